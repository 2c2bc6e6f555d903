"""Synthetic result records for the tests of records, figures and notes (never written under results/)."""

import dataclasses

from gemm_course.measure import bench, records
from gemm_course.runtime import ladder


def bench_record(step, tflops, cublas, date, shape=4096, gpu="Synthetic GPU"):
    """A ``bench`` record of ``step``'s default config at shape^3 (or ``shape = (m, n, k)``)."""
    m, n, k = (shape, shape, shape) if isinstance(shape, int) else shape
    return {
        "schema": 1, "kind": "bench", "step": step, "title": ladder.get(step).title,
        "config": dataclasses.asdict(ladder.get(step).default), "shape": {"m": m, "n": n, "k": k},
        "gpu": gpu, "driver": "0", "cuda": "0", "torch": "0", "cutlass_dsl": "0", "date": date,
        "protocol": {"warmup": 1, "repeats": 10, "rounds": 2},
        "tflops": {"median": tflops, "min": 0.9 * tflops, "max": 1.1 * tflops, "p10": tflops, "p90": tflops,
                   "seed_mean": tflops},
        "cublas_tflops": {"median": cublas, "min": cublas, "max": cublas, "p10": cublas, "p90": cublas,
                          "seed_mean": cublas},
        "ratio_to_cublas": tflops / cublas, "rel_error": 1e-3,
    }


def sweep_record(m, n, k, ratio, date, step="sm90/10"):
    """A ``bench`` record of ``step`` at ``m x n x k`` at ``ratio`` of a 700 TFLOP/s cuBLAS."""
    return bench_record(step, 700.0 * ratio, 700.0, date, shape=(m, n, k))


def write_runs(tmp_path, runs, kind="bench"):
    """``runs``: {tag: [records]} -> one results file per run; returns what load_records reads back."""
    for tag, recs in runs.items():
        bench.write_records(recs, tag, out_dir=str(tmp_path / "results" / "synthetic-gpu" / tag))
    return records.load_records(str(tmp_path / "results"), kind=kind)


def clocks_record(step, size, tflops, mhz, watts, file="run1"):
    """A ``clocks`` record (``scripts/gpu_clocks.py``) on a 132-SM GPU, already carrying its ``_file``."""
    flop_per_clock = tflops * 1e12 / (mhz * 1e6) / 132
    return {"kind": "clocks", "step": step, "shape": {"m": size, "n": size, "k": size}, "gpu": "NVIDIA H200",
            "date": "2026-11-30T00:00:00+00:00", "_file": file, "tflops": tflops, "sm_mhz": mhz, "power_w": watts,
            "flop_per_sm_clock": flop_per_clock}


def decode_record(shape, step_ms: float, cublas_ms: float, date: str, name: str = "20261205T000000Z_decode.json",
                  gpu: str = "NVIDIA H100 80GB HBM3", copy: float = 3.0) -> dict:
    """A decode-class record as ``bench.bench_step(..., rotate=True)`` writes its fields (the ones
    ``records.decode_sweep`` and ``viz.bandwidth_bars`` read)."""
    from gemm_course.measure import bench
    from gemm_course.runtime.problem import GemmProblem

    return {"step": "sm90/11", "shape": dict(zip("mnk", shape)), "gpu": gpu, "date": date, "driver": "x", "cuda": "13.0",
            "torch": "2.11", "cutlass_dsl": "4.8.1", "_file": name, "protocol": {"rounds": 5, "repeats": 100},
            "rotation": {"sets": 3}, "bandwidth": bench.bandwidth_fields(GemmProblem(*shape), step_ms, cublas_ms, gpu, copy)}
