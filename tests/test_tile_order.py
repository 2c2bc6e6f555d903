"""Tile orders (chapters 9-10): every order is a permutation of the grid, the kernel-side index
math agrees with the Python orders, and the Gilbert curve moves between neighbouring tiles."""

import itertools

import pytest

from gemm_course.rules import tile_order as to

SMALL = list(itertools.product(range(1, 18), range(1, 18)))
LARGE = [(32, 64), (64, 32), (63, 65), (65, 63), (1, 100), (100, 1), (97, 89), (65, 64), (128, 48)]
GRIDS = SMALL + LARGE


@pytest.mark.fast
@pytest.mark.parametrize("kind", to.ORDERS)
def test_every_order_visits_each_tile_once(kind):
    for m, n in GRIDS:
        for group in ((8,) if kind != "grouped" else (1, 3, 8, 16)):
            path = to.order(kind, m, n, group)
            assert len(path) == m * n, (kind, m, n, group)
            assert set(path) == set(itertools.product(range(m), range(n))), (kind, m, n, group)


@pytest.mark.fast
@pytest.mark.parametrize("kind", to.ORDERS)
def test_tile_at_is_the_order(kind):
    for m, n in [(1, 1), (1, 7), (7, 1), (5, 9), (13, 7), (16, 16), (17, 3), (63, 65)]:
        table = to.gilbert_table(m, n) if kind == "gilbert" else None
        for group in (1, 4, 8):
            expect = to.order(kind, m, n, group)
            assert [to.tile_at(kind, i, m, n, group, table) for i in range(m * n)] == expect, (kind, m, n, group)


@pytest.mark.fast
def test_grouped_raster_with_a_band_covering_every_row_is_the_column_raster():
    for m, n in GRIDS:
        for group in (m, m + 1, max(m, 64)):
            assert to.grouped_raster(m, n, group) == to.column_raster(m, n), (m, n, group)


@pytest.mark.fast
def test_grouped_raster_with_bands_of_one_row_is_the_row_raster():
    for m, n in SMALL:
        assert to.grouped_raster(m, n, 1) == to.row_raster(m, n)


@pytest.mark.fast
def test_grouped_raster_walks_bands_column_by_column_and_keeps_the_short_last_band():
    assert to.grouped_raster(5, 2, group=2) == [
        (0, 0), (1, 0), (0, 1), (1, 1),  # band of rows 0-1
        (2, 0), (3, 0), (2, 1), (3, 1),  # band of rows 2-3
        (4, 0), (4, 1),  # last band: one row
    ]  # fmt: skip


@pytest.mark.slow  # 1600 grids
def test_gilbert_steps_are_unit_except_one_diagonal_where_parity_forces_it():
    for m, n in itertools.product(range(1, 41), range(1, 41)):
        path = to.gilbert(m, n)
        assert path[0] == (0, 0)
        moves = to.steps(path)
        odd = [d for d in moves if d not in ((0, 1), (1, 0))]
        assert all(d == (1, 1) for d in odd), (m, n, odd)  # Chebyshev distance 1
        assert len(odd) == (1 if to.gilbert_has_diagonal(m, n) else 0), (m, n, len(odd))


@pytest.mark.fast
def test_gilbert_diagonal_rule_on_examples_and_large_grids():
    assert not any(to.gilbert_has_diagonal(m, n) for m, n in [(2, 3), (3, 2), (2, 17), (5, 5), (6, 8), (7, 9), (32, 64)])
    assert all(to.gilbert_has_diagonal(m, n) for m, n in [(4, 5), (5, 4), (4, 17), (6, 7), (65, 64)])
    for m, n in LARGE:
        odd = [d for d in to.steps(to.gilbert(m, n)) if d not in ((0, 1), (1, 0))]
        assert len(odd) == int(to.gilbert_has_diagonal(m, n)) and all(d == (1, 1) for d in odd), (m, n)


@pytest.mark.fast
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


@pytest.mark.fast
def test_gilbert_table_packs_one_int_per_tile():
    table = to.gilbert_table(7, 12)
    assert sorted(table) == list(range(84))
    assert [(p // 12, p % 12) for p in table] == to.gilbert(7, 12)


@pytest.mark.fast
def test_bad_inputs_are_refused():
    with pytest.raises(ValueError, match="unknown tile order"):
        to.order("spiral", 4, 4)
    with pytest.raises(ValueError, match="at least 1 x 1"):
        to.order("gilbert", 0, 4)
    with pytest.raises(ValueError, match="group"):
        to.grouped_raster(4, 4, 0)


@pytest.mark.compile
def test_grouped_tile_traces_as_kernel_integer_math():
    """The same function, given cutlass.min, builds Int32 arithmetic inside a CuTeDSL trace."""
    import cutlass
    import cutlass.cute as cute

    from gemm_course.runtime import arch

    seen = {}

    @cute.jit
    def probe(i: cutlass.Int32, tiles_m: cutlass.Int32, tiles_n: cutlass.Int32):
        m, n = to.tile_at("grouped", i, tiles_m, tiles_n, 8, minimum=cutlass.min)
        seen["types"] = (type(m), type(n))

    arch.trace(probe, cutlass.Int32(0), cutlass.Int32(32), cutlass.Int32(32), target="sm_90a")
    assert seen["types"] == (cutlass.Int32, cutlass.Int32)


# ---------------------------------------------------------------------------------------------
# gilbert_tile: the i-th Gilbert tile by one descent, on Python ints and traced by CuTeDSL
# ---------------------------------------------------------------------------------------------

GILBERT_TILE_GRIDS = list(itertools.product(range(1, 41), range(1, 41))) + [
    (64, 32), (32, 64), (63, 65), (65, 63), (97, 89), (65, 64), (128, 256), (256, 128), (1, 300), (300, 1),
]  # fmt: skip


@pytest.mark.slow  # every index of every grid: 2-4 s
def test_gilbert_tile_is_the_gilbert_order_on_every_index():
    for m, n in GILBERT_TILE_GRIDS:
        assert [to.gilbert_tile(i, m, n) for i in range(m * n)] == to.gilbert(m, n), (m, n)


@pytest.mark.fast
def test_gilbert_tile_is_written_in_kernel_safe_python():
    """What the CuTeDSL rewrite stages: no calls (abs/min/max, recursion), no conditional
    expressions or and/or, no lists or for loops, tuples only in the one final return; and no
    // or %, which the kernel would run as signed division on its first tile's path."""
    import ast
    import inspect
    import textwrap

    fn = ast.parse(textwrap.dedent(inspect.getsource(to.gilbert_tile))).body[0]
    body = [node for stmt in fn.body for node in ast.walk(stmt)]
    banned = (ast.Call, ast.IfExp, ast.BoolOp, ast.List, ast.ListComp, ast.GeneratorExp, ast.For, ast.Lambda)
    assert not [type(node).__name__ for node in body if isinstance(node, banned)]
    # halving and parity by >> 1 and & 1: a signed // or % costs the kernel sign fix-ups per level
    signed = (ast.FloorDiv, ast.Mod)
    assert not [type(node.op).__name__ for node in body if isinstance(node, ast.BinOp) and isinstance(node.op, signed)]
    returns = [node for node in body if isinstance(node, ast.Return)]
    assert returns == [fn.body[-1]]
    assert [node for node in body if isinstance(node, ast.Tuple)] == [fn.body[-1].value]


def _compile(fn, *args, target="sm_90a", keep_ptx=False):
    """cute.compile ``fn`` for ``target`` on any machine (a GPU is not needed); with the PTX if asked."""
    from gemm_course.runtime import arch

    return arch.trace(fn, *args, target=target, keep_ptx=keep_ptx)


@pytest.mark.compile
def test_gilbert_tile_traces_in_an_sm90a_kernel_with_dynamic_arguments():
    """Block b computes tile b of a grid whose size is only known at run time (Int32 arguments).

    ``cute.jit(f)`` rewrites f's ``if``/``while`` only when f's source carries a ``@<x>.jit``
    decorator, hence ``@traceable.jit`` on gilbert_tile; :func:`for_kernel` wraps a copy, because
    cute.jit swaps the rewritten code into the function object it is given.
    """
    import cutlass
    import cutlass.cute as cute
    from cutlass.cute.runtime import make_fake_tensor

    code = to.gilbert_tile.__code__
    gilbert_tile = to.for_kernel(to.gilbert_tile)
    seen = {}

    @cute.kernel
    def kernel(tiles_m: cutlass.Int32, tiles_n: cutlass.Int32, out: cute.Tensor):
        block, _, _ = cute.arch.block_idx()
        m, n = gilbert_tile(cutlass.Int32(block), tiles_m, tiles_n)
        seen["types"] = (type(m), type(n))
        out[block] = m * tiles_n + n

    @cute.jit
    def launch(tiles_m: cutlass.Int32, tiles_n: cutlass.Int32, out: cute.Tensor):
        kernel(tiles_m, tiles_n, out).launch(grid=(tiles_m * tiles_n, 1, 1), block=(1, 1, 1))

    out = make_fake_tensor(cutlass.Int32, (cute.sym_int32(),), stride=(1,))
    _, ptx = _compile(launch, cutlass.Int32(1), cutlass.Int32(1), out, keep_ptx=True)
    assert seen["types"] == (cutlass.Int32, cutlass.Int32)
    assert ".target sm_90a" in ptx and ".entry kernel_" in ptx
    assert to.gilbert_tile.__code__ is code  # the module's function is still plain Python
    assert to.gilbert_tile(5, 4, 4) == to.gilbert(4, 4)[5]


@pytest.mark.compile
def test_gilbert_tile_compiled_by_cutedsl_is_the_gilbert_order():
    """Compiled, not just traced: a host-side @cute.jit loop (it runs on the CPU, no GPU needed)
    writes every tile of a run-time-sized grid; CuTeDSL's Int32 ``%`` is C's remainder, so this
    checks the compiled integer semantics, not only Python's."""
    import cutlass
    import cutlass.cute as cute
    import numpy as np
    from cutlass.cute.runtime import from_dlpack

    gilbert_tile = to.for_kernel(to.gilbert_tile)

    @cute.jit
    def walk(tiles_m: cutlass.Int32, tiles_n: cutlass.Int32, out: cute.Tensor):
        for i in range(tiles_m * tiles_n):
            m, n = gilbert_tile(i, tiles_m, tiles_n)
            out[2 * i] = m
            out[2 * i + 1] = n

    buf = np.zeros(2 * max(m * n for m, n in GILBERT_TILE_GRIDS), dtype=np.int32)
    out = from_dlpack(buf)
    compiled, _ = _compile(walk, cutlass.Int32(1), cutlass.Int32(1), out)
    for m, n in GILBERT_TILE_GRIDS:
        compiled(cutlass.Int32(m), cutlass.Int32(n), out)
        assert [tuple(p) for p in buf[: 2 * m * n].reshape(-1, 2).tolist()] == to.gilbert(m, n), (m, n)
