"""The Python twins of the Blackwell steps 4-10, which cannot run here: the scheduler of step 8
(cluster launch control), the accumulators of steps 7-8 in tensor memory, the CTA pair and its
multicast masks (step 5), the epilogue's register paths (steps 4-5), and the figures drawn from them.

Where a twin restates a kernel's rule, a test compares it with the kernel's own objects traced
for sm_100a; where a test checks a property, a deliberately broken variant shows it can fail."""

from __future__ import annotations

import dataclasses
import io
import itertools

import pytest
from matplotlib.text import Text

from gemm_course import viz
from gemm_course.kernels.sm100 import layouts
from gemm_course.kernels.sm100 import step07_tmem_double_buffer as step07
from gemm_course.runtime import ladder
from gemm_course.teaching import sim

CLUSTERS = ((2, 1), (4, 1), (2, 2), (4, 2))


# ---- cluster launch control (step 8) ------------------------------------------------------------


def _resident_at(schedule, t) -> int:
    """Clusters resident just before time t."""
    return sum(1 for c, start in schedule.launched.items() if start < t and schedule.exited[c] >= t)


@pytest.mark.fast
@pytest.mark.parametrize("policy", ["lowest", "highest", "random"])
def test_clc_computes_every_tile_once_in_any_interleaving(policy):
    cases = itertools.product((1, 7, 24), (1, 2, 5, 30), (0.0, 0.3), (0.0, 0.25), (1, 2))
    for (g, resident, fail, gap, ahead), seed in itertools.product(cases, range(4)):
        s = sim.clc_schedule(g, resident, policy, seed=seed, jitter=1.0, fail=fail, launch_gap=gap, ahead=ahead)
        assert sim.check_clc_schedule(s) == [], (g, resident, fail, gap, ahead, seed)
        assert s.max_resident <= resident
        assert sorted(r.tile for r in s.runs) == list(range(g))


@pytest.mark.fast
def test_clc_no_cancellation_wins_when_every_cluster_is_resident():
    for seed in range(20):
        s = sim.clc_schedule(12, 12 + seed % 3, "random", seed=seed, jitter=1.0)
        assert s.cancelled == {} and s.per_cluster == {c: [c] for c in range(12)}
        assert all(q.cancelled is None for q in s.queries)
        assert sim.check_clc_schedule(s) == []


@pytest.mark.fast
def test_clc_every_pending_cluster_is_cancelled_when_launches_are_instant():
    """No failures and no launch delay: the first `resident` clusters launch at once, and every other
    launch is cancelled, its tile taken over (no cluster leaves while any is pending)."""
    for policy, seed in itertools.product(("lowest", "highest", "random"), range(10)):
        s = sim.clc_schedule(20, 6, policy, seed=seed, jitter=1.0)
        assert sorted(s.launched) == list(range(6))
        assert sorted(s.cancelled) == list(range(6, 20))
        assert sim.check_clc_schedule(s) == []
    one = sim.clc_schedule(9, 1)
    assert one.per_cluster == {0: list(range(9))}


@pytest.mark.fast
def test_clc_models_the_race_both_ways():
    """After a cluster leaves on a failed try_cancel, a pending cluster either launches into the
    freed slot, or another cluster's try_cancel takes it first: both happen, and both are correct."""
    launched_late = cancelled_with_a_free_slot = 0
    for seed in range(60):
        s = sim.clc_schedule(16, 4, "lowest", seed=seed, jitter=1.0, fail=0.3, launch_gap=0.3)
        assert sim.check_clc_schedule(s) == []
        first_exit = min(s.exited.values())
        launched_late += any(t >= first_exit for t in s.launched.values())
        cancelled_with_a_free_slot += any(t >= first_exit and _resident_at(s, t) < 4 for _, t in s.cancelled.values())
    assert launched_late and cancelled_with_a_free_slot


@pytest.mark.fast
def test_clc_checker_catches_broken_kernels():
    for seed in range(10):
        no_divide = sim.clc_schedule(10, 3, seed=seed, jitter=1.0, decode=lambda x: x)  # first_cta_x, not // cluster_m
        assert any("computed 0 times" in p for p in sim.check_clc_schedule(no_divide))
        assert any("outside the grid" in p for p in sim.check_clc_schedule(no_divide))
        forgetful = sim.clc_schedule(10, 3, seed=seed, jitter=1.0, own_tile=False)
        problems = sim.check_clc_schedule(forgetful)
        assert any("computed 0 times" in p for p in problems) and any("own tile" in p for p in problems)
    with_one_cta = sim.clc_schedule(10, 3, cluster_m=1, decode=lambda x: x)  # cluster_m = 1: no difference
    assert sim.check_clc_schedule(with_one_cta) == []
    crowded = dataclasses.replace(with_one_cta, resident=2)  # three ran at once
    assert sim.check_clc_schedule(crowded) == ["3 clusters resident at once, more than 2"]


@pytest.fixture(scope="module", params=[2, 4])
def kernel_decode(request):
    cm = request.param
    xs = [sim.clc_first_cta_x(c, cm) for c in range(24)]
    return cm, layouts.clc_decode_table("sm100/8", ladder.get("sm100/8").config(cluster_m=cm), xs)


@pytest.mark.compile
def test_kernel_decodes_like_the_twin(kernel_decode):
    cm, table = kernel_decode
    for c in range(24):
        x = sim.clc_first_cta_x(c, cm)
        assert table[x] == (sim.clc_decode(x, cm), True) == (c, True)
    for seed in range(10):  # the model run with the kernel's own decode
        s = sim.clc_schedule(24, 5, "random", seed=seed, cluster_m=cm, jitter=1.0, fail=0.2,
                             decode=lambda x: table[x][0])
        assert sim.check_clc_schedule(s) == []


GRIDS = ((4096, 4096), (1000, 3000), (5000, 7000))  # square, ragged in one wave, ragged over many waves
ORDERS = {"sm100/8": "row", "sm100/9": "grouped", "sm100/10": "gilbert"}


@pytest.mark.fast
@pytest.mark.parametrize("key", list(ORDERS))
@pytest.mark.parametrize("cluster", [(2, 1), (4, 1), (2, 2)])
def test_cluster_tiles_cover_the_grid_once(key, cluster):
    cm, cn = cluster
    step = ladder.get(key)
    cfg = step.config(cluster_m=cm, cluster_n=cn)
    bm, bn = cfg.tile_m, cfg.tile_n
    for m, n in GRIDS:
        clusters_m, clusters_n = -(-m // (bm * cm)), -(-n // (bn * cn))
        kernel = layouts.kernel_cta_tiles(key, cfg, m, n, cluster=3)
        twin = {i: sim.cluster_cta_tiles(i, cm, cn, clusters_m, clusters_n, ORDERS[key], getattr(cfg, "group", 8))
                for i in range(clusters_m * clusters_n)}
        assert kernel == twin, (m, n)
        tiles = [cta for per in kernel.values() for _, cta in per.values()]
        grid = {(i, j) for i in range(clusters_m * cm) for j in range(clusters_n * cn)}
        assert len(tiles) == len(set(tiles)) and set(tiles) == grid  # every CTA tile exactly once
        assert {(i, j) for i in range(-(-m // bm)) for j in range(-(-n // bn))} <= grid  # all of C
        for per in kernel.values():
            for (x, _), (pair_tile, cta_tile) in per.items():
                assert pair_tile == (cta_tile[0] // 2, cta_tile[1]) and cta_tile[0] % 2 == x % 2
    assert layouts.kernel_cta_tiles(key, cfg, 1000, 3000, cluster=0) == layouts.kernel_cta_tiles(key, cfg, 1000, 3000, cluster=7)


# ---- accumulators in tensor memory (steps 7, 8) -------------------------------------------------


@pytest.mark.fast
def test_tmem_plan_hand_computed():
    one = sim.tmem_plan([4, 4, 4], [2, 2, 2], acc_stages=1)
    assert (one.span, one.overlap, one.allocated) == (18, 0, 256)  # 3 x (4 + 2), nothing overlaps
    two = sim.tmem_plan([4, 4, 4], [2, 2, 2], acc_stages=2)
    assert (two.span, two.overlap, two.allocated) == (14, 4, 512)  # 3 x 4 + the last epilogue
    assert [(i.who, i.stage, i.start, i.end) for i in two.intervals] == [
        ("mma", 0, 0, 4), ("epilogue", 0, 4, 6), ("mma", 1, 4, 8), ("epilogue", 1, 8, 10),
        ("mma", 0, 8, 12), ("epilogue", 0, 12, 14)]
    slow = sim.tmem_plan([2, 2, 2], [5, 5, 5], acc_stages=2)  # epilogue-bound: tile 2 waits for stage 0
    assert slow.span == 17 and [i.start for i in slow.of("mma")] == [0, 2, 7]
    with pytest.raises(ValueError):
        sim.tmem_plan([1] * 3, [1] * 3, acc_stages=3, tile_n=256)  # 768 columns


@pytest.mark.fast
def test_tmem_no_stage_is_written_while_read():
    import random

    rng = random.Random(0)
    for stages, _ in itertools.product((1, 2, 3), range(30)):
        tiles = rng.randint(1, 9)
        plan = sim.tmem_plan([rng.uniform(0.1, 5) for _ in range(tiles)], [rng.uniform(0.1, 5) for _ in range(tiles)],
                             stages, tile_n=128)
        for s in range(stages):
            uses = sorted((i for i in plan.intervals if i.stage == s), key=lambda i: (i.start, i.who != "mma"))
            assert [i.tile for i in uses] == sorted(i.tile for i in uses)  # write t, read t, write t + stages, ...
            assert [i.who for i in uses] == ["mma", "epilogue"] * (len(uses) // 2)
            for a, b in zip(uses, uses[1:]):
                assert b.start >= a.end - 1e-12
        for who in ("mma", "epilogue"):  # one MMA warp, one set of epilogue warps
            runs = plan.of(who)
            assert all(b.start >= a.end - 1e-12 for a, b in zip(runs, runs[1:]))
        if stages == 1:
            assert plan.overlap == 0
        elif tiles > 1 and all(e < m for e, m in zip([i.end - i.start for i in plan.of("epilogue")],
                                                     [i.end - i.start for i in plan.of("mma")])):
            assert plan.overlap > 0


@pytest.mark.compile
@pytest.mark.parametrize("fields", [{}, {"tile_n": 128, "acc_stages": 3}, {"tile_n": 64, "acc_stages": 1}])
def test_tmem_columns_are_the_kernels(fields):
    step = ladder.get("sm100/7")
    cfg = step.config(**fields)
    stages = layouts.accumulator_stages("sm100/7", cfg)
    plan = sim.tmem_plan([1] * cfg.acc_stages, [1] * cfg.acc_stages, cfg.acc_stages, cfg.tile_n)
    assert sorted(stages) == list(range(cfg.acc_stages))
    for s, (lanes, columns) in stages.items():
        assert lanes == tuple(range(128))
        assert columns == tuple(range(*plan.columns(s))) and columns[0] == s * cfg.tile_n
    assert plan.allocated == sim.tmem_columns(cfg.acc_stages, cfg.tile_n) == step07.tmem_columns(cfg)
    assert plan.allocated == step.load().Gemm(cfg).tmem_cols


# ---- the CTA pair and its multicast masks (step 5) ----------------------------------------------


@pytest.fixture(scope="module")
def split():
    return layouts.pair_split("sm100/5")


@pytest.mark.compile
def test_each_cta_of_the_pair_holds_its_half(split):
    assert sorted(split) == [0, 1]
    for v, share in split.items():
        rows = tuple(range(128 * v, 128 * v + 128))
        assert share.a_rows == rows and share.b_rows == rows
        assert share.c_rows == share.a_rows  # the accumulator holds the rows of its own A
        assert share.c_cols == tuple(range(256))  # ... and all columns of C, though only half of B
        assert {k for _, k in share.a} == {k for _, k in share.b} == set(range(64))
        for (row, col), (lane, column) in zip(share.c, share.tmem):
            assert (lane, column) == (row - 128 * v, col)
    for operand, rows in (("a", 256), ("b", 256)):
        every = [rc for share in split.values() for rc in getattr(share, operand)]
        assert len(every) == len(set(every)) == rows * 64  # the union covers the tile once
    every_c = [rc for share in split.values() for rc in share.c]
    assert len(every_c) == len(set(every_c)) == 256 * 256


@pytest.fixture(scope="module")
def masks():
    return {shape: layouts.tma_multicast_masks(*shape) for shape in CLUSTERS}


@pytest.mark.compile
def test_multicast_twin_is_cutes(masks):
    for (cm, cn), found in masks.items():
        assert found == layouts.multicast_masks(cm, cn), (cm, cn)


@pytest.mark.compile
def test_multicast_semantics(masks):
    ctas = {shape: {r: tuple(layouts.mask_ctas(m) for m in ab) for r, ab in found.items()} for shape, found in masks.items()}
    assert ctas[(2, 1)] == {0: ((0,), (0,)), 1: ((1,), (1,))}  # one pair: nothing to share
    assert ctas[(4, 1)][0] == ((0,), (0, 2)) and ctas[(4, 1)][3] == ((3,), (1, 3))  # B across the pairs
    assert ctas[(2, 2)][0] == ((0, 2), (0,)) and ctas[(2, 2)][1] == ((1, 3), (1,))  # A across N
    assert ctas[(4, 2)][0] == ((0, 4), (0, 2)) and ctas[(4, 2)][7] == ((3, 7), (5, 7))
    for (cm, cn), per in ctas.items():
        for r, (a, b) in per.items():
            assert r in a and r in b and len(a) == cn and len(b) == cm // 2
            assert {c % cm for c in a} == {r % cm}  # same x: same rows of A
            assert {c % 2 for c in b} == {r % 2} and {c // cm for c in b} == {r // cm}  # same half of B, same y


# ---- the epilogue's register paths (steps 4, 5) ---------------------------------------------------

EPILOGUES = {
    "sm100/4, tile_m 64: 16x256b + stmatrix": ("sm100/4", {"tile_m": 64}, None),
    "sm100/4, tile_m 128: 32x32b + st.shared": ("sm100/4", {"tile_m": 128}, None),
    "sm100/5: 32x32b + st.shared": ("sm100/5", {}, None),
    "wrong: transposed stmatrix after 16x256b": ("sm100/4", {"tile_m": 64}, "stmatrix.trans"),
    "wrong: stmatrix after 32x32b": ("sm100/4", {"tile_m": 128}, "stmatrix"),
}


@pytest.fixture(scope="module", params=list(EPILOGUES))
def epilogue(request):
    key, fields, store = EPILOGUES[request.param]
    cfg = ladder.get(key).config(**fields)
    paths = layouts.epilogue_paths(key, cfg, store)
    return request.param, cfg, paths, layouts.epilogue_mismatches(paths, cfg.epi_n, cfg.epi_stages)


@pytest.mark.compile
def test_every_loaded_element_is_stored_at_its_own_place(epilogue):
    name, cfg, paths, wrong = epilogue
    assert {p.thread for p in paths} == set(range(128))
    assert sorted(p.loaded for p in paths) == [(r, c) for r in range(cfg.tile_m) for c in range(cfg.tile_n)]
    if name.startswith("wrong"):
        assert len(wrong) > len(paths) // 2  # the check is not vacuous
    else:
        assert wrong == []
        assert {p.written[2] for p in paths} == set(range(cfg.epi_stages))


# ---- figures -----------------------------------------------------------------------------------


def _readable(fig):
    """Drawn without error (Agg), at most page width, no text under 9 pt."""
    fig.savefig(io.BytesIO(), format="png", dpi=50)
    assert fig.get_size_inches()[0] <= 7.0
    texts = [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]
    small = [(t.get_text(), t.get_fontsize()) for t in texts if t.get_fontsize() < 9]
    assert not small, small[:5]
    return [t.get_text() for t in texts]


def _patches(fig, gid):
    return [p for ax in fig.axes for p in ax.patches if p.get_gid() == gid]


@pytest.mark.fast
def test_clc_timeline_draws_each_run():
    s = sim.clc_schedule(20, 6, seed=2, jitter=0.4, launch_gap=0.05)
    fig = viz.clc_timeline(s)
    texts = _readable(fig)
    bars = _patches(fig, "run")
    assert len(bars) == len(s.runs) == 20
    assert sorted((round(b.get_x(), 9), round(b.get_width(), 9)) for b in bars) == sorted(
        (round(r.start, 9), round(r.end - r.start, 9)) for r in s.runs)
    assert sorted(int(t) for t in texts if t.isdigit()) == list(range(20))
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == [f"cluster {c}" for c in sorted(s.launched)]
    assert f"{len(s.cancelled)} launches were cancelled" in fig.caption


@pytest.mark.fast
def test_tmem_timeline_draws_each_interval_in_its_stage():
    plans = {"one accumulator": sim.tmem_plan([4] * 3, [2] * 3, 1), "two accumulators": sim.tmem_plan([4] * 3, [2] * 3, 2)}
    fig = viz.tmem_timeline(plans)
    _readable(fig)
    for ax, plan in zip(fig.axes, plans.values()):
        drawn = sorted((p.get_gid(), p.get_x(), p.get_y(), p.get_height()) for p in ax.patches)
        assert drawn == sorted((i.who, i.start, plan.columns(i.stage)[0], plan.tile_n) for i in plan.intervals)
    assert len(_patches(fig, "mma")) == len(_patches(fig, "epilogue")) == 6


@pytest.mark.compile
def test_cta_pair_split_draws_each_ctas_rows(split):
    fig = viz.cta_pair_split(split)
    texts = _readable(fig)
    for v, share in split.items():
        (a,) = _patches(fig, f"A{v}")
        (b,) = _patches(fig, f"B{v}")
        assert (a.get_height(), b.get_width()) == (len(share.a_rows), len(share.b_rows)) == (128, 128)
        assert a.get_y() - _patches(fig, "A0")[0].get_y() == share.a_rows[0]
        assert len(_patches(fig, f"C{v}")) == 1
        assert any(f"C rows {share.c_rows[0]}-{share.c_rows[-1]}, columns 0-255" in t for t in texts)


@pytest.mark.compile
def test_multicast_mask_grid_fills_one_cell_per_bit(masks):
    for (cm, cn), found in masks.items():
        fig = viz.multicast_mask_grid(found, cm, cn)
        _readable(fig)
        for ax, which in zip(fig.axes, (0, 1)):
            bits = [p for p in ax.patches if p.get_gid() == "bit"]
            cells = sorted((round(p.get_y() + 0.5), round(p.get_x() + 0.5)) for p in bits)
            assert cells == sorted((r, c) for r, m in found.items() for c in layouts.mask_ctas(m[which]))
            assert len(ax.get_yticklabels()) == cm * cn
