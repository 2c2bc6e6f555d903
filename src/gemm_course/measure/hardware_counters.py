"""Records of what the hardware's own counters said: kind ``clocks`` and kind ``ncu``.

``clocks`` records (``scripts/gpu_clocks.py``: TFLOP/s, SM clock and board power per run, step and
shape) split a step's ratio to cuBLAS into a clock part and a per-clock part
(:func:`power_limit_split`) and set the persistent steps' tile orders against their joules per
TFLOP (:func:`order_energy_points`); ``ncu`` records (Nsight Compute logs, ``results/logs/*ncu*.txt``)
give their metrics (:func:`ncu_runs`, :func:`ncu_metric`, :func:`ncu_utilization`,
:func:`coalescer_counters`). Re-exported by :mod:`gemm_course.measure.records`.
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from .record_queries import shape_of

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
