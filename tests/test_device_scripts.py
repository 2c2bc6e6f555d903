"""The prepared device run (scripts/gpu_decode12.sh), dry on the CPU: every command it would run names
steps, shapes, variants and files that exist and that the steps take, so a rare device call is not
spent on a typo. ``python3`` is a stand-in that logs its arguments (and the code it is fed); each
logged command is then checked here with the course's own parsers and rules."""

import os
import pathlib
import subprocess

import pytest
from conftest import import_script

from gemm_course import cli
from gemm_course.measure import b200, sweep_shapes
from gemm_course.rules import schedule
from gemm_course.runtime import ladder, run
from gemm_course.runtime.problem import GemmProblem

pytestmark = pytest.mark.fast

ROOT = pathlib.Path(__file__).resolve().parent.parent

FAKE_PY = r'''#!/bin/bash
n=$(ls "$LOG"/*.args 2>/dev/null | wc -l)
printf '%s\n' "$@" > "$LOG/$n.args"
if [ "$1" = "-" ]; then cat > "$LOG/$n.stdin"; fi
exit 0
'''


def logged_commands(tmp_path, *phases):
    """[(argv, stdin or None)] of every python3 call ``gpu_decode12.sh OUT phases...`` makes, in order."""
    bin_dir, log = tmp_path / "bin", tmp_path / "log"
    bin_dir.mkdir()
    log.mkdir()
    fake = bin_dir / "python3"
    fake.write_text(FAKE_PY)
    fake.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "LOG": str(log)}
    done = subprocess.run(["bash", str(ROOT / "scripts" / "gpu_decode12.sh"), str(tmp_path / "out"), *phases], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    calls = []
    for i in range(len(list(log.glob("*.args")))):
        stdin = log / f"{i}.stdin"
        calls.append(((log / f"{i}.args").read_text().splitlines(), stdin.read_text() if stdin.exists() else None))
    return calls


def option(argv, name):
    """The values after ``name`` up to the next option."""
    i = argv.index(name) + 1
    j = next((j for j in range(i, len(argv)) if argv[j].startswith("--")), len(argv))
    return argv[i:j]


def takes(step, shape, config=None):
    problem = GemmProblem(*shape)
    config = config if config is not None else step.config_for(problem)
    ok, why = step.can_implement(problem, config)
    assert ok, f"{step.key} {problem.label}: {why}"
    step.load().Gemm(config)  # the kernel object its launch would build (nothing compiled)


def test_the_check_phase_checks_real_shapes_and_variants_and_runs_existing_tests(tmp_path, monkeypatch):
    calls = logged_commands(tmp_path, "check")
    (code,) = [stdin for argv, stdin in calls if argv == ["-"]]
    checked = []

    def check(step, shapes, config=None, seed=None):
        for shape in shapes:
            takes(ladder.get(step), shape, config)
            checked.append((shape, config))
        return [run.CheckResult(ladder.get(step).key, tuple(s), 1e-3, True) for s in shapes]

    monkeypatch.setattr(run, "check", check)
    with pytest.raises(SystemExit) as done:
        exec(compile(code, "gpu_decode12.sh:check", "exec"), {"__name__": "__main__"})
    assert done.value.code == 0 and len(checked) >= 12 + 5 * 4
    assert any(s[0] == 1 for s, _ in checked) and any(s[0] > 256 for s, _ in checked)  # M = 1, and past the swap
    long_k = [(s, c) for s, c in checked if c is not None and -(-s[2] // c.tile_k) >= schedule.LOCKSTEP_K_TILES]
    assert {c.lockstep for _, c in long_k} == {False, True}  # a long K loop with the classic tail and with lockstep
    pytest_calls = [argv for argv, _ in calls if argv[:2] == ["-m", "pytest"]]
    assert pytest_calls
    files = [a for a in pytest_calls[0] if a.endswith(".py")]
    assert "tests/test_swap_ab.py" in files and all((ROOT / f).exists() for f in files)
    scripts = [argv[0] for argv, _ in calls if argv[0].startswith("scripts/")]
    assert scripts and all((ROOT / s).exists() for s in scripts)


def test_the_bench_and_graph_phases_name_shapes_the_steps_take(tmp_path):
    calls = logged_commands(tmp_path, "bench", "graphs", "reversed")
    forward, reversed_ = [cli.build_parser().parse_args(argv[2:]) for argv, _ in calls
                          if argv[:3] == ["-m", "gemm_course", "bench"]]
    assert forward.rotate and forward.tag == "decode12" and forward.out
    shapes = cli._shapes(forward.shapes)
    assert sorted({m for m, _, _ in shapes}) == [1, 8, 16, 32, 64, 128, 256]
    assert shapes == sweep_shapes.decode12_shapes()  # the B200 kit's decode run times the same shapes
    for key in forward.steps:
        for shape in shapes:
            takes(ladder.get(key), shape)
    assert reversed_.rotate and reversed_.tag == "decode12_reversed"  # the same run, in the other order
    assert reversed_.steps == forward.steps[::-1] and cli._shapes(reversed_.shapes) == shapes[::-1]
    (graph,) = [argv for argv, _ in calls if argv[0] == "scripts/gpu_decode_graph.py"]
    assert option(graph, "--shapes") == list(b200.DECODE_GRAPH_SHAPES)  # and the same inside graphs
    for key in option(graph, "--steps"):
        for shape in cli._shapes(option(graph, "--shapes")):
            takes(ladder.get(key), shape)
    (kernels,) = [argv for argv, _ in calls if argv[0] == "scripts/cublas_kernels.py"]
    assert option(kernels, "--out") and cli._shapes([a for a in kernels[1:] if a[0].isdigit()])  # records kept


def test_the_tune_phase_names_variants_the_steps_take(tmp_path):
    gpu_tune = import_script("gpu_tune")
    runs = [argv for argv, _ in logged_commands(tmp_path, "tune") if argv[0] == "scripts/gpu_tune.py"]
    assert len(runs) == 2 and len({tuple(option(argv, "--out")) for argv in runs}) == 2  # neither overwrites the other's rows
    for argv in runs:
        specs = [a for a in argv[1:] if a.startswith("sm")]
        assert "sm90/12" in specs and "sm90/11" in specs
        for spec in specs:
            step, changes = gpu_tune.variant(spec)
            for shape in cli._shapes(option(argv, "--shapes")):
                takes(step, shape, gpu_tune.config_on(step, changes, GemmProblem(*shape)))


@pytest.mark.parametrize("phase", ["tune_prefetch", "tune_more", "tune_256b", "tune_handover", "tune_rows_in_n",
                                   "tune_partial_m", "m1_late", "w_early", "m1_w", "w_more", "split2048"])
def test_each_prepared_ab_names_variants_the_steps_take(tmp_path, phase):
    """Every variant of the A/B phases prepared for the next device run is a config its step accepts and
    takes at each of the phase's shapes (gpu_tune.py would stop at the first it refuses)."""
    gpu_tune = import_script("gpu_tune")
    runs = [argv for argv, _ in logged_commands(tmp_path, phase) if argv[0] == "scripts/gpu_tune.py"]
    assert runs and len({tuple(option(argv, "--out")) for argv in runs}) == len(runs)  # none overwrites another's rows
    for argv in runs:
        specs = [a for a in argv[1:] if a.startswith("sm")]
        assert "sm90/12" in specs and len(specs) >= 2  # the rule and at least one variant
        for spec in specs:
            step, changes = gpu_tune.variant(spec)
            for shape in cli._shapes(option(argv, "--shapes")):
                takes(step, shape, gpu_tune.config_on(step, changes, GemmProblem(*shape)))


@pytest.mark.parametrize("phase", ["graphs_prefetch", "graphs_launch", "graphs_m1_second", "m1_late", "w_early", "m1_w",
                                   "w_more", "split2048"])
def test_the_graph_ab_keeps_its_records_apart_from_the_chapters(tmp_path, phase):
    graph_script = import_script("gpu_decode_graph")
    runs = [argv for argv, _ in logged_commands(tmp_path, phase) if argv[0] == "scripts/gpu_decode_graph.py"]
    assert runs and len({tuple(option(argv, "--tag")) for argv in runs}) == len(runs)  # each A/B its own records
    for argv in runs:
        assert option(argv, "--kind") == ["decode_graph_ab"]  # viz.memory_roofline reads kind decode_graph
        for spec in option(argv, "--steps"):
            for shape in cli._shapes(option(argv, "--shapes")):
                step, config = graph_script.step_config(spec, GemmProblem(*shape))
                takes(step, shape, config)
