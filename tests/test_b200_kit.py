"""The B200 kit on a machine without a B200: scripts/b200_validate.sh refuses quickly and cleanly,
its GPU check tells a B200 from a Hopper GPU, its dry run plans the right phases, and its record
copy and table work on records shaped like bench's."""

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gemm_course.measure import b200, records, sweep_shapes
from gemm_course.rules import schedule
from gemm_course.runtime import arch, ladder

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "b200_validate.sh"
B200 = arch.Machine("NVIDIA B200", (10, 0), 148, "sm_100a")
H200 = arch.Machine("NVIDIA H200", (9, 0), 132, "sm_90a")

not_on_a_b200 = pytest.mark.skipif(arch.machine().target == "sm_100a", reason="on a B200 the kit would really run")


def _results_listing():
    return sorted(str(p.relative_to(ROOT)) for p in (ROOT / "results").rglob("*"))


def _run_kit(tmp_path, **env):
    """The script as a reader runs it, with this interpreter; results/ redirected and watched."""
    results = tmp_path / "results"
    full_env = {k: v for k, v in os.environ.items() if k not in (b200.PRETEND, "DRY_RUN")}
    full_env.update(PY=sys.executable, GEMM_COURSE_RESULTS=str(results), **env)
    before = _results_listing()
    t0 = time.monotonic()
    proc = subprocess.run(["bash", str(SCRIPT), str(tmp_path / "out")], capture_output=True, text=True, env=full_env,
                          timeout=120)
    seconds = time.monotonic() - t0
    assert _results_listing() == before, "the kit wrote under results/"
    assert not results.exists() or not any(results.rglob("*")), "the kit wrote under GEMM_COURSE_RESULTS"
    return proc, seconds


@pytest.mark.fast
def test_script_parses():
    subprocess.run(["bash", "-n", str(SCRIPT)], check=True)


@pytest.mark.slow  # runs the kit in bash: about 2 s
@not_on_a_b200
def test_refuses_this_machine_quickly(tmp_path):
    proc, seconds = _run_kit(tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert seconds < 60
    text = proc.stdout + proc.stderr
    assert "b200_validate.sh stops:" in text and "sm_100a" in text
    assert "Hopper owners: scripts/gpu_ladder.sh" in text
    assert (tmp_path / "out" / "status.log").read_text().startswith("gpu_check: refused")


@pytest.mark.fast
def test_refuses_an_h200_with_the_hopper_hint(tmp_path):
    proc, seconds = _run_kit(tmp_path, GEMM_COURSE_PRETEND_GPU="NVIDIA H200,9.0,132")
    assert proc.returncode == 2 and seconds < 60
    message = proc.stdout.strip()
    assert "\n" not in message  # one paragraph, and nothing after it
    assert "device 0 is NVIDIA H200 (compute capability 9.0, course target sm_90a)" in message
    assert "compute capability 10.0 (B200, GB200)" in message
    assert "Hopper owners: scripts/gpu_ladder.sh" in message


@pytest.mark.parametrize("machine,ok", [
    (B200, True),
    (arch.Machine("NVIDIA B300", (10, 3), 148, arch._target_for_capability((10, 3))), False),  # sm_100a code runs on 10.0 only
    (H200, False),
    (arch.Machine("NVIDIA GeForce RTX 5090", (12, 0), 170, None), False),
    (arch.Machine(None, None, None, None), False),
])
@pytest.mark.fast
def test_check_machine(machine, ok):
    passed, message = b200.check_machine(machine)
    assert passed is ok
    if ok:
        assert "sm_100a" in message
    else:
        assert "Hopper owners: scripts/gpu_ladder.sh" in message and "10.0 (B200, GB200)" in message
        assert (machine.gpu_name or "no CUDA GPU") in message


@pytest.mark.fast
def test_a_b200_with_a_pytorch_without_its_kernels_is_refused():
    """cuBLAS (torch.mm) and the float32 reference need a PyTorch built for sm_100: without one every
    check would fail, so the kit stops before running anything and says what to install."""
    passed, message = b200.check_machine(B200, arch_list=["sm_80", "sm_90"])
    assert not passed and "not sm_100" in message and "CUDA 12.8 or newer" in message and "nothing was run" in message
    assert b200.check_machine(B200, arch_list=["sm_90", "sm_100", "sm_120"])[0]


@pytest.mark.fast
def test_pretended_gpu_goes_through_the_arch_table(monkeypatch):
    monkeypatch.setenv(b200.PRETEND, "NVIDIA B200,10.0,148")
    assert b200.present_machine() == B200 and b200.check_machine()[0]
    assert b200.slug() == "nvidia-b200"
    monkeypatch.setenv(b200.PRETEND, "NVIDIA H200,9.0")
    assert b200.present_machine().target == "sm_90a" and not b200.check_machine()[0]
    monkeypatch.setenv(b200.PRETEND, "none")
    assert not b200.present_machine().has_gpu


def _broad_sweep():
    from gemm_course.measure import bench

    return ["%dx%dx%d" % s for group in bench.broad_sweep_shapes().values() for s in group]


@pytest.mark.slow  # runs the kit in bash: about 1 s
def test_dry_run_on_a_pretended_b200_plans_every_phase(tmp_path):
    fake_bin = tmp_path / "bin"  # a compute-sanitizer on PATH, so the dry run plans the sanitizer too
    fake_bin.mkdir()
    (fake_bin / "compute-sanitizer").write_text("#!/bin/sh\nexit 99\n")
    (fake_bin / "compute-sanitizer").chmod(0o755)
    proc, _ = _run_kit(tmp_path, GEMM_COURSE_PRETEND_GPU="NVIDIA B200,10.0,148", DRY_RUN="1",
                       PATH=f"{fake_bin}{os.pathsep}{os.environ['PATH']}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    phases = re.findall(r"^== (\w+): (.*)$", out, flags=re.M)
    names = [name for name, _ in phases if name != "nvidia_smi"]  # planned only where nvidia-smi exists
    assert names == ["doctor", "stepwise", "pytest_gpu", "sanitize_racecheck", "sanitize_synccheck",
                     "ladder", "broad_sweep", "broad_sweep_reversed", "tail_ab", "decode12", "decode12_reversed",
                     "decode_graph", "decode_graph_launch", "copy"]
    cmd = dict(phases)
    tail = cmd["tail_ab"]  # the A/B the book and the kit's table read, as gemm_course.measure.b200 names it
    assert b200.tail_ab_command().replace('"', "") in tail.replace(str(tmp_path / "out"), "OUT")
    assert "-m pytest -q -m gpu -k not sm90 and not random_shapes" in cmd["pytest_gpu"]
    assert "tests/test_gpu.py" in cmd["pytest_gpu"]
    stepwise = cmd["stepwise"].split()
    assert stepwise[stepwise.index("run") + 2:stepwise.index("--sanitizer")] == [s.key for s in ladder.steps("sm100")]
    assert stepwise[stepwise.index("--sanitizer") + 1].endswith("compute-sanitizer")
    for tool in ("racecheck", "synccheck"):
        assert f"compute-sanitizer --tool {tool}" in cmd[f"sanitize_{tool}"]
        assert f"scripts/b200_sanitize.py {tool}" in cmd[f"sanitize_{tool}"]
    ladder_cmd = cmd["ladder"].split()
    # the decode step runs step 11's config at 4096 and 8192: timed at its own shapes only (decode12)
    compute_steps = [s.key for s in ladder.steps("sm100") if s.key != b200.decode_step_key()]
    assert [a for a in ladder_cmd if a.startswith("sm")] == compute_steps
    assert "--shapes 4096 8192 " in cmd["ladder"] and "--tag ladder" in cmd["ladder"]
    for name, order in (("broad_sweep", 1), ("broad_sweep_reversed", -1)):  # the broad sweep, both orders
        sweep = cmd[name].split()
        assert sweep[sweep.index("bench") + 1] == "sm100/11" and sweep[sweep.index("--tag") + 1] == name
        shapes = sweep[sweep.index("--shapes") + 1:sweep.index("--rounds")]
        assert shapes == _broad_sweep()[::order] and len(shapes) == 46
    decode = ["x".join(map(str, shape)) for shape in sweep_shapes.decode12_shapes()]
    for name, order, steps in (("decode12", 1, ["sm100/12", "sm100/11"]), ("decode12_reversed", -1, ["sm100/11", "sm100/12"])):
        bench = cmd[name].split()  # chapter 12's Blackwell table reads these tags (viz.memory_roofline.decode_table)
        assert bench[bench.index("bench") + 1:bench.index("--shapes")] == steps and "--rotate" in bench
        assert bench[bench.index("--shapes") + 1:bench.index("--rounds")] == decode[::order] and len(decode) == 35
        assert bench[bench.index("--tag") + 1] == name
    graph = cmd["decode_graph"].split()
    assert graph[graph.index("--steps") + 1:graph.index("--shapes")] == ["sm100/12", "sm100/11"]
    assert graph[graph.index("--shapes") + 1:] == list(b200.DECODE_GRAPH_SHAPES)
    launch = cmd["decode_graph_launch"].split()  # the early launch's A/B, kept apart from the chapter's records
    assert launch[launch.index("--kind") + 1] == "decode_graph_ab" and launch[launch.index("--tag") + 1] == "decode_graph_launch"
    assert launch[launch.index("--steps") + 1:launch.index("--shapes")] == list(b200.decode_launch_variants())
    assert launch[launch.index("--shapes") + 1:] == list(b200.DECODE_LAUNCH_SHAPES)
    assert "results/nvidia-b200/" in out and "pull request" in out and "results/logs/*_b200_*.log" in out


@pytest.mark.fast
def test_sanitizer_plan_covers_steps_5_to_8_with_partial_tiles_and_many_clusters():
    import importlib.util

    from gemm_course.runtime import ladder
    from gemm_course.runtime.problem import GemmProblem

    spec = importlib.util.spec_from_file_location("b200_sanitize", ROOT / "scripts" / "b200_sanitize.py")
    driver = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(driver)
    for tool in ("racecheck", "synccheck", "memcheck"):
        plan = driver.plan(tool)
        assert {key for key, _ in plan} == {"sm100/5", "sm100/6", "sm100/7", "sm100/8", "sm100/11"}
        for key, shape in plan:
            assert ladder.get(key).can_implement(GemmProblem(*shape))[0], (key, shape)
        # more pair-clusters than a B200 (148 SMs) holds at once, so CLC cancellations succeed
        assert any(key == "sm100/8" and (m // 256) * (n // 256) > 148 // 2 for key, (m, n, _) in plan)
    assert any(m % 128 and n % 256 for _, (m, n, _) in driver.plan("memcheck"))
    for key, (m, n, k) in driver.plan("memcheck"):  # step 11's shapes split their tail (the hand-over runs)
        if key == "sm100/11":
            assert schedule.tail_parts(-(-m // 256) * -(-n // 256), 74, -(-k // 64)) > 1, (m, n, k)


def _record(step, shape, tflops, cublas, rel_error=3e-3, gpu="NVIDIA B200"):
    m, n, k = shape
    return {"schema": 1, "kind": "bench", "step": step, "shape": {"m": m, "n": n, "k": k}, "gpu": gpu,
            "date": "2027-01-01T00:00:00+00:00", "tflops": {"median": tflops}, "cublas_tflops": {"median": cublas},
            "ratio_to_cublas": tflops / cublas, "rel_error": rel_error, "config": None,
            "protocol": {"rounds": 5, "repeats": 100}}


def _write(folder, name, records):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(json.dumps({"schema": 1, "records": records}))


@pytest.mark.fast
def test_copy_puts_records_where_the_book_reads_them(tmp_path):
    out, results = tmp_path / "out", tmp_path / "results"
    _write(out, "20270101T000000Z_ladder.json", [_record("sm100/10", (4096,) * 3, 1500.0, 1600.0)])
    _write(out, "20270101T000100Z_sweep.json", [_record("sm100/10", (2048,) * 3, 900.0, 1000.0, rel_error=0.5)])
    done = {os.path.basename(src): (dest, why) for src, dest, why in b200.copy_records(str(out), str(results))}
    dest, why = done["20270101T000000Z_ladder.json"]
    assert why == "copied" and Path(dest) == results / "nvidia-b200" / "20270101T000000Z_ladder.json"
    assert done["20270101T000100Z_sweep.json"][0] is None  # a wrong output: not copied
    loaded = records.load_records(str(results))
    assert [r["step"] for r in loaded] == ["sm100/10"] and loaded[0]["_file"].startswith("results/nvidia-b200/")
    assert b200.copy_records(str(out), str(results))[0][2] == "already there"


@pytest.mark.fast
def test_table_lists_the_ladder_and_the_sweep(tmp_path):
    records = [_record(f"sm100/{n}", (s,) * 3, 100.0 * n, 1500.0) for n in (1, 2, 10, 11) for s in (4096, 8192)]
    _write(tmp_path, "20270101T000000Z_ladder.json", records)
    _write(tmp_path, "20270101T000100Z_sweep.json",
           [_record("sm100/10", (2048,) * 3, 900.0, 1000.0), _record("sm100/10", (8192, 4096, 28672), 1500.0, 1400.0)])
    text = b200.table(str(tmp_path))
    lines = text.splitlines()
    assert lines[0].split()[:3] == ["step", "4096x4096x4096", "ratio"]
    assert [line.split()[0] for line in lines[1:6]] == ["sm100/1", "sm100/2", "sm100/10", "sm100/11", "cuBLAS"]
    # step 11 against its parent, beside what the tail model expected (1100 / 1000 TFLOP/s here)
    assert "sm100/11 over sm100/10 at 4096x4096x4096: 1.100 (the tail model: 1.067, 2 parts per tail tile)" in text
    assert "sm100/11 over sm100/10 at 8192x8192x8192: 1.100 (the tail model: 1.000, 1 part per tail tile)" in text
    assert "sweep sm100/10: 2 shapes" in text and "min 0.900 (2048x2048x2048)" in text
    _write(tmp_path, "20270101T000200Z_broad_sweep_reversed.json", [_record("sm100/10", (4096,) * 3, 1200.0, 1000.0)])
    text = b200.table(str(tmp_path))
    assert "broad sweep reversed sm100/10: 1 shapes, ratio to cuBLAS geometric mean 1.200" in text
    assert "  square: 1 shapes, geometric mean 1.200, lowest 1.200 (4096x4096x4096)" in text


@pytest.mark.fast
def test_table_lists_the_runs_inside_graphs_per_step_and_variant(tmp_path):
    """The decode runs inside CUDA graphs: a line per step (kind decode_graph) and per variant of the launch
    A/B (kind decode_graph_ab), the share of the copy bandwidth per shape with cuBLAS's beside it."""
    def graph(kind, step, variant, m, share):
        return {"kind": kind, "step": step, "variant": variant, "gpu": "NVIDIA B200", "rel_error": 3e-3,
                "shape": {"m": m, "n": 4096, "k": 4096},
                "bandwidth": {"fraction_of_copy": share, "cublas_fraction_of_copy": 0.7}}
    _write(tmp_path, "20270101T000000Z_ladder.json", [_record("sm100/11", (4096,) * 3, 1000.0, 1000.0)])
    _write(tmp_path, "20270101T000100Z_decode_graph.json", [graph("decode_graph", "sm100/12", None, m, 0.8) for m in (1, 16)])
    _write(tmp_path, "20270101T000200Z_decode_graph_launch.json",
           [graph("decode_graph_ab", "sm100/12", v, 16, 0.9) for v in b200.decode_launch_variants()])
    text = b200.table(str(tmp_path))
    assert ("inside graphs (decode_graph) sm100/12, share of the copy bandwidth: 1x4096x4096 80% (cuBLAS 70%), "
            "16x4096x4096 80% (cuBLAS 70%)") in text
    assert "inside graphs (decode_graph_ab) sm100/12:pdl=true,launch_after_loads=true, share of the copy bandwidth: " \
           "16x4096x4096 90% (cuBLAS 70%)" in text


@pytest.mark.fast
def test_makefile_target_calls_the_script():
    out = subprocess.run(["make", "-n", "b200", "OUT=somewhere"], cwd=ROOT, capture_output=True, text=True)
    assert "scripts/b200_validate.sh \"somewhere\"" in out.stdout


@pytest.mark.fast
def test_logs_name_no_folder_of_this_machine(tmp_path):
    out, repo = tmp_path / "repo" / "out", tmp_path / "repo"
    out.mkdir(parents=True)
    (out / "pytest_gpu.log").write_text(f"generated xml file: {out}/pytest_gpu.xml\n{repo}/.venv/bin/python -m pytest\n")
    (out / "ladder.json").write_text(f'"{out}"')  # records are not logs: left alone
    assert b200.redact_logs(str(out), str(repo)) == [str(out / "pytest_gpu.log")]
    assert (out / "pytest_gpu.log").read_text() == "generated xml file: OUT/pytest_gpu.xml\nREPO/.venv/bin/python -m pytest\n"
    assert (out / "ladder.json").read_text() == f'"{out}"'


FAKE_PY = r'''#!/bin/bash
# Stands in for python in the kit's phases: the kit's own Python (gemm_course.measure.b200) runs for real,
# the GPU phases are faked; FAKE_FAIL=1 makes a GPU test fail.
case "$*" in
  "-m gemm_course.measure.bounded"*) exec "$REAL_PY" "$@" ;;  # runs the phase's command: this fake again
  "-m gemm_course.measure.b200"*) exec "$REAL_PY" "$@" ;;
  "-c from gemm_course.measure import bench"*) exec "$REAL_PY" "$@" ;;
  "-c from gemm_course.measure import b200"*) exec "$REAL_PY" "$@" ;;
  "-c import triton") exit 1 ;;
  "-m gemm_course doctor") echo "machine     NVIDIA B200 (fake)" ;;
  "-m gemm_course.measure.stepwise run"*)
    exec "$REAL_PY" -c '
import json, os, sys
out, keys = sys.argv[1], [a for a in sys.argv[2:] if a.startswith("sm")]
bad = "sm100/5" if os.environ.get("FAKE_FAIL") == "1" else ""
rows = [{"step": k, "debug": "FAILED" if k == bad else "ok", "timed": "-" if k == bad else "ok", "sanitizer": "skipped",
         "failed": "debug: watchdog: mainloop_pipeline.producer_acquire(state) (empty barrier)" if k == bad else "",
         "passed": k != bad, "seconds": 1.0} for k in keys]
os.makedirs(os.path.join(out, "stepwise"), exist_ok=True)
json.dump({"rows": rows, "passed": [k for k in keys if k != bad]}, open(os.path.join(out, "stepwise", "summary.json"), "w"))
for k in keys:
    open(os.path.join(out, "step_%s_debug.log" % k.replace("/", "-")), "w").write("%s (debug): fake\n" % k)
print("stepwise: %d steps" % len(keys))
sys.exit(1 if bad else 0)
' "${@:4}" ;;
  "-m gemm_course.measure.stepwise"*) exec "$REAL_PY" "$@" ;;
  "-m pytest"*) echo "4 passed" ;;
  "scripts/gpu_tune.py"*)
    exec "$REAL_PY" -c '
import json, os, sys
args = sys.argv[1:]
variants = args[:args.index("--shapes")]
shapes = args[args.index("--shapes") + 1:args.index("--out")]
out = args[args.index("--out") + 1]
rows = []
for sh in shapes:
    m, n, k = sh.split("x") if "x" in sh else (sh, sh, sh)
    label = f"{m}x{n}x{k}"
    for v, ms in zip(variants + ["cublas"], (1.0, 1.05, 1.1)):
        rows.append({"shape": label, "variant": v, "median_ms": ms, "ratio_to_cublas": 1.1 / ms})
os.makedirs(out, exist_ok=True)
json.dump({"env": {"gpu": "NVIDIA B200"}, "rows": rows}, open(os.path.join(out, "tune.json"), "w"))
' "${@:2}" ;;
  "-m gemm_course bench"*)
    exec "$REAL_PY" -c '
import json, sys
args = sys.argv[4:]
steps = args[:args.index("--shapes")]
shapes = args[args.index("--shapes") + 1:]
shapes = [s for s in shapes[:next((i for i, s in enumerate(shapes) if s.startswith("--")), len(shapes))]]
out, tag = args[args.index("--out") + 1], args[args.index("--tag") + 1]
recs = []
for st in steps:
    for sh in shapes:
        m, n, k = (sh.split("x") + [sh, sh])[:3] if "x" in sh else (sh, sh, sh)
        recs.append({"kind": "bench", "step": st, "gpu": "NVIDIA B200", "shape": {"m": int(m), "n": int(n), "k": int(k)},
                     "tflops": {"median": 1000.0}, "cublas_tflops": {"median": 1250.0}, "ratio_to_cublas": 0.8,
                     "rel_error": 3e-3, "date": "2027-01-01"})
json.dump({"schema": 1, "records": recs}, open(f"{out}/20270101T00000{len(tag)}Z_{tag}.json", "w"))
print(f"wrote {len(recs)} records")
' "$@" ;;
  "scripts/gpu_decode_graph.py"*)
    exec "$REAL_PY" -c '
import json, sys
args = sys.argv[1:]
out, steps = args[args.index("--out") + 1], args[args.index("--steps") + 1:args.index("--shapes")]
shapes = args[args.index("--shapes") + 1:]
kind = args[args.index("--kind") + 1] if "--kind" in args else "decode_graph"
tag = args[args.index("--tag") + 1] if "--tag" in args else "decode_graph"
recs = [{"kind": kind, "step": st.split(":")[0], "variant": st, "gpu": "NVIDIA B200",
         "shape": dict(zip("mnk", map(int, sh.split("x")))), "rel_error": 3e-3, "ratio": 1.0, "date": "2027-01-01"}
        for st in steps for sh in shapes]
json.dump({"schema": 1, "records": recs}, open(f"{out}/20270101T0001{len(tag):02d}Z_{tag}.json", "w"))
' "${@:2}" ;;
  *) echo "unexpected: $*"; exit 3 ;;
esac
'''


@pytest.mark.slow  # runs the kit in bash with faked phases: 2-7 s each
@pytest.mark.parametrize("fail", [False, True], ids=["steps-pass", "a-step-fails"])
def test_the_whole_flow_with_faked_gpu_phases(tmp_path, fail):
    """Everything but the GPU: phases in order, a failed step dropped from the timing (and the rest timed),
    records copied into results/nvidia-b200/ (here under GEMM_COURSE_RESULTS), the tables last, logs free of folders."""
    fake = tmp_path / "python"
    fake.write_text(FAKE_PY)
    fake.chmod(0o755)
    tools = tmp_path / "bin"  # only the shell tools the script uses: no nvidia-smi, no compute-sanitizer
    tools.mkdir()
    for tool in ("mkdir", "dirname", "cat", "tee", "timeout", "grep", "head", "sed", "cut", "sort", "env"):
        (tools / tool).symlink_to(shutil.which(tool))
    results = tmp_path / "results"
    env = {k: v for k, v in os.environ.items() if k not in ("DRY_RUN", "PATH")}
    env.update(PY=str(fake), REAL_PY=sys.executable, GEMM_COURSE_RESULTS=str(results), FAKE_FAIL="1" if fail else "0",
               GEMM_COURSE_PRETEND_GPU="NVIDIA B200,10.0,148", PATH=str(tools))
    out = tmp_path / "out"
    proc = subprocess.run([shutil.which("bash"), str(SCRIPT), str(out)], capture_output=True, text=True, env=env,
                          timeout=120)
    status = (out / "status.log").read_text()
    assert [line.split(":")[0] for line in status.splitlines()] == [
        "gpu_check", "doctor", "stepwise", "pytest_gpu", "sanitize", "ladder", "broad_sweep", "broad_sweep_reversed",
        "tail_ab", "decode12", "decode12_reversed", "decode_graph", "decode_graph_launch", "copy"]
    steps_table = proc.stdout[proc.stdout.index("== steps"):]
    blackwell = len(ladder.steps("sm100"))
    assert steps_table.count("sm100/") >= blackwell
    timed = re.search(r"^ladder: .*bench (.*) --shapes", status, flags=re.M).group(1).split()
    if fail:
        assert proc.returncode == 1
        assert "stepwise: FAILED (exit 1)" in status
        assert "sm100/5" not in timed and len(timed) == blackwell - 2, "the failed step is not timed; the others are"
        assert "producer_acquire(state) (empty barrier)" in steps_table
        assert len(records.load_records(str(results))) == (blackwell - 2) * 2 + 2 * 46 + 2 * 2 * 35  # decode: both steps passed
        return
    assert timed == [s.key for s in ladder.steps("sm100") if s.key != b200.decode_step_key()]
    copied = sorted(p.name for p in (results / "nvidia-b200").iterdir())
    assert copied == sorted(p.name for p in out.glob("*.json")) and len(copied) == 7  # ladder, sweeps, decode, graphs x 2
    assert len(records.load_records(str(results))) == (blackwell - 1) * 2 + 2 * 46 + 2 * 2 * 35
    assert len(records.load_records(str(results), kind="decode_graph")) == 2 * len(b200.DECODE_GRAPH_SHAPES)
    launch_ab = records.load_records(str(results), kind="decode_graph_ab")
    assert len(launch_ab) == len(b200.decode_launch_variants()) * len(b200.DECODE_LAUNCH_SHAPES)
    tail = proc.stdout[proc.stdout.index("== records"):]
    assert "broad sweep sm100/11: 46 shapes" in tail and "broad sweep reversed sm100/11: 46 shapes" in tail
    assert "decode12 sm100/12: 35 shapes, ratio to cuBLAS geometric mean per M 1: 0.800," in tail
    assert "decode12 reversed sm100/11: 35 shapes" in tail
    assert "pull request" in tail
    assert "split tail over whole at 4096x4096x4096: 1.050 (the tail model: 1.067, 2 parts per tail tile)" in tail
    tune = records.load_tuning(b200.tail_ab_run(str(results)), str(results))
    assert b200.tail_ab_run(str(results)).startswith(b200.TAIL_AB_RUN + "_2")
    assert tune["command"] == b200.tail_ab_command() and "B200 kit" in tune["what"] and len(tune["rows"]) == 15
    published = sorted((results / "logs").iterdir())  # the logs, as the book cites them: results/logs/*_b200_*.log
    assert [p.name.split("_b200_")[1] for p in published] == sorted(p.name for p in out.glob("*.log"))
    for log in list(out.glob("*.log")) + published:  # (the fake python's own folder would be a real one's, e.g. /usr/bin)
        assert str(out) not in log.read_text() and str(results) not in log.read_text(), log.name


@pytest.mark.fast
def test_the_kit_checks_every_blackwell_step():
    """The kit's list of steps is the ladder's (step 12, the memory roofline's, included)."""
    assert b200.kit_steps() == [s.key for s in ladder.steps("sm100")]
