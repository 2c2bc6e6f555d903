"""Chapter 0's small CuTe demos, and a way to look at a ladder kernel's own objects on a CPU.

CuTeDSL reads a ``@cute.jit`` function's source from its file, so demo functions live here and
the chapter notebook calls them. Every demo evaluates CuTe's own layout algebra while the function
is *traced* (no GPU is involved) and hands back plain Python values: strings of layouts, offset
tables, coordinates.

* :func:`layout_table` - a layout as a function: every (row, col) -> offset.
* :func:`tiling_views` - ``local_tile`` (with ``None`` keeping a mode, and ``proj``), ``flat_divide``
  and ``zipped_divide`` applied to an identity tensor, so every view shows the coordinates it covers.
* :func:`atoms` - an MMA atom and a copy atom as CuTe prints them (the SIMT FMA atom, a 128-bit
  copy, and on request Hopper's wgmma atom as the course's step 2 builds it).
* :func:`static_vs_dynamic` - what is known while tracing (``Constexpr``) and what only at run time.
* :func:`compile_tiny` - compile a 6-line kernel for ``sm_90a`` or ``sm_100a`` and return its PTX.
* :func:`trace_kernel` - run a ladder step's host code with fake tensors and hand the objects it
  passes to its kernel (tiled MMA, copy atoms, shared-memory layouts) to a function of yours,
  inside the trace. The accumulator and bank diagrams of chapters 2 and 3 are drawn this way.
"""

from __future__ import annotations

import contextlib
import inspect as _pyinspect
from typing import Callable, Optional

import cutlass
import cutlass.cute as cute
import cutlass.utils.hopper_helpers as sm90_utils
from cutlass.cute.nvgpu import OperandMajorMode
from cutlass.cute.runtime import make_fake_stream, make_fake_tensor

from ..runtime import arch as _arch

# ---------------------------------------------------------------------------------------------
# tracing for a chosen target
# ---------------------------------------------------------------------------------------------


@contextlib.contextmanager
def target(name: str = "sm_90a"):
    """Trace/compile for ``name`` (``sm_90a`` / ``sm_100a``): architecture-specific atoms check it."""
    with _arch.targeting(name) as resolved:
        yield resolved


# ---------------------------------------------------------------------------------------------
# layouts are functions
# ---------------------------------------------------------------------------------------------


@cute.jit
def _layout_table(shape: cutlass.Constexpr, stride: cutlass.Constexpr, sink: cutlass.Constexpr):
    layout = cute.make_layout(shape, stride=stride)
    rows, cols = cute.product_each(layout.shape)
    sink["text"] = str(layout)
    sink["size"] = cute.size(layout)
    sink["cosize"] = cute.cosize(layout)
    sink["offsets"] = [[layout((i, j)) for j in range(cols)] for i in range(rows)]


def layout_table(shape, stride) -> dict:
    """``{'text': '(4,8):(8,1)', 'offsets': [[0, 1, ...], ...], 'size': 32, 'cosize': 32}``.

    ``shape``/``stride`` may be nested (``((2, 2), (2, 4))``); the table is indexed by the
    natural (row, col) coordinate of the two top-level modes, as CuTe evaluates ``layout((i, j))``.
    """
    sink: dict = {}
    _layout_table(shape, stride, sink)
    return sink


@cute.jit
def _tiling_views(rows: cutlass.Constexpr, cols: cutlass.Constexpr, tile: cutlass.Constexpr,
                  coord: cutlass.Constexpr, sink: cutlass.Constexpr):
    whole = cute.make_identity_tensor((rows, cols))  # each element *is* its (row, col) coordinate
    one = cute.local_tile(whole, tile, coord)  # (tile_r, tile_c): one tile, a view, nothing copied
    row_of_tiles = cute.local_tile(whole, tile, (coord[0], None))  # (tile_r, tile_c, cols/tile_c)
    mnk = cute.local_tile(whole, (tile[0], 99, tile[1]), (coord[0], 0, None), proj=(1, None, 1))
    sink["whole"] = str(whole)
    sink["local_tile"] = str(one)
    sink["local_tile_coords"] = [[one[(i, j)] for j in range(tile[1])] for i in range(tile[0])]
    sink["local_tile_none"] = str(row_of_tiles)
    sink["local_tile_none_shape"] = tuple(cute.shape(row_of_tiles))
    sink["local_tile_proj"] = str(mnk)
    sink["flat_divide"] = str(cute.flat_divide(whole, tile))
    sink["flat_divide_shape"] = tuple(cute.shape(cute.flat_divide(whole, tile)))
    sink["zipped_divide"] = str(cute.zipped_divide(whole, tile))


def tiling_views(rows: int = 8, cols: int = 12, tile=(4, 4), coord=(1, 2)) -> dict:
    """Views of a ``rows x cols`` identity tensor: ``local_tile`` at ``coord``, with ``None``, with
    ``proj`` (as the kernels tile A by (bM, bN, bK) with ``proj=(1, None, 1)``), ``flat_divide``."""
    sink: dict = {}
    _tiling_views(rows, cols, tuple(tile), tuple(coord), sink)
    return sink


# ---------------------------------------------------------------------------------------------
# atoms: hardware operations as objects
# ---------------------------------------------------------------------------------------------


@cute.jit
def _atoms(with_wgmma: cutlass.Constexpr, sink: cutlass.Constexpr):
    fma = cute.make_mma_atom(cute.nvgpu.MmaUniversalOp(cutlass.Float32))
    sink["simt_fma"] = str(fma)
    copy128 = cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), cutlass.BFloat16, num_bits_per_copy=128)
    sink["copy_128b"] = str(copy128)
    if cutlass.const_expr(with_wgmma):
        tiled = sm90_utils.make_trivial_tiled_mma(
            cutlass.BFloat16, cutlass.BFloat16, OperandMajorMode.K, OperandMajorMode.K, cutlass.Float32,
            atom_layout_mnk=(1, 1, 1), tiler_mn=(64, 256),
        )
        sink["wgmma_64x256x16"] = str(tiled)


def atoms(with_wgmma: bool = True) -> dict:
    """CuTe's own description of a SIMT FMA atom, a 128-bit copy atom and (traced for sm_90a)
    the wgmma 64x256x16 tiled MMA that the course's Hopper step 2 builds."""
    sink: dict = {}
    with target("sm_90a"):
        _atoms(with_wgmma, sink)
    return sink


# ---------------------------------------------------------------------------------------------
# compile time vs run time
# ---------------------------------------------------------------------------------------------


@cute.jit
def _static_vs_dynamic(n: cutlass.Int32, tile: cutlass.Constexpr, sink: cutlass.Constexpr):
    sink["n (Int32 argument)"] = str(n)
    sink["tile (Constexpr argument)"] = str(tile)
    static_layout = cute.make_layout((tile, 4))
    mixed_layout = cute.make_layout((tile, n))
    sink["make_layout((tile, 4))"] = str(static_layout)
    sink["make_layout((tile, n))"] = str(mixed_layout)
    sink["size((tile, 4))"] = str(cute.size(static_layout))
    sink["size((tile, n))"] = str(cute.size(mixed_layout))
    sink["is_static((tile, 4))"] = cute.is_static(static_layout)
    sink["is_static((tile, n))"] = cute.is_static(mixed_layout)


def static_vs_dynamic(tile: int = 8) -> dict:
    """Trace a function with a run-time ``Int32`` and a compile-time ``tile``: what each prints as.

    Compiled (not run), so it works without a GPU; the values are read while tracing.
    """
    sink: dict = {}
    cute.compile(_static_vs_dynamic, cutlass.Int32(5), tile, sink)
    return sink


# ---------------------------------------------------------------------------------------------
# a tiny kernel, compiled on the CPU
# ---------------------------------------------------------------------------------------------


@cute.kernel
def _axpy_kernel(x: cute.Tensor, y: cute.Tensor, alpha: cutlass.Float32):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    bdim, _, _ = cute.arch.block_dim()
    i = bidx * bdim + tidx
    if i < cute.size(x):
        y[i] = alpha * x[i] + y[i]


@cute.jit
def _axpy(x: cute.Tensor, y: cute.Tensor, alpha: cutlass.Float32, stream):
    threads = 128
    _axpy_kernel(x, y, alpha).launch(grid=(cute.ceil_div(cute.size(x), threads), 1, 1), block=(threads, 1, 1), stream=stream)


AXPY_SOURCE = _pyinspect.getsource(_axpy_kernel) + "\n\n" + _pyinspect.getsource(_axpy)


def axpy(x, y, alpha: float = 2.0):
    """Run the tiny kernel on a GPU: ``y <- alpha * x + y`` for float32 CUDA tensors; returns ``y``."""
    import torch
    from cuda.bindings import driver as cuda
    from cutlass.cute.runtime import from_dlpack

    if x.dtype != torch.float32 or y.dtype != torch.float32 or x.shape != y.shape or x.dim() != 1:
        raise ValueError("axpy takes two float32 vectors of the same length")
    stream = cuda.CUstream(torch.cuda.current_stream().cuda_stream)
    args = (from_dlpack(x, assumed_align=16), from_dlpack(y, assumed_align=16), cutlass.Float32(alpha), stream)
    present = _arch.machine().target
    with target(present) if present else contextlib.nullcontext():
        compiled = cute.compile(_axpy, *args)
    compiled(*args)
    return y


def compile_tiny(target_name: str = "sm_90a") -> str:
    """Compile ``y = alpha * x + y`` (float32, any length) for ``target_name``; return its PTX."""
    n = cute.sym_int32()
    x = make_fake_tensor(cutlass.Float32, (n,), stride=(1,), assumed_align=16)
    y = make_fake_tensor(cutlass.Float32, (n,), stride=(1,), assumed_align=16)
    _, ptx = _arch.trace(_axpy, x, y, cutlass.Float32(2.0), make_fake_stream(), target=target_name, keep_ptx=True)
    return ptx


# ---------------------------------------------------------------------------------------------
# a ladder kernel's own objects, on a CPU
# ---------------------------------------------------------------------------------------------


class _NoLaunch:
    def launch(self, **kwargs):
        return None


def trace_kernel(step, fn: Callable[[dict], object], config=None, target_name: Optional[str] = None):
    """Run ``step``'s host code (``Gemm(config).__call__``) on fake operands and, where it would
    launch its kernel, call ``fn(kernel_args)`` instead; return what ``fn`` returns.

    ``kernel_args`` maps the kernel's parameter names to the objects the host built for it, e.g.
    ``tiled_mma``, ``tma_atom_a``, ``a_smem_layout``, plus ``gemm`` (the step's ``Gemm``) and
    ``step``. ``fn`` runs inside the trace, so it may call
    CuTe (``tiled_mma.get_slice(t).partition_C(...)``) and must return plain Python values.
    Nothing is launched or compiled to a cubin; a trace takes well under a second.
    """
    from ..runtime import ladder

    step = ladder.get(step)
    config = step.default if config is None else config
    ok, why = step.check_config(config)
    if not ok:
        raise ValueError(f"{step.key}: invalid config {config}: {why}")
    module = step.load()
    params = list(_pyinspect.signature(module.Gemm.kernel).parameters)[1:]  # drop self
    result: dict = {}

    class _Probe(module.Gemm):
        def kernel(self, *args, **kwargs):
            named = dict(zip(params, args), **kwargs)
            named["gemm"] = self
            named["step"] = step
            result["value"] = fn(named)
            return _NoLaunch()

    operands = _arch.fake_operands_any() if step.any_shape else _arch.fake_operands("dynamic")
    operands += _arch.fake_workspace(step, config)
    with target(target_name or step.target):
        cute.compile(_Probe(config), *_arch.call_arguments(operands, make_fake_stream()))
    return result.get("value")


def wgmma_accumulator_owners(step="sm90/2", config=None) -> dict:
    """Which thread of the warpgroup holds which fp32 accumulator element, on Hopper.

    Derived from the step's own tiled MMA (built by its host code, see :func:`trace_kernel`):
    ``thr_mma.partition_C`` of an identity tensor over the (tile_m, tile_n) tile gives, for each
    thread, the (row, col) coordinate of each of its accumulator registers, the same partition the
    kernel applies to C. Returns ``{'thread': grid, 'value': grid, 'tv_layout': str, 'source': str}``
    with ``grid[row][col]``.
    """

    def derive(objs):
        tiled_mma = objs["tiled_mma"]
        bm, bn, _ = objs["gemm"].tile_mnk
        coords = cute.make_identity_tensor((bm, bn))
        thread = [[-1] * bn for _ in range(bm)]
        value = [[-1] * bn for _ in range(bm)]
        for t in range(cute.size(tiled_mma.thr_id)):
            tCcC = tiled_mma.get_slice(t).partition_C(coords)  # (MMA, MMA_M, MMA_N) of (row, col)
            for v in range(cute.size(tCcC)):
                r, c = tCcC[v]
                thread[r][c], value[r][c] = t, v
        return {
            "thread": thread,
            "value": value,
            "tv_layout": str(tiled_mma.tv_layout_C_tiled),
            "mma": str(tiled_mma),
            "source": f"From {objs['step'].module_name}'s tiled MMA: thr_mma.partition_C of an "
                      f"identity tensor, traced for sm_90a.",
        }

    return trace_kernel(step, derive, config)


def stage_bytes(step, config=None) -> int:
    """Bytes one K tile of A and B occupies in shared memory, from the step's own layouts: what
    its mbarrier expects TMA to deliver per K tile."""

    def count(objs):
        return int(cute.size_in_bytes(cutlass.BFloat16, objs["a_smem_layout"])
                   + cute.size_in_bytes(cutlass.BFloat16, objs["b_smem_layout"]))

    return trace_kernel(step, count, config)
