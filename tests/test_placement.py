"""The cluster order that follows the GPCs (``gemm_course.rules.placement``): pure functions, on CPU."""

import random

import pytest

from gemm_course.rules import placement

pytestmark = pytest.mark.fast


def h200_like(seed=0):
    """A made-up placement like the H200's: 66 two-SM clusters dealt out to 8 GPCs in turn."""
    rng = random.Random(seed)
    gpc_of_tpc = [t % 8 for t in range(66)]
    rng.shuffle(gpc_of_tpc)
    tpcs = list(range(66))
    rng.shuffle(tpcs)
    cluster_sms = [2 * t for t in tpcs]
    return cluster_sms, gpc_of_tpc


def test_groups_join_every_cluster_seen_and_leave_the_rest_alone():
    groups = placement.gpc_groups(10, [[0, 1, 4], [4, 5], [7, 8]])
    assert groups[0] == groups[1] == groups[4] == groups[5]
    assert groups[7] == groups[8] != groups[0]
    assert len({groups[s] for s in (2, 3, 6, 9)}) == 4  # never seen with another SM: a group each
    assert groups[2] not in (groups[0], groups[7])


def test_order_is_a_permutation_and_keeps_each_gpc_together():
    for seed in range(20):
        cluster_sms, gpc_of_tpc = h200_like(seed)
        runs = [[2 * t for t in range(66) if gpc_of_tpc[t] == g] for g in range(8)]
        groups = placement.gpc_groups(132, runs)
        place = placement.order_from_placement(cluster_sms, groups)
        assert sorted(place) == list(range(66))
        by_place = sorted(range(66), key=lambda c: place[c])
        gpcs = [groups[cluster_sms[c]] for c in by_place]
        # each GPC's clusters take one run of consecutive places
        assert sum(1 for i in range(1, 66) if gpcs[i] != gpcs[i - 1]) == len(set(gpcs)) - 1


def test_order_without_any_gpc_information_is_the_identity():
    assert placement.order_from_placement([8, 2, 40, 6], {}) == [0, 1, 2, 3]


def test_probe_record_and_figure():
    """A made-up probe record: the grid's clusters, SM groups from clusters of 8, and the figure."""
    cluster_sms, gpc_of_tpc = h200_like(3)
    grid = [sm + i for sm in cluster_sms for i in (0, 1)]
    eights = []
    for g in range(8):
        sms = [s for t in range(66) if gpc_of_tpc[t] == g for s in (2 * t, 2 * t + 1)]
        eights += sms[: len(sms) // 8 * 8]
    record = {"gpu": "test", "sms": 132, "date": "2026-11-30", "runs": [
        {"cluster": 2, "ctas": 132, "smid": grid}, {"cluster": 8, "ctas": len(eights), "smid": eights}]}
    p = placement.from_probe_record(record)
    assert p["cluster_sms"] == cluster_sms
    assert sorted(p["places"]) == list(range(66))
    from gemm_course import viz

    ax = viz.cluster_placement(record).axes[0]
    n = len(cluster_sms)
    top = [int(t.get_text()) for t in ax.texts if (t.get_gid() or "").startswith("index ")]  # by cluster index
    bottom = [int(t.get_text()) for t in ax.texts if (t.get_gid() or "").startswith("place ")]  # by place in a wave
    assert top == list(range(n)) and bottom == sorted(range(n), key=lambda c: p["places"][c])
    colour = {int(r.get_gid().split()[1]): tuple(r.get_facecolor()) for r in ax.patches
              if (r.get_gid() or "").startswith("index ")}  # the top strip
    sizes = {g: list(p["groups"].values()).count(g) for g in set(p["groups"].values())}
    known = [c for c in range(n) if sizes[p["groups"][cluster_sms[c]]] > 1]
    gpc_colours = {}  # a GPC's clusters share one colour; the palette has 9, so more GPCs repeat one
    for c in known:
        assert gpc_colours.setdefault(p["groups"][cluster_sms[c]], colour[c]) == colour[c]
    assert len(set(gpc_colours.values())) == min(len(gpc_colours), 9)
