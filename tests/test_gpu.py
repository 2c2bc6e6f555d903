"""GPU tests (marked `gpu`; skipped without a GPU): correctness of every runnable step on many
random shapes with poisoned outputs, refusal of what a step cannot take, and a bench record."""

import pytest

from gemm_course.runtime import arch, ladder, run

pytestmark = pytest.mark.gpu


def _runnable():
    target = arch.machine().target
    own = arch.TARGET_ARCH.get(target)
    return [s for s in ladder.steps() if (s.target == target and not s.any_shape) or (s.any_shape and s.arch == own)]


@pytest.mark.parametrize("step", _runnable() if arch.machine().target else [], ids=lambda s: s.key)
def test_step_is_correct_on_random_shapes(step):
    shapes = run.shapes_for(step, count=6, seed=step.number)
    if step.any_shape:
        shapes = [s for s in shapes if s[0] * s[1] * s[2] <= 2**31]
    results = run.check(step, shapes, seed=1234)
    bad = [str(r) for r in results if not r.ok]
    assert not bad, bad
    assert len(results) >= 6


@pytest.mark.parametrize("key,fields", [("sm90/5", {"mma_n": 64}), ("sm90/10", {"mma_n": 128})])
def test_smaller_wgmma_instructions_are_correct(key, fields):
    """Several wgmma per warpgroup and k16 step: the epilogue must still read the accumulator in order."""
    if arch.machine().target != "sm_90a":
        pytest.skip("a Hopper kernel")
    step = ladder.get(key)
    config = step.config(**fields)
    results = run.check(step, run.shapes_for(step, config, count=4, seed=7), config, seed=99)
    bad = [str(r) for r in results if not r.ok]
    assert not bad, bad


@pytest.mark.parametrize("tile_n", [176, 208])
def test_tile_widths_between_the_rules_are_correct(tile_n):
    """Widths that are multiples of 16 but not of 64 (step 5's check admits them; the tile rule picks
    none today): wgmma N = tile_n, B multicast in halves of tile_n / 2 rows, one tile-wide store."""
    if arch.machine().target != "sm_90a":
        pytest.skip("a Hopper kernel")
    step = ladder.get("sm90/11")
    config = step.config(tile_n=tile_n, epi_n=tile_n, epi_stages=1, stages=4, cluster_m=2, cluster_n=1)
    shapes = run.shapes_for(step, config, count=4, seed=tile_n) + [(2304, 2304, 9216), (3072, 1024, 8192)]
    results = run.check(step, shapes, config, seed=tile_n)
    bad = [str(r) for r in results if not r.ok]
    assert not bad, bad


def test_gpc_order_is_a_permutation_and_every_tile_is_computed():
    """The probed cluster order permutes the cluster indices; with it, multi-wave grids stay correct."""
    if arch.machine().target != "sm_90a":
        pytest.skip("a Hopper kernel")
    from gemm_course.kernels.sm90 import step08_persistent
    from gemm_course.rules import placement

    clusters = step08_persistent.max_clusters(2)
    assert sorted(placement.cluster_order(2, clusters)) == list(range(clusters))
    step = ladder.get("sm90/11")  # gpc_order on by default; the grouped order too
    config = step.config(gpc_order=True, stream_k=False)
    results = run.check(step, [(4096, 4096, 512), (2048, 8192, 136), (8192, 4096, 1000)], config, seed=5)
    bad = [str(r) for r in results if not r.ok]
    assert not bad, bad


def test_refuses_shape_before_launch():
    import torch

    from gemm_course.runtime.problem import GemmInputError

    a = torch.randn(100, 64, device="cuda").to(torch.bfloat16)
    b = torch.randn(256, 64, device="cuda").to(torch.bfloat16)
    with pytest.raises(GemmInputError, match="step 4"):
        run.gemm("sm90/2" if arch.machine().target == "sm_90a" else "sm100/2", a, b)


def test_refuses_other_architecture():
    import torch

    from gemm_course.runtime.problem import GemmInputError

    other = "sm100/2" if arch.machine().target == "sm_90a" else "sm90/2"
    a = torch.randn(128, 64, device="cuda").to(torch.bfloat16)
    b = torch.randn(256, 64, device="cuda").to(torch.bfloat16)
    with pytest.raises(GemmInputError, match="built for"):
        run.gemm(other, a, b)


def test_bench_record_has_same_run_cublas(tmp_path):
    from gemm_course.measure import bench, records
    from gemm_course.runtime.problem import GemmProblem

    step = [s for s in _runnable() if not s.any_shape][-1]
    rec = bench.bench_step(step, GemmProblem.square(2048), repeats=10, rounds=2, command="pytest")
    assert rec["rel_error"] < 1e-2
    assert rec["cublas_tflops"]["median"] > 50 and rec["tflops"]["median"] > 1
    path = bench.write_records([rec], "pytest", out_dir=str(tmp_path))
    assert records.load_records(str(tmp_path.parent)) or path


@pytest.mark.skipif(arch.machine().target != "sm_90a", reason="the stream-K tail is in the Hopper steps")
@pytest.mark.parametrize("key", ["sm90/11"])
def test_stream_k_tail_is_correct_launch_after_launch(key):
    """Shapes whose last wave is split along K (hand-over through the workspace), launched three
    times on one workspace: every launch must leave the flags ready for the next."""
    import torch

    from gemm_course.kernels.sm90.step08_persistent import max_clusters
    from gemm_course.rules import schedule
    from gemm_course.runtime.problem import GemmProblem, make_inputs, reference, relative_error

    step = ladder.get(key)
    clusters = max_clusters(step.default.cluster_m * step.default.cluster_n)
    shapes = [(8192, 8192, 8192), (5000, 3000, 3000), (8000, 8104, 4000), (2999, 12288, 6000), (1024, 2048, 4096),
              (700, 1496, 5000), (2048, 1000, 16384), (5000, 3000, 10000)]
    # (1024, 2048, 4096), (700, 1496, 5000) and (2048, 1000, 16384) have fewer tiles than clusters: the split
    # spreads them over the GPU; (2048, 1000, 16384) and (5000, 3000, 10000) (157 K tiles) run it in lockstep
    lockstep = {(2048, 1000, 16384), (5000, 3000, 10000)}
    for m, n, k in shapes:
        tiles, k_tiles = -(-m // 256) * -(-n // 256), -(-k // 64)
        launched = schedule.grid_clusters(tiles, clusters, k_tiles)
        assert schedule.split_tail(tiles, launched, k_tiles)[1] > 0, (m, n, k)  # the tail is split
        assert (schedule.split_tail(tiles, launched, k_tiles)[2] > 0) == ((m, n, k) in lockstep), (m, n, k)
        a, b, c = make_inputs(GemmProblem(m, n, k), "cuda", seed=m + n + k)
        ref = reference(a, b)
        launch = run.prepare(step, a, b, c, step.default)  # the 128 x 256 tile the tail counts above assume
        for _ in range(3):
            c.fill_(float("nan"))
            launch()
            torch.cuda.synchronize()
            assert relative_error(c, ref) < run.TOLERANCE
        assert int(launch.workspace[1].abs().sum()) == 0  # every flag reset by its finisher


@pytest.mark.skipif(arch.machine().target != "sm_90a", reason="the tile rule is step 11's, a Hopper kernel")
def test_every_tile_the_rule_chooses_is_correct():
    """Step 11 without a config runs the tile ``tile_rule`` picks for each shape: shapes that make it
    pick each width and each pipeline (ragged edges, stream-K tails, all-tail grids), every one checked."""
    from gemm_course.kernels.sm90.step08_persistent import max_clusters
    from gemm_course.rules import tile_rule
    from gemm_course.runtime.problem import GemmProblem

    step = ladder.get("sm90/11")
    shapes = [(3072, 3072, 3072), (1000, 3000, 8000), (4096, 1536, 4104), (1024, 2048, 32768), (1024, 1024, 8200),
              (2304, 2304, 9216), (3072, 1024, 32768), (2048, 2048, 16384), (4096, 4096, 4096), (777, 1544, 2048),
              (1000, 1000, 16384)]
    chosen = {step.config_for(GemmProblem(*shape)) for shape in shapes}
    clusters = max_clusters(tile_rule.CLUSTER_SIZE)
    picks = {tile_rule.choose(m, n, k, clusters) for m, n, k in shapes}
    assert {c.tile_n for c in picks} == set(tile_rule.TILE_NS), picks  # the shapes reach every width
    assert len(chosen) == len(picks) >= 4
    results = run.check(step, shapes, seed=31)
    bad = [str(r) for r in results if not r.ok]
    assert not bad, bad


# ---------------------------------------------------------------------------------------------
# Blackwell (sm_100a): what the generic random-shape test above does not reach
# ---------------------------------------------------------------------------------------------

sm100 = pytest.mark.skipif(arch.machine().target != "sm_100a", reason="a Blackwell kernel: needs sm_100a")


def _ids(value):  # "sm100/9", "group=16", "default"
    return value if isinstance(value, str) else ",".join(f"{k}={v}" for k, v in value.items()) or "default"


PARTIAL = [(200, 264, 136), (1000, 1000, 1000), (129, 520, 72), (65, 264, 8), (1, 8, 8)]  # M % 128, N % 256 != 0


def _check_sm100(key, shapes, config=None, seed=0):
    """Every shape must be one the step accepts (a refusal must not pass as a test), then checked."""
    from gemm_course.runtime.problem import GemmProblem

    step = ladder.get(key)
    config = step.default if config is None else config
    for shape in shapes:
        ok, why = step.can_implement(GemmProblem(*shape), config)
        assert ok, (key, shape, why)
    results = run.check(step, shapes, config, seed=seed)
    bad = [str(r) for r in results if not r.ok]
    assert not bad, (config, bad)


@sm100
@pytest.mark.parametrize("key", ["sm100/2", "sm100/3"])
def test_sm100_k_not_a_multiple_of_the_k_tile(key):
    """K = 72 and 200: the last 64-wide K tile is partial; TMA zero-fills it and the MMAs run over it."""
    _check_sm100(key, [(128, 256, 72), (192, 512, 200), (64, 256, 8)], seed=3)


@sm100
@pytest.mark.parametrize("key,fields", [(f"sm100/{n}", {}) for n in range(4, 12)] + [("sm100/4", {"tile_m": 128})],
                         ids=_ids)
def test_sm100_partial_tiles_are_clipped_by_the_tma_store(key, fields):
    """M not a multiple of 128 and N not a multiple of 256: the TMA store must write only inside C."""
    step = ladder.get(key)
    _check_sm100(key, PARTIAL, step.config(**fields), seed=11)


@sm100
@pytest.mark.parametrize("key", [f"sm100/{n}" for n in range(5, 12)])
@pytest.mark.parametrize("cluster", [(2, 1), (2, 2), (4, 1), (4, 2)], ids=lambda c: f"cluster{c[0]}x{c[1]}")
def test_sm100_every_cluster_shape_on_a_ragged_grid(key, cluster):
    """CTA grids (tiles of 128 x 256) that are not multiples of the cluster: 5 x 3, 9 x 5, 1 x 1 tiles,
    so whole CTAs of a cluster (even a pair's peer) have no rows or no columns of C."""
    step = ladder.get(key)
    config = step.config(cluster_m=cluster[0], cluster_n=cluster[1])
    _check_sm100(key, [(640, 768, 200), (1100, 1032, 72), (128, 256, 64)], config, seed=21)


@sm100
@pytest.mark.parametrize("tiles_per_cta", [1, 2, 4], ids=lambda v: f"tiles_per_cta={v}")
@pytest.mark.parametrize("acc_stages", [1, 2], ids=lambda v: f"acc_stages={v}")
def test_sm100_step7_tiles_per_cta_and_accumulators(tiles_per_cta, acc_stages):
    """6, 10 and 2 tiles along N: a CTA at the right edge gets fewer than tiles_per_cta."""
    step = ladder.get("sm100/7")
    config = step.config(tiles_per_cta=tiles_per_cta, acc_stages=acc_stages)
    _check_sm100("sm100/7", [(640, 1288, 200), (256, 2312, 136), (300, 264, 64)], config, seed=31)


def _launch_three_times(step, config, shape, after=None):
    """One launcher, three launches, the output poisoned before each and checked after;
    ``after(launcher)`` must hold after each launch too (e.g. a workspace left ready)."""
    import torch

    from gemm_course.runtime.problem import GemmProblem, make_inputs, reference, relative_error

    a, b, c = make_inputs(GemmProblem(*shape), "cuda", seed=sum(shape))
    ref = reference(a, b)
    launch = run.prepare(step, a, b, c, config)
    for _ in range(3):
        c.fill_(float("nan"))
        launch()
        torch.cuda.synchronize()
        assert relative_error(c, ref) < run.TOLERANCE, (step.key, config, shape)
        assert after is None or after(launch), (step.key, config, shape)


CLC_FEW = [(256, 256, 64), (512, 512, 1000)]  # 1 and 4 clusters, all resident: every try_cancel fails
CLC_MANY = [(8192, 8192, 256), (8000, 8104, 136)]  # ~1000 clusters: most tiles come from cancellations


@sm100
@pytest.mark.parametrize("key,fields", [("sm100/8", {}), ("sm100/8", {"cluster_m": 4}), ("sm100/9", {}),
                                        ("sm100/9", {"group": 1}), ("sm100/9", {"group": 16}), ("sm100/10", {}),
                                        ("sm100/11", {}), ("sm100/11", {"stream_k": False})],
                         ids=_ids)
def test_sm100_clc_grids_below_one_wave_and_of_many_waves(key, fields):
    """Cluster launch control: fewer tiles than SMs (cancellations fail at once) and many waves
    (they win), each launched three times on one launcher, output poisoned before each."""
    import torch

    step = ladder.get(key)
    config = step.config(**fields)
    pairs_at_once = torch.cuda.get_device_properties(0).multi_processor_count // (config.cluster_m * config.cluster_n)
    clusters = lambda m, n: -(-m // (128 * config.cluster_m)) * -(-n // (256 * config.cluster_n))  # noqa: E731
    assert all(clusters(m, n) < pairs_at_once for m, n, _ in CLC_FEW)
    assert all(clusters(m, n) > 4 * pairs_at_once for m, n, _ in CLC_MANY)
    for shape in CLC_FEW + CLC_MANY:
        _launch_three_times(step, config, shape)


# 2, 3 and 4 parts per tail tile on a B200 (schedule.tail_parts with 74 clusters), one with ragged edges
SPLIT_TAILS = [(4096, 4096, 4096), (1000, 1000, 4000), (1024, 1024, 8192), (256, 256, 28672)]


@sm100
@pytest.mark.parametrize("cluster", [(2, 1), (4, 1), (2, 2)], ids=lambda c: f"cluster{c[0]}x{c[1]}")
def test_sm100_split_tail_is_correct_launch_after_launch(cluster):
    """Step 11's tail cut along K: every tail part's hand-over, three launches on one workspace,
    output poisoned before each; every counter and flag must be back at zero after each launch."""
    from gemm_course.kernels.sm100.step11_beyond_the_seed import resident_clusters
    from gemm_course.rules import schedule

    step = ladder.get("sm100/11")
    config = step.config(cluster_m=cluster[0], cluster_n=cluster[1])
    seen = set()
    for m, n, k in SPLIT_TAILS:
        tiles = -(-m // (128 * cluster[0])) * -(-n // (256 * cluster[1]))
        seen.add(schedule.tail_parts(tiles, resident_clusters(config), -(-k // 64)))
        _launch_three_times(step, config, (m, n, k), after=lambda launch: not any(
            int(w.abs().sum()) for w in launch.workspace[1:]))  # every counter and flag back at zero
    if cluster == (2, 1):
        assert seen == {2, 3, 4}  # every part count the rule can pick ran
    assert max(seen) > 1  # a tail was split


@sm100
@pytest.mark.parametrize("key,shape", [
    ("sm100/2", (100, 256, 64)),  # M not a multiple of 64: step 2 stores whole tiles
    ("sm100/3", (64, 200, 64)),  # N not a multiple of 256
    *[(f"sm100/{n}", (128, 100, 64)) for n in range(4, 11)],  # N not a multiple of 8: C's rows for TMA
    ("sm100/10", (128, 256, 100)),  # K not a multiple of 8: A's and B's rows
], ids=lambda v: "x".join(map(str, v)) if isinstance(v, tuple) else v)
def test_sm100_refused_shapes_raise_before_launch(key, shape):
    """The refusal comes before any launch: the poisoned output is left untouched."""
    import torch

    from gemm_course.runtime.problem import GemmInputError

    m, n, k = shape
    a = torch.randn(m, k, device="cuda").to(torch.bfloat16)
    b = torch.randn(n, k, device="cuda").to(torch.bfloat16)
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    with pytest.raises(GemmInputError, match="step 4" if key in ("sm100/2", "sm100/3") else "multiple of 8"):
        run.gemm(key, a, b, c)
    torch.cuda.synchronize()
    assert torch.isnan(c).all()


@sm100
def test_sm100_refused_config_raises_before_launch():
    """Three 256-column accumulators do not fit in tensor memory's 512 columns: refused, not launched."""
    import torch

    from gemm_course.runtime.problem import GemmInputError

    step = ladder.get("sm100/7")
    a = torch.randn(256, 64, device="cuda").to(torch.bfloat16)
    b = torch.randn(256, 64, device="cuda").to(torch.bfloat16)
    c = torch.full((256, 256), float("nan"), device="cuda", dtype=torch.bfloat16)
    with pytest.raises(GemmInputError, match="tensor memory"):
        run.gemm(step, a, b, c, step.config(acc_stages=3))
    assert torch.isnan(c).all()


@pytest.mark.parametrize("key", ["sm90/11", "sm100/11"])
def test_each_launcher_owns_its_workspace_and_concurrent_launchers_stay_correct(key):
    """Step 11's stream-K scratch (partial sums, counters, flags) belongs to one launcher, which launches
    on the stream it was prepared on; two launchers on two streams, launched together, never share it."""
    import torch

    from gemm_course.runtime.problem import GemmProblem, make_inputs, reference, relative_error

    step = ladder.get(key)
    if arch.machine().target != step.target:
        pytest.skip(f"a {step.target} kernel")
    shape = (1000, 1000, 4000)  # a split tail: the hand-over's counters and flags are used
    streams = [torch.cuda.Stream(), torch.cuda.Stream()]
    jobs = []
    for i, stream in enumerate(streams):
        a, b, c = make_inputs(GemmProblem(*shape), "cuda", seed=50 + i)
        with torch.cuda.stream(stream):
            launcher = run.prepare(step, a, b, c)
        jobs.append((launcher, a, b, c))
    ptrs = [{t.data_ptr() for t in launcher.workspace} for launcher, *_ in jobs]
    assert ptrs[0] and not ptrs[0] & ptrs[1], "two launchers must not share scratch"
    torch.cuda.synchronize()
    for _ in range(5):  # interleaved on two streams: both kernels can be resident together
        for launcher, *_ in jobs:
            launcher()
    torch.cuda.synchronize()
    for launcher, a, b, c in jobs:
        assert relative_error(c, reference(a, b)) < run.TOLERANCE
