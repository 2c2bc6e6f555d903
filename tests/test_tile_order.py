"""Tile orders (chapters 9-10): every order is a permutation of the grid, the kernel-side index
math agrees with the Python orders, and the Gilbert curve moves between neighbouring tiles."""

import itertools

import pytest

from gemm_course import tile_order as to

SMALL = list(itertools.product(range(1, 18), range(1, 18)))
LARGE = [(32, 64), (64, 32), (63, 65), (65, 63), (1, 100), (100, 1), (97, 89), (65, 64), (128, 48)]
GRIDS = SMALL + LARGE


@pytest.mark.parametrize("kind", to.ORDERS)
def test_every_order_visits_each_tile_once(kind):
    for m, n in GRIDS:
        for group in ((8,) if kind != "grouped" else (1, 3, 8, 16)):
            path = to.order(kind, m, n, group)
            assert len(path) == m * n, (kind, m, n, group)
            assert set(path) == set(itertools.product(range(m), range(n))), (kind, m, n, group)


@pytest.mark.parametrize("kind", to.ORDERS)
def test_tile_at_is_the_order(kind):
    for m, n in [(1, 1), (1, 7), (7, 1), (5, 9), (13, 7), (16, 16), (17, 3), (63, 65)]:
        table = to.gilbert_table(m, n) if kind == "gilbert" else None
        for group in (1, 4, 8):
            expect = to.order(kind, m, n, group)
            assert [to.tile_at(kind, i, m, n, group, table) for i in range(m * n)] == expect, (kind, m, n, group)


def test_grouped_raster_with_a_band_covering_every_row_is_the_column_raster():
    for m, n in GRIDS:
        for group in (m, m + 1, max(m, 64)):
            assert to.grouped_raster(m, n, group) == to.column_raster(m, n), (m, n, group)


def test_grouped_raster_with_bands_of_one_row_is_the_row_raster():
    for m, n in SMALL:
        assert to.grouped_raster(m, n, 1) == to.row_raster(m, n)


def test_grouped_raster_walks_bands_column_by_column_and_keeps_the_short_last_band():
    assert to.grouped_raster(5, 2, group=2) == [
        (0, 0), (1, 0), (0, 1), (1, 1),  # band of rows 0-1
        (2, 0), (3, 0), (2, 1), (3, 1),  # band of rows 2-3
        (4, 0), (4, 1),  # last band: one row
    ]  # fmt: skip


def test_gilbert_steps_are_unit_except_one_diagonal_where_parity_forces_it():
    for m, n in itertools.product(range(1, 41), range(1, 41)):
        path = to.gilbert(m, n)
        assert path[0] == (0, 0)
        moves = to.steps(path)
        odd = [d for d in moves if d not in ((0, 1), (1, 0))]
        assert all(d == (1, 1) for d in odd), (m, n, odd)  # Chebyshev distance 1
        assert len(odd) == (1 if to.gilbert_has_diagonal(m, n) else 0), (m, n, len(odd))


def test_gilbert_diagonal_rule_on_examples_and_large_grids():
    assert not any(to.gilbert_has_diagonal(m, n) for m, n in [(2, 3), (3, 2), (2, 17), (5, 5), (6, 8), (7, 9), (32, 64)])
    assert all(to.gilbert_has_diagonal(m, n) for m, n in [(4, 5), (5, 4), (4, 17), (6, 7), (65, 64)])
    for m, n in LARGE:
        odd = [d for d in to.steps(to.gilbert(m, n)) if d not in ((0, 1), (1, 0))]
        assert len(odd) == int(to.gilbert_has_diagonal(m, n)) and all(d == (1, 1) for d in odd), (m, n)


def test_gilbert_on_powers_of_two_has_no_diagonal_and_fills_aligned_blocks_one_at_a_time():
    """On 2^a x 2^a it is a Hilbert curve: every aligned 2^j x 2^j block is one contiguous run."""
    for a, b in itertools.product(range(7), range(7)):
        m, n = 2**a, 2**b
        assert all(d in ((0, 1), (1, 0)) for d in to.steps(to.gilbert(m, n))), (m, n)
    for side in (2, 4, 8, 16, 32):
        path = to.gilbert(side, side)
        for block in (2, 4, 8):
            if block > side:
                continue
            ids = [(m // block, n // block) for m, n in path]
            runs = [k for k, _ in itertools.groupby(ids)]
            assert len(runs) == (side // block) ** 2, (side, block)


def test_gilbert_table_packs_one_int_per_tile():
    table = to.gilbert_table(7, 12)
    assert sorted(table) == list(range(84))
    assert [(p // 12, p % 12) for p in table] == to.gilbert(7, 12)


def test_bad_inputs_are_refused():
    with pytest.raises(ValueError, match="unknown tile order"):
        to.order("spiral", 4, 4)
    with pytest.raises(ValueError, match="at least 1 x 1"):
        to.order("gilbert", 0, 4)
    with pytest.raises(ValueError, match="group"):
        to.grouped_raster(4, 4, 0)


def test_grouped_tile_traces_as_kernel_integer_math():
    """The same function, given cutlass.min, builds Int32 arithmetic inside a CuTeDSL trace."""
    import cutlass
    import cutlass.cute as cute
    from cutlass.cutlass_dsl import CuTeDSL

    seen = {}

    @cute.jit
    def probe(i: cutlass.Int32, tiles_m: cutlass.Int32, tiles_n: cutlass.Int32):
        m, n = to.tile_at("grouped", i, tiles_m, tiles_n, 8, minimum=cutlass.min)
        seen["types"] = (type(m), type(n))

    dsl = CuTeDSL._get_dsl()
    old = dsl.envar.arch if dsl.envar._arch else None
    dsl.envar.arch = "sm_90a"
    try:
        cute.compile(probe, cutlass.Int32(0), cutlass.Int32(32), cutlass.Int32(32))
    finally:
        dsl.envar.arch = old
    assert seen["types"] == (cutlass.Int32, cutlass.Int32)
