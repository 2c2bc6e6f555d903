"""Shared-memory layouts of A and B (chapters 2, 3) and where the accumulator lives in tensor memory:
which thread receives each element (chapter 2) and the lanes and columns of each stage (chapter 7)."""

from __future__ import annotations

import dataclasses
from typing import Optional

from ._common import _gemm, _offsets, trace_static


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


