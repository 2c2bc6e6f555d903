"""Result records: their schema, where they live, how they are written and read, and the queries
that the book's pages, ``NOTES.md`` (:mod:`gemm_course.measure.notes`), the exercises and the figures share.

A record is one JSON object of a results file under ``results/<gpu-slug>/``, written by
:func:`write_records` (which :mod:`gemm_course.measure.bench` re-exports, as it does the broad sweep's
shapes, :func:`broad_sweep_shapes`); :func:`load_records` reads them all and stores each one's
file in ``'_file'``, which also names its *run*. Kinds: ``bench`` (a step timed against cuBLAS,
:func:`gemm_course.measure.bench.bench_step`), ``clocks`` (``scripts/gpu_clocks.py``), ``timeline``
(``scripts/gpu_timeline.py``), ``placement`` (:mod:`gemm_course.rules.placement`) and ``ncu``. The A/B
runs of ``scripts/gpu_tune.py`` (variants interleaved in one process, raw per-launch times) are
files of their own, ``results/tuning/NAME.json.gz``: :func:`load_tuning` reads one,
:func:`ab_changes` and :func:`ab_table` compare two of its variants.

Nothing here measures or draws, and nothing here imports :mod:`gemm_course.measure.bench` or
:mod:`gemm_course.rules.placement` (they import this module): apart from the writer, every function
takes records and returns records, numbers or Markdown text. Bench records may carry energy per
GEMM and back-to-back times (``scripts/gpu_energy_b2b.py``): :func:`energy_ratio`,
:func:`b2b_ratio`, :func:`energy_classes` and :func:`energy_class_table` read them, and a record
without them (every record written before them) simply has none.
"""

from __future__ import annotations

import dataclasses
import glob
import json
import math
import os
import statistics
from typing import Iterable, Optional, Sequence

import numpy as np

CHECKOUT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))  # above src/
RESULTS_DIR = os.environ.get("GEMM_COURSE_RESULTS", os.path.join(CHECKOUT, "results"))

# Config fields added after records were written, with the value the kernels behaved as before:
# a record without the field ran that way.
LEGACY_FIELDS = {"gpc_order": False}

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


# ---------------------------------------------------------------------------------------------
# the broad sweep: the shape classes the final kernel is judged on
# ---------------------------------------------------------------------------------------------

SWEEP_SQUARES = (2048, 3072, 4096, 6144, 7168, 8192, 10240, 12288, 16384)
LLM_MS = (4096, 8192, 16384)
LLM_NKS = (1536, 2048, 3584, 4096, 5120, 7168, 11008, 14336, 28672)
FEW_WAVE_MNS = (1024, 2048, 3072)
FEW_WAVE_KS = (8192, 16384, 32768)


def broad_sweep_shapes() -> dict:
    """{class: [(m, n, k), ...]}: squares 2048-16384 (non-powers of two included); LLM shapes, for
    each M every N and every K once (a Latin square over the nine values: 27 of the 243); few-wave
    long-K shapes, every (M, N) pair with the three Ks in turn, plus 2304 x 2304 x 9216."""
    values = len(LLM_NKS)
    llm = [(m, LLM_NKS[j], LLM_NKS[(j + 3 * i + 1) % values]) for i, m in enumerate(LLM_MS) for j in range(values)]
    pairs = [(m, n) for m in FEW_WAVE_MNS for n in FEW_WAVE_MNS]
    few = [(m, n, FEW_WAVE_KS[(i + i // 3) % len(FEW_WAVE_KS)]) for i, (m, n) in enumerate(pairs)] + [(2304, 2304, 9216)]
    return {"square": [(s, s, s) for s in SWEEP_SQUARES], "llm": llm, "few-wave long-K": few}


# decode-sized GEMMs: y = x W^T with few tokens (M) and the weights (N, K) of real models' linear layers
DECODE_MS = (16, 32, 64, 128, 256, 512)
DECODE_LAYERS = {  # model: {layer: (N, K)} as nn.Linear stores W (out_features, in_features)
    "Llama-3.2-1B": {"qkv": (3072, 2048), "o": (2048, 2048), "gate_up": (16384, 2048), "down": (2048, 8192)},
    "Llama-3.1-8B": {"qkv": (6144, 4096), "o": (4096, 4096), "gate_up": (28672, 4096), "down": (4096, 14336)},
    "Qwen2.5-14B": {"qkv": (7168, 5120), "o": (5120, 5120), "gate_up": (27648, 5120), "down": (5120, 13824)},
    "Llama-3.1-70B": {"qkv": (10240, 8192), "o": (8192, 8192), "gate_up": (57344, 8192), "down": (8192, 28672)},
}


def decode_shapes() -> list:
    """The decode class, [(m, n, k), ...]: every layer of :data:`DECODE_LAYERS` at M = 128 (where the
    memory roofline is judged), and each layer once more at one other M of :data:`DECODE_MS`, in turn."""
    layers = [nk for model in DECODE_LAYERS.values() for nk in model.values()]
    others = [m for m in DECODE_MS if m != 128]
    return [(128, n, k) for n, k in layers] + [(others[i % len(others)], n, k) for i, (n, k) in enumerate(layers)]


def shape_class(m: int, n: int, k: int) -> str:
    """The broad sweep's class of a shape (``decode`` for :func:`decode_shapes`, ``other`` outside both)."""
    if (m, n, k) in decode_shapes():
        return "decode"
    for name, shapes in broad_sweep_shapes().items():
        if (m, n, k) in shapes:
            return name
    return "other"


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


CHOSEN_PER_SHAPE = "the step's choice for the shape"  # a bench record's config_source when no config was given


def has_default_config(record: dict, step) -> bool:
    """Whether ``record`` ran ``step`` (a ``ladder.Step``) as the course runs it: its current default
    config, or, for a step that picks per shape (``config_source`` says so), the default in every
    field but those ``tile_rule`` sets."""
    if record.get("config") is None:
        return False
    default = dataclasses.asdict(step.default)
    legacy = {k: v for k, v in LEGACY_FIELDS.items() if k in default}
    config = {**legacy, **record["config"]}
    if record.get("config_source") == CHOSEN_PER_SHAPE:
        from ..rules.tile_rule import Choice

        return all(config.get(k) == v for k, v in default.items() if k not in Choice._fields)
    return config == default


def config_changes(record: dict, step=None) -> dict:
    """The fields of ``record``'s config that differ from ``step``'s current default (default: the
    record's own step; a variant such as ``sm90/10:mma_n=128`` is compared with its step), as
    ``{field: recorded value}``. A record may predate its step's present Config: a recorded field
    the Config lacks is included, and a field the record lacks counts at its value in
    :data:`LEGACY_FIELDS`."""
    from ..runtime import ladder

    step = ladder.get(step or record["step"].split(":")[0])
    default = dataclasses.asdict(step.default)
    recorded = {**{k: v for k, v in LEGACY_FIELDS.items() if k in default}, **(record.get("config") or {})}
    return {k: v for k, v in sorted(recorded.items()) if default.get(k, object()) != v}


def latest(records: Iterable[dict], step: str, m: int, n: int, k: int, gpu: Optional[str] = None,
           config: Optional[dict] = None) -> Optional[dict]:
    """The newest record of ``step`` at ``m x n x k`` (default config unless ``config`` given)."""
    from ..runtime import ladder

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
    from ..runtime import ladder

    m, n, k = shape
    return {s.number: latest(records, s.key, m, n, k, gpu=gpu) for s in ladder.steps(arch)}


def roofline_points(records: Sequence[dict], arch: str = "sm90", size: int = 4096, gpu: Optional[str] = None) -> list:
    """Each measured tensor-core step at ``size``^3 as a roofline point: ``{label, intensity (the
    problem's FLOP per DRAM byte), tflops (median), clock_mhz (SM clock after the run)}``; cuBLAS from
    the final step's run as the last point."""
    from ..runtime import ladder
    from ..runtime.problem import GemmProblem

    intensity = GemmProblem(size, size, size).arithmetic_intensity
    points, last = [], None
    for number, rec in latest_per_step(records, arch, (size, size, size), gpu).items():
        if rec is None or number < 2:
            continue
        clock = (rec.get("clocks_after") or {}).get("sm_mhz")
        points.append({"label": f"{arch}/{number}", "intensity": intensity, "tflops": rec["tflops"]["median"],
                       "clock_mhz": clock})
        last = rec
    if last is not None and last["step"] == ladder.final(arch).key:
        points.append({"label": "cuBLAS", "intensity": intensity, "tflops": last["cublas_tflops"]["median"],
                       "clock_mhz": (last.get("clocks_after") or {}).get("sm_mhz")})
    return points


def sustained_clock_mhz(records: Sequence[dict]) -> Optional[float]:
    """Median over ``records`` of the SM clock right after a run (``clocks_after``): the clock a
    sustained GEMM runs at on that GPU. Times ``sim.TENSOR_FLOP_PER_CLOCK`` and the SM count, it is
    the tensor cores' ceiling at that clock."""
    clocks = [r["clocks_after"]["sm_mhz"] for r in records if (r.get("clocks_after") or {}).get("sm_mhz")]
    return statistics.median(clocks) if clocks else None


def sustained_clock_ratio(records: Sequence[dict]) -> Optional[float]:
    """Median over ``records`` of the SM clock after a run over the GPU's maximum clock."""
    ratios = [r["clocks_after"]["sm_mhz"] / r["clocks_after"]["max_sm_mhz"] for r in records
              if (r.get("clocks_after") or {}).get("sm_mhz") and r["clocks_after"].get("max_sm_mhz")]
    return statistics.median(ratios) if ratios else None


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


# each persistent step's tile order (step 11 permutes each full wave's Gilbert indices by GPC, the
# same tiles per wave)
STEP_ORDERS = {"sm90/8": "row", "sm90/9": "grouped", "sm90/10": "gilbert", "sm90/11": "gilbert"}


def order_energy_points(records: Sequence[dict]) -> list:
    """Records of kind ``clocks`` of the persistent steps (:data:`STEP_ORDERS`), as points: the panel model's DRAM
    bytes for the step's own order (cluster-tiles in waves of the grid's clusters,
    :func:`gemm_course.teaching.sim.l2_traffic`) against the measured joules per TFLOP, averaged over the
    step's runs."""
    from ..rules import tile_order
    from ..teaching import sim

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


# ---------------------------------------------------------------------------------------------
# A/B runs (scripts/gpu_tune.py, results/tuning/NAME.json.gz): variants interleaved in one process
# ---------------------------------------------------------------------------------------------


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


def ab_changes(tune: dict, new: str, old: str) -> dict:
    """``{shape: [old median / new median - 1, ...]}``, one value per repetition of the shape in
    the run: how much faster variant ``new`` ran than ``old`` (positive: ``new`` is faster). Only
    shapes where both ran; variant names as the run wrote them."""
    out: dict = {}
    for shape in dict.fromkeys(r["shape"] for r in tune["rows"]):
        times = {v: [r["median_ms"] for r in tune["rows"] if r["shape"] == shape and r["variant"] == v] for v in (new, old)}
        pairs = list(zip(times[new], times[old]))
        if pairs:
            out[shape] = [o / n - 1.0 for n, o in pairs]
    return out


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


def variant_config(step, variant: str):
    """The config a tuning run's variant name (``STEP[:FIELD=VALUE,...]``, as ``scripts/gpu_tune.py``
    takes it) stands for, or None for a name of another step, a kernel copy, cuBLAS, or a field the
    step's Config lacks."""
    key, _, fields = variant.partition(":")
    if key != step.key:
        return None
    try:
        return step.parse_config([f for f in fields.split(",") if f])
    except ValueError:
        return None


def row_config(step, row: dict):
    """The config a tuning run's row timed: the one the row records (``config``; there a plain
    ``STEP`` is the step's choice for the shape), else what its variant name stands for (the
    default Config with the named fields changed); None where the step's Config lacks a field."""
    if row.get("config") and row["variant"].partition(":")[0] == step.key:
        try:
            return step.config(**{k: tuple(v) if isinstance(v, list) else v for k, v in row["config"].items()})
        except TypeError:  # a recorded field the step's Config lacks
            return None
    return variant_config(step, row["variant"])


def rule_ab(tune: dict, choose, step=None) -> list:
    """Per shape of a tuning run: ``(shape, chosen config, its ratio to cuBLAS, the default's ratio,
    best ratio of any variant)``, where ``choose(m, n, k)`` is a per-shape rule's config (e.g. step
    11's ``config_for``); shapes whose chosen config the run did not time are left out."""
    from ..runtime import ladder

    step = step or ladder.final("sm90")
    out = []
    for shape in dict.fromkeys(r["shape"] for r in tune["rows"]):
        rows = [r for r in tune["rows"] if r["shape"] == shape]
        by_config = {}
        for r in rows:
            config = row_config(step, r)
            if config is not None:
                by_config.setdefault(config, r["ratio_to_cublas"])
        chosen = choose(*map(int, shape.split("x")))
        if chosen in by_config and step.default in by_config:
            out.append((shape, chosen, by_config[chosen], by_config[step.default], max(by_config.values())))
    return out


# ---------------------------------------------------------------------------------------------
# Nsight Compute logs (results/logs/*ncu*.txt)
# ---------------------------------------------------------------------------------------------


def ncu_runs(records: Sequence[dict], source: str = "") -> list:
    """The ``kind: ncu`` records (``scripts/ncu_records.py``) whose source log's name contains
    ``source``, oldest first."""
    return sorted((r for r in records if r.get("kind") == "ncu" and source in r.get("source_log", "")),
                  key=lambda r: (r.get("date", ""), r.get("source_log", "")))


def ncu_metric(kernel: dict, name: str) -> Optional[float]:
    """A kernel's metric in base units (bytes, sectors, cycles), or None when the run did not collect it."""
    value = kernel.get("metrics", {}).get(name)
    return None if value is None else value[0]


def ncu_utilization(record: dict) -> list:
    """``[(kernel, {elapsed, active, pipe, pipe_percent}), ...]`` for the kernels of an ncu record
    that has the speed-of-light sections (``scripts/profile_ncu.py``)."""
    out = []
    for k in record.get("kernels", []):
        elapsed, active = ncu_metric(k, "Elapsed Cycles"), ncu_metric(k, "SM Active Cycles")
        if elapsed and active and k.get("busiest_pipe"):
            out.append((k["kernel"], {"elapsed": elapsed, "active": active, "pipe": k["busiest_pipe"]["pipe"],
                                      "pipe_percent": k["busiest_pipe"]["percent_of_elapsed"]}))
    return out


# Nsight Compute counters of ``scripts/ncu_counters.sh`` that show the L2 request coalescer at work
# (:mod:`gemm_course.rules.placement` explains it)
COALESCER_METRICS = {
    "merged": "lrc__request_sectors_op_read_coalescing_achieved_type_hardware.sum",
    "l2_lookups": "lts__t_sectors_srcunit_tex_op_read.sum",
    "dram": "dram__bytes_read.sum",
}


def coalescer_counters(record: dict) -> list:
    """``[(kernel, {merged, l2_lookups: sectors; dram: bytes}), ...]`` for the kernels of an ncu record
    of ``scripts/ncu_counters.sh`` that collected the L2 request coalescer's counters
    (:data:`COALESCER_METRICS`)."""
    out = []
    for k in record.get("kernels", []):
        values = {key: ncu_metric(k, metric) for key, metric in COALESCER_METRICS.items()}
        if all(v is not None for v in values.values()):
            out.append((k["kernel"], values))
    return out
