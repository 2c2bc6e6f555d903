"""scripts/gpu_energy_b2b.py on the CPU: its estimate fits the device's limits, its shape orders
and tags are the broad sweep's, and a run (bench_step faked) writes one records file per order
that records.energy_sweep reads back."""

import json

import pytest
from conftest import import_script

from gemm_course.measure import bench, records

pytestmark = pytest.mark.fast



@pytest.fixture(scope="module")
def script():
    return import_script("gpu_energy_b2b")


def test_the_default_run_fits_in_eight_minutes(script):
    args = script.parse(["--estimate-only"])
    shapes = script.sweep_shapes()
    known = script.per_launch_ms(args.step)
    assert len(shapes) == 46 and len(known) == 46  # the committed broad sweep prices every shape
    est = script.estimate(args, shapes, known)
    assert 240 < est["total_s"] < args.budget_s <= 8 * 60 and args.deadline_s < 600
    longer = script.estimate(script.parse(["--estimate-only", "--energy-seconds", "2", "--energy-rounds", "3"]), shapes, known)
    assert longer["total_s"] > args.budget_s  # what the warning is for
    assert script.main(["--estimate-only", "--energy-seconds", "2", "--energy-rounds", "3"]) == 0


def test_orders_shapes_and_tags(script):
    shapes = script.sweep_shapes()
    assert script.order_shapes(shapes, "reversed") == shapes[::-1] and script.order_shapes(shapes, "forward") == shapes
    assert script.sweep_shapes(["2048x2048x2048", "1024x1024x8192"]) == [(2048, 2048, 2048), (1024, 1024, 8192)]
    with pytest.raises(SystemExit):
        script.sweep_shapes(["5x5x5"])
    assert script.breakdown_shapes(shapes, 2) == {(1024, 1024, 8192), (2048, 2048, 2048)}  # the shortest kernels
    assert script.command_line(["--out", "/root/x", "--orders", "forward"]).endswith("--out $OUT --orders forward")
    with pytest.raises(SystemExit):
        script.parse([])  # --out is required to measure


def test_a_faked_run_writes_both_orders_and_stops_at_its_deadline(script, tmp_path, monkeypatch, capsys):
    from synthetic import bench_record

    calls = []

    def fake_bench_step(step, problem, config, warmup, repeats, rounds, **kw):
        calls.append(((problem.m, problem.n, problem.k), kw))
        rec = bench_record(step, 650.0, 700.0, "2030-01-01T00:00:00", shape=(problem.m, problem.n, problem.k))
        return dict(rec, energy_j_per_gemm={"step": 0.002, "cublas": 0.0025}, b2b_ms={"step": 0.1, "cublas": 0.1},
                    sm_clock_mhz_median={"step": 1700.0, "cublas": 1650.0}, energy_note=None)

    monkeypatch.setattr(bench, "bench_step", fake_bench_step)
    monkeypatch.setattr(bench, "environment", lambda: {"gpu": "Synthetic GPU"})
    monkeypatch.setattr(bench, "open_meter", lambda device=0: (None, "no NVML: test"))
    out = tmp_path / "out"
    shapes = ["2048x2048x2048", "4096x4096x4096", "1024x1024x8192"]
    assert script.main(["--out", str(out), "--shapes", *shapes, "--host-breakdown", "1"]) == 0
    files = sorted(p.name for p in out.iterdir())
    assert [f.split("_", 1)[1] for f in files] == ["broad_sweep_energy.json", "broad_sweep_energy_reversed.json"]
    forward = [(2048, 2048, 2048), (4096, 4096, 4096), (1024, 1024, 8192)]  # the sweep's order
    assert [c[0] for c in calls] == forward + forward[::-1]
    # first order only, on the shortest kernel (2048^3 and 1024x1024x8192 tie at 2^34 FLOP: the first)
    assert [c[1]["host_breakdown"] for c in calls] == [True, False, False, False, False, False]
    assert all(c[1]["energy_seconds"] == 0.5 and c[1]["graph"] and c[1]["meter"] == (None, "no NVML: test") for c in calls)
    (results := tmp_path / "results" / "g").mkdir(parents=True)
    for f in out.iterdir():
        (results / f.name).write_text(f.read_text())
    recs = records.load_records(str(tmp_path / "results"))
    final = records.energy_sweep(recs, None, "forward")  # default: the final Hopper step, which the script runs
    assert len(final) == 3 and records.energy_ratio(final[0]) == pytest.approx(0.8)
    assert "energy step/cuBLAS 0.800" in capsys.readouterr().out
    # a deadline that leaves room for no shape: nothing measured, nothing written
    calls.clear()
    assert script.main(["--out", str(tmp_path / "none"), "--shapes", *shapes, "--deadline-s", "1"]) == 0
    assert calls == [] and not (tmp_path / "none").exists()
    assert json.loads(json.dumps(script.TAGS)) == {"forward": "broad_sweep_energy", "reversed": "broad_sweep_energy_reversed"}
