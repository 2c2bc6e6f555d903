"""Sweeps: one step over many shapes, summarized by shape class, with their energy.

Which records make a step's sweep (:func:`latest_sweep`, :func:`broad_sweep`,
:func:`decode_sweep`: each shape's newest record from the files of one shape order), their ratios
to cuBLAS by the broad sweep's classes (:func:`sweep_classes`, :func:`sweep_summary`,
:func:`sweep_class_table`), and the energy per GEMM and back-to-back times some bench records
carry (``scripts/gpu_energy_b2b.py``, :func:`gemm_course.measure.bench.sustained`):
:func:`energy_ratio`, :func:`b2b_ratio`, :func:`energy_classes`, :func:`energy_class_table`; a
record without them (every record written before them) simply has none. Re-exported by
:mod:`gemm_course.measure.records`.
"""

from __future__ import annotations

import math
import os
from typing import Iterable, Optional, Sequence

from .record_queries import has_default_config, shape_of
from .sweep_shapes import broad_sweep_shapes, decode_shapes, shape_class


def geomean(values: Iterable[float]) -> float:
    """The geometric mean, ``exp(mean(log x))``."""
    values = list(values)
    return math.exp(sum(math.log(v) for v in values) / len(values))


def latest_sweep(records: Sequence[dict], step: Optional[str] = None) -> list:
    """The sweep the book shows of ``step`` (as the course runs it; default: the final Hopper step):
    the broad sweep (:func:`broad_sweep`) if there is one, else the records of the newest results
    file whose name says ``sweep`` (newest: the file holding the latest record date)."""
    from ..runtime import ladder

    step = step or ladder.final("sm90").key
    broad = broad_sweep(records, step)
    if broad:
        return broad
    sweep = [r for r in records if r["step"] == step and has_default_config(r, ladder.get(step))
             and "sweep" in r.get("_file", "")]
    if not sweep:
        return []
    newest = max(sweep, key=lambda r: (r.get("date", ""), r["_file"]))["_file"]
    return [r for r in sweep if r["_file"] == newest]


DECODE_ORDERS = {"forward": "_decode.json", "reversed": "_decode_reversed.json"}  # scripts/gpu_decode.sh


def decode_sweep(records: Sequence[dict], step: Optional[str] = None, order: str = "forward",
                 gpu: Optional[str] = None) -> list:
    """The decode class's records (``scripts/gpu_decode.sh``, operands out of L2) of ``step`` (default:
    the final Hopper step) in one order: each shape's newest, in :func:`decode_shapes`' order; ``gpu``
    keeps one card's."""
    from ..runtime import ladder

    step = step or ladder.final("sm90").key
    newest = {}
    for r in records:
        if (r["step"] == step and r.get("_file", "").endswith(DECODE_ORDERS[order]) and r.get("rotation")
                and (gpu is None or r.get("gpu") == gpu)):
            shape = shape_of(r)
            if shape not in newest or (r.get("date", ""), r["_file"]) > (newest[shape].get("date", ""), newest[shape]["_file"]):
                newest[shape] = r
    return [newest[s] for s in decode_shapes() if s in newest]


BROAD_SWEEP_ORDERS = {"forward": "_broad_sweep.json", "reversed": "_broad_sweep_reversed.json"}


def broad_sweep(records: Sequence[dict], step: Optional[str] = None, order: str = "forward") -> list:
    """``step``'s records (as the course runs it) of the broad sweep in one shape order
    (``scripts/gpu_broad_sweep.sh``, :func:`broad_sweep_shapes`): for each shape of
    the sweep, its newest record from the files of that order, in the sweep's shape order. A shape
    re-measured after a change (the script given shapes) replaces its older record."""
    return _newest_per_sweep_shape(records, step, (BROAD_SWEEP_ORDERS[order],))


def _newest_per_sweep_shape(records: Sequence[dict], step: Optional[str], suffixes: Sequence[str], keep=None) -> list:
    """For each broad-sweep shape, in the sweep's order, the newest record of ``step`` (as the course
    runs it; default the final Hopper step) from files whose names end with one of ``suffixes``
    and for which ``keep(record)`` holds."""
    from ..runtime import ladder

    step = step or ladder.final("sm90").key
    newest = {}
    for r in records:
        if (r["step"] == step and r.get("_file", "").endswith(tuple(suffixes)) and (keep is None or keep(r))
                and has_default_config(r, ladder.get(step))):
            shape = shape_of(r)
            if shape not in newest or (r.get("date", ""), r["_file"]) > (newest[shape].get("date", ""), newest[shape]["_file"]):
                newest[shape] = r
    shapes = [s for group in broad_sweep_shapes().values() for s in group]
    return [newest[s] for s in shapes if s in newest]


def sweep_class_table(records: Sequence[dict], step: Optional[str] = None) -> str:
    """A Markdown table of ``step``'s broad sweep, a row per order and shape class
    (:func:`broad_sweep`, :func:`sweep_classes`); empty without a broad sweep. Where the records
    hold a broad sweep with energy (:func:`energy_sweep`), its table (:func:`energy_class_table`)
    follows, after a blank line."""
    rows = ["| order | class | shapes | geometric mean | lowest | at or above cuBLAS | Triton (course's) |",
            "|---|---|---|---|---|---|---|"]
    for order in BROAD_SWEEP_ORDERS:
        for name, c in sweep_classes(broad_sweep(records, step, order)).items():
            triton = "-" if c["triton_geomean"] is None else f"{c['triton_geomean']:.3f}"
            rows.append(f"| {order} | {name} | {c['shapes']} | {c['geomean']:.3f} | {c['lowest']:.3f} "
                        f"({c['lowest_shape']}) | {c['at_or_above']} | {triton} |")
    table = "\n".join(rows) if len(rows) > 2 else ""
    energy = energy_class_table(records, step)
    return "\n\n".join(t for t in (table, energy) if t)


def _by_class(sweep: Sequence[dict]) -> dict:
    """{class: the sweep's records of that class (:func:`shape_class`), ``all``: every record}; ``{}``
    for an empty sweep."""
    groups: dict = {}
    for r in sweep:
        groups.setdefault(shape_class(*shape_of(r)), []).append(r)
    if sweep:
        groups["all"] = list(sweep)
    return groups


def sweep_classes(sweep: Sequence[dict]) -> dict:
    """{class: summary} of a sweep by the broad sweep's shape classes (:func:`shape_class`): shapes,
    geometric mean and lowest ratio to cuBLAS, shapes at or above it, and the course's Triton
    matmul's geometric mean where it was timed (None otherwise); ``all`` for the whole sweep; ``{}``
    for an empty sweep."""
    out = {}
    groups = _by_class(sweep)
    for name, rows in groups.items():
        ratios = [r["ratio_to_cublas"] for r in rows]
        triton = [(r.get("peers") or {}).get("triton", {}).get("ratio_to_cublas") for r in rows]
        out[name] = {"shapes": len(rows), "geomean": geomean(ratios), "lowest": min(ratios),
                     "lowest_shape": "x".join(map(str, shape_of(min(rows, key=lambda r: r["ratio_to_cublas"])))),
                     "at_or_above": sum(x >= 1 for x in ratios),
                     "triton_geomean": geomean(triton) if all(t is not None for t in triton) else None}
    return out


def sweep_summary(sweep: Sequence[dict]) -> dict:
    """A sweep's (:func:`latest_sweep`) ratios to cuBLAS: per-launch medians (``ratios``) and the
    seed's protocol, means of back-to-back launches (``seed_ratios``), the geometric mean of each,
    and how many shapes reach cuBLAS (``at_or_above``)."""
    ratios = [r["ratio_to_cublas"] for r in sweep]
    seed = [r["tflops"]["seed_mean"] / r["cublas_tflops"]["seed_mean"] for r in sweep]
    return {"ratios": ratios, "seed_ratios": seed, "geomean": geomean(ratios), "seed_geomean": geomean(seed),
            "at_or_above": sum(x >= 1 for x in ratios), "shapes": len(ratios)}


# ---------------------------------------------------------------------------------------------
# energy per GEMM and back-to-back times (scripts/gpu_energy_b2b.py, bench.sustained)
# ---------------------------------------------------------------------------------------------

ENERGY_SWEEP_ORDERS = {"forward": "_broad_sweep_energy.json", "reversed": "_broad_sweep_energy_reversed.json"}


def _pair_ratio(record: dict, field: str, numerator: str, denominator: str) -> Optional[float]:
    values = record.get(field) or {}
    top, bottom = values.get(numerator), values.get(denominator)
    return top / bottom if top is not None and bottom else None


def energy_ratio(record: dict) -> Optional[float]:
    """The step's energy per GEMM over cuBLAS's in the same rounds (below 1: the step uses less),
    or None where the record has no energy (older records, or NVML was missing: ``energy_note``)."""
    return _pair_ratio(record, "energy_j_per_gemm", "step", "cublas")


def clock_ratio(record: dict) -> Optional[float]:
    """The step's median SM clock over cuBLAS's during their energy blocks, or None."""
    return _pair_ratio(record, "sm_clock_mhz_median", "step", "cublas")


def b2b_ratio(record: dict, field: str = "b2b_ms") -> Optional[float]:
    """cuBLAS's back-to-back time per launch over the step's, as ``ratio_to_cublas`` is (above 1:
    the step is faster): ``b2b_ms`` (host in the loop, wall clock), ``b2b_event_ms`` or
    ``b2b_graph_ms`` (a CUDA graph); None where the record lacks it."""
    return _pair_ratio(record, field, "cublas", "step")


def _has_user_loop(record: dict) -> bool:
    return "energy_j_per_gemm" in record or "b2b_ms" in record or "b2b_graph_ms" in record


def energy_sweep(records: Sequence[dict], step: Optional[str] = None, order: str = "forward") -> list:
    """``step``'s broad sweep in one shape order from the records that carry energy or back-to-back
    times: for each shape, its newest such record from the energy sweep's files
    (``scripts/gpu_energy_b2b.py``: :data:`ENERGY_SWEEP_ORDERS`) or the broad sweep's
    (:data:`BROAD_SWEEP_ORDERS`, should a full broad sweep measure them too), in the sweep's order."""
    return _newest_per_sweep_shape(records, step, (ENERGY_SWEEP_ORDERS[order], BROAD_SWEEP_ORDERS[order]),
                                   keep=_has_user_loop)


def _geomean_or_none(values: Sequence[Optional[float]]) -> Optional[float]:
    values = [v for v in values if v is not None]
    return geomean(values) if values else None


def energy_classes(sweep: Sequence[dict]) -> dict:
    """{class: summary} of a sweep's energy and back-to-back ratios by broad-sweep class
    (:func:`shape_class`; ``all`` for the whole sweep): ``shapes`` with an energy ratio, the
    geometric mean of the per-shape energy ratios (:func:`energy_ratio`) with the lowest and
    highest, and geometric means of the clock ratio, of the per-launch ratio to cuBLAS
    (``ratio_to_cublas``), of the back-to-back ratios (host in the loop, CUDA graph:
    :func:`b2b_ratio`), each over the shapes that have it (None where none has); ``{}`` for an empty sweep."""
    out = {}
    groups = _by_class(sweep)
    for name, rows in groups.items():
        energy = [x for x in map(energy_ratio, rows) if x is not None]
        out[name] = {"records": len(rows), "shapes": len(energy), "energy_geomean": _geomean_or_none(energy),
                     "energy_lowest": min(energy) if energy else None, "energy_highest": max(energy) if energy else None,
                     "clock_geomean": _geomean_or_none([clock_ratio(r) for r in rows]),
                     "time_geomean": _geomean_or_none([r.get("ratio_to_cublas") for r in rows]),
                     "b2b_geomean": _geomean_or_none([b2b_ratio(r) for r in rows]),
                     "graph_geomean": _geomean_or_none([b2b_ratio(r, "b2b_graph_ms") for r in rows])}
    return out


def energy_class_table(records: Sequence[dict], step: Optional[str] = None) -> str:
    """A caption and a Markdown table of ``step``'s energy sweep (:func:`energy_sweep`), a row per
    order and class (:func:`energy_classes`); empty where no record has energy or back-to-back times."""
    def cell(x, fmt=".3f"):
        return "-" if x is None else format(x, fmt)

    rows = ["| order | class | shapes | energy per GEMM, step / cuBLAS | lowest - highest | SM clock, step / cuBLAS "
            "| per launch, cuBLAS / step | back to back, host in the loop, cuBLAS / step | CUDA graph, cuBLAS / step |",
            "|---|---|---|---|---|---|---|---|---|"]
    files = set()
    for order in ENERGY_SWEEP_ORDERS:
        sweep = energy_sweep(records, step, order)
        files |= {os.path.basename(r["_file"]) for r in sweep}
        for name, c in energy_classes(sweep).items():
            span = "-" if c["energy_lowest"] is None else f"{c['energy_lowest']:.3f} - {c['energy_highest']:.3f}"
            rows.append(f"| {order} | {name} | {c['shapes']} of {c['records']} | {cell(c['energy_geomean'])} | {span} | "
                        f"{cell(c['clock_geomean'])} | {cell(c['time_geomean'])} | {cell(c['b2b_geomean'])} | "
                        f"{cell(c['graph_geomean'])} |")
    if len(rows) == 2:
        return ""
    caption = (f"Energy per GEMM from NVML's total-energy counter and back-to-back times, step against cuBLAS in the "
               f"same rounds ({', '.join(sorted(files))}): geometric means over each class's shapes of the per-shape "
               "ratios (energy below 1: the step uses less; times above 1: the step is faster).")
    return caption + "\n\n" + "\n".join(rows)
