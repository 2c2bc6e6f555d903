"""What every layout probe shares: tracing for ``sm_100a``, finding a Blackwell step's module and
building its ``Gemm``, and evaluating static CuTe layouts in Python."""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import os
import pkgutil
from typing import Callable, Optional

_TARGET = "sm_100a"


def trace_static(fn: Callable[[], None], target: str = _TARGET) -> None:
    """Compile the argument-free ``@cute.jit`` function ``fn`` for ``target`` so that its body is traced.

    ``fn`` collects what it needs into Python objects while tracing; the compiled result is dropped.
    """
    from ....runtime import arch

    arch.trace(fn, target=target)


_ARCH_NAMES = {"sm100": "sm100", "blackwell": "sm100", "sm_100a": "sm100"}


def _step_module(step) -> tuple:
    """``(key, module)`` of a Blackwell step: a ladder ``Step`` (anything with ``key`` and ``load()``),
    or a key such as ``"sm100/5"``, ``"sm100:5"`` or ``("sm100", 5)``, found among this package's
    ``stepNN_*`` modules. (Read here, not through :mod:`gemm_course.runtime.ladder`: the ladder imports the
    kernels, and the kernels' package does not import it back.)"""
    if hasattr(step, "load") and hasattr(step, "key"):
        if getattr(step, "arch", "") != "sm100":
            raise ValueError(f"{step.key} is not a Blackwell step")
        return step.key, step.load()
    if isinstance(step, tuple):
        arch, number = step
    else:
        arch, _, number = str(step).replace(":", "/").rpartition("/")
    key = f"{arch or 'sm90'}/{number}"
    if _ARCH_NAMES.get(arch) != "sm100":
        raise ValueError(f"{key} is not a Blackwell step")
    prefix = f"step{int(number):02d}_"
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the sm100 kernels
    names = [m.name for m in pkgutil.iter_modules([package]) if m.name.startswith(prefix)]
    if len(names) != 1:
        raise ValueError(f"no Blackwell step {number} among the kernels (gemm_course.kernels.sm100.{prefix}*)")
    return f"sm100/{int(number)}", importlib.import_module(f"{__package__.rpartition('.')[0]}.{names[0]}")


def _gemm(step, config):
    key, mod = _step_module(step)
    config = mod.Config() if config is None else config
    ok, why = (mod.check_config(config) if isinstance(config, mod.Config)
               else (False, f"expected a {mod.__name__}.Config, got {type(config).__name__}"))
    if not ok:
        raise ValueError(f"{key}: invalid config {config}: {why}")
    return mod.Gemm(config)




def _leaves(tree) -> list:
    return [leaf for t in tree for leaf in _leaves(t)] if isinstance(tree, tuple) else [tree]


def _layout_values(layout, rank: Optional[int] = None):
    """Every value of a static layout, index by index (CuTe's colexicographic order), as a numpy array.

    Integer strides give offsets, shape (size,); scaled-basis strides (``v@m``, as in identity
    tensors) give coordinates, shape (size, rank). CuTe's own arithmetic, written out: index ->
    coordinate of each mode -> sum of coordinate x stride. Evaluating element by element through
    CuTe costs ~0.1-0.3 ms each while tracing; this is what makes whole tiles cheap.
    """
    import numpy as np

    shapes, strides = _leaves(layout.shape), _leaves(layout.stride)
    if not all(isinstance(s, int) for s in shapes):
        raise ValueError(f"{layout} is not static")
    bases = [s for s in strides if not isinstance(s, int)]
    modes = []
    for b in bases:
        mode = b.mode if isinstance(b.mode, int) else list(b.mode)
        if not isinstance(mode, int) and len(mode) != 1:
            raise ValueError(f"nested basis {mode} in {layout}")
        modes.append(mode if isinstance(mode, int) else mode[0])
    if bases:
        rank = rank or 1 + max(modes)
    size = int(np.prod(shapes)) if shapes else 1
    index = np.arange(size, dtype=np.int64)
    out = np.zeros((size, rank), dtype=np.int64) if bases else np.zeros(size, dtype=np.int64)
    step, b = 1, 0
    for extent, stride in zip(shapes, strides):
        coord = (index // step) % extent
        step *= extent
        if isinstance(stride, int):
            if bases and stride:
                raise ValueError(f"integer stride {stride} among basis strides in {layout}")
            if not bases:
                out += coord * stride
        else:
            out[:, modes[b]] += coord * int(stride.value)
            b += 1
    return out


def _spot_check(values, reference: Callable[[int], object], count: int = 6) -> None:
    """Compare ``values[i]`` with CuTe's own ``reference(i)`` at ``count`` indices spread over the range."""
    n = len(values)
    for i in sorted({0, n - 1, *range(0, n, max(1, n // count))}):
        ref = reference(i)
        ref = tuple(int(x) for x in ref) if isinstance(ref, tuple) else int(ref)
        mine = tuple(int(x) for x in values[i]) if values.ndim == 2 else int(values[i])
        if ref != mine:
            raise AssertionError(f"layout evaluated at {i}: {mine}, CuTe says {ref}")


def _coords(tensor) -> list:
    """The coordinates held by a partition of an identity tensor, element by element (tuples)."""
    origin = tuple(int(x) for x in tensor.iterator)
    values = _layout_values(tensor.layout, rank=len(origin)) + origin
    _spot_check(values, lambda i: tensor[i])
    return [tuple(int(x) for x in row) for row in values]


def _offsets(layout) -> list:
    """The integer offsets of a static layout, index by index."""
    values = _layout_values(layout)
    _spot_check(values, lambda i: layout(i))
    return [int(v) for v in values]


def _stage0(acc):
    """The first accumulator of steps 7+ ((MMA, MMA_M, MMA_N, acc_stages)); earlier steps' one accumulator."""
    import cutlass.cute as cute

    return acc[(None, None, None, 0)] if cute.rank(acc) == 4 else acc


def _static_int(value) -> int:
    """A CuTeDSL integer that tracing folded to a constant, as a Python int (16-bit masks unsigned)."""
    if isinstance(value, int):
        return value
    op = value.ir_value().owner
    if getattr(op, "name", None) != "arith.constant":
        raise ValueError(f"not a constant: {value}")
    return int(op.attributes["value"].value) & 0xFFFF


def _config(step, **fields):
    return dataclasses.replace(_step_module(step)[1].Config(), **fields)




@contextlib.contextmanager
def _patched(obj, **attributes):
    old = {name: getattr(obj, name) for name in attributes}
    for name, value in attributes.items():
        setattr(obj, name, value)
    try:
        yield
    finally:
        for name, value in old.items():
            setattr(obj, name, value)


