"""GPU tests (marked `gpu`; skipped without a GPU): correctness of every runnable step on many
random shapes with poisoned outputs, refusal of what a step cannot take, and a bench record."""

import pytest

from gemm_course import arch, ladder, run

pytestmark = pytest.mark.gpu


def _runnable():
    target = arch.machine().target
    return [s for s in ladder.steps() if (s.target == target and not s.any_shape) or (s.any_shape and s.arch == arch.TARGET_ARCH.get(target))]


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


def test_gpc_order_is_a_permutation_and_every_tile_is_computed():
    """The probed cluster order permutes the cluster indices; with it, multi-wave grids stay correct."""
    if arch.machine().target != "sm_90a":
        pytest.skip("a Hopper kernel")
    from gemm_course import placement
    from gemm_course.kernels.sm90 import step08_persistent

    clusters = step08_persistent.max_clusters(2)
    assert sorted(placement.cluster_order(2, clusters)) == list(range(clusters))
    step = ladder.get("sm90/9")  # grouped order, knob turned on (step 10 has it on by default)
    config = step.config(gpc_order=True)
    results = run.check(step, [(4096, 4096, 512), (2048, 8192, 136), (8192, 4096, 1000)], config, seed=5)
    bad = [str(r) for r in results if not r.ok]
    assert not bad, bad


def test_refuses_shape_before_launch():
    import torch

    from gemm_course.problem import GemmInputError

    a = torch.randn(100, 64, device="cuda").to(torch.bfloat16)
    b = torch.randn(256, 64, device="cuda").to(torch.bfloat16)
    with pytest.raises(GemmInputError, match="step 4"):
        run.gemm("sm90/2" if arch.machine().target == "sm_90a" else "sm100/2", a, b)


def test_refuses_other_architecture():
    import torch

    from gemm_course.problem import GemmInputError

    other = "sm100/2" if arch.machine().target == "sm_90a" else "sm90/2"
    a = torch.randn(128, 64, device="cuda").to(torch.bfloat16)
    b = torch.randn(256, 64, device="cuda").to(torch.bfloat16)
    with pytest.raises(GemmInputError, match="built for"):
        run.gemm(other, a, b)


def test_bench_record_has_same_run_cublas(tmp_path):
    from gemm_course import bench
    from gemm_course.problem import GemmProblem

    step = [s for s in _runnable() if not s.any_shape][-1]
    rec = bench.bench_step(step, GemmProblem.square(2048), repeats=10, rounds=2, command="pytest")
    assert rec["rel_error"] < 1e-2
    assert rec["cublas_tflops"]["median"] > 50 and rec["tflops"]["median"] > 1
    path = bench.write_records([rec], "pytest", out_dir=str(tmp_path))
    assert bench.load_records(str(tmp_path.parent)) or path


@pytest.mark.skipif(arch.machine().target != "sm_90a", reason="the stream-K tail is in the Hopper steps")
@pytest.mark.parametrize("key", ["sm90/8", "sm90/10"])
def test_stream_k_tail_is_correct_launch_after_launch(key):
    """Shapes whose last wave is split along K (hand-over through the workspace), launched three
    times on one workspace: every launch must leave the flags ready for the next."""
    import torch

    from gemm_course import schedule
    from gemm_course.kernels.sm90.step08_persistent import max_clusters
    from gemm_course.problem import GemmProblem, make_inputs, reference, relative_error

    step = ladder.get(key)
    clusters = max_clusters(step.default.cluster_m * step.default.cluster_n)
    shapes = [(8192, 8192, 8192), (5000, 3000, 3000), (8000, 8104, 4000), (2999, 12288, 6000), (1024, 2048, 4096), (700, 1496, 5000)]
    for m, n, k in shapes:  # the last two have fewer tiles than clusters: the split spreads them over all
        tiles, k_tiles = -(-m // 256) * -(-n // 256), -(-k // 64)
        launched = schedule.grid_clusters(tiles, clusters, k_tiles)
        assert schedule.split_tail(tiles, launched, k_tiles)[1] > 0, (m, n, k)  # the tail is split
        a, b, c = make_inputs(GemmProblem(m, n, k), "cuda", seed=m + n + k)
        ref = reference(a, b)
        launch = run.prepare(step, a, b, c)
        for _ in range(3):
            c.fill_(float("nan"))
            launch()
            torch.cuda.synchronize()
            assert relative_error(c, ref) < run.TOLERANCE
        assert int(launch.workspace[1].abs().sum()) == 0  # every flag reset by its finisher
