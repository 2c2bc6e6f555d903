"""Result records: where they live, how they are read, and the queries that the book's pages,
``NOTES.md`` (:mod:`gemm_course.notes`), the exercises and the figures share.

A record is one JSON object of a results file under ``results/<gpu-slug>/`` (written by
:func:`gemm_course.bench.write_records`); :func:`load_records` reads them all and stores each
one's file in ``'_file'``, which also names its *run*. Kinds: ``bench`` (a step timed against
cuBLAS, :func:`gemm_course.bench.bench_step`), ``clocks`` (``scripts/gpu_clocks.py``) and
``timeline`` (``scripts/gpu_timeline.py``).

Nothing here measures or draws: every function takes records and returns records, numbers or
Markdown text.
"""

from __future__ import annotations

import dataclasses
import glob
import json
import math
import os
from typing import Iterable, Optional, Sequence

import numpy as np

RESULTS_DIR = os.environ.get(
    "GEMM_COURSE_RESULTS", os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "results")
)

# Config fields added after records were written, with the value the kernels behaved as before:
# a record without the field ran that way.
LEGACY_FIELDS = {"gpc_order": False}


def load_records(results_dir: Optional[str] = None, kind: Optional[str] = "bench") -> list:
    """Every record of ``kind`` (``None``: every kind) under ``results/``, oldest first, each with
    its file, relative to the folder above ``results/``, in ``'_file'``."""
    results_dir = results_dir or RESULTS_DIR
    out = []
    for path in sorted(glob.glob(os.path.join(results_dir, "**", "*.json"), recursive=True)):
        with open(path) as f:
            doc = json.load(f)
        for rec in doc.get("records", []):
            if kind is None or rec.get("kind") == kind:
                out.append(dict(rec, _file=os.path.relpath(path, os.path.dirname(results_dir))))
    out.sort(key=lambda r: r.get("date", ""))
    return out


def shape_of(record: dict) -> tuple:
    """``(m, n, k)`` of a record."""
    s = record["shape"]
    return s["m"], s["n"], s["k"]


def run_of(record: dict) -> str:
    """The run a record belongs to: its results file (its date when it was never written)."""
    return record.get("_file") or record.get("date", "?")


def newest_run(records: Sequence[dict]) -> list:
    """The records of the newest results file (the largest name: files start with their UTC stamp)."""
    if not records:
        return []
    newest = max(r["_file"] for r in records)
    return [r for r in records if r["_file"] == newest]


def has_default_config(record: dict, step) -> bool:
    """Whether ``record`` ran ``step``'s (a ``ladder.Step``) current default config."""
    if record.get("config") is None:
        return False
    default = dataclasses.asdict(step.default)
    legacy = {k: v for k, v in LEGACY_FIELDS.items() if k in default}
    return {**legacy, **record["config"]} == default


def latest(records: Iterable[dict], step: str, m: int, n: int, k: int, gpu: Optional[str] = None,
           config: Optional[dict] = None) -> Optional[dict]:
    """The newest record of ``step`` at ``m x n x k`` (default config unless ``config`` given)."""
    from . import ladder

    best = None
    for r in records:
        if r["step"] != step or shape_of(r) != (m, n, k):
            continue
        if gpu and r.get("gpu") != gpu:
            continue
        if not (has_default_config(r, ladder.get(step)) if config is None else r.get("config") == config):
            continue
        if best is None or r["date"] >= best["date"]:
            best = r
    return best


def latest_per_step(records: Sequence[dict], arch: str = "sm90", shape=(4096, 4096, 4096),
                    gpu: Optional[str] = None) -> dict:
    """``{step number: newest record at shape, or None}`` for every step of ``arch``'s ladder."""
    from . import ladder

    m, n, k = shape
    return {s.number: latest(records, s.key, m, n, k, gpu=gpu) for s in ladder.steps(arch)}


def provenance(record: dict) -> str:
    """One line for a caption: where and when a number was measured."""
    date = record.get("date", "")[:10]
    return (
        f"measured on {record.get('gpu')}, {date}, driver {record.get('driver')}, CUDA {record.get('cuda')}, "
        f"torch {record.get('torch')} (cuBLAS), cutlass-dsl {record.get('cutlass_dsl')}; "
        f"median of {record['protocol']['rounds'] * record['protocol']['repeats']} launches ({record.get('_file', '')})"
    )


# ---------------------------------------------------------------------------------------------
# sweeps: one step over many shapes
# ---------------------------------------------------------------------------------------------


def geomean(values: Iterable[float]) -> float:
    """The geometric mean, ``exp(mean(log x))``."""
    values = list(values)
    return math.exp(sum(math.log(v) for v in values) / len(values))


def latest_sweep(records: Sequence[dict], step: Optional[str] = None) -> list:
    """The records of ``step`` (default config; default: the final Hopper step) in the newest results
    file whose name says ``sweep`` (newest: the file holding the latest record date)."""
    from . import ladder

    step = step or ladder.final("sm90").key
    sweep = [r for r in records if r["step"] == step and has_default_config(r, ladder.get(step))
             and "sweep" in r.get("_file", "")]
    if not sweep:
        return []
    newest = max(sweep, key=lambda r: (r.get("date", ""), r["_file"]))["_file"]
    return [r for r in sweep if r["_file"] == newest]


def sweep_summary(sweep: Sequence[dict]) -> dict:
    """A sweep's (:func:`latest_sweep`) ratios to cuBLAS: per-launch medians (``ratios``) and the
    seed's protocol, means of back-to-back launches (``seed_ratios``), the geometric mean of each,
    and how many shapes reach cuBLAS (``at_or_above``)."""
    ratios = [r["ratio_to_cublas"] for r in sweep]
    seed = [r["tflops"]["seed_mean"] / r["cublas_tflops"]["seed_mean"] for r in sweep]
    return {"ratios": ratios, "seed_ratios": seed, "geomean": geomean(ratios), "seed_geomean": geomean(seed),
            "at_or_above": sum(x >= 1 for x in ratios), "shapes": len(ratios)}


# ---------------------------------------------------------------------------------------------
# chapters 4-10: measured steps side by side (generated text, never typed numbers)
# ---------------------------------------------------------------------------------------------


def step_table(records: Sequence[dict], keys: Sequence[str], sizes: Sequence[int] = (4096, 8192),
               gpu: Optional[str] = None) -> str:
    """A Markdown table of the newest record of each step in ``keys`` at each size^3: median TFLOP/s
    (p10-p90), its ratio to cuBLAS in the same run, and its ratio to the previous row's step."""
    head = "| step | " + " | ".join(f"{s}^3" for s in sizes) + " |"
    rows = [head, "|---|" + "---|" * len(sizes)]
    previous = None
    for key in keys:
        cells = []
        for size in sizes:
            rec = latest(records, key, size, size, size, gpu=gpu)
            if rec is None:
                cells.append("no record")
                continue
            t = rec["tflops"]
            cell = (f"{t['median']:.0f} TFLOP/s ({t['p10']:.0f}-{t['p90']:.0f}), "
                    f"{rec['ratio_to_cublas']:.2f} of cuBLAS")
            before = latest(records, previous, size, size, size, gpu=gpu) if previous else None
            if before is not None:
                cell += f"; x{t['median'] / before['tflops']['median']:.2f} vs {previous}"
            cells.append(cell)
        rows.append(f"| {key} | " + " | ".join(cells) + " |")
        previous = key
    return "\n".join(rows)


def spread_verdict(records: Sequence[dict], new: str, old: str, sizes: Sequence[int] = (4096, 8192),
                   gpu: Optional[str] = None) -> str:
    """Markdown bullets, one per size: is ``new``'s median inside ``old``'s p10-p90 range of per-launch
    throughput (newest records of each), and their ratio. For judging small changes against the spread."""
    lines = []
    for size in sizes:
        before, after = (latest(records, key, size, size, size, gpu=gpu) for key in (old, new))
        if before is None or after is None:
            lines.append(f"* {size}^3: no record of {old if before is None else new} yet")
            continue
        inside = before["tflops"]["p10"] <= after["tflops"]["median"] <= before["tflops"]["p90"]
        lines.append(f"* {size}^3: {new}'s median is {'inside' if inside else 'outside'} {old}'s p10-p90 range "
                     f"(ratio of medians {after['tflops']['median'] / before['tflops']['median']:.3f})")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# records of kind ``clocks`` (scripts/gpu_clocks.py): the power limit
# ---------------------------------------------------------------------------------------------


def _groups(records: Sequence[dict], key) -> dict:
    """``{key(record): [records]}`` in first-seen order."""
    out: dict = {}
    for r in records:
        out.setdefault(key(r), []).append(r)
    return out


def _mean(records: Sequence[dict], key: str) -> float:
    return float(np.mean([r[key] for r in records]))


def power_limit_split(records: Sequence[dict]) -> list:
    """Records of kind ``clocks`` as rows, one per run, shape and step: mean TFLOP/s, SM clock, board
    power and FLOP per clock per SM over the step's runs, with cuBLAS's from the same run, and the
    ratio split into a clock part and a per-clock part. A run without cuBLAS at a shape gives no row."""
    rows = []
    for file, run in _groups(records, lambda r: r.get("_file")).items():
        for shape, here in _groups(run, shape_of).items():
            cublas = [r for r in here if r["step"] == "cublas"]
            if not cublas:
                continue
            for step, mine in _groups([r for r in here if r["step"] != "cublas"], lambda r: r["step"]).items():
                mean = {key: _mean(mine, key) for key in ("tflops", "sm_mhz", "power_w", "flop_per_sm_clock")}
                base = {key: _mean(cublas, key) for key in mean}
                rows.append({"shape": "x".join(map(str, shape)), "step": step, "file": file, "gpu": mine[0].get("gpu"),
                             "date": mine[0].get("date", "")[:10], "step_values": mean, "cublas_values": base,
                             "ratio": mean["tflops"] / base["tflops"], "clock_ratio": mean["sm_mhz"] / base["sm_mhz"],
                             "per_clock_ratio": mean["flop_per_sm_clock"] / base["flop_per_sm_clock"]})
    return rows


STEP_ORDERS = {"sm90/8": "row", "sm90/9": "grouped", "sm90/10": "gilbert"}  # each persistent step's tile order


def order_energy_points(records: Sequence[dict]) -> list:
    """Records of kind ``clocks`` of the persistent steps 8-10, as points: the panel model's DRAM
    bytes for the step's own order (cluster-tiles in waves of the grid's clusters,
    :func:`gemm_course.sim.l2_traffic`) against the measured joules per TFLOP, averaged over the
    step's runs."""
    from . import sim, tile_order

    points = []
    for file, run in _groups(records, lambda r: r.get("_file")).items():
        run = [r for r in run if r["step"] in STEP_ORDERS]
        for (step, m, n, k), mine in _groups(run, lambda r: (r["step"], *shape_of(r))).items():
            cfg = mine[0].get("config") or {}
            bm, bn = cfg.get("tile_m", 128) * cfg.get("cluster_m", 2), cfg.get("tile_n", 256) * cfg.get("cluster_n", 1)
            clusters = mine[0].get("sm_count", sim.H100_SMS) // (cfg.get("cluster_m", 2) * cfg.get("cluster_n", 1))
            order = tile_order.order(STEP_ORDERS[step], -(-m // bm), -(-n // bn), cfg.get("group", 8))
            traffic = sim.l2_traffic(order, sms=clusters, tile_m=bm, tile_n=bn, k=k)
            # as power_limit_split averages: mean power over mean throughput
            joules = _mean(mine, "power_w") / _mean(mine, "tflops")
            points.append({"file": file, "shape": f"{m}x{n}x{k}", "step": step, "model_gb": traffic.bytes / 1e9,
                           "joule_per_tflop": joules, "gpu": mine[0].get("gpu"), "date": mine[0].get("date", "")[:10]})
    return points
