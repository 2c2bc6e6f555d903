"""The persistent kernels' schedule (stream-K tail): every K tile of every tile exactly once, a
hand-over protocol that cannot deadlock while ``clusters_at_once`` clusters run together, and main
parts that run in lockstep."""

import collections

import pytest

from gemm_course.rules import schedule

pytestmark = pytest.mark.fast

CASES = [(256, 66, 64), (1024, 66, 128), (1792, 66, 64), (512, 66, 448), (64, 66, 32), (130, 66, 3), (67, 66, 1),
         (66, 66, 64), (2304, 66, 192), (5, 3, 7), (7, 4, 100), (1, 1, 5), (100, 57, 80), (1000, 64, 64), (32, 66, 64),
         (8, 66, 2), (1, 66, 64), (3, 66, 40), (768, 66, 96), (120, 66, 17), (65, 66, 200), (16, 64, 128),
         (120, 66, 300), (16, 64, 256), (1, 4, 256), (3584, 66, 224), (1000, 66, 1000)]


@pytest.mark.parametrize("tiles,clusters,k_tiles", CASES)
@pytest.mark.parametrize("enabled", [True, False])
def test_every_k_tile_once(tiles, clusters, k_tiles, enabled):
    seen = collections.Counter()
    for units in schedule.plan(tiles, clusters, k_tiles, enabled):
        for index, k_begin, k_end in units:
            assert 0 <= index < tiles and 0 <= k_begin < k_end <= k_tiles
            seen.update((index, k) for k in range(k_begin, k_end))
    assert len(seen) == tiles * k_tiles and set(seen.values()) == {1}


@pytest.mark.parametrize("tiles,clusters,k_tiles", CASES)
def test_hand_over(tiles, clusters, k_tiles):
    """A split tile's K-tile-0 piece finishes it, and is its cluster's last unit: a cluster writes
    every partial sum it owes before it waits, so no cluster waits on a waiting one. The pieces a
    finisher adds have unique workspace slots below the cluster count, exactly ``helper_slots``."""
    whole, tail_tiles, main_k, helpers, rest_k = schedule.split_tail(tiles, clusters, k_tiles)
    mains = schedule.main_clusters(tail_tiles, main_k)
    parts = collections.defaultdict(list)  # tile -> [(cluster, k_begin, k_end)]
    plans = schedule.plan(tiles, clusters, k_tiles)
    for c, units in enumerate(plans):
        finishes = [pos for pos, (i, b, e) in enumerate(units) if i >= whole and b == 0]
        assert finishes in ([], [len(units) - 1])
        for index, k_begin, k_end in units:
            parts[index].append((c, k_begin, k_end))
    slots = []
    for index, ps in parts.items():
        if len(ps) == 1:
            assert ps[0][1:] == (0, k_tiles)  # whole tile, no hand-over
            continue
        assert index >= whole
        finisher = [p for p in ps if p[1] == 0]
        assert len(finisher) == 1
        if main_k:  # lockstep: cluster t runs tail tile t's main part, and nothing else in the tail
            assert finisher[0] == (index - whole, 0, main_k)
            assert [u for u in plans[index - whole] if u[0] >= whole] == [(index, 0, main_k)]
        mine = sorted(schedule.piece_slot(c, index, whole, mains) for c, b, _ in ps if b > 0)
        first, last = schedule.helper_slots(index, whole, main_k, helpers, rest_k, max(k_tiles - main_k, 1))
        assert mine == list(range(first, last + 1))
        slots += mine
    assert len(slots) == len(set(slots)) and all(0 <= s < clusters for s in slots)


@pytest.mark.parametrize("tiles,clusters,k_tiles", CASES)
def test_main_parts_run_in_lockstep_and_nobody_runs_longer(tiles, clusters, k_tiles):
    """Every main part starts after the same number of whole K tiles; no cluster does more than
    ceil(r * k_tiles / G) tail K tiles (the classic stream-K bound)."""
    whole, tail_tiles, main_k, _, _ = schedule.split_tail(tiles, clusters, k_tiles)
    plans = schedule.plan(tiles, clusters, k_tiles)
    assert (main_k > 0) == (tail_tiles > 0 and k_tiles >= schedule.LOCKSTEP_K_TILES)
    starts = {sum(e - b for i, b, e in units if i < whole) for units in plans[:schedule.main_clusters(tail_tiles, main_k)]}
    assert len(starts) <= 1
    bound = -(-tail_tiles * k_tiles // clusters)
    for units in plans:
        assert sum(e - b for i, b, e in units if i >= whole) <= bound


def test_tail_is_split_where_it_pays():
    # 8192^3 on an H200: 1024 cluster-tiles of 128 K tiles over 66 clusters -> 34 tail tiles shared by all
    assert schedule.busy_fraction(1024, 66, 128, enabled=False) == pytest.approx(1024 / (66 * 16))
    assert schedule.busy_fraction(1024, 66, 128) > 0.995
    # 4096^3: 58 tail tiles of 64 K tiles leave 8 idle K tiles per cluster, less than the fix-up's cost
    assert schedule.split_tail(256, 66, 64)[:2] == (256, 0)
    # a tail that nearly fills the wave with short K loops is not worth the fix-up
    assert schedule.split_tail(64 + 66, 66, 8)[:2] == (130, 0)
    # 12288^3: 60 tail tiles of 192 K tiles; the 6 idle clusters win back less than the runs stream
    assert schedule.split_tail(2304, 66, 192)[:2] == (2304, 0)
    assert schedule.split_tail(2304 - 6, 66, 192)[1] == 54  # 12 idle clusters: split


@pytest.mark.parametrize("tiles,clusters,k_tiles", CASES)
def test_launch_size_agrees_with_the_kernels_split(tiles, clusters, k_tiles):
    launched = schedule.grid_clusters(tiles, clusters, k_tiles)
    _, tail_tiles, _, helpers, _ = schedule.split_tail(tiles, launched, k_tiles)  # the kernel's decision on the launched grid
    if tail_tiles:  # split: every cluster is launched (up to MAX_PARTS per tile), each with part of the work ...
        capped = min(clusters, schedule.MAX_PARTS * tiles)
        even = tiles * min(clusters // tiles, schedule.MAX_PARTS)
        # ... or, with fewer tiles than clusters, a whole number per tile if that idles at most 1 / IDLE_SHARE
        whole_parts = even * schedule.IDLE_SHARE >= capped * (schedule.IDLE_SHARE - 1)
        assert launched == (even if whole_parts else capped)
        assert all(units for units in schedule.plan(tiles, launched, k_tiles)[:tail_tiles + helpers])
    else:  # not split: no cluster is launched without a tile
        assert launched == min(tiles, clusters)


def test_fewer_tiles_than_clusters_share_their_k_loops():
    # 1024 x 2048 x 4096 on an H200: 4 x 8 cluster-tiles of 256 x 256 for 66 clusters: 64 launched, two per tile
    assert schedule.grid_clusters(32, 66, 64) == 64
    assert schedule.busy_fraction(32, 66, 64) > 0.95
    # 24 tiles: three per tile would idle 18 of 66 clusters, more than 1 / IDLE_SHARE: all 66, uneven parts
    assert schedule.grid_clusters(24, 66, 128) == 66
    assert schedule.grid_clusters(32, 66, 64, enabled=False) == 32
    # 2048^3: 64 cluster-tiles; splitting them to fill 2 idle clusters is not worth a hand-over
    assert schedule.grid_clusters(64, 66, 32) == 64
    # one tile: split over MAX_PARTS clusters, not all 66 (the finisher adds the parts one by one)
    assert schedule.grid_clusters(1, 66, 64) == schedule.MAX_PARTS
    parts = [units for units in schedule.plan(1, schedule.MAX_PARTS, 64) if units]
    assert len(parts) == schedule.MAX_PARTS


@pytest.mark.parametrize("tiles,k_tiles", [(32, 64), (32, 128), (32, 256), (16, 128), (22, 300), (20, 128), (33, 1000), (1, 64)])
def test_whole_parts_per_tile_give_every_tile_equal_parts(tiles, k_tiles):
    """With a whole number p of clusters per tile, both layouts cut every tile into p equal parts
    (within one K tile), so each finisher adds p - 1 partial sums."""
    launched = schedule.grid_clusters(tiles, 66, k_tiles)
    parts = launched // tiles
    assert launched == tiles * parts and parts >= 2
    pieces = collections.defaultdict(list)
    for units in schedule.plan(tiles, launched, k_tiles):
        for index, k_begin, k_end in units:
            pieces[index].append(k_end - k_begin)
    for index, spans in pieces.items():
        assert len(spans) == parts and max(spans) - min(spans) <= 1, (index, spans)


def test_lockstep_main_parts_do_not_stream_their_operands():
    # 8192x4096x28672 on an H200: 512 cluster-tiles over 66 clusters, 50 in the tail, 448 K tiles each;
    # lockstep: main parts take K tiles 0..339 of each (ceil(50 * 448 / 66)), 16 runs the other 108 of each
    per_k_tile = (256 + 256) * 64 * 2
    assert schedule.split_tail(512, 66, 448) == (462, 50, 340, 16, 50 * 108)
    assert schedule.split_tail_bytes(512, 66, 448, per_k_tile) == 50 * 108 * per_k_tile
    # 8192x4096x6144: 96 K tiles, classic: all 66 runs stream every tail K tile
    assert schedule.split_tail(512, 66, 96) == (462, 50, 0, 66, 50 * 96)
    assert schedule.split_tail_bytes(512, 66, 96, per_k_tile) == 50 * 96 * per_k_tile
    assert schedule.split_tail_bytes(256, 66, 64, per_k_tile) == 0  # 4096^3: not split


def test_lockstep_threshold_matches_the_recorded_runs():
    """Runs 43 and 44 timed the lockstep tail against the classic one (a copy with
    LOCKSTEP_K_TILES = 64) in both orders. Over the shapes with a split tail that the old threshold
    (256 K tiles) kept classic, lockstep is faster in each order from today's threshold on (144 and
    192 K tiles were measured) and slower at 128 K tiles and below, so the threshold lies in
    (128, 144]. Run 44's 8192x4096x6144 replaces run 43's (both slower)."""
    import math

    from gemm_course.measure import records
    from gemm_course.rules import tile_rule

    changes = {}  # shape -> lockstep's speed-up, one per order
    for name in ("tune_run43_lockstep_tail_first_few_wave", "tune_run44_lockstep_one_to_nine_waves"):
        changes.update(records.ab_changes(records.load_tuning(name), "sm90_lockstep@sm90/11", "sm90/11"))
    above, at_128, below = [], [], []
    for shape, values in changes.items():
        m, n, k = map(int, shape.split("x"))
        choice = tile_rule.choose(m, n, k, 66)
        tiles = tile_rule.cluster_tiles(m, n, choice.tile_n)
        k_tiles = math.ceil(k / 64)
        if schedule.split_tail(tiles, schedule.grid_clusters(tiles, 66, k_tiles), k_tiles)[1] == 0:
            continue  # no split tail: both copies run the same schedule
        if schedule.LOCKSTEP_K_TILES <= k_tiles < 256:
            above.append(values)
        elif k_tiles == 128:
            at_128.append(values)
        elif k_tiles < 128:
            below.append(values)
    assert len(above) >= 5 and len(at_128) >= 3 and len(below) >= 5
    assert all(len(v) == 2 for v in above + at_128 + below)
    assert 128 < schedule.LOCKSTEP_K_TILES <= 144  # between the measured 128 and 144
    for order in (0, 1):
        assert records.geomean(1 + v[order] for v in above) > 1.0, order
        assert records.geomean(1 + v[order] for v in at_128) < 1.0, order
        assert records.geomean(1 + v[order] for v in below) < 1.0, order


def _finishes_with(slots: int, plans) -> bool:
    """Runs ``plans`` with at most ``slots`` clusters at once, started in launch order, each holding
    its slot until its last unit is done; a tile's K-tile-0 piece waits for the tile's other pieces.
    True when every cluster finishes."""
    pieces = collections.Counter(index for units in plans for index, _, _ in units)
    done = collections.Counter()  # tile -> its pieces done, the finisher's aside
    position = [0] * len(plans)
    running, launched = [], 0
    while running or launched < len(plans):
        while len(running) < slots and launched < len(plans):
            running.append(launched)
            launched += 1
        moved = False
        for c in list(running):
            while position[c] < len(plans[c]):
                index, k_begin, _ = plans[c][position[c]]
                if k_begin == 0 and done[index] < pieces[index] - 1:
                    break  # the finisher waits
                done[index] += k_begin > 0
                position[c] += 1
                moved = True
            if position[c] == len(plans[c]):
                running.remove(c)
                moved = True
        if not moved:
            return False
    return True


@pytest.mark.parametrize("tiles,clusters,k_tiles", CASES)
def test_clusters_at_once_is_the_fewest_that_let_the_launch_finish(tiles, clusters, k_tiles):
    """``clusters_at_once`` against a run of the plan with that many clusters at once, and one fewer:
    the hand-over cannot deadlock on a GPU of its own, and needs this many SMs when it shares one."""
    plans = schedule.plan(tiles, clusters, k_tiles)
    need = schedule.clusters_at_once(tiles, clusters, k_tiles)
    assert _finishes_with(need, plans) and (need == 1 or not _finishes_with(need - 1, plans))
    assert need <= clusters and schedule.clusters_at_once(tiles, clusters, k_tiles, enabled=False) == 1


@pytest.mark.parametrize("tiles,clusters,k_tiles", CASES)
def test_the_classic_layout_at_every_k(tiles, clusters, k_tiles):
    """``lockstep_from=NO_LOCKSTEP`` (sm90/12): no main parts at any K, every K tile once, and two
    clusters at once are enough."""
    plans = schedule.plan(tiles, clusters, k_tiles, lockstep_from=schedule.NO_LOCKSTEP)
    assert schedule.launch_constants(tiles, clusters, k_tiles, lockstep_from=schedule.NO_LOCKSTEP).main_k == 0
    seen = collections.Counter((index, k) for units in plans for index, b, e in units for k in range(b, e))
    assert len(seen) == tiles * k_tiles and set(seen.values()) == {1}
    need = schedule.clusters_at_once(tiles, clusters, k_tiles, lockstep_from=schedule.NO_LOCKSTEP)
    assert need <= 2 and _finishes_with(need, plans)
