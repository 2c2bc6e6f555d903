"""Targets: which GPU is here (if any), and compiling a ladder step for a chosen target anywhere.

CuTeDSL compiles on a machine without a GPU when it is told the target (``sm_100a`` or
``sm_90a``) and given *fake* tensors that carry dtypes, symbolic shapes and alignment but no
data. :func:`compile_step` does that and keeps the PTX and cubin; :mod:`gemm_course.teaching.inspect`
reads them. On a GPU the same function compiles against real tensors for the GPU that is
present, and the result can be launched.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import tempfile
import threading
from typing import Any, Optional

TARGETS = {
    "sm_100a": "Blackwell (B200/GB200 class): tcgen05 MMA, tensor memory, TMA",
    "sm_90a": "Hopper (H100/H200): wgmma, TMA",
}
# ladder architecture key -> compile target
ARCH_TARGET = {"sm100": "sm_100a", "sm90": "sm_90a"}
TARGET_ARCH = {v: k for k, v in ARCH_TARGET.items()}


@dataclasses.dataclass(frozen=True)
class Machine:
    gpu_name: Optional[str]
    capability: Optional[tuple]
    sm_count: Optional[int]
    target: Optional[str]  # sm_90a / sm_100a when a course target is present, else None

    @property
    def has_gpu(self) -> bool:
        return self.gpu_name is not None

    def describe(self) -> str:
        if not self.has_gpu:
            return "no GPU: kernels compile for sm_100a and sm_90a, nothing runs"
        cc = ".".join(map(str, self.capability))
        t = self.target or "no course target (steps 2+ need sm_90a or sm_100a)"
        return f"{self.gpu_name} (compute capability {cc}, {self.sm_count} SMs): {t}"


def _target_for_capability(cc) -> Optional[str]:
    if cc == (9, 0):
        return "sm_90a"
    if cc == (10, 0):  # code for sm_100a runs on compute capability 10.0 only (not 10.3, a B300)
        return "sm_100a"
    return None


@functools.lru_cache(maxsize=1)
def machine() -> Machine:
    """The GPU of this process (device 0), or a machine without one."""
    try:
        import torch

        if not torch.cuda.is_available():
            return Machine(None, None, None, None)
        props = torch.cuda.get_device_properties(0)
        cc = (props.major, props.minor)
        return Machine(props.name, cc, props.multi_processor_count, _target_for_capability(cc))
    except Exception:  # torch missing or driver broken: behave as a CPU-only machine
        return Machine(None, None, None, None)


def resolve_target(target: Optional[str], step=None) -> str:
    """``None`` means: the step's own architecture when a ladder step is given, else the GPU that is
    here, else sm_90a."""
    if target is None:
        if step is not None and step.arch in ARCH_TARGET:
            return ARCH_TARGET[step.arch]
        return machine().target or "sm_90a"
    target = {"sm100": "sm_100a", "sm90": "sm_90a", "sm_100": "sm_100a", "sm_90": "sm_90a"}.get(target, target)
    if target not in TARGETS:
        raise ValueError(f"unknown target {target!r}: choose one of {', '.join(TARGETS)}")
    return target


# ---------------------------------------------------------------------------------------------
# compiling
# ---------------------------------------------------------------------------------------------


@dataclasses.dataclass
class Artifacts:
    """What a compile leaves: PTX text, cubin bytes, and the callable (launchable on a matching GPU)."""

    step_key: str
    config: Any
    target: str
    shape_class: str
    ptx: str
    cubin: bytes
    compiled: Any = dataclasses.field(repr=False, default=None)
    seconds: float = 0.0
    dynamic_smem: Optional[int] = None  # bytes of dynamic shared memory the launch asks for
    storage_smem: Optional[int] = None  # of which the kernel's shared storage uses (less where the launch pads)

    @property
    def kernel_names(self) -> list:
        import re

        return re.findall(r"^\.(?:visible |weak )?\.entry\s+(\w+)", self.ptx, flags=re.M)


_lock = threading.RLock()  # the DSL's target is process-wide state
_cache: dict = {}


def _dsl():
    from cutlass.cutlass_dsl import CuTeDSL

    return CuTeDSL._get_dsl()


@contextlib.contextmanager
def targeting(target: str, dump_dir: Optional[str] = None):
    """Trace and compile for ``target`` inside the block (any machine); restores the DSL after.

    Architecture-specific atoms (wgmma, tcgen05) check the DSL's target while tracing.
    """
    target = resolve_target(target)
    dsl = _dsl()
    with _lock:
        old_arch, old_dump = (dsl.envar.arch if dsl.envar._arch else None), dsl.envar.dump_dir
        dsl.envar.arch = target
        if dump_dir is not None:
            dsl.envar.dump_dir = dump_dir
        try:
            yield target
        finally:
            dsl.envar.arch, dsl.envar.dump_dir = old_arch, old_dump


def trace(fn, *args, target: str = "sm_90a", keep_ptx: bool = False):
    """Compile the ``@cute.jit`` function ``fn(*args)`` for ``target``; return (compiled, PTX or None).

    Tracing runs ``fn``'s Python, so a function can also collect what it sees (layouts, copy
    partitions) into Python objects: the book's diagrams come from the kernels' own objects so.
    """
    import cutlass.cute as cute

    with tempfile.TemporaryDirectory(prefix="gemm-course-") as tmp, targeting(target, tmp):
        compiled = (cute.compile[cute.KeepPTX] if keep_ptx else cute.compile)(fn, *args)
        ptx = _artifact(compiled.artifacts.PTX, binary=False) if keep_ptx else None
    return compiled, ptx


def fake_operands(shape_class: str = "dynamic"):
    """Fake A (M,K), B (N,K), C (M,N) bf16 tensors, K-major / row-major, 16-byte aligned.

    ``dynamic``: M, N, K symbolic (K and N multiples of 8, as TMA needs). ``MxNxK``: static shape.
    """
    import cutlass
    import cutlass.cute as cute
    from cutlass.cute.runtime import make_fake_tensor

    if shape_class == "dynamic":
        m, n, k = cute.sym_int32(), cute.sym_int32(divisibility=8), cute.sym_int32(divisibility=8)
        ld_k, ld_n = cute.sym_int64(divisibility=8), cute.sym_int64(divisibility=8)
    else:
        from .problem import GemmProblem

        p = GemmProblem.parse(shape_class)
        m, n, k, ld_k, ld_n = p.m, p.n, p.k, p.k, p.n

    def fake(rows, cols, ld):
        return make_fake_tensor(cutlass.BFloat16, (rows, cols), stride=(ld, 1), assumed_align=16)

    return fake(m, k, ld_k), fake(n, k, ld_k), fake(m, n, ld_n)


def runtime_operands(a, b, c):
    """Wrap torch tensors for CuTeDSL with the same symbolic structure as :func:`fake_operands`."""
    from cutlass.cute.runtime import from_dlpack

    def wrap(t):
        return from_dlpack(t, assumed_align=16).mark_layout_dynamic(leading_dim=1).mark_compact_shape_dynamic(
            mode=1, divisibility=8
        )

    return wrap(a), wrap(b), wrap(c)


def runtime_workspace(tensors) -> tuple:
    """CuTe views of a step's scratch tensors (zero-filled torch tensors; static shapes)."""
    from cutlass.cute.runtime import from_dlpack

    return tuple(from_dlpack(t, assumed_align=16) for t in tensors)


def runtime_operands_any(a, b, c):
    """Wrap torch tensors with no alignment promise (the naive step accepts any shape)."""
    from cutlass.cute.runtime import from_dlpack

    return tuple(from_dlpack(t, assumed_align=2).mark_layout_dynamic(leading_dim=1) for t in (a, b, c))


def fake_operands_any():
    import cutlass
    import cutlass.cute as cute
    from cutlass.cute.runtime import make_fake_tensor

    m, n, k = cute.sym_int32(), cute.sym_int32(), cute.sym_int32()

    def fake(rows, cols):
        return make_fake_tensor(cutlass.BFloat16, (rows, cols), stride=(cute.sym_int64(), 1), assumed_align=2)

    return fake(m, k), fake(n, k), fake(m, n)


_DTYPES = {"float32": "Float32", "int32": "Int32"}


def workspace_shapes(step, config) -> tuple:
    """((dtype, shape), ...) of the scratch tensors a step's kernel takes after the stream (may be empty)."""
    shapes = getattr(step.load().Gemm, "workspace_shapes", None)
    return shapes(config) if shapes else ()


def fake_workspace(step, config) -> tuple:
    import cutlass
    from cutlass.cute.runtime import make_fake_compact_tensor

    return tuple(
        make_fake_compact_tensor(getattr(cutlass, _DTYPES[dtype]), shape, assumed_align=16)
        for dtype, shape in workspace_shapes(step, config)
    )


def call_arguments(operands: tuple, stream) -> tuple:
    """(A, B, C, stream, *workspace): a kernel's scratch tensors come after the stream."""
    return (*operands[:3], stream, *operands[3:])


def compile_step(step, config=None, target: Optional[str] = None, shape_class: str = "dynamic", operands=None):
    """Compile ``step`` (a :class:`gemm_course.runtime.ladder.Step`) for ``target``; cached.

    ``operands``: real (A, B, C) CuTe tensors to compile against on a GPU; by default fake ones.
    The cache key is (step, config, target, shape class, whether real operands were given, watchdog
    bound); configs are frozen dataclasses. With ``GEMM_COURSE_WATCHDOG`` set the build is a debug
    build whose mbarrier waits are bounded (:mod:`gemm_course.runtime.watchdog`).
    """
    config = step.default if config is None else config
    target = resolve_target(target, step)
    ok, why = step.check_config(config)
    if not ok:
        raise ValueError(f"{step.key}: invalid config {config}: {why}")
    return _compile(step, config, target, shape_class, operands)


def compile_plan(plan, operands=None, shape_class: str = "runtime"):
    """Compile a checked :class:`gemm_course.runtime.plan.Plan` (nothing is checked again) against
    ``operands`` (real CuTe tensors; fake ones by default); cached as :func:`compile_step`."""
    return _compile(plan.step, plan.config, plan.target, shape_class, operands)


def _compile(step, config, target: str, shape_class: str, operands):
    import time

    import cutlass.cute as cute
    from cutlass.cute.runtime import make_fake_stream

    from . import watchdog

    bound = watchdog.setting()
    key = (step.key, config, target, shape_class, operands is not None, bound)
    with _lock:
        if key in _cache:
            return _cache[key]
        disk = _disk_path(step, config, target, shape_class, bound) if operands is None else None
        if disk and os.path.exists(disk + ".json"):
            _cache[key] = _load_artifacts(disk, step.key, config, target, shape_class)
            return _cache[key]
        module = step.load()
        gemm = module.Gemm(config)
        if operands is None:
            operands = (fake_operands_any() if step.any_shape else fake_operands(shape_class)) + fake_workspace(step, config)
            stream = make_fake_stream()
        else:
            import torch
            from cuda.bindings import driver as cuda

            stream = cuda.CUstream(torch.cuda.current_stream().cuda_stream)
        with tempfile.TemporaryDirectory(prefix="gemm-course-") as tmp, targeting(target, tmp), \
                watchdog.debug_build(step.key, bound):
            t0 = time.perf_counter()
            compiled = cute.compile[cute.KeepPTX, cute.KeepCUBIN](gemm, *call_arguments(operands, stream))
            seconds = time.perf_counter() - t0
            ptx = _artifact(compiled.artifacts.PTX, binary=False)
            cubin = _artifact(compiled.artifacts.CUBIN, binary=True)
        smem = getattr(gemm, "smem_bytes", None)
        art = Artifacts(step.key, config, target, shape_class, ptx, cubin, compiled, seconds, smem,
                        getattr(gemm, "storage_bytes", smem))
        _cache[key] = art
        if disk:
            _store_artifacts(disk, art)
        return art


# An optional cache of fake-operand compiles on disk, shared by the processes of one run (`make test`
# runs the chapters, then the tests, in separate processes). Off unless GEMM_COURSE_COMPILE_CACHE
# names a folder; keyed by every source file of the package, so an edit never reads a stale entry.


@functools.lru_cache(maxsize=1)
def _source_digest() -> str:
    import hashlib

    import cutlass

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the whole package
    digest = hashlib.sha256(getattr(cutlass, "__version__", "").encode())
    for folder, _, files in sorted(os.walk(root)):
        for name in sorted(f for f in files if f.endswith(".py")):
            with open(os.path.join(folder, name), "rb") as f:
                digest.update(name.encode() + f.read())
    return digest.hexdigest()


def _disk_path(step, config, target, shape_class, bound=None) -> Optional[str]:
    import hashlib

    folder = os.environ.get("GEMM_COURSE_COMPILE_CACHE")
    if not folder:
        return None
    what = repr((_source_digest(), step.key, step.module_name, config, target, shape_class, machine(), bound))
    return os.path.join(folder, hashlib.sha256(what.encode()).hexdigest())


def _store_artifacts(path: str, art: Artifacts) -> None:
    import json

    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".cubin", "wb") as f:
        f.write(art.cubin)
    with open(path + ".json.tmp", "w") as f:
        json.dump({"ptx": art.ptx, "seconds": art.seconds, "dynamic_smem": art.dynamic_smem,
                   "storage_smem": art.storage_smem}, f)
    os.replace(path + ".json.tmp", path + ".json")  # complete entries only, for concurrent readers


def _load_artifacts(path: str, key, config, target, shape_class) -> Artifacts:
    import json

    with open(path + ".json") as f:
        meta = json.load(f)
    with open(path + ".cubin", "rb") as f:
        cubin = f.read()
    return Artifacts(key, config, target, shape_class, meta["ptx"], cubin, None, meta["seconds"], meta["dynamic_smem"],
                     meta.get("storage_smem", meta["dynamic_smem"]))


def _artifact(value, binary: bool):
    """CuTeDSL hands back either a path to the dumped file or the content itself."""
    if isinstance(value, (bytes, bytearray)):
        return bytes(value) if binary else bytes(value).decode()
    if isinstance(value, str) and len(value) < 4096 and os.path.isfile(value):
        with open(value, "rb" if binary else "r") as f:
            return f.read()
    if value is None:
        raise RuntimeError("the compiler kept no artifact; is the dump directory writable?")
    return value.encode("latin-1") if binary else value


def clear_cache():
    with _lock:
        _cache.clear()
