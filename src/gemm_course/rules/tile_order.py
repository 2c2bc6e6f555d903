"""Tile orders: in which order the CTAs of a GEMM visit the output tiles.

Taught in chapters 9 (grouped raster, the "thread-block swizzle") and 10 (the Gilbert curve).
The grid of output tiles is ``tiles_m x tiles_n``; tile ``(m, n)`` needs row panel ``m`` of A
and column panel ``n`` of B. The tiles that run at the same time (a *wave*, one per SM) share
the L2 cache, so an order that keeps a wave's tiles in a compact block reads fewer distinct
panels from DRAM (:func:`gemm_course.teaching.sim.l2_traffic` counts them).

Orders, each a list of ``(tile_m, tile_n)`` in visit order (:func:`order`):

``row``      row raster: all of row 0, then row 1, ... (what ``blockIdx.x = n`` launches give)
``column``   column raster: all of column 0, then column 1, ...
``grouped``  grouped raster: bands of ``group`` tile rows, each band walked column by column
             (Triton's ``GROUP_SIZE_M``); the last band may be narrower.
``gilbert``  a generalized Hilbert curve over the rectangle: every step moves to an adjacent tile,
             but for one diagonal step on grids whose longer side is odd and shorter side even and
             at least 4 (:func:`gilbert_has_diagonal`).

Inside a kernel each CTA (or each iteration of a persistent loop) needs the i-th tile of an
order as integer arithmetic. :func:`tile_at` gives that: closed-form index math for the rasters
(:func:`grouped_tile` is written so that ``cutlass.min`` can be passed in for ``min``), and for
Gilbert a lookup in :func:`gilbert_table`, one packed int32 per tile, for a kernel that would
read the order from a small global-memory table (4 bytes per tile: 4 KiB for a 32 x 32 grid).
:func:`gilbert_tile` computes the same tile with no table: it walks down the curve's recursion
to the one part holding the index, in integer ops that also trace in a kernel (:func:`for_kernel`);
the Gilbert steps (10 and 11, and Blackwell's 10) use it.

The Gilbert curve follows Jakub Červený's "gilbert" generalized Hilbert curve
(https://github.com/jakubcerveny/gilbert, BSD-2-Clause, 2018), implemented here from its
published description.
"""

from __future__ import annotations

from typing import Callable, List, Optional, Sequence, Tuple

Tile = Tuple[int, int]
ORDERS = ("row", "column", "grouped", "gilbert")


def _check_grid(tiles_m: int, tiles_n: int) -> None:
    if tiles_m < 1 or tiles_n < 1:
        raise ValueError(f"the tile grid must be at least 1 x 1, got {tiles_m} x {tiles_n}")


# ---------------------------------------------------------------------------------------------
# rasters: closed-form index math
# ---------------------------------------------------------------------------------------------


def row_tile(i, tiles_m, tiles_n) -> Tile:
    return i // tiles_n, i % tiles_n


def column_tile(i, tiles_m, tiles_n) -> Tile:
    return i % tiles_m, i // tiles_m


def grouped_tile(i, tiles_m, tiles_n, group, minimum: Callable = min) -> Tile:
    """The i-th tile of the grouped raster; only integer ops, so it also traces in a kernel.

    ``minimum``: Python's ``min`` here, ``cutlass.min`` inside a CuTeDSL kernel.
    """
    per_band = group * tiles_n  # tiles in a full band of `group` tile rows
    band = i // per_band
    first_m = band * group
    rows = minimum(tiles_m - first_m, group)  # the last band holds what is left
    local = i - band * per_band
    return first_m + local % rows, local // rows


def row_raster(tiles_m: int, tiles_n: int) -> List[Tile]:
    _check_grid(tiles_m, tiles_n)
    return [row_tile(i, tiles_m, tiles_n) for i in range(tiles_m * tiles_n)]


def column_raster(tiles_m: int, tiles_n: int) -> List[Tile]:
    _check_grid(tiles_m, tiles_n)
    return [column_tile(i, tiles_m, tiles_n) for i in range(tiles_m * tiles_n)]


def grouped_raster(tiles_m: int, tiles_n: int, group: int = 8) -> List[Tile]:
    """``group`` >= ``tiles_m`` is the column raster; ``group`` = 1 is the row raster."""
    _check_grid(tiles_m, tiles_n)
    if group < 1:
        raise ValueError(f"group must be >= 1, got {group}")
    return [grouped_tile(i, tiles_m, tiles_n, group) for i in range(tiles_m * tiles_n)]


# ---------------------------------------------------------------------------------------------
# Gilbert: a generalized Hilbert curve for any rectangle
# ---------------------------------------------------------------------------------------------


def _sign(v: int) -> int:
    return (v > 0) - (v < 0)


def _gilbert_fill(out: list, x: int, y: int, ax: int, ay: int, bx: int, by: int) -> None:
    """Cover the rectangle spanned from (x, y) by the major vector a and the minor vector b.

    The path starts at (x, y) and ends at the far end of a (one cell in from it). Each call
    splits the rectangle: a long one (2w > 3h) into two halves along a; otherwise into three
    parts, up the first half of b, along the whole of a, and back down; halves are nudged to
    even lengths so the pieces join with unit steps wherever the sides allow it.
    """
    w, h = abs(ax + ay), abs(bx + by)
    dax, day = _sign(ax), _sign(ay)  # unit step along the major axis
    dbx, dby = _sign(bx), _sign(by)  # unit step along the minor axis

    if h == 1:  # a single line along a
        out.extend((x + t * dax, y + t * day) for t in range(w))
        return
    if w == 1:  # a single line along b
        out.extend((x + t * dbx, y + t * dby) for t in range(h))
        return

    ax2, ay2 = ax // 2, ay // 2
    bx2, by2 = bx // 2, by // 2
    w2, h2 = abs(ax2 + ay2), abs(bx2 + by2)

    if 2 * w > 3 * h:
        if w2 % 2 and w > 2:
            ax2, ay2 = ax2 + dax, ay2 + day
        _gilbert_fill(out, x, y, ax2, ay2, bx, by)
        _gilbert_fill(out, x + ax2, y + ay2, ax - ax2, ay - ay2, bx, by)
    else:
        if h2 % 2 and h > 2:
            bx2, by2 = bx2 + dbx, by2 + dby
        _gilbert_fill(out, x, y, bx2, by2, ax2, ay2)
        _gilbert_fill(out, x + bx2, y + by2, ax, ay, bx - bx2, by - by2)
        _gilbert_fill(
            out,
            x + (ax - dax) + (bx2 - dbx),
            y + (ay - day) + (by2 - dby),
            -bx2,
            -by2,
            -(ax - ax2),
            -(ay - ay2),
        )


def gilbert(tiles_m: int, tiles_n: int) -> List[Tile]:
    """Gilbert order: starts at tile (0, 0), runs along the longer side, ends at its far corner."""
    _check_grid(tiles_m, tiles_n)
    path: list = []
    if tiles_n >= tiles_m:  # x = n is the major axis
        _gilbert_fill(path, 0, 0, tiles_n, 0, 0, tiles_m)
    else:
        _gilbert_fill(path, 0, 0, 0, tiles_m, tiles_n, 0)
    return [(y, x) for x, y in path]


class _Traceable:
    """``@traceable.jit`` marks a function whose source CuTeDSL may trace; it changes nothing.

    CuTeDSL stages ``if``/``while`` on dynamic values by rewriting a function's source, and it
    only rewrites a function whose source carries a decorator spelled ``@<something>.jit`` (or
    ``.kernel``); ``cute.jit(f)`` applied to an undecorated ``f`` traces it as plain Python, and a
    dynamic ``if`` then fails. This marker supplies the spelling without importing cutlass, so
    the function stays an ordinary Python function here; :func:`for_kernel` wraps it for a kernel.
    """

    @staticmethod
    def jit(fn):
        return fn


traceable = _Traceable()


def for_kernel(fn):
    """``cute.jit`` of a copy of the ``@traceable.jit`` function ``fn``, to call inside a kernel.

    A copy, because ``cute.jit`` swaps the rewritten code into the function object it wraps;
    wrapping ``fn`` itself would leave the module's function running CuTeDSL's rewritten code
    (and importing cutlass) on plain Python calls afterwards.
    """
    import types

    import cutlass.cute as cute

    copy = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
    copy.__qualname__, copy.__doc__ = fn.__qualname__, fn.__doc__
    return cute.jit(copy)


@traceable.jit
def gilbert_tile(i, tiles_m, tiles_n) -> Tile:
    """The i-th tile of :func:`gilbert` without building the curve: one descent, no recursion.

    It follows the recursion of :func:`_gilbert_fill` down the one branch that holds index ``i``.
    The current sub-rectangle is its origin (x, y), the major vector a = w * (dax, day) and the
    minor vector b = h * (dbx, dby) (unit directions, lengths w and h; x is the tile column n).
    Each level splits it as the recursion does, into 2 parts (w2 x h, then (w - w2) x h) or 3
    (h2 x w2 up the first half of b, w x (h - h2) along a, h2 x (w - w2) back down); the parts
    hold |major| * |minor| cells each, so the index picks one: skip the cells of the parts before
    it and descend into it. A single row or column (h or w = 1) is a straight line: origin +
    index * direction.

    Written to run unchanged on Python ints and traced by CuTeDSL with ``cutlass.Int32``
    arguments (in a kernel: ``for_kernel(gilbert_tile)(i, tiles_m, tiles_n)``): only integer
    + - * >> &, comparisons, ``while`` and ``if``/``else`` statements that assign the same
    variables in every branch, every variable defined beforehand, one return. Nothing negative
    is ever halved: a signed ``// 2`` or ``% 2`` costs a kernel sign fix-ups (and CuTeDSL's
    Int32 ``%`` is C's remainder, where Python floors), so lengths are halved with ``>> 1`` and
    tested for oddness with ``& 1``. The reference halves a signed vector with ``ax // 2``,
    which rounds a backwards vector away from zero, so the half's length is ``(w + 1) // 2``
    when the vector points backwards and ``w // 2`` when it points forwards; the code halves
    lengths that way. (Backwards minor sides of odd length
    are common; a backwards major side was even on every grid up to 80 x 80, but is halved
    the same way.)
    """
    zero = (i + tiles_m + tiles_n) * 0  # 0 of the arguments' type (cutlass.Int32 in a kernel)
    one = zero + 1
    idx = i + zero
    x = zero  # origin: x is the tile column n, y the tile row m
    y = zero
    dax = one  # major unit direction and length: along the longer side (n on a tie)
    day = zero
    w = tiles_n + zero
    dbx = zero  # minor unit direction and length
    dby = one
    h = tiles_m + zero
    if tiles_n < tiles_m:
        dax = zero
        day = one
        w = tiles_m + zero
        dbx = one
        dby = zero
        h = tiles_n + zero
    else:
        dax = one
        day = zero
        w = tiles_n + zero
        dbx = zero
        dby = one
        h = tiles_m + zero
    # the next level's rectangle, assigned in full by every branch below
    nx = x
    ny = y
    ndax = dax
    nday = day
    nw = w
    ndbx = dbx
    ndby = dby
    nh = h
    nidx = idx
    w2 = zero
    h2 = zero
    grow = zero
    first = zero
    second = zero
    while (w - 1) * (h - 1) > 0:  # both sides longer than 1 (a rectangle holding i is never empty)
        # |a // 2| and |b // 2| as the reference floors them: backwards (-1) rounds the length up.
        # Shifts and masks, not // and %: every operand is >= 0 (1 - dax - day is 0 or 2), and
        # a kernel then needs no sign fix-ups on the first tile's critical path
        w2 = (w + ((1 - dax - day) >> 1)) >> 1
        h2 = (h + ((1 - dbx - dby) >> 1)) >> 1
        if 2 * w > 3 * h:  # long: two halves along a
            if (w2 & 1) * (w - 2) > 0:  # w2 odd and w > 2: lengthen the first half to even
                grow = one
            else:
                grow = zero
            w2 = w2 + grow
            first = w2 * h
            if idx < first:
                nx = x
                ny = y
                ndax = dax
                nday = day
                nw = w2
                ndbx = dbx
                ndby = dby
                nh = h
                nidx = idx
            else:
                nx = x + w2 * dax
                ny = y + w2 * day
                ndax = dax
                nday = day
                nw = w - w2
                ndbx = dbx
                ndby = dby
                nh = h
                nidx = idx - first
        else:  # three parts: up half of b, along all of a, back down
            if (h2 & 1) * (h - 2) > 0:  # h2 odd and h > 2: lengthen the first half of b to even
                grow = one
            else:
                grow = zero
            h2 = h2 + grow
            first = h2 * w2
            second = w * (h - h2)
            if idx < first:  # major b2, minor a2
                nx = x
                ny = y
                ndax = dbx
                nday = dby
                nw = h2
                ndbx = dax
                ndby = day
                nh = w2
                nidx = idx
            else:
                if idx < first + second:  # major a, minor b - b2, from x + b2
                    nx = x + h2 * dbx
                    ny = y + h2 * dby
                    ndax = dax
                    nday = day
                    nw = w
                    ndbx = dbx
                    ndby = dby
                    nh = h - h2
                    nidx = idx - first
                else:  # major -b2, minor -(a - a2), from x + (a - da) + (b2 - db)
                    nx = x + (w - 1) * dax + (h2 - 1) * dbx
                    ny = y + (w - 1) * day + (h2 - 1) * dby
                    ndax = zero - dbx
                    nday = zero - dby
                    nw = h2
                    ndbx = zero - dax
                    ndby = zero - day
                    nh = w - w2
                    nidx = idx - first - second
        x = nx
        y = ny
        dax = ndax
        day = nday
        w = nw
        dbx = ndbx
        dby = ndby
        h = nh
        idx = nidx
    if h == 1:  # a line along a (checked first, as in the recursion)
        nx = x + idx * dax
        ny = y + idx * day
    else:  # w == 1: a line along b
        nx = x + idx * dbx
        ny = y + idx * dby
    return ny, nx


def gilbert_has_diagonal(tiles_m: int, tiles_n: int) -> bool:
    """Whether the Gilbert order of this grid takes a diagonal step; there is never more than one.

    Exactly when the longer side is odd and the shorter side even and at least 4 (checked for
    every grid up to 128 x 128 while writing this; tests/test_tile_order.py checks up to 40 x 40).
    The reason is parity: colour the tiles like a chessboard. The curve starts and ends at the
    two corners of one long side, which have the same colour when the long side is odd; a path
    of unit steps alternates colours, so over an even number of tiles (short side even) it must
    end on the other colour. One diagonal step (Chebyshev distance 1) absorbs the mismatch. With
    a short side of 2 the curve ends one tile short of the far corner instead, and needs none.
    Square grids, powers of two and grids with an odd short side never take one.
    """
    long_side, short_side = max(tiles_m, tiles_n), min(tiles_m, tiles_n)
    return long_side % 2 == 1 and short_side % 2 == 0 and short_side >= 4


# ---------------------------------------------------------------------------------------------
# one entry point
# ---------------------------------------------------------------------------------------------


def order(kind: str, tiles_m: int, tiles_n: int, group: int = 8) -> List[Tile]:
    """All tiles of a ``tiles_m x tiles_n`` grid in the visit order ``kind`` (see :data:`ORDERS`)."""
    if kind == "row":
        return row_raster(tiles_m, tiles_n)
    if kind == "column":
        return column_raster(tiles_m, tiles_n)
    if kind == "grouped":
        return grouped_raster(tiles_m, tiles_n, group)
    if kind == "gilbert":
        return gilbert(tiles_m, tiles_n)
    raise ValueError(f"unknown tile order {kind!r}: choose one of {', '.join(ORDERS)}")


def gilbert_table(tiles_m: int, tiles_n: int) -> List[int]:
    """The Gilbert order packed one int per tile, ``m * tiles_n + n``, for a global-memory table."""
    return [m * tiles_n + n for m, n in gilbert(tiles_m, tiles_n)]


def tile_at(
    kind: str,
    i,
    tiles_m,
    tiles_n,
    group: int = 8,
    table: Optional[Sequence] = None,
    minimum: Callable = min,
) -> Tile:
    """The i-th tile of order ``kind``, computed the way a kernel computes it.

    Rasters are pure index math. Gilbert reads ``table`` (:func:`gilbert_table`, built on the
    host; a kernel indexes the same table in global memory) and unpacks it with one divide.
    """
    if kind == "row":
        return row_tile(i, tiles_m, tiles_n)
    if kind == "column":
        return column_tile(i, tiles_m, tiles_n)
    if kind == "grouped":
        return grouped_tile(i, tiles_m, tiles_n, group, minimum)
    if kind == "gilbert":
        if table is None:
            table = gilbert_table(tiles_m, tiles_n)
        packed = table[i]
        return packed // tiles_n, packed % tiles_n
    raise ValueError(f"unknown tile order {kind!r}: choose one of {', '.join(ORDERS)}")


def steps(path: Sequence[Tile]) -> List[Tile]:
    """(|dm|, |dn|) of every move along a path, for checking adjacency."""
    return [(abs(m1 - m0), abs(n1 - n0)) for (m0, n0), (m1, n1) in zip(path, path[1:])]
