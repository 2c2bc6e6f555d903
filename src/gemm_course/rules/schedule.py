"""The static schedule of the final Hopper kernel (step 11), with a stream-K tail.

G clusters share T cluster-tiles of ``k_tiles`` K tiles each. The first ``T - r`` tiles (r = T
mod G, the last partial wave) are handed out whole: cluster c takes c, c + G, c + 2G, ... The
r tail tiles are split along K so that every cluster gets about ``r * k_tiles / G`` K tiles.
The tail's K tiles are laid end to end (tile after tile) and cut into contiguous *runs* of
(nearly) equal length, one per cluster; a run may cover pieces of several tiles. The piece that
holds a tile's K tile 0 *finishes* the tile: it waits for the tile's other pieces (partial sums
in fp32 written to a workspace slot, each announced by a flag), adds them and stores C. Two
layouts of the runs:

* *classic* (short K loops): the runs cover every tail K tile. A run's first piece starts
  mid-tile and never waits; its second, if any, starts at K tile 0 and finishes its tile, so
  nobody waits on a cluster that is itself waiting. Concurrent pieces sit at different K, so
  each streams its own operands from L2 or DRAM;
* *lockstep* (long K loops, ``k_tiles >= LOCKSTEP_K_TILES``): clusters 0 .. r-1 each take K tiles
  0 .. main_k - 1 of one tail tile (main_k = ceil(r * k_tiles / G)): these *main parts* all start
  together at K tile 0, so tiles that share an A row-panel or a B column-panel read it at the
  same time, as whole tiles in a wave do. The other clusters' runs cover the rest of every tail
  tile; they never finish a tile, so they never wait. Each of their pieces ends in a partial-sum
  store, which is why short K loops keep the classic layout (more in chapter 11).

The split is skipped when the idle clusters' share of a tile is no larger than the fix-up it costs,
or when they are too few to pay for the operands the runs stream (``IDLE_SHARE``).
Every function is integer arithmetic only, so the kernel traces the same code: pass
``cutlass.select_``/``cutlass.min``/``cutlass.max`` there, Python's (the defaults) here.
:func:`plan` lists every cluster's units for tests and the chapter's figure.
"""

from __future__ import annotations

from typing import Any, Callable, List, NamedTuple, Tuple

# What handing a partial tile over costs, in K tiles of one cluster's work (waiting for a helper
# that runs late included). From the H200: at 4096^3 the split tail had 8 idle K tiles per
# cluster (~6 us) to win back and ran 3% (~6 us) *slower*, so a hand-over costs ~16 K tiles.
FIXUP_K_TILES = 16

# The split tail's runs sit at different K, so they share little in L2 and stream their operands
# (``split_tail_bytes``): a cost that grows with the tail tiles r, while what the split wins back
# shrinks with the idle clusters G - r. So the split also needs G - r > G / IDLE_SHARE. On the
# H200 at 12288^3 (r = 60 of 66, 192 K tiles, 17.5 idle K tiles per cluster) the tail ran 0.5-1.7%
# faster whole (three interleaved runs); with more idle clusters the split pays (8192^3, r = 34:
# +2.3%; r = 50 with 96-224 K tiles: +1.2 to +2%). NOTES.md has the runs.
IDLE_SHARE = 8

# From this many K tiles per tile on, the tail runs in lockstep. Against the classic layout on the
# H200 (interleaved A/B runs, both orders): slower on five of six shapes at 64-112 K tiles (up to
# -6%: a partial-sum store ends every helper piece), mixed at 128 (-6 to +2%), faster on four of
# five shapes at 144-192 (up to +5%) where the tail is a large share of the work (1.6-3.5 waves; the
# classic layout's runs stream their operands from DRAM), and level or within the noise with many
# waves (0 at 192, +0.6 and -1.7% at 224, +0.8 to +2.0% at 448). NOTES.md has the runs.
LOCKSTEP_K_TILES = 144
NO_LOCKSTEP = 2**31 - 1  # a ``lockstep_from`` no K loop reaches: the classic layout at every K


def _select(condition, if_true, if_false):
    return if_true if condition else if_false


def operations(*values) -> tuple:
    """(select, minimum, maximum) for ``values``: Python's on ints, CuTeDSL's on traced values."""
    if all(isinstance(v, int) for v in values):
        return _select, min, max
    import cutlass

    return cutlass.select_, cutlass.min, cutlass.max


def split_tail(tiles, clusters, k_tiles, enabled=True, select: Callable = _select, minimum: Callable = min, *,
               lockstep_from=LOCKSTEP_K_TILES):
    """(whole tiles, tail tiles, main parts' K tiles (0: classic), clusters with runs, K tiles in the runs);
    lockstep from ``lockstep_from`` K tiles per tile on."""
    tail_tiles = tiles % clusters
    idle = clusters - tail_tiles
    worth = (idle * k_tiles > FIXUP_K_TILES * clusters) & (idle * IDLE_SHARE > clusters)
    tail_tiles = select(worth & enabled, tail_tiles, 0)
    main_k = select(k_tiles >= lockstep_from, (tail_tiles * k_tiles + clusters - 1) // clusters, 0)
    rest_k = tail_tiles * (k_tiles - main_k)
    return tiles - tail_tiles, tail_tiles, main_k, minimum(clusters - main_clusters(tail_tiles, main_k, select), rest_k), rest_k


def main_clusters(tail_tiles, main_k, select: Callable = _select):
    """Clusters that run a main part: one per tail tile in lockstep, none in the classic layout."""
    return select(main_k > 0, tail_tiles, 0)


# With fewer tiles than clusters, a tile is split over about this many clusters: its finisher
# adds the other parts one after another. Measured on the H200 up to about 4 parts per tile
# (1024 x 1024 x 8192: 16 cluster-tiles over 66 clusters, 1.9x faster); more is not measured.
MAX_PARTS = 4


def grid_clusters(tiles, clusters, k_tiles, enabled=True, select: Callable = _select, minimum: Callable = min,
                  max_parts: int = MAX_PARTS):
    """Clusters to launch out of ``clusters``: when the tail is split, all of them (or ``max_parts``
    per tile when there are fewer tiles than that allows), so even a few tiles keep the SMs busy with
    their K loops shared; else no more than the tiles. With fewer tiles than clusters, a whole
    number of clusters per tile (every tile in equal parts, one hand-over per extra part) when that
    idles no more than 1 / IDLE_SHARE of them. The kernel's own ``split_tail`` on the launched
    count then makes the same choice."""
    capped = minimum(clusters, max_parts * tiles)
    even = tiles * minimum(clusters // tiles, max_parts)  # the same whole number of parts for every tile
    capped = select(even * IDLE_SHARE >= capped * (IDLE_SHARE - 1), even, capped)
    _, tail_tiles, _, _, _ = split_tail(tiles, capped, k_tiles, enabled, select, minimum)
    return select(tail_tiles > 0, capped, minimum(tiles, clusters))


class LaunchConstants(NamedTuple):
    """What every cluster's schedule needs, computed once per launch (the kernel gets it from the host).

    Whole tiles go round ``full_waves`` times to every cluster and once more to the first
    ``leftover``; ``mains`` clusters run a lockstep main part of ``main_k`` K tiles; ``helpers``
    clusters share the runs' ``rest_k`` K tiles; ``piece`` is each tail tile's span in the runs
    and ``share`` what a run's bounds are divided by (the kernel divides by these two with
    dividers prepared on the host, so no cluster waits on an integer division before its first
    load).
    """

    whole_tiles: Any
    full_waves: Any
    leftover: Any
    mains: Any
    main_k: Any
    helpers: Any
    rest_k: Any
    piece: Any
    share: Any


def launch_constants(tiles, clusters, k_tiles, enabled=True, select: Callable = _select, minimum: Callable = min,
                     maximum: Callable = max, *, lockstep_from=LOCKSTEP_K_TILES) -> LaunchConstants:
    whole, tail_tiles, main_k, helpers, rest_k = split_tail(tiles, clusters, k_tiles, enabled, select, minimum,
                                                            lockstep_from=lockstep_from)
    mains = main_clusters(tail_tiles, main_k, select)
    return LaunchConstants(whole, whole // clusters, whole % clusters, mains, main_k, helpers, rest_k,
                           maximum(k_tiles - main_k, 1), maximum(helpers, 1))


def whole_units(cluster, full_waves, leftover, select: Callable = _select):
    return full_waves + select(cluster < leftover, 1, 0)


def helper_run(cluster, mains, helpers, rest_k, share, select: Callable = _select):
    """Cluster ``cluster``'s run [start, end) of the runs' K tiles (0, 0 if it has none)."""
    j = cluster - mains
    has = (j >= 0) & (j < helpers)
    return select(has, j * rest_k // share, 0), select(has, (j + 1) * rest_k // share, 0)


def num_units(cluster, whole_count, mains, start, end, piece, select: Callable = _select):
    pieces = select(end > start, (end - 1) // piece - start // piece + 1, 0)
    return whole_count + select(cluster < mains, 1, 0) + pieces


def work_unit(u, cluster, clusters, whole_count, whole_tiles, main_k, start, end, k_tiles, piece, piece_div=None,
              select: Callable = _select, minimum: Callable = min, maximum: Callable = max):
    """Unit u of a cluster: (cluster-tile index, first K tile, end K tile). ``piece_div`` divides
    by ``piece`` (the kernel passes a fast divider; by default ``piece`` itself)."""
    is_whole = u < whole_count
    tile = start // (piece if piece_div is None else piece_div) + u - whole_count  # a run's tail tile, from the first tail tile
    low, high = maximum(start, tile * piece) - tile * piece, minimum(end, (tile + 1) * piece) - tile * piece
    is_main = end == start  # a cluster with a tail unit and no run has a main part
    index = select(is_whole, cluster + u * clusters, whole_tiles + select(is_main, cluster, tile))
    k_begin = select(is_whole, 0, select(is_main, 0, main_k + low))
    k_end = select(is_whole, k_tiles, select(is_main, main_k, main_k + high))
    return index, k_begin, k_end


def piece_slot(cluster, index, whole_tiles, mains, select: Callable = _select):
    """Workspace slot of a piece that hands its partial sum over (run j, tail tile t).

    Classic: j (a run hands over at most its first piece). Lockstep: j + t, unique and < clusters
    too: walking the runs' K tiles, every new piece starts at a run boundary (j + 1), a tile
    boundary (t + 1) or both, so j + t grows with every piece, and there are at most
    r + (G - r) - 1 pieces.
    """
    return cluster - mains + select(mains > 0, index - whole_tiles, 0)


def helper_slots(index, whole_tiles, main_k, helpers, rest_k, piece, select: Callable = _select,
                 minimum: Callable = min, maximum: Callable = max):
    """(first, last) workspace slot of the pieces that tail tile ``index``'s finisher adds.

    Run j, [j * R // H, (j + 1) * R // H), meets tile t's span [t * P, (t + 1) * P) exactly when
    it ends after t * P and starts before (t + 1) * P. In the classic layout the first of these
    runs holds K tile 0 and is the finisher itself.
    """
    tile, total = index - whole_tiles, maximum(rest_k, 1)
    first = ((tile * piece + 1) * helpers + total - 1) // total - 1 + select(main_k > 0, 0, 1)
    last = minimum(helpers - 1, ((tile + 1) * piece * helpers + total - 1) // total - 1)
    offset = select(main_k > 0, tile, 0)  # piece_slot's j + t in lockstep, j in the classic layout
    return first + offset, last + offset


def plan(tiles: int, clusters: int, k_tiles: int, enabled: bool = True,
         lockstep_from: int = LOCKSTEP_K_TILES) -> List[List[Tuple[int, int, int]]]:
    """Every cluster's units, [(tile index, k_begin, k_end), ...], in the order it runs them."""
    c = launch_constants(tiles, clusters, k_tiles, enabled, lockstep_from=lockstep_from)
    out = []
    for cluster in range(clusters):
        start, end = helper_run(cluster, c.mains, c.helpers, c.rest_k, c.share)
        count = whole_units(cluster, c.full_waves, c.leftover)
        units = num_units(cluster, count, c.mains, start, end, c.piece)
        out.append([work_unit(u, cluster, clusters, count, c.whole_tiles, c.main_k, start, end, k_tiles, c.piece)
                    for u in range(units)])
    return out


def clusters_at_once(tiles: int, clusters: int, k_tiles: int, enabled: bool = True,
                     lockstep_from: int = LOCKSTEP_K_TILES) -> int:
    """The fewest of the launched clusters that must run at the same time for the launch to finish,
    when clusters start in launch order and each holds its SMs until its last unit is done.

    A finisher waits for pieces of clusters launched after it. In the classic layout those are
    first pieces, which never wait: one more cluster running beside a waiting one always makes
    progress (2). In lockstep every main part finishes its tile and waits for helpers launched
    after all the mains: the mains and one helper (``mains + 1``). Without a split nobody waits
    (1). The kernel launches no more clusters than the GPU holds at once, so on a GPU of its own
    this always holds; a launch sharing the SMs with kernels that keep theirs (a partition of the
    SMs, communication kernels that spin) needs this many free. The Blackwell tail (cluster launch
    control) waits on no unit that has not started, so it needs one.
    """
    _, tail_tiles, main_k, _, _ = split_tail(tiles, clusters, k_tiles, enabled, lockstep_from=lockstep_from)
    if not tail_tiles:
        return 1
    return main_clusters(tail_tiles, main_k) + 1 if main_k else 2


def clusters_at_once_for(step, config, m: int, n: int, k: int) -> int:
    """:func:`clusters_at_once` for ``step``'s launch with ``config`` on an M x N x K GEMM (a
    ``gemm_course.runtime.ladder.Step``; the pair ``gemm_course.runtime.linear.route`` gives for a
    call of ``linear``): what a process that keeps SMs for kernels that spin while they wait
    (collectives, an SM partition) must leave it, in clusters of the config's shape. Host work only."""
    if step.arch != "sm90":
        return 1  # the Blackwell tail waits on no unit that has not started
    gemm = step.load().Gemm(config)
    rows, cols = (n, m) if getattr(config, "swap_ab", False) else (m, n)  # C, or C^T where the step swaps

    def shape(*dims):  # a stand-in with only a shape: the steps' host-side grid math takes Python ints
        return type("Shape", (), {"shape": dims})

    clusters_m, clusters_n = gemm.cluster_grid(shape(rows, cols))
    return clusters_at_once(clusters_m * clusters_n, gemm.launched_clusters(shape(rows, k), shape(rows, cols)),
                            -(-k // config.tile_k), config.stream_k, gemm.lockstep_from)


def split_tail_bytes(tiles: int, clusters: int, k_tiles: int, k_tile_bytes: int) -> int:
    """Operand bytes the runs stream if no two clusters read a panel at the same time.

    A run's piece is its own K range of its own tile, and runs sit at different K, so L2 rarely
    serves one run's panel to another: a model of the worst case, every K tile of the runs read
    once. Lockstep main parts all run K tiles 0 .. main_k - 1 together, like a wave of whole
    tiles, and share panels the same way, so they are not counted.
    """
    return split_tail(tiles, clusters, k_tiles)[4] * k_tile_bytes


def busy_fraction(tiles: int, clusters: int, k_tiles: int, enabled: bool = True,
                  lockstep_from: int = LOCKSTEP_K_TILES) -> float:
    """Useful K tiles over (clusters x the longest cluster's K tiles): 1.0 is a perfectly even split."""
    work = [sum(e - b for _, b, e in units) for units in plan(tiles, clusters, k_tiles, enabled, lockstep_from)]
    return tiles * k_tiles / (clusters * max(work))


# ---- a tail for a dynamic scheduler (the Blackwell step 11, under cluster launch control) ------
#
# Cluster launch control hands out *units* in launch order to whichever cluster is free, so no
# plan says in advance which cluster runs what, and no cluster may wait for another that may not
# have started. The tail's r tiles are cut into ``parts`` equal K ranges each; the units are the
# whole tiles (0 .. tiles - r - 1), then every tail tile's parts in turn. Each part adds one to its
# tile's counter before it hands anything over; the part that finds ``parts - 1`` there is the
# tile's last: it adds the others' partial sums (each of which counted itself before writing, so
# it is running and never waits) and stores C. Whichever order the units run in, nobody waits on
# a unit that has not started.


def tail_span(tail, clusters, parts, k_tiles):
    """The tail's length in K tiles of one cluster, times ``parts`` (an integer): r = ``tail`` tiles
    cut into p = ``parts`` parts are r p units for G = ``clusters`` clusters, ceil(r p / G) rounds;
    each round takes 1 / p of a tile's K loop, and its tiles' last parts then add the other p - 1
    partial sums, ``FIXUP_K_TILES`` each, before their clusters take the next round's units.
    Whole (p = 1), the tail takes one tile's K loop."""
    rounds = (tail * parts + clusters - 1) // clusters
    return rounds * (k_tiles + parts * (parts - 1) * FIXUP_K_TILES)


def tail_parts(tiles, clusters, k_tiles, select: Callable = _select):
    """Parts per tail tile (1: the tail stays whole): the p in 2 .. MAX_PARTS whose ``tail_span`` is
    shortest, if it is shorter than the whole tail's. The spans are compared cross-multiplied
    (span_p / p against span_q / q), so in integer arithmetic only."""
    tail = tiles % clusters
    best_parts, best_span = 1, k_tiles  # the whole tail: one tile's K loop
    for parts in range(2, MAX_PARTS + 1):
        span = tail_span(tail, clusters, parts, k_tiles)
        better = (span * best_parts < best_span * parts) & (tail > 0) & (k_tiles >= parts)
        best_parts = select(better, parts, best_parts)
        best_span = select(better, span, best_span)
    return best_parts


def tail_units(tiles, clusters, parts, select: Callable = _select):
    """(units to launch, whole tiles): the whole tiles, then ``parts`` units per tail tile."""
    whole = tiles - select(parts > 1, tiles % clusters, 0)
    return whole + (tiles - whole) * parts, whole


def tail_unit(u, whole, parts, k_tiles, parts_div=None, select: Callable = _select):
    """Unit u: (cluster-tile index, its part, first K tile, end K tile). ``parts_div`` divides by
    ``parts`` (the kernel passes a fast divider made on the host; by default ``parts`` itself)."""
    div = parts if parts_div is None else parts_div
    is_whole = u < whole
    j = select(is_whole, 0, u - whole)  # place among the tail's parts
    tail_tile = j // div
    part = j - tail_tile * parts
    index = select(is_whole, u, whole + tail_tile)
    k_begin = select(is_whole, 0, part * k_tiles // div)
    k_end = select(is_whole, k_tiles, (part + 1) * k_tiles // div)
    return index, part, k_begin, k_end


def tail_slot(index, part, whole, cta, ctas):
    """(counter, partial-sum slot) of CTA ``cta`` (of ``ctas`` per cluster) in tail tile ``index``'s
    part ``part``: one counter per CTA of a tail tile, MAX_PARTS slots per counter."""
    counter = (index - whole) * ctas + cta
    return counter, counter * MAX_PARTS + part


def dynamic_plan(tiles: int, clusters: int, k_tiles: int) -> List[Tuple[int, int, int, int]]:
    """Every unit, (tile index, part, k_begin, k_end), in launch order."""
    parts = tail_parts(tiles, clusters, k_tiles)
    units, whole = tail_units(tiles, clusters, parts)
    return [tail_unit(u, whole, parts, k_tiles) for u in range(units)]
