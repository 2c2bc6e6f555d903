"""The final Hopper kernel's tile per shape (``tile_rule``): its arithmetic, its configurations, and
its choices against the H200 measurements it was drawn from."""

import collections
import math

import pytest

from gemm_course.rules import tile_rule
from gemm_course.runtime import ladder
from gemm_course.runtime.problem import GemmProblem

H200_CLUSTERS = 66  # 132 SMs in clusters of two


@pytest.mark.fast
def test_wave_fill_and_cluster_tiles():
    assert tile_rule.cluster_tiles(3072, 3072, 256) == 12 * 12  # 24 tile-rows in pairs x 12 tile-columns
    assert tile_rule.cluster_tiles(3072, 3072, 192) == 12 * 16
    assert tile_rule.cluster_tiles(1000, 3000, 192) == 4 * 16  # ragged edges count as whole tiles
    assert tile_rule.cluster_tiles(2048, 1024, 128) == 16 * 4  # 128 x 128 tiles pair along N
    assert tile_rule.cluster_tiles(1000, 1000, 128) == 8 * 4
    assert tile_rule.wave_fill(2.0) == 1.0
    assert tile_rule.wave_fill(144 / 66) == pytest.approx(144 / 198)
    assert tile_rule.wave_fill(0.5) == 0.5


@pytest.mark.fast
@pytest.mark.parametrize("shape,tile_n", [
    ((4096, 4096, 4096), 256),  # 3.9 waves, 97% filled
    ((8192, 8192, 8192), 256),  # many waves
    ((16384, 1536, 2048), 256),  # 7.8 waves
    ((2048, 2048, 2048), 256),  # 64 of 66 clusters: a full wave already
    ((3072, 3072, 3072), 192),  # 2.18 waves of 256 (73%), 2.91 of 192 (97%)
    ((4096, 1536, 4096), 192),  # 192 and 128 both 97% filled: the wider wins the tie
    ((1024, 2048, 32768), 128),  # 0.48 / 0.67 / 0.97 waves
    ((1024, 1024, 8192), 128),
])
def test_choices_on_the_h200(shape, tile_n):
    assert tile_rule.choose_tile_n(shape[0], shape[1], H200_CLUSTERS) == tile_n


@pytest.mark.fast
def test_many_waves_keep_the_widest_tile_whatever_the_fill():
    for m in range(8192, 16385, 1024):
        for n in (4096, 5000, 7168, 11008):
            if tile_rule.waves(m, n, 256, H200_CLUSTERS) >= tile_rule.MANY_WAVES:
                assert tile_rule.choose_tile_n(m, n, H200_CLUSTERS) == 256


@pytest.mark.fast
def test_the_choice_fills_its_waves_best_within_the_tie():
    """On a grid of few-wave shapes, the chosen width's fill is the best fill (within FILL_TIE), and
    no wider width is as good: the rule as its docstring states it, checked shape by shape."""
    for m in range(512, 6145, 512):
        for n in range(512, 6145, 512):
            tn = tile_rule.choose_tile_n(m, n, H200_CLUSTERS)
            if tile_rule.waves(m, n, 256, H200_CLUSTERS) >= tile_rule.MANY_WAVES:
                continue
            fills = {w: tile_rule.wave_fill(tile_rule.waves(m, n, w, H200_CLUSTERS)) for w in tile_rule.TILE_NS}
            assert fills[tn] >= max(fills.values()) - tile_rule.FILL_TIE
            assert all(fills[w] < max(fills.values()) - tile_rule.FILL_TIE for w in tile_rule.TILE_NS if w > tn)


@pytest.mark.fast
def test_long_k_gives_the_widest_tile_four_stages():
    assert tile_rule.choose(3072, 1024, 32768, H200_CLUSTERS) == tile_rule.Choice(256, *tile_rule.LONG_K_STAGES, 2, 1)
    assert tile_rule.choose(3072, 1024, 8192, H200_CLUSTERS).stages == tile_rule.STAGES[256][0]
    assert tile_rule.choose(1024, 2048, 32768, H200_CLUSTERS).tile_n == 128  # long K does not change other widths


@pytest.mark.fast
def test_every_choice_is_a_valid_step_11_config():
    step = ladder.get("sm90/11")
    module = step.load()
    for stages in list(tile_rule.STAGES.items()) + [(256, tile_rule.LONG_K_STAGES)]:
        tile_n, (s, epi_n, epi_stages) = stages
        cluster_m, cluster_n = tile_rule.CLUSTERS[tile_n]
        config = step.config(tile_n=tile_n, stages=s, epi_n=epi_n, epi_stages=epi_stages, cluster_m=cluster_m,
                             cluster_n=cluster_n)
        assert module.check_config(config) == (True, ""), config
        assert cluster_m * cluster_n == tile_rule.CLUSTER_SIZE


@pytest.mark.fast
def test_step_config_for_uses_the_rule_on_step_11_only():
    """Without a GPU ``max_clusters`` is a full H200's, so the CPU sees the H200's choices."""
    step = ladder.get("sm90/11")
    assert step.config_for(GemmProblem(3072, 3072, 3072)).tile_n == 192
    assert step.config_for(GemmProblem(8192, 8192, 8192)) == step.default
    assert step.config_for(GemmProblem(8192, 8192, 32768)).stages == tile_rule.LONG_K_STAGES[0]
    assert ladder.get("sm90/10").config_for(GemmProblem(3072, 3072, 3072)) == ladder.get("sm90/10").default


@pytest.mark.compile
@pytest.mark.parametrize("choice", sorted({tile_rule.choose(m, n, k, H200_CLUSTERS) for m, n, k in [
    (8192, 8192, 8192), (3072, 3072, 3072), (1024, 1024, 8192), (3072, 1024, 32768)]}), ids=str)
def test_every_choice_compiles_without_spills(choice):
    from gemm_course.runtime import arch
    from gemm_course.teaching import inspect

    step = ladder.get("sm90/11")
    art = arch.compile_step(step, step.config(**choice.fields()), "sm_90a")
    res = inspect.report(art).resources
    assert not res.spills, res
    assert (res.dynamic_smem or 0) + res.static_smem <= 227 * 1024


@pytest.mark.fast
@pytest.mark.parametrize("run", ["tune_run36_tile_192", "tune_run37_few_wave_clusters"])
def test_the_rule_against_its_measurements(run):
    """On each shape of the H200 runs the rule was drawn from, the variant the rule picks is within 5%
    of the best variant timed there (the runs' noise is 2-3%), and over all shapes it beats the
    128 x 256 default, whose few-wave losses it exists for."""
    from gemm_course.measure import records

    step = ladder.get("sm90/11")

    def choose(m, n, k):
        return step.config(**tile_rule.choose(m, n, k, H200_CLUSTERS).fields())

    rows = records.rule_ab(records.load_tuning(run), choose, step)
    for shape, _, picked, _, best in rows:
        assert picked >= 0.95 * best, (shape, picked, best)
    geo = [math.exp(sum(math.log(r[i]) for r in rows) / len(rows)) for i in (2, 3)]
    n_shapes = len({r["shape"] for r in records.load_tuning(run)["rows"]})
    assert len(rows) == n_shapes >= 12 and geo[0] > geo[1] + 0.02, geo


@pytest.mark.fast
def test_the_rule_against_fixed_widths_on_the_few_wave_shapes():
    """Run 40 timed the rule's pick ("sm90/11", its config recorded per row) beside fixed 256-, 192-
    and 128-wide tiles on the broad sweep's few-wave shapes, in both orders: the recorded picks are
    today's rule, and each is within 5% of the best width on every shape and order."""
    from gemm_course.measure import records

    step = ladder.get("sm90/11")
    tune = records.load_tuning("tune_run40_few_wave_widths")
    halves = collections.defaultdict(list)  # (shape, variant) -> ratios, one per order
    for r in tune["rows"]:
        if r["variant"] != "cublas":
            halves[r["shape"], r["variant"]].append(r["ratio_to_cublas"])
        if r["variant"] == "sm90/11":
            m, n, k = map(int, r["shape"].split("x"))
            assert records.row_config(step, r) == step.config(**tile_rule.choose(m, n, k, H200_CLUSTERS).fields())
    shapes = {shape for shape, _ in halves}
    assert len(shapes) == 10 and all(len(v) == 2 for v in halves.values())
    for shape in shapes:
        for order in (0, 1):
            best = max(v[order] for (s, _), v in halves.items() if s == shape)
            assert halves[shape, "sm90/11"][order] >= 0.95 * best, (shape, order)


@pytest.mark.compile
@pytest.mark.parametrize("key", ["sm90/5", "sm90/6", "sm90/7", "sm90/8", "sm90/9", "sm90/10"])
def test_the_192_wide_tile_compiles_from_step_5(key):
    """Step 5's check admits tile_n = 192 for every later step (wgmma N = 192): each compiles, one
    192-wide wgmma per warpgroup and k16 step, no spills."""
    from gemm_course.runtime import arch
    from gemm_course.teaching import inspect

    step = ladder.get(key)
    config = step.config(tile_n=192, epi_n=32)
    assert step.check_config(config) == (True, "")
    art = arch.compile_step(step, config, "sm_90a")
    assert not inspect.report(art).resources.spills
    assert "wgmma.mma_async.sync.aligned.m64n192k16.f32.bf16.bf16" in art.ptx and "m64n256k16" not in art.ptx


@pytest.mark.fast
def test_step_5s_check_admits_every_wgmma_width_its_epilogue_can_store():
    """tile_n in multiples of 16 from 64 to 256 for steps 5-11; epi_n in multiples of 16 from step 4
    on. On the H200 (results/logs/20261202T0029_check_tile_widths.log) 144, 160, 176, 208, 224 and
    240 were correct; epi_n = 8 wrote wrong values and epi_n = 88 faulted; 168 aborts the compiler
    (results/logs/20261202T0105_compile_tile_168.log)."""
    for key in ("sm90/5", "sm90/8", "sm90/11"):
        step = ladder.get(key)
        for tile_n in (80, 112, 144, 160, 176, 208, 224, 240):
            config = step.config(tile_n=tile_n, epi_n=16, epi_stages=1, stages=3)
            assert step.check_config(config) == (True, ""), (key, tile_n)
        for tile_n in (168, 272, 48, 200):
            ok, why = step.check_config(step.config(tile_n=tile_n, epi_n=8, epi_stages=1, stages=3))
            assert not ok and why.startswith("tile_n must be a multiple of 16"), (key, tile_n, why)
    for key in ("sm90/4", "sm90/7", "sm90/11"):
        step = ladder.get(key)
        for tile_n, epi_n in ((256, 8), (192, 24), (176, 88)):
            if key == "sm90/4" and tile_n not in (64, 128, 256):
                continue  # step 4's own check takes the widths of steps 2-4 only
            ok, why = step.check_config(step.config(tile_n=tile_n, epi_n=epi_n, epi_stages=1))
            assert not ok and why.startswith("epi_n must be a multiple of 16"), (key, tile_n, epi_n, why)


@pytest.mark.compile
def test_a_176_wide_tile_compiles_with_one_wgmma_and_one_store():
    """The width cuBLAS's 168-wide kernel suggests for 2304 x 2304 (168 does not compile: stmatrix
    takes 16 columns): one m64n176k16 per warpgroup and k16 step, no spills. The staging rows are
    tiled by swizzle atoms of the widest of 64, 32 or 16 columns that divides epi_n, and the TMA store
    goes out one atom-wide box at a time: 176 = 11 x 16 columns, eleven stores per tile."""
    from gemm_course.runtime import arch
    from gemm_course.teaching import inspect

    step = ladder.get("sm90/11")
    config = step.config(tile_n=176, epi_n=176, epi_stages=1, stages=4)
    art = arch.compile_step(step, config, "sm_90a")
    assert "wgmma.mma_async.sync.aligned.m64n176k16.f32.bf16.bf16" in art.ptx
    assert "m64n256k16" not in art.ptx and "m64n192k16" not in art.ptx
    assert inspect.ptx_count(art.ptx, "cp.async.bulk.tensor.2d.global.shared::cta") == 11
    assert not inspect.report(art).resources.spills


@pytest.mark.compile
@pytest.mark.parametrize("key,tile_n", [("sm90/11", n) for n in (80, 96, 112, 144, 160, 208, 224, 240)]
                         + [("sm90/5", 176), ("sm90/8", 176), ("sm90/10", 208)])
def test_every_admitted_width_compiles(key, tile_n):
    """Each width step 5's check admits compiles to one wgmma of that N per warpgroup and k16 step,
    without spills (the widths not run on a GPU are at least compiled)."""
    from gemm_course.runtime import arch
    from gemm_course.teaching import inspect

    step = ladder.get(key)
    epi_n = 16 if tile_n % 32 else 32
    stages = (227 * 1024 - 128 * epi_n * 2 - 3 * 1024) // ((128 + tile_n) * 64 * 2)
    config = step.config(tile_n=tile_n, epi_n=epi_n, epi_stages=1, stages=min(stages, 6))
    assert step.check_config(config) == (True, "")
    art = arch.compile_step(step, config, "sm_90a")
    assert f"wgmma.mma_async.sync.aligned.m64n{tile_n}k16.f32.bf16.bf16" in art.ptx
    assert not inspect.report(art).resources.spills
