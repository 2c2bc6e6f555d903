"""Queries on records: which record a page shows, and the lines and tables made of one.

A record's shape and run (:func:`shape_of`, :func:`run_of`, :func:`newest_run`); whether it ran a
step as the course runs it (:func:`has_default_config`, :func:`config_changes`); the newest record
of a step at a shape (:func:`latest`, :func:`latest_per_step`), the roofline's points, the
sustained clock and a caption's provenance line; chapters 4-10's steps side by side
(:func:`step_table`, :func:`spread_verdict`: generated text, never typed numbers). Every function
takes records and returns records, numbers or Markdown text; re-exported by
:mod:`gemm_course.measure.records`.
"""

from __future__ import annotations

import dataclasses
import statistics
from typing import Iterable, Optional, Sequence

# Config fields added after records were written, with the value the kernels behaved as before:
# a record without the field ran that way.
LEGACY_FIELDS = {"gpc_order": False}


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
