"""Chapters 2, 3, 9 and 10: write the function; the check compares it with the kernels.

Part of ``gemm_course.teaching.exercises`` (its docstring says how the checks work)."""

from __future__ import annotations

from .common import NOT_ANSWERED, attempt, unanswered  # noqa: F401

# ---------------------------------------------------------------------------------------------
# chapters 2, 3, 9 and 10: write the function; the check compares it with the kernels
# ---------------------------------------------------------------------------------------------


def _pair(got, what: str) -> tuple:
    """``got`` as a tuple of two, or an AssertionError that says a pair is asked for (not a TypeError
    from ``tuple(5)`` that reads as a bug in the reader's code)."""
    try:
        pair = None if isinstance(got, str) else tuple(got)
    except TypeError:  # not iterable: an int, None, ...
        pair = None
    assert pair is not None and len(pair) == 2, f"your function returned {got!r}; return a pair {what}"
    return pair


def check_stage_bytes(fn) -> str:
    """Write ``fn(tile_m, tile_n, tile_k)``: the bytes step 2's barrier expects for one K tile of A and B
    (bf16). Compared with ``expect_tx`` in the compiled PTX of both architectures' step 2."""
    from ...runtime import arch, ladder
    from .. import inspect

    for key, tile_n, tile_k in (("sm90/2", 256, 64), ("sm90/2", 128, 32), ("sm100/2", 256, 64), ("sm100/2", 64, 32)):
        s = ladder.get(key)
        config = s.config(tile_n=tile_n, tile_k=tile_k)
        (tx,) = inspect.expect_tx_bytes(arch.compile_step(s, config, s.target).ptx)
        got = fn(config.tile_m, tile_n, tile_k)
        assert got == tx, (
            f"{key} with tile {config.tile_m} x {tile_n} x {tile_k}: you say {got}, the PTX expects {tx} bytes. Hint: one K "
            "tile of A (tile_m x tile_k) and of B (tile_n x tile_k), 2 bytes per bf16; a count that is off hangs the kernel."
        )
    return "right: (tile_m + tile_n) x tile_k x 2 bytes per K tile, the same on both architectures"


def check_swizzle(fn) -> str:
    """Write ``fn(row, chunk)``: the physical 16-byte chunk where logical chunk ``chunk`` (0-7) of tile row
    ``row`` lands under the 128-byte swizzle. Compared with both step 3's shared-memory layouts."""
    from ...kernels.sm100 import layouts
    from .. import sim

    sw = layouts.smem_layouts("sm100/3")["A"]  # Blackwell's atom: apply its Swizzle<B, M, S> to byte addresses

    def blackwell(row, chunk):
        address = row * 128 + chunk * 16
        address ^= ((address >> (sw.swizzle_base + sw.swizzle_shift)) & ((1 << sw.swizzle_bits) - 1)) << sw.swizzle_base
        return (address >> 4) & 7

    tables = {"sm90/3": sim.xor_pattern("sm90/3"), "sm100/3": [[blackwell(r, c) for c in range(8)] for r in range(8)]}
    for key, table in tables.items():
        for row in range(16):
            for chunk in range(8):
                got = fn(row, chunk)
                assert got == table[row % 8][chunk], (
                    f"{key}: row {row}, chunk {chunk} lands in chunk {table[row % 8][chunk]}, you say {got}. Hint: the "
                    "swizzle XORs the chunk index (address bits 4-6) with the row within its group of 8 (bits 7-9)."
                )
    return "right: chunk XOR (row mod 8), in both steps 3"


def check_grouped_order(fn) -> str:
    """Write ``fn(index, tiles_m, tiles_n, group)``: the (m, n) of the index-th tile of the grouped raster.
    Compared with the order the steps 9 compute, on grids whose last band is narrower."""
    from ...rules import tile_order

    for tiles_m, tiles_n, group in ((8, 8, 8), (13, 7, 4), (5, 16, 8), (16, 4, 1)):
        want = tile_order.grouped_raster(tiles_m, tiles_n, group)
        for index, tile in enumerate(want):
            got = _pair(fn(index, tiles_m, tiles_n, group), "(m, n)")
            assert got == tile, (
                f"{tiles_m} x {tiles_n} tiles, group {group}: index {index} is tile {tile}, you say {got}. Hint: a band of "
                "`group` tile-rows holds group x tiles_n indices and is walked column by column; the last band may be "
                "narrower (min(group, tiles_m - first row))."
            )
    return "right: the order of tile_order.grouped_tile, which sm90/9 and sm100/9 trace into their kernels"


def check_wave_footprint(fn) -> str:
    """Write ``fn(order, wave)``: the (A row-panels, B column-panels) the first ``wave`` tiles of ``order``
    (a list of (m, n)) touch. Compared with the L2 model on the three orders of chapter 10."""
    from ...rules import tile_order
    from .. import sim

    for kind, tm, tn, wave in (("row", 32, 32, 66), ("grouped", 32, 32, 66), ("gilbert", 32, 32, 66), ("gilbert", 24, 40, 74)):
        order = tile_order.order(kind, tm, tn)
        model = sim.l2_traffic(order, sms=wave)
        want = (model.a_per_wave[0], model.b_per_wave[0])
        got = _pair(fn(order, wave), "(A panels, B panels)")
        assert got == want, (
            f"{kind} order on {tm} x {tn} tiles, waves of {wave}: the model counts {want}, you say {got}. Hint: count the "
            "distinct m (A panels) and the distinct n (B panels) among the first `wave` tiles."
        )
    return "right: a Gilbert wave touches few panels in both directions; a row raster's wave, few A panels but many B"
