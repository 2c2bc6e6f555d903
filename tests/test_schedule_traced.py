"""The Hopper step 11's schedule as the kernel computes it: on traced Int32 values, with CuTeDSL's
select/min/max and the fast dividers the host makes, compiled and executed by CuTeDSL's host JIT
on this CPU. Every cluster's units must be the Python twin's (``schedule.plan``), so a change that
makes the traced arithmetic differ from the tested Python fails here, without a GPU."""

from __future__ import annotations

import pytest
from host_jit import printed_words

from gemm_course.rules import schedule

TRACED = '''
import sys
import cutlass, cutlass.cute as cute
from gemm_course.rules import schedule

@cute.jit
def plan(tiles: cutlass.Int32, max_clusters: cutlass.Constexpr, k_tiles: cutlass.Int32, lockstep_from: cutlass.Constexpr):
    select, minimum, maximum = schedule.operations(tiles, k_tiles)
    # the host side of sm90/11 (launched_clusters, schedule_constants)
    clusters = schedule.grid_clusters(tiles, max_clusters, k_tiles, True, select, minimum)
    enabled = (k_tiles > 0) == True  # noqa: E712  (a runtime value, as in the kernel)
    c = schedule.launch_constants(tiles, clusters, k_tiles, enabled, select, minimum, maximum, lockstep_from=lockstep_from)
    piece_div = cute.fast_divmod_create_divisor_v2(cutlass.Int32(c.piece))
    share_div = cute.fast_divmod_create_divisor_v2(cutlass.Int32(c.share))
    cute.printf("case %d %d grid %d", tiles, k_tiles, clusters)
    # every cluster's side (make_plan, num_units, work_unit)
    for cluster in cutlass.range(clusters, unroll=1):
        start, end = schedule.helper_run(cluster, c.mains, c.helpers, c.rest_k, share_div, cutlass.select_)
        count = schedule.whole_units(cluster, c.full_waves, c.leftover, cutlass.select_)
        units = schedule.num_units(cluster, count, c.mains, start, end, piece_div, cutlass.select_)
        for u in cutlass.range(units, unroll=1):
            index, k_begin, k_end = schedule.work_unit(
                u, cluster, clusters, count, c.whole_tiles, c.main_k, start, end, k_tiles, c.piece, piece_div,
                cutlass.select_, cutlass.min, cutlass.max)
            cute.printf("unit %d %d %d %d", cluster, index, k_begin, k_end)

max_clusters, lockstep_from = int(sys.argv[1]), int(sys.argv[2])
run = cute.compile(plan, cutlass.Int32(1), max_clusters, cutlass.Int32(1), lockstep_from)
for arg in sys.argv[3:]:
    tiles, k_tiles = map(int, arg.split(","))
    run(cutlass.Int32(tiles), cutlass.Int32(k_tiles))
'''

# (tiles, K tiles) on an H200's 66 clusters: whole waves, classic and lockstep tails, fewer tiles than clusters
CASES = [(256, 64), (1024, 128), (512, 448), (64, 32), (130, 3), (2304, 192), (2298, 192), (32, 64), (1, 64),
         (120, 300), (3584, 224), (16, 128), (67, 1), (3, 300), (13, 260)]


def _parse(words: list) -> dict:
    """{(tiles, k_tiles): (grid, [units of cluster 0], [units of cluster 1], ...)} from the printed words."""
    got, case, i = {}, None, 0
    while i < len(words):
        if words[i] == "case":
            case = (int(words[i + 1]), int(words[i + 2]))
            got[case] = [int(words[i + 4])]
            i += 5
        else:
            assert words[i] == "unit", words[i:i + 5]
            cluster, index, k_begin, k_end = (int(w) for w in words[i + 1:i + 5])
            while len(got[case]) <= cluster + 1:
                got[case].append([])
            got[case][cluster + 1].append((index, k_begin, k_end))
            i += 5
    return got


@pytest.mark.compile
@pytest.mark.parametrize("max_clusters,lockstep_from", [(66, schedule.LOCKSTEP_K_TILES), (8, schedule.LOCKSTEP_K_TILES),
                                                         (66, schedule.NO_LOCKSTEP)])  # sm90/12: classic at every K
def test_traced_schedule_is_the_twins(max_clusters, lockstep_from, tmp_path):
    got = _parse(printed_words(TRACED, [max_clusters, lockstep_from] + [f"{t},{k}" for t, k in CASES], tmp_path))
    assert set(got) == set(CASES)
    kinds = set()
    for tiles, k_tiles in CASES:
        grid = schedule.grid_clusters(tiles, max_clusters, k_tiles)
        plan = schedule.plan(tiles, grid, k_tiles, lockstep_from=lockstep_from)
        traced = got[(tiles, k_tiles)]
        assert traced[0] == grid, (tiles, k_tiles)
        assert traced[1:] + [[]] * (grid - len(traced[1:])) == plan, (tiles, k_tiles)
        c = schedule.launch_constants(tiles, grid, k_tiles, lockstep_from=lockstep_from)
        kinds.add("lockstep" if c.main_k else "classic" if c.helpers else "whole")
    expected = {"lockstep", "classic", "whole"} if lockstep_from == schedule.LOCKSTEP_K_TILES else {"classic", "whole"}
    assert kinds == expected  # every layout of the tail was traced
