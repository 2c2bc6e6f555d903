"""Protocol arithmetic and records (no GPU needed)."""

import json

import pytest

from gemm_course import bench, ladder, records
from gemm_course.problem import GemmProblem

pytestmark = pytest.mark.fast


def test_tflops():
    p = GemmProblem.square(4096)
    assert bench.tflops(p, 1.0) == pytest.approx(2 * 4096**3 / 1e-3 / 1e12)


def test_summarize_median_and_spread():
    s = bench.summarize([3.0, 1.0, 2.0, 10.0, 2.5])
    assert s["median"] == 2.5 and s["min"] == 1.0 and s["max"] == 10.0 and s["n"] == 5


def _record(step="sm90/3", m=4096, tf=300.0, date="2026-11-29T10:00:00+00:00", cfg=None):
    import dataclasses

    return {
        "kind": "bench", "step": step, "shape": {"m": m, "n": m, "k": m}, "gpu": "NVIDIA H200",
        "config": cfg or dataclasses.asdict(ladder.get(step).default), "date": date,
        "tflops": {"median": tf}, "cublas_tflops": {"median": 700.0}, "driver": "x", "cuda": "13.0",
        "torch": "2.11", "cutlass_dsl": "4.8.1", "protocol": {"rounds": 5, "repeats": 100},
    }


def test_records_round_trip_and_latest(tmp_path):
    old, new = _record(tf=100.0), _record(tf=200.0, date="2026-11-30T10:00:00+00:00")
    path = bench.write_records([old, new, _record(step="sm90/2")], "t", out_dir=str(tmp_path / "nvidia-h200"))
    with open(path) as f:
        assert len(json.load(f)["records"]) == 3
    with open(path) as f:  # one compact line per record between the header and the closing line
        assert len(f.read().splitlines()) == 3 + 2
    recs = records.load_records(str(tmp_path))
    assert len(recs) == 3
    best = records.latest(recs, "sm90/3", 4096, 4096, 4096)
    assert best["tflops"]["median"] == 200.0
    assert records.latest(recs, "sm90/3", 8192, 8192, 8192) is None
    assert "NVIDIA H200" in records.provenance(best) and "2026-11-30" in records.provenance(best)


def test_latest_ignores_other_configs(tmp_path):
    r = _record(cfg={"tile_m": 64, "tile_n": 128, "tile_k": 64})
    bench.write_records([r], "t", out_dir=str(tmp_path / "g"))
    assert records.latest(records.load_records(str(tmp_path)), "sm90/3", 4096, 4096, 4096) is None


def test_write_refuses_empty():
    with pytest.raises(ValueError):
        bench.write_records([], "t")


def test_committed_records_have_provenance():
    recs = records.load_records()
    assert {r["step"] for r in recs} >= {s.key for s in ladder.steps("sm90")}, "a Hopper step has no record under results/"
    for r in recs:
        for key in ("gpu", "driver", "cuda", "torch", "cutlass_dsl", "date", "shape", "config", "protocol"):
            assert r.get(key) is not None, f"{r['_file']} lacks {key}"
        assert r["rel_error"] < 1e-2
        assert r["cublas_tflops"]["median"] > 0 and r["tflops"]["median"] > 0


def test_compare_reverses_the_order_every_other_round(monkeypatch):
    """A block inherits the clock the previous block left, so no provider may always follow the same one."""
    import torch

    calls = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    monkeypatch.setattr(bench, "host_seconds_per_launch", lambda fn, launches: 1e-5)
    monkeypatch.setattr(bench, "time_block", lambda fn, launches, host: 1.0)
    monkeypatch.setattr(bench, "time_each", lambda fn, repeats, host: calls.append(fn()) or [1.0] * repeats)
    out = bench.compare({"step": lambda: "step", "cublas": lambda: "cublas"}, warmup=0, repeats=3, rounds=4)
    assert calls == ["step", "cublas", "cublas", "step", "step", "cublas", "cublas", "step"]
    assert all(len(v["each"]) == 12 for v in out.values())


@pytest.mark.fast
def test_broad_sweep_covers_the_classes():
    from gemm_course import bench

    classes = bench.broad_sweep_shapes()
    assert {s[0] for s in classes["square"]} >= {2048, 3072, 6144, 7168, 10240, 12288, 16384}
    for m in bench.LLM_MS:  # every N and every K once for each M
        rows = [s for s in classes["llm"] if s[0] == m]
        assert sorted(n for _, n, _ in rows) == sorted(bench.LLM_NKS) == sorted(k for _, _, k in rows)
    few = classes["few-wave long-K"]
    assert {(m, n) for m, n, _ in few} >= {(m, n) for m in bench.FEW_WAVE_MNS for n in bench.FEW_WAVE_MNS}
    assert {k for _, _, k in few} >= set(bench.FEW_WAVE_KS)
    assert bench.shape_class(2304, 2304, 9216) == "few-wave long-K" and bench.shape_class(5, 5, 5) == "other"
    every = [s for group in classes.values() for s in group]
    assert len(every) == len(set(every)) == 46  # no shape in two classes
