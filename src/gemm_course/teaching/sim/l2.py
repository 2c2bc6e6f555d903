"""L2 reuse of a tile order (chapters 9-10) and the main loop's shared-memory traffic (chapters 5, 11).

Part of ``gemm_course.teaching.sim`` (its docstring says what each model is for)."""

from __future__ import annotations

import dataclasses
from typing import Dict, Optional, Sequence, Tuple

from ...rules import tile_order
from .constants import H100_SMS, TENSOR_FLOP_PER_CLOCK

# ---------------------------------------------------------------------------------------------
# L2 reuse of a tile order
# ---------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class L2Traffic:
    """Panels (and bytes) an order reads from DRAM in the one-wave-in-L2 model."""

    waves: int
    a_panels: int  # sum over waves of distinct A row panels
    b_panels: int  # sum over waves of distinct B column panels
    a_panel_bytes: int  # tile_m x K
    b_panel_bytes: int  # K x tile_n
    unique_a: int  # distinct A panels over the whole order: the floor if L2 held everything
    unique_b: int
    a_per_wave: Tuple[int, ...]
    b_per_wave: Tuple[int, ...]

    @property
    def panels(self) -> int:
        return self.a_panels + self.b_panels

    @property
    def bytes(self) -> int:
        return self.a_panels * self.a_panel_bytes + self.b_panels * self.b_panel_bytes

    @property
    def min_bytes(self) -> int:
        return self.unique_a * self.a_panel_bytes + self.unique_b * self.b_panel_bytes


def l2_traffic(
    order: Sequence[Tuple[int, int]],
    sms: int = H100_SMS,
    tile_m: int = 128,
    tile_n: int = 256,
    k: int = 4096,
    elem_bytes: int = 2,
) -> L2Traffic:
    """Cut ``order`` into waves of ``sms`` tiles and count the panels each wave touches.

    Tile sizes default to the 128 x 256 tile of the later Hopper steps; ``k`` is the GEMM's K.
    """
    if sms < 1:
        raise ValueError(f"sms must be >= 1, got {sms}")
    a_per_wave, b_per_wave = [], []
    for start in range(0, len(order), sms):
        wave = order[start : start + sms]
        a_per_wave.append(len({m for m, _ in wave}))
        b_per_wave.append(len({n for _, n in wave}))
    return L2Traffic(
        waves=len(a_per_wave),
        a_panels=sum(a_per_wave),
        b_panels=sum(b_per_wave),
        a_panel_bytes=tile_m * k * elem_bytes,
        b_panel_bytes=tile_n * k * elem_bytes,
        unique_a=len({m for m, _ in order}),
        unique_b=len({n for _, n in order}),
        a_per_wave=tuple(a_per_wave),
        b_per_wave=tuple(b_per_wave),
    )


def compare_orders(
    tiles_m: int,
    tiles_n: int,
    kinds: Sequence[str] = tile_order.ORDERS,
    group: int = 8,
    **traffic,
) -> Dict[str, L2Traffic]:
    """:func:`l2_traffic` of each order kind on one grid (``traffic``: sms, tile sizes, k)."""
    return {kind: l2_traffic(tile_order.order(kind, tiles_m, tiles_n, group), **traffic) for kind in kinds}


# ---------------------------------------------------------------------------------------------
# shared-memory traffic of the main loop
# ---------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class SmemTraffic:
    """One K tile of one CTA: bytes read by wgmma, bytes written by TMA, tensor-core clocks."""

    wgmma_read: int
    tma_write: int
    clocks: float

    @property
    def bytes_per_clock(self) -> float:
        return (self.wgmma_read + self.tma_write) / self.clocks


def smem_traffic(tile_m: int, tile_n: int, mma_n: Optional[int] = None, tile_k: int = 64, elem_bytes: int = 2) -> SmemTraffic:
    """Shared-memory traffic of a ``tile_m`` x ``tile_n`` tile's K tile at the tensor cores' rate.

    ``mma_n`` is the wgmma's N (default ``tile_n``: one wgmma spans the tile's width).
    """
    mma_n = mma_n or tile_n
    if tile_m % 64 or tile_n % mma_n or tile_k % 16:
        raise ValueError("tile_m must be a multiple of 64, tile_n of mma_n, tile_k of 16")
    wgmmas = (tile_m // 64) * (tile_n // mma_n) * (tile_k // 16)
    read = wgmmas * (64 + mma_n) * 16 * elem_bytes
    write = (tile_m + tile_n) * tile_k * elem_bytes
    return SmemTraffic(read, write, 2 * tile_m * tile_n * tile_k / TENSOR_FLOP_PER_CLOCK)
