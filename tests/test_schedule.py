"""The persistent kernels' schedule (stream-K tail): every K tile of every tile exactly once, and
a hand-over protocol that cannot deadlock."""

import collections

import pytest

from gemm_course import schedule

CASES = [(256, 66, 64), (1024, 66, 128), (1792, 66, 64), (512, 66, 448), (64, 66, 32), (130, 66, 3), (67, 66, 1),
         (66, 66, 64), (2304, 66, 192), (5, 3, 7), (7, 4, 100), (1, 1, 5), (100, 57, 80), (1000, 64, 64), (32, 66, 64), (8, 66, 2), (1, 66, 64), (3, 66, 40)]


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
    """A split tile's K-tile-0 part finishes it; its helpers are exactly finisher+1 .. last_helper;
    a helper part is its cluster's first tail unit, so it is written before that cluster waits."""
    whole, tail_clusters, tail_k = schedule.split_tail(tiles, clusters, k_tiles)
    parts = collections.defaultdict(list)  # tile -> [(cluster, k_begin, k_end, unit position)]
    plans = schedule.plan(tiles, clusters, k_tiles)
    for c, units in enumerate(plans):
        for pos, (index, k_begin, k_end) in enumerate(units):
            parts[index].append((c, k_begin, k_end, pos))
    for index, ps in parts.items():
        if len(ps) == 1:
            assert ps[0][1:3] == (0, k_tiles)  # whole tile, no hand-over
            continue
        assert index >= whole
        finisher = [p for p in ps if p[1] == 0]
        assert len(finisher) == 1
        f = finisher[0][0]
        helpers = sorted(p[0] for p in ps if p[1] > 0)
        assert helpers == list(range(f + 1, schedule.last_helper(index, whole, tail_clusters, tail_k, k_tiles) + 1))
        whole_units = len([u for u in plans[f] if u[2] - u[1] == k_tiles and u[0] < whole])
        for h, k_begin, _, pos in ps:
            if k_begin > 0:
                assert pos == len([u for u in plans[h] if u[0] < whole])  # first tail unit of its cluster
        assert whole_units >= 0


def test_tail_is_split_where_it_pays():
    # 8192^3 on an H200: 1024 cluster-tiles of 128 K tiles over 66 clusters -> 34 tail tiles shared by all
    assert schedule.busy_fraction(1024, 66, 128, enabled=False) == pytest.approx(1024 / (66 * 16))
    assert schedule.busy_fraction(1024, 66, 128) > 0.995
    # 4096^3: 58 tail tiles of 64 K tiles leave 8 idle K tiles per cluster, less than the fix-up's cost
    assert schedule.split_tail(256, 66, 64) == (256, 0, 0)
    # a tail that nearly fills the wave with short K loops is not worth the fix-up
    assert schedule.split_tail(64 + 66, 66, 8) == (130, 0, 0)


@pytest.mark.parametrize("tiles,clusters,k_tiles", CASES)
def test_launch_size_agrees_with_the_kernels_split(tiles, clusters, k_tiles):
    launched = schedule.grid_clusters(tiles, clusters, k_tiles)
    _, tail_clusters, _ = schedule.split_tail(tiles, launched, k_tiles)  # what the kernel decides on the launched grid
    if tail_clusters:  # split: every cluster is launched (up to MAX_PARTS per tile), each with part of the work
        assert launched == min(clusters, schedule.MAX_PARTS * tiles)
        assert all(units for units in schedule.plan(tiles, launched, k_tiles)[:tail_clusters])
    else:  # not split: no cluster is launched without a tile
        assert launched == min(tiles, clusters)


def test_fewer_tiles_than_clusters_share_their_k_loops():
    # 1024 x 2048 x 4096 on an H200: 4 x 8 cluster-tiles of 256 x 256 for 66 clusters
    assert schedule.grid_clusters(32, 66, 64) == 66
    assert schedule.busy_fraction(32, 66, 64) > 0.95
    assert schedule.grid_clusters(32, 66, 64, enabled=False) == 32
    # 2048^3: 64 cluster-tiles; splitting them to fill 2 idle clusters is not worth a hand-over
    assert schedule.grid_clusters(64, 66, 32) == 64
    # one tile: split over MAX_PARTS clusters, not all 66 (the finisher adds the parts one by one)
    assert schedule.grid_clusters(1, 66, 64) == schedule.MAX_PARTS
    parts = [units for units in schedule.plan(1, schedule.MAX_PARTS, 64) if units]
    assert len(parts) == schedule.MAX_PARTS


def test_split_tail_streams_every_k_tile_of_the_tail_once():
    # 8192x4096x28672 on an H200: 512 cluster-tiles over 66 clusters, 50 in the tail, 448 K tiles each
    per_k_tile = (256 + 256) * 64 * 2
    assert schedule.split_tail_bytes(512, 66, 448, per_k_tile) == 50 * 448 * per_k_tile
    assert schedule.split_tail_bytes(256, 66, 64, per_k_tile) == 0  # 4096^3: not split
