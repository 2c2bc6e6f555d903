"""The Blackwell steps' layouts, evaluated on the CPU from the kernels' own objects.

The book draws its swizzle and accumulator-ownership figures from these functions, and the tests
check them, so a figure can never disagree with the kernel it illustrates:

* :func:`smem_layouts` - the shared-memory layouts of A and B that a step's ``Gemm`` builds
  (its swizzle and its layout), taught in chapter 2 (interleaved) and chapter 3 (128-byte swizzle).
* :func:`accumulator_ownership` - which accumulator element (row, column) each thread receives
  from the epilogue's ``tcgen05.ld`` copy, and :func:`accumulator_tmem_addresses` - where in
  tensor memory (lane, column) the MMA keeps each element; both taught in chapter 2.

Each traces a small ``@cute.jit`` function for ``sm_100a``: static layouts evaluate to Python
ints while CuTeDSL traces, so nothing runs and no GPU is needed. The loops that read them live
in plain functions, which CuTeDSL leaves as Python (it rewrites only the jit function's own loops).
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Optional

_TARGET = "sm_100a"


def trace_static(fn: Callable[[], None], target: str = _TARGET) -> None:
    """Compile the argument-free ``@cute.jit`` function ``fn`` for ``target`` so that its body is traced.

    ``fn`` collects what it needs into Python objects while tracing; the compiled result is dropped.
    """
    from ... import arch

    arch.trace(fn, target=target)


def _gemm(step, config):
    from ... import ladder

    step = ladder.get(step)
    if step.arch != "sm100":
        raise ValueError(f"{step.key} is not a Blackwell step")
    config = step.default if config is None else config
    ok, why = step.check_config(config)
    if not ok:
        raise ValueError(f"{step.key}: invalid config {config}: {why}")
    return step.load().Gemm(config)


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
