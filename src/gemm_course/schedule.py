"""The persistent kernels' static schedule, with a stream-K tail (step 8 on).

G clusters share T cluster-tiles of ``k_tiles`` K tiles each. The first ``T - r`` tiles (r = T
mod G, the last partial wave) are handed out whole: cluster c takes c, c + G, c + 2G, ... The
r tail tiles' K tiles, ``r * k_tiles`` of them laid end to end, are cut into G contiguous runs of
(nearly) equal length, one per cluster; a run may start inside one tile and end inside the
next, so a cluster has at most two tail *units*: a part that starts mid-tile (its first unit;
it writes a partial sum and never waits) and a part that starts at K tile 0 (it *finishes* the
tile: waits for the other parts, adds them, stores C). The split is skipped when the idle
clusters' share of a tile is smaller than the fix-up it costs.

Every function is integer arithmetic only, so the kernel traces the same code: pass
``cutlass.select_``/``cutlass.min``/``cutlass.max`` there, Python's (the defaults) here.
:func:`plan` lists every cluster's units for tests and the chapter's figure.
"""

from __future__ import annotations

from typing import Callable, List, Tuple

# What handing a partial tile over costs, in K tiles of one cluster's work (waiting for a helper
# that runs late included). From the H200: at 4096^3 the split tail had 8 idle K tiles per
# cluster (~6 us) to win back and ran 3% (~6 us) *slower*, so a hand-over costs ~16 K tiles.
FIXUP_K_TILES = 16


def _select(condition, if_true, if_false):
    return if_true if condition else if_false


def operations(*values) -> tuple:
    """(select, minimum, maximum) for ``values``: Python's on ints, CuTeDSL's on traced values."""
    if all(isinstance(v, int) for v in values):
        return _select, min, max
    import cutlass

    return cutlass.select_, cutlass.min, cutlass.max


def split_tail(tiles, clusters, k_tiles, enabled=True, select: Callable = _select, minimum: Callable = min):
    """(whole tiles, clusters sharing the tail, K tiles in the tail)."""
    tail_tiles = tiles % clusters
    worth = (clusters - tail_tiles) * k_tiles > FIXUP_K_TILES * clusters
    tail_tiles = select(worth & enabled, tail_tiles, 0)
    tail_k_tiles = tail_tiles * k_tiles
    return tiles - tail_tiles, minimum(clusters, tail_k_tiles), tail_k_tiles


# With fewer tiles than clusters, a tile is split over at most this many clusters: its finisher
# adds the other parts one after another. Measured on the H200 up to about 4 parts per tile
# (1024 x 1024 x 8192: 16 cluster-tiles over 66 clusters, 1.9x faster); more is not measured.
MAX_PARTS = 4


def grid_clusters(tiles, clusters, k_tiles, enabled=True, select: Callable = _select, minimum: Callable = min):
    """Clusters to launch out of ``clusters``: when the tail is split, all of them (or MAX_PARTS per
    tile when there are fewer tiles than that allows), so even a few tiles keep the SMs busy with
    their K loops shared; else no more than the tiles. The kernel's own ``split_tail`` on the
    launched count then makes the same choice."""
    capped = minimum(clusters, MAX_PARTS * tiles)
    _, tail_clusters, _ = split_tail(tiles, capped, k_tiles, enabled, select, minimum)
    return select(tail_clusters > 0, capped, minimum(tiles, clusters))


def tail_run(cluster, tail_clusters, tail_k_tiles, select: Callable = _select, maximum: Callable = max):
    """Cluster ``cluster``'s run [start, end) of the tail's K tiles (0, 0 if it has none)."""
    share = maximum(tail_clusters, 1)
    has = cluster < tail_clusters
    return select(has, cluster * tail_k_tiles // share, 0), select(has, (cluster + 1) * tail_k_tiles // share, 0)


def num_units(cluster, clusters, whole_tiles, start, end, k_tiles, select: Callable = _select):
    whole_units = (whole_tiles - cluster + clusters - 1) // clusters
    boundary = (start // k_tiles + 1) * k_tiles  # where the run's first tile ends
    return whole_units + select(end > start, 1, 0) + select(end > boundary, 1, 0)


def work_unit(u, cluster, clusters, whole_tiles, start, end, k_tiles, select: Callable = _select, minimum: Callable = min):
    """Unit u of a cluster: (cluster-tile index, first K tile, end K tile)."""
    whole_units = (whole_tiles - cluster + clusters - 1) // clusters
    first_tail_tile = whole_tiles + start // k_tiles
    boundary = (start // k_tiles + 1) * k_tiles
    is_whole = u < whole_units
    is_first_part = u == whole_units
    index = select(is_whole, cluster + u * clusters, select(is_first_part, first_tail_tile, first_tail_tile + 1))
    k_begin = select(is_whole, 0, select(is_first_part, start % k_tiles, 0))
    first_part_end = minimum(end, boundary) - start + start % k_tiles
    k_end = select(is_whole, k_tiles, select(is_first_part, first_part_end, end - boundary))
    return index, k_begin, k_end


def last_helper(index, whole_tiles, tail_clusters, tail_k_tiles, k_tiles, minimum: Callable = min):
    """The last cluster whose run holds part of tail tile ``index``; its helpers are finisher + 1 .. this.

    Cluster h's run starts at h * tail_k_tiles // tail_clusters, which is before the tile's end
    exactly when h * tail_k_tiles < tile_end * tail_clusters.
    """
    tile_end = (index - whole_tiles + 1) * k_tiles
    return minimum(tail_clusters - 1, (tile_end * tail_clusters + tail_k_tiles - 1) // tail_k_tiles - 1)


def plan(tiles: int, clusters: int, k_tiles: int, enabled: bool = True) -> List[List[Tuple[int, int, int]]]:
    """Every cluster's units, [(tile index, k_begin, k_end), ...], in the order it runs them."""
    whole, tail_clusters, tail_k = split_tail(tiles, clusters, k_tiles, enabled)
    out = []
    for c in range(clusters):
        start, end = tail_run(c, tail_clusters, tail_k)
        units = num_units(c, clusters, whole, start, end, k_tiles)
        out.append([work_unit(u, c, clusters, whole, start, end, k_tiles) for u in range(units)])
    return out


def split_tail_bytes(tiles: int, clusters: int, k_tiles: int, k_tile_bytes: int) -> int:
    """Operand bytes the split tail streams if no two clusters read a panel at the same time.

    Each part reads its own K range of its own tile (``k_tile_bytes`` per K tile: the cluster-tile's
    A rows and B columns, ``tile_k`` deep), and parts of neighbouring tiles sit at different K, so
    L2 rarely serves one part's panel to another: a model of the worst case, every tail K tile
    read once. As whole tiles, the same tail would share panels across a compact patch of tiles.
    """
    _, _, tail_k_tiles = split_tail(tiles, clusters, k_tiles)
    return tail_k_tiles * k_tile_bytes


def busy_fraction(tiles: int, clusters: int, k_tiles: int, enabled: bool = True) -> float:
    """Useful K tiles over (clusters x the longest cluster's K tiles): 1.0 is a perfectly even split."""
    work = [sum(e - b for _, b, e in units) for units in plan(tiles, clusters, k_tiles, enabled)]
    return tiles * k_tiles / (clusters * max(work))
