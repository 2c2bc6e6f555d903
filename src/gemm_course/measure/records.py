"""Result records: their schema, where they live, how they are written and read, and the queries
that the book's pages, ``NOTES.md`` (:mod:`gemm_course.measure.notes`), the exercises and the figures share.

A record is one JSON object of a results file under ``results/<gpu-slug>/``, written by
:func:`write_records` (which :mod:`gemm_course.measure.bench` re-exports, as it does the broad sweep's
shapes, :func:`broad_sweep_shapes`); :func:`load_records` reads them all and stores each one's
file in ``'_file'``, which also names its *run*. Kinds: ``bench`` (a step timed against cuBLAS,
:func:`gemm_course.measure.bench.bench_step`), ``clocks`` (``scripts/gpu_clocks.py``), ``timeline``
(``scripts/gpu_timeline.py``), ``placement`` (:mod:`gemm_course.rules.placement`), ``ncu``
(``scripts/ncu_records.py``), ``cublas_kernels`` (:mod:`gemm_course.measure.cublas_kernels`) and
``decode_graph`` and ``decode_graph_ab`` (``scripts/gpu_decode_graph.py``). The A/B
runs of ``scripts/gpu_tune.py`` (variants interleaved in one process, raw per-launch times) are
files of their own, ``results/tuning/NAME.json.gz``: :func:`load_tuning` reads one,
:func:`ab_changes` and :func:`ab_table` compare two of its variants.

This module holds what touches the files: :data:`RESULTS_DIR`, the writer and the readers
(:func:`load_records`, :func:`load_tuning`, :func:`ab_table`), so a patch of ``records.RESULTS_DIR``
reaches every one of them. The queries live beside it, each name re-exported here, where the
pages, scripts and tests call it (``records.latest``, ...): :mod:`.record_queries` (a record's
shape, config, the newest record of a step, chapters 4-10's tables), :mod:`.sweep_shapes` (the
broad sweep's and the decode class's shapes), :mod:`.sweeps` (a step over many shapes, by class,
with energy and back-to-back times), :mod:`.ab_runs` (A/B runs compared) and
:mod:`.hardware_counters` (records of kind ``clocks`` and ``ncu``); none of them imports this module.

Nothing here measures or draws, and nothing here imports :mod:`gemm_course.measure.bench` or
:mod:`gemm_course.rules.placement` (they import this module): apart from the writer, every function
takes records and returns records, numbers or Markdown text.
"""

from __future__ import annotations

import glob
import json
import os
from typing import Optional, Sequence

from .ab_runs import ab_changes, row_config, rule_ab, variant_config  # noqa: F401  (re-exported)
from .hardware_counters import (  # noqa: F401  (re-exported)
    COALESCER_METRICS,
    STEP_ORDERS,
    coalescer_counters,
    ncu_metric,
    ncu_runs,
    ncu_utilization,
    order_energy_points,
    power_limit_split,
)
from .record_queries import (  # noqa: F401  (re-exported)
    CHOSEN_PER_SHAPE,
    LEGACY_FIELDS,
    config_changes,
    has_default_config,
    latest,
    latest_per_step,
    newest_run,
    provenance,
    roofline_points,
    run_of,
    shape_of,
    spread_verdict,
    step_table,
    sustained_clock_mhz,
    sustained_clock_ratio,
)
from .sweep_shapes import (  # noqa: F401  (re-exported)
    DECODE_LAYERS,
    DECODE_MS,
    FEW_WAVE_KS,
    FEW_WAVE_MNS,
    LLM_MS,
    LLM_NKS,
    SWEEP_SQUARES,
    broad_sweep_shapes,
    decode_shapes,
    shape_class,
)
from .sweeps import (  # noqa: F401  (re-exported)
    BROAD_SWEEP_ORDERS,
    DECODE_ORDERS,
    ENERGY_SWEEP_ORDERS,
    b2b_ratio,
    broad_sweep,
    clock_ratio,
    decode_sweep,
    energy_class_table,
    energy_classes,
    energy_ratio,
    energy_sweep,
    geomean,
    latest_sweep,
    sweep_class_table,
    sweep_classes,
    sweep_summary,
)

CHECKOUT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))  # above src/
RESULTS_DIR = os.environ.get("GEMM_COURSE_RESULTS", os.path.join(CHECKOUT, "results"))

SCHEMA = 1  # a results file's "schema"


def gpu_slug(name: str) -> str:
    """A GPU's folder name under ``results/``: ``NVIDIA H200`` -> ``nvidia-h200``."""
    return "".join(ch if ch.isalnum() else "-" for ch in name.lower()).strip("-")


def write_records(records: list, tag: str, out_dir: Optional[str] = None) -> str:
    """Write one JSON file of records under ``results/<gpu-slug>/`` (or ``out_dir``), named
    ``<UTC stamp>_<tag>.json``; return its path."""
    import datetime

    if not records:
        raise ValueError("no records to write")
    gpu = records[0].get("gpu") or "unknown-gpu"
    folder = out_dir or os.path.join(RESULTS_DIR, gpu_slug(gpu))
    os.makedirs(folder, exist_ok=True)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    path = os.path.join(folder, f"{stamp}_{tag}.json")
    with open(path, "w") as f:
        f.write(dump_records(records))
    return path


def dump_records(records: list, schema: int = SCHEMA) -> str:
    """A records file's text: one compact JSON line per record, so files stay small (the tree travels
    to the GPU machine) and a diff still shows records one by one."""
    lines = ",\n".join(json.dumps(r, sort_keys=True, separators=(",", ":")) for r in records)
    return f'{{"schema": {schema}, "records": [\n{lines}\n]}}\n'


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


def load_tuning(name: str, results_dir: Optional[str] = None) -> Optional[dict]:
    """The A/B run ``results/tuning/NAME.json.gz`` (``NAME`` with or without the suffix): what it
    compared (``what``), its ``command`` and one row per variant and shape, in the order run (a
    shape repeated in one run has a row per repetition); None when the file is absent."""
    import gzip

    name = name if name.endswith(".json.gz") else name + ".json.gz"
    path = os.path.join(results_dir or RESULTS_DIR, "tuning", name)
    if not os.path.exists(path):
        return None
    with gzip.open(path, "rt") as f:
        return dict(json.load(f), _file=name)


def ab_table(runs: Sequence[tuple], results_dir: Optional[str] = None) -> str:
    """A Markdown table of A/B runs ``[(name, new, old), ...]`` (:func:`load_tuning` names): one
    column per run, one row per shape, each cell ``new``'s speed-up over ``old`` in that run
    (:func:`ab_changes`; repetitions side by side), a last row with the geometric mean over the
    run's shapes; under it, what each run compared, from its file. Absent files are named, not drawn."""
    loaded = [(name, load_tuning(name, results_dir), new, old) for name, new, old in runs]
    present = [(name, tune, new, old) for name, tune, new, old in loaded if tune is not None]
    missing = [name for name, tune, _, _ in loaded if tune is None]
    if not present:
        return "No A/B run recorded under results/tuning/: " + ", ".join(missing)
    changes = [ab_changes(tune, new, old) for _, tune, new, old in present]
    shapes = list(dict.fromkeys(s for c in changes for s in c))
    head = "| shape | " + " | ".join(f"run {i + 1}: `{new}` vs `{old}`" for i, (_, _, new, old) in enumerate(present)) + " |"
    rows = [head, "|---|" + "---:|" * len(present)]
    for shape in shapes:
        rows.append(f"| {shape} | " + " | ".join(", ".join(f"{v:+.1%}" for v in c[shape]) if shape in c else ""
                                                for c in changes) + " |")
    rows.append("| geometric mean | " + " | ".join(
        f"{geomean(1.0 + v for vs in c.values() for v in vs) - 1.0:+.1%}" if c else "" for c in changes) + " |")
    notes = [f"Run {i + 1}: `results/tuning/{tune['_file']}`: {tune.get('what', '(no description)')}."
             for i, (_, tune, _, _) in enumerate(present)]
    if missing:
        notes.append("Not found under results/tuning/: " + ", ".join(missing) + ".")
    return "\n".join(rows) + "\n\n" + "\n".join(f"* {n}" for n in notes)
