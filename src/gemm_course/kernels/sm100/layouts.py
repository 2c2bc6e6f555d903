"""The Blackwell steps' layouts, evaluated on the CPU from the kernels' own objects.

The book draws its swizzle and accumulator-ownership figures from these functions, and the tests
check them, so a figure can never disagree with the kernel it illustrates:

* :func:`smem_layouts` - the shared-memory layouts of A and B that a step's ``Gemm`` builds
  (its swizzle and its layout), taught in chapter 2 (interleaved) and chapter 3 (128-byte swizzle).
* :func:`accumulator_ownership` - which accumulator element (row, column) each thread receives
  from the epilogue's ``tcgen05.ld`` copy, and :func:`accumulator_tmem_addresses` - where in
  tensor memory (lane, column) the MMA keeps each element; both taught in chapter 2.
* :func:`epilogue_paths` - where each accumulator element goes through a thread's registers into
  the epilogue's staging buffer (steps 4, 5), checked by :func:`epilogue_mismatches`.
* :func:`pair_split` - which rows of A, B and C each CTA of a ``cta_group::2`` pair holds (step 5);
  :func:`tma_multicast_masks` - the TMA multicast masks of a cluster, and
  :func:`multicast_masks` their Python twin.
* :func:`accumulator_stages` - the TMEM lanes and columns of each accumulator stage (step 7).
* :func:`clc_decode_table` and :func:`kernel_cta_tiles` - step 8's decoding of a ``try_cancel``
  answer and the tile each CTA computes for a cluster-tile index (steps 8-10), evaluated from the
  kernels' own methods.

Each traces a small ``@cute.jit`` function for ``sm_100a`` (but :func:`kernel_cta_tiles`, which
runs the kernel's index arithmetic as plain Python): static layouts evaluate to Python ints while
CuTeDSL traces, so nothing runs and no GPU is needed. The loops that read them live
in plain functions, which CuTeDSL leaves as Python (it rewrites only the jit function's own loops).
"""

from __future__ import annotations

import collections
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
    from ... import arch

    arch.trace(fn, target=target)


_ARCH_NAMES = {"sm100": "sm100", "blackwell": "sm100", "sm_100a": "sm100"}


def _step_module(step) -> tuple:
    """``(key, module)`` of a Blackwell step: a ladder ``Step`` (anything with ``key`` and ``load()``),
    or a key such as ``"sm100/5"``, ``"sm100:5"`` or ``("sm100", 5)``, found among this package's
    ``stepNN_*`` modules. (Read here, not through :mod:`gemm_course.ladder`: the ladder imports the
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
    package = os.path.dirname(os.path.abspath(__file__))
    names = [m.name for m in pkgutil.iter_modules([package]) if m.name.startswith(prefix)]
    if len(names) != 1:
        raise ValueError(f"no Blackwell step {number} among the kernels (gemm_course.kernels.sm100.{prefix}*)")
    return f"sm100/{int(number)}", importlib.import_module(f"{__package__}.{names[0]}")


def _gemm(step, config):
    key, mod = _step_module(step)
    config = mod.Config() if config is None else config
    ok, why = (mod.check_config(config) if isinstance(config, mod.Config)
               else (False, f"expected a {mod.__name__}.Config, got {type(config).__name__}"))
    if not ok:
        raise ValueError(f"{key}: invalid config {config}: {why}")
    return mod.Gemm(config)


# ---- shared memory -----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class SmemLayout:
    """One operand's shared-memory layout: ``swizzle o layout`` in CuTe's notation."""

    operand: str  # "A" or "B"
    swizzle_bits: int  # B of Sw<B,M,S> on byte addresses: 0 = none, 3 = 128-byte swizzle
    swizzle_base: int  # M: 2**M bytes move together (16-byte chunks: M = 4)
    swizzle_shift: int  # S: the row bits XORed onto the chunk bits sit S bits higher
    layout: str  # the (MMA, MMA_M or MMA_N, MMA_K) layout, in elements

    @property
    def swizzle(self) -> str:
        return f"Sw<{self.swizzle_bits},{self.swizzle_base},{self.swizzle_shift}>"

    @property
    def swizzle_bytes(self) -> int:
        """Width of the swizzle pattern (0 when unswizzled): 2**(B + M) bytes, 128 for Sw<3,4,3>."""
        return 0 if self.swizzle_bits == 0 else 1 << (self.swizzle_bits + self.swizzle_base)


def _describe(name, layout) -> SmemLayout:
    sw = layout.inner
    return SmemLayout(name, sw.num_bits, sw.num_base, sw.num_shift, str(layout.outer))


def smem_layouts(step="sm100/2", config=None) -> dict:
    """``{"A": SmemLayout, "B": SmemLayout}`` as the step's ``Gemm.make_smem_layouts`` builds them."""
    import cutlass.cute as cute

    gemm = _gemm(step, config)
    found = {}

    @cute.jit
    def probe():
        a_layout, b_layout = gemm.make_smem_layouts(gemm.make_tiled_mma())
        found.update(A=_describe("A", a_layout), B=_describe("B", b_layout))

    trace_static(probe)
    return found


# ---- the accumulator ---------------------------------------------------------------------------


def _owned(gemm, tCtAcc, coords, thread) -> list:
    import cutlass.cute as cute

    _, _, tDcC = gemm.make_epilogue_copy(tCtAcc, coords, thread)  # (T2R, T2R_M, T2R_N, 1, sub-tiles)
    owned = []
    for sub in range(cute.size(tDcC, mode=[4])):
        frag = tDcC[(None, None, None, 0, sub)]
        owned += [tuple(int(x) for x in frag[i]) for i in range(cute.size(frag))]
    return owned


def accumulator_ownership(step="sm100/2", config=None, threads: Optional[range] = None) -> dict:
    """``{thread: [(row, col), ...]}``: the accumulator elements each thread's registers receive.

    Derived from the step's own epilogue copy (``Gemm.make_epilogue_copy``, a ``tcgen05.ld``
    tiled copy) applied to an identity tensor of the CTA tile: each element of the identity
    tensor is its own (row, col). Per thread, the list follows the registers: sub-tile by sub-tile
    (64 columns each), then register index within the sub-tile.
    """
    import cutlass.cute as cute

    gemm = _gemm(step, config)
    threads = range(gemm.threads) if threads is None else threads
    table = {}

    @cute.jit
    def probe():
        tCtAcc = gemm.make_accumulator(gemm.make_tiled_mma())
        coords = cute.make_identity_tensor((gemm.config.tile_m, gemm.config.tile_n))
        table.update({t: _owned(gemm, tCtAcc, coords, t) for t in threads})

    trace_static(probe)
    return table


def _addresses(acc_layout, tile_m, tile_n) -> dict:
    table = {}
    for row in range(tile_m):
        for col in range(tile_n):
            address = int(acc_layout(((row, col), 0, 0)))
            table[(row, col)] = (address >> 16, address & 0xFFFF)
    return table


def accumulator_tmem_addresses(step="sm100/2", config=None) -> dict:
    """``{(row, col): (lane, column)}``: where the step's accumulator layout keeps each element in TMEM.

    A TMEM address holds the lane in its upper 16 bits and the 32-bit column in its lower 16.
    """
    import cutlass.cute as cute

    gemm = _gemm(step, config)
    table = {}

    @cute.jit
    def probe():
        acc = gemm.make_accumulator(gemm.make_tiled_mma()).layout  # (MMA, MMA_M, MMA_N), MMA = (rows, cols)
        table.update(_addresses(acc, gemm.config.tile_m, gemm.config.tile_n))

    trace_static(probe)
    return table


# ---- static layouts evaluated in Python ----------------------------------------------------------


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


# ---- the CTA pair of a 2-CTA MMA (steps 5-10) ----------------------------------------------------


@dataclasses.dataclass(frozen=True)
class PairShare:
    """What CTA ``cta`` of a pair holds of the pair's tile, from the step's own 2-CTA tiled MMA.

    Coordinates are in the pair's tile: A is (2 * tile_m, tile_k), B is (tile_n, tile_k) (a row of
    B is a column of C), C is (2 * tile_m, tile_n).
    """

    cta: int  # place in the pair, V of the cluster's VMNK layout: 0 leads
    a: tuple  # (row, k) of A in this CTA's shared memory (partition_A), in partition order
    b: tuple  # (row, k) of B in this CTA's shared memory (partition_B)
    c: tuple  # (row, col) of C in this CTA's accumulator (partition_C)
    tmem: tuple  # (lane, column) where the accumulator keeps each element of ``c``

    @property
    def a_rows(self) -> tuple:
        return tuple(sorted({r for r, _ in self.a}))

    @property
    def b_rows(self) -> tuple:
        return tuple(sorted({r for r, _ in self.b}))

    @property
    def c_rows(self) -> tuple:
        return tuple(sorted({r for r, _ in self.c}))

    @property
    def c_cols(self) -> tuple:
        return tuple(sorted({c for _, c in self.c}))


def pair_split(step="sm100/5", config=None) -> dict:
    """``{v: PairShare}``: which rows of A and B each CTA v of the pair holds, and which of C.

    ``tiled_mma.get_slice(v).partition_A / partition_B / partition_C`` of identity tensors of the
    pair's A, B and C tiles, with the step's own ``make_tiled_mma`` (``cta_group::2``), and the
    TMEM address (lane << 16 | column) of each accumulator element from ``make_accumulator``.
    """
    import cutlass.cute as cute

    gemm = _gemm(step, config)
    found = {}

    @cute.jit
    def probe():
        tiled_mma = gemm.make_tiled_mma()
        bm, bn, bk = gemm.mma_tiler
        acc = _stage0(gemm.make_accumulator(tiled_mma))
        found.update(_pair_shares(tiled_mma, acc.layout, bm, bn, bk))

    trace_static(probe)
    return found


def _stage0(acc):
    """The first accumulator of steps 7+ ((MMA, MMA_M, MMA_N, acc_stages)); earlier steps' one accumulator."""
    import cutlass.cute as cute

    return acc[(None, None, None, 0)] if cute.rank(acc) == 4 else acc


def _pair_shares(tiled_mma, acc_layout, bm, bn, bk) -> dict:
    import cutlass.cute as cute

    pair = cute.size(tiled_mma.thr_id)
    if pair != 2:
        raise ValueError(f"not a 2-CTA MMA: {pair} CTA(s) per MMA")
    addresses = [(a >> 16, a & 0xFFFF) for a in _offsets(acc_layout)]
    shares = {}
    for v in range(pair):
        thr = tiled_mma.get_slice(v)
        a = _coords(thr.partition_A(cute.make_identity_tensor((bm, bk))))
        b = _coords(thr.partition_B(cute.make_identity_tensor((bn, bk))))
        c = _coords(thr.partition_C(cute.make_identity_tensor((bm, bn))))
        if len(c) != len(addresses):
            raise AssertionError(f"{len(c)} C coordinates but {len(addresses)} accumulator elements")
        shares[v] = PairShare(v, tuple(a), tuple(b), tuple(c), tuple(addresses))
    return shares


# ---- TMA multicast masks (steps 5-10) -----------------------------------------------------------


def multicast_masks(cluster_m: int, cluster_n: int, pair: int = 2) -> dict:
    """``{rank: (A mask, B mask)}`` of a ``cluster_m x cluster_n`` cluster of CTA pairs, in Python.

    CTA rank r = x + cluster_m * y (x along M, y along N); x = v + pair * m (v: place in the
    pair, m: the pair along M). A load of A goes to the CTAs along N with the same x (they
    compute the same rows); a load of B to the CTAs with the same v and y, one per pair along M
    (they hold the same half of the same B tile). Bit r of a mask is CTA r.
    """
    if cluster_m % pair:
        raise ValueError(f"cluster_m {cluster_m} is not a whole number of {pair}-CTA pairs")
    masks = {}
    for y in range(cluster_n):
        for x in range(cluster_m):
            v = x % pair
            a = sum(1 << (x + cluster_m * yy) for yy in range(cluster_n))
            b = sum(1 << (v + pair * m + cluster_m * y) for m in range(cluster_m // pair))
            masks[x + cluster_m * y] = (a, b)
    return masks


def mask_ctas(mask: int) -> tuple:
    """The CTA ranks whose bits are set in a multicast mask."""
    return tuple(r for r in range(16) if mask >> r & 1)


def _static_int(value) -> int:
    """A CuTeDSL integer that tracing folded to a constant, as a Python int (16-bit masks unsigned)."""
    if isinstance(value, int):
        return value
    op = value.ir_value().owner
    if getattr(op, "name", None) != "arith.constant":
        raise ValueError(f"not a constant: {value}")
    return int(op.attributes["value"].value) & 0xFFFF


def tma_multicast_masks(cluster_m: int, cluster_n: int, step="sm100/5") -> dict:
    """``{rank: (A mask, B mask)}`` as the step's ``load_partitions`` builds them:
    ``create_tma_multicast_mask(cluster, coord, mcast_mode=2)`` for A and ``mcast_mode=1`` for B,
    with ``cluster = Gemm.cta_layout_vmnk(tiled_mma)`` and each CTA's static VMNK coordinate."""
    import cutlass.cute as cute
    from cutlass.cute.nvgpu import cpasync

    gemm = _gemm(step, _config(step, cluster_m=cluster_m, cluster_n=cluster_n))
    found = {}

    def evaluate(cluster):
        for rank in range(cute.size(cluster)):
            coord = cluster.get_flat_coord(rank)
            a = cpasync.create_tma_multicast_mask(cluster, coord, mcast_mode=2)
            b = cpasync.create_tma_multicast_mask(cluster, coord, mcast_mode=1)
            found[rank] = (_static_int(a), _static_int(b))

    @cute.jit
    def probe():
        evaluate(gemm.cta_layout_vmnk(gemm.make_tiled_mma()))

    trace_static(probe)
    return found


def _config(step, **fields):
    return dataclasses.replace(_step_module(step)[1].Config(), **fields)


# ---- accumulator stages in tensor memory (steps 7-10) -------------------------------------------


def accumulator_stages(step="sm100/7", config=None) -> dict:
    """``{stage: (lanes, columns)}``: the TMEM lanes and columns each accumulator stage occupies,
    from the step's own ``make_accumulator`` layout (address = lane << 16 | column), sorted tuples."""
    import cutlass.cute as cute

    gemm = _gemm(step, config)
    found = {}

    @cute.jit
    def probe():
        found["offsets"] = _offsets(gemm.make_accumulator(gemm.make_tiled_mma()).layout)

    trace_static(probe)
    offsets = found["offsets"]
    stages = gemm.acc_stages
    per = len(offsets) // stages  # the stage mode is the last, so the slowest
    table = {}
    for s in range(stages):
        part = offsets[s * per:(s + 1) * per]
        table[s] = (tuple(sorted({a >> 16 for a in part})), tuple(sorted({a & 0xFFFF for a in part})))
    return table


# ---- the epilogue's register paths (steps 4-10) -------------------------------------------------


@dataclasses.dataclass(frozen=True)
class RegisterPath:
    """One accumulator element through one thread's registers into the staging buffer."""

    thread: int
    sub: int  # epilogue sub-tile (epi_n columns each)
    register: int  # offset in the thread's fp32 registers (tDrAcc)
    loaded: tuple  # (row, col) of the accumulator tile that tcgen05.ld put in the register
    written: Optional[tuple]  # (row, col, stage) of the staging buffer the store writes it to

    def ok(self, epi_n: int, epi_stages: int) -> bool:
        """Whether the element lands where the TMA store expects its (row, col) of the tile."""
        if self.written is None:
            return False
        row, col, stage = self.written
        return (row, self.sub * epi_n + col) == self.loaded and stage == self.sub % epi_stages


def _swizzled(offset_bytes: int, bits: int, base: int, shift: int) -> int:
    """CuTe's Swizzle<bits, base, shift> on a byte offset (the smem pointer applies it)."""
    return offset_bytes ^ ((offset_bytes >> shift) & (((1 << bits) - 1) << base))


def _store_atom(kind: str):
    import cutlass.cute as cute
    from cutlass.cute.nvgpu import warp

    from .step04_tma_store import C_DTYPE

    if kind == "stmatrix":
        return cute.make_copy_atom(warp.StMatrix8x8x16bOp(transpose=False, num_matrices=4), C_DTYPE)
    if kind == "stmatrix.trans":
        return cute.make_copy_atom(warp.StMatrix8x8x16bOp(transpose=True, num_matrices=4), C_DTYPE)
    if kind == "st.shared":
        return cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), C_DTYPE, num_bits_per_copy=128)
    raise ValueError(f"unknown store {kind!r}: 'stmatrix', 'stmatrix.trans' or 'st.shared'")


def _written(op, vals: int, thread: int, j: int, start) -> Optional[int]:
    """Byte address where one register -> shared-memory instruction puts element ``j`` of ``thread``'s
    source fragment, by the instruction's definition (PTX), not by CuTe's partition; None where the
    address the instruction is given is not aligned to what it writes.

    ``start(t, k)``: the byte address thread t supplies for atom instance k (its first destination
    element). stmatrix m8n8.x4: register i of lane l holds row l // 4, columns 2 (l % 4) + {0, 1} of
    matrix i; lane 8 i + r supplies the address of row r of matrix i (16 contiguous bytes); .trans
    stores each matrix transposed. A vector st.shared writes a thread's elements contiguously.
    """
    from cutlass.cute.nvgpu import warp

    k, v = divmod(j, vals)
    if isinstance(op, warp.StMatrix8x8x16bOp):
        w, lane = divmod(thread, 32)
        i, e = divmod(v, 2)
        row, col = lane // 4, 2 * (lane % 4) + e
        if op.transpose:
            row, col = col, row
        base = start(32 * w + 8 * i + row, k)
        return base + 2 * col if base % 16 == 0 else None
    base = start(thread, k)
    return base + 2 * v if base % (2 * vals) == 0 else None


def epilogue_paths(step="sm100/4", config=None, store: Optional[str] = None) -> list:
    """Every accumulator element's way through the epilogue of ``Gemm.epilogue_tma``, as
    :class:`RegisterPath` (all epilogue threads, all sub-tiles).

    Load side, from the step's own objects: ``make_epilogue_copy`` (tcgen05.ld) applied to an
    identity tensor of the tile gives the (row, col) each register receives. Store side:
    ``r2s = make_tiled_copy_D(smem_store_atom(), tmem_load)``, ``r2s.retile(tDrAcc)`` orders the
    registers as the store consumes them, ``partition_D`` of an identity tensor of the staging
    buffer gives each thread's destination, and the staging layout with its swizzle (from
    ``make_epilogue_operands``) turns that into byte addresses. Where each register lands is then
    worked out from the store instruction's definition (:func:`_written`). ``store`` replaces the
    step's store atom ('stmatrix', 'stmatrix.trans', 'st.shared') to show a wrong pairing fail.
    """
    import cutlass.cute as cute

    from ... import arch
    from .step02_tcgen05_tma import ACC_DTYPE

    gemm = _gemm(step, config)
    cfg = gemm.config
    threads = getattr(gemm, "epilogue_threads", 128)
    found = {}

    def evaluate(mC):
        tiled_mma = gemm.make_tiled_mma()
        acc = _stage0(gemm.make_accumulator(tiled_mma))
        epi_layout, _, _ = gemm.make_epilogue_operands(mC)
        bm, bn = gemm.tile_mnk[0], gemm.tile_mnk[1]
        tile = cute.make_identity_tensor((bm, bn))
        staging = cute.make_identity_tensor((bm, cfg.epi_n, cfg.epi_stages))
        atom = gemm.smem_store_atom() if store is None else _store_atom(store)
        loaded, dest = {}, {}
        for t in range(threads):
            tmem_load, _, tDgC = gemm.make_epilogue_copy(acc, tile, t)
            loaded[t] = _coords(tDgC)  # (T2R, T2R_M, T2R_N, 1, subtiles): sub-tiles slowest
            if t == 0:
                tDrAcc = cute.make_rmem_tensor(tDgC[(None, None, None, 0, 0)].shape, ACC_DTYPE)
                r2s = cute.make_tiled_copy_D(atom, tmem_load)
                found["load_registers"] = _offsets(tDrAcc.layout)
                found["store_registers"] = _offsets(r2s.retile(tDrAcc).layout)
                found["store_shape"] = r2s.retile(tDrAcc).shape
                found["dst_shape"] = r2s.get_slice(0).partition_D(staging).shape
            dest[t] = _coords(r2s.get_slice(t).partition_D(staging))  # (R2S, R2S_M, R2S_N, stages)
        found.update(
            loaded=loaded, dest=dest, op=atom.op, vals=cute.size(atom.layout_src_tv, mode=[1]),
            dst_vals=cute.size(atom.layout_dst_tv, mode=[1]),
            staging=_offsets(epi_layout.outer),
            swizzle=(epi_layout.inner.num_bits, epi_layout.inner.num_base, epi_layout.inner.num_shift),
        )

    def probe(mC):
        evaluate(mC)

    probe.__annotations__ = {"mC": cute.Tensor}  # an object: this module's annotations are strings
    arch.trace(cute.jit(probe), arch.fake_operands()[2], target=_TARGET)
    return _paths(found, cfg.tile_m, cfg.epi_n, cfg.epi_stages, threads)


def _atom_mode(shape) -> int:
    """Size of the first sub-mode of a copy fragment's first mode: the atom's values per thread."""
    import math

    first = shape[0][0] if isinstance(shape[0], tuple) else shape[0]
    return math.prod(_leaves(first))


def _paths(found: dict, tile_m: int, epi_n: int, epi_stages: int, threads: int) -> list:
    vals, dst_vals = found["vals"], found["dst_vals"]
    if _atom_mode(found["store_shape"]) != vals or _atom_mode(found["dst_shape"]) != dst_vals:
        raise ValueError(f"fragments {found['store_shape']} / {found['dst_shape']} do not start with the atom's values")
    # staging buffer: (row, col, stage) -> byte address and back; column-major over (tile_m, epi_n, stages)
    byte = {}
    for index, offset in enumerate(found["staging"]):
        row, rest = index % tile_m, index // tile_m
        byte[(row, rest % epi_n, rest // epi_n)] = _swizzled(2 * offset, *found["swizzle"])
    where = {b: rc for rc, b in byte.items()}
    per_stage = len(found["dest"][0]) // epi_stages

    def start(t, k, stage):
        return byte[found["dest"][t][stage * per_stage + k * dst_vals]]

    load_regs, store_regs = found["load_registers"], found["store_registers"]
    paths = []
    for t in range(threads):
        per_sub = len(load_regs)
        for sub in range(len(found["loaded"][t]) // per_sub):
            coords = found["loaded"][t][sub * per_sub:(sub + 1) * per_sub]
            received = dict(zip(load_regs, coords))  # register offset -> accumulator (row, col)
            stage = sub % epi_stages
            for j, reg in enumerate(store_regs):
                address = _written(found["op"], vals, t, j, lambda tt, k: start(tt, k, stage))
                paths.append(RegisterPath(t, sub, reg, received[reg], where.get(address)))
    return paths


def epilogue_mismatches(paths: list, epi_n: int, epi_stages: int) -> list:
    """The paths whose element does not land at its own (row, col), and staging cells written
    other than exactly once per sub-tile; empty when the epilogue is right."""
    wrong = [p for p in paths if not p.ok(epi_n, epi_stages)]
    counts = collections.Counter((p.sub, p.written) for p in paths)
    twice = [key for key, n in counts.items() if n != 1]
    return wrong + twice


# ---- the persistent kernels' schedule (steps 8-10) ----------------------------------------------


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


class _Stub:
    """Stands in for the CLC pipeline, its state and the shared storage while ``next_tile`` traces."""

    index = 0

    def consumer_wait(self, state):
        pass

    def consumer_release(self, state):
        pass

    def advance(self):
        pass

    class clc_responses:  # storage.clc_responses.data_ptr() + stage
        @staticmethod
        def data_ptr():
            return 0


def clc_decode_table(step="sm100/8", config=None, first_cta_xs=range(16)) -> dict:
    """``{first_cta_x: (cluster-tile index, valid)}`` as the step's own ``Gemm.next_tile`` decodes a
    successful ``try_cancel`` answer whose first CTA has x = ``first_cta_x``.

    ``next_tile`` is traced with the answer's query (``cute.arch.clc_response``) replaced by the
    given coordinates and the pipeline by a stand-in; its arithmetic is the kernel's.
    """
    import cutlass.cute as cute

    gemm = _gemm(step, config)
    found = {}

    def evaluate():
        for x in first_cta_xs:
            with _patched(cute.arch, clc_response=lambda ptr, x=x: (x, 0, 0, 1), fence_proxy=lambda *a, **k: None):
                index, valid, _ = gemm.next_tile(_Stub(), _Stub(), _Stub())
            found[x] = (int(index), bool(valid))

    @cute.jit
    def probe():
        evaluate()

    trace_static(probe)
    return found


def _plain(fn):
    """A ``cute.jit`` function as plain Python, rebuilt from its source.

    Not ``fn.__wrapped__``: once CuTeDSL has compiled a kernel that calls ``fn``, it has swapped its
    rewritten code (staged ``if``/``while``) into that function object, and the rewritten code needs
    an MLIR context to run."""
    import ast
    import inspect as pyinspect
    import sys

    inner = getattr(fn, "__wrapped__", fn)
    module = sys.modules[inner.__module__]
    tree = ast.parse(pyinspect.getsource(module))
    node = tree
    for part in inner.__qualname__.split("."):
        node = next(n for n in ast.iter_child_nodes(node)
                    if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name == part)
    node.decorator_list = []
    namespace = dict(vars(module))
    exec(compile(ast.Module(body=[node], type_ignores=[]), module.__file__, "exec"), namespace)
    return namespace[node.name]


def kernel_cta_tiles(step="sm100/8", config=None, m: int = 4096, n: int = 4096, cluster: int = 0) -> dict:
    """``{index: {(x, y): (pair tile (m, n), CTA tile (m, n))}}``: what the step's own
    ``Gemm.tile_coords`` gives each CTA (x, y) of cluster ``cluster`` for every cluster-tile index
    of an ``m x n`` C, with ``block_idx`` = (cluster * cluster_m + x, y, 0).

    Plain Python: ``block_idx`` is replaced by those numbers, C by its shape, and ``cluster_tile``
    (and the jit functions it calls, e.g. step 10's ``gilbert_tile``) by their Python bodies.
    """
    import types

    import cutlass.cute as cute

    gemm = _gemm(step, config)
    cm, cn, _ = gemm.cluster_shape_mnk
    mC = types.SimpleNamespace(shape=(m, n))
    tile_fn = _plain(type(gemm).cluster_tile)
    jitted = {name: _plain(v) for name, v in tile_fn.__globals__.items()
              if name in tile_fn.__code__.co_names and hasattr(v, "__wrapped__")}
    gemm.cluster_tile = types.MethodType(tile_fn, gemm)
    clusters_m, clusters_n = gemm.cluster_grid(mC)
    table = {}
    with contextlib.ExitStack() as stack:
        for name, fn in jitted.items():  # the module's jit functions, as Python, while this runs
            stack.callback(tile_fn.__globals__.__setitem__, name, tile_fn.__globals__[name])
            tile_fn.__globals__[name] = fn
        for index in range(clusters_m * clusters_n):
            table[index] = {}
            for x in range(cm):
                for y in range(cn):
                    with _patched(cute.arch, block_idx=lambda x=x, y=y: (cluster * cm + x, y, 0)):
                        pair_tile, cta_tile = gemm.tile_coords(index, mC)
                    table[index][(x, y)] = (tuple(int(v) for v in pair_tile[:2]), tuple(int(v) for v in cta_tile[:2]))
    return table
