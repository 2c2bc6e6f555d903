"""Hopper's SM, stages and schedule (chapters 5-11): occupancy, the stage pipeline, the persistent schedule.

Part of ``gemm_course.teaching.sim`` (its docstring says what each model is for)."""

from __future__ import annotations

from typing import Optional

import numpy as np

from ... import hardware

# ---------------------------------------------------------------------------------------------
# Hopper: CTAs per SM (chapter 5), the stage pipeline (chapters 6-7), the static persistent
# schedule (chapters 8-11)
# ---------------------------------------------------------------------------------------------

# Hopper (compute capability 9.0) per-SM limits, from the CUDA C++ Programming Guide's table of
# technical specifications; quoted, not measured. Nsight Compute reports the same 1 KiB of
# "driver shared memory" per block (results/logs/*ncu*).
HOPPER_SM = hardware.SM90A.occupancy_limits()  # registers, register_unit, smem_per_sm, smem_per_cta, ...


def occupancy(registers: int, threads: int, smem_bytes: int, stages: int = 1, limits: Optional[dict] = None) -> dict:
    """How many CTAs of a kernel fit on one Hopper SM, and what limits it.

    ``registers`` per thread and ``smem_bytes`` per CTA as the compiled kernel reports them
    (:func:`gemm_course.teaching.inspect.report`), ``threads`` per CTA. ``stages``: shared-memory stages
    per CTA, to count the K tiles an SM can have in flight (``ctas * stages``).
    """
    lim = dict(HOPPER_SM, **(limits or {}))
    warps = -(-threads // 32)
    unit = lim["register_unit"]
    regs_per_warp = -(-registers * 32 // unit) * unit
    by_registers = (lim["registers"] // regs_per_warp) // warps if regs_per_warp else lim["ctas"]
    by_smem = lim["smem_per_sm"] // (smem_bytes + lim["smem_reserved_per_cta"]) if smem_bytes <= lim["smem_per_cta"] else 0
    by_warps = lim["warps"] // warps
    limits_ = {"registers": by_registers, "shared memory": by_smem, "warps": by_warps, "CTA slots": lim["ctas"]}
    ctas = min(limits_.values())
    return {
        "registers": registers, "threads": threads, "warps": warps, "smem_bytes": smem_bytes, "stages": stages,
        "registers_per_warp": regs_per_warp, "limits": limits_, "ctas": ctas,
        "limiter": [name for name, v in limits_.items() if v == ctas],
        "warps_per_sm": ctas * warps, "k_tiles_in_flight": ctas * stages,
    }


def pipeline_model(stages: int, k_tiles: int, tiles_per_cta: int = 1, ctas: int = 1, load: float = 3.0,
                   mma: float = 1.0, epilogue: float = 2.5, issue: float = 0.2) -> dict:
    """A small event model of one SM running ``ctas`` CTAs one after the other (one fits at a time),
    each computing ``tiles_per_cta`` tiles of ``k_tiles`` K tiles through ``stages`` shared-memory stages.

    Rules (the kernels' protocol, with made-up durations): the producer issues K tile j into
    stage ``j % stages`` once the tile that used the stage before has been released, ``issue``
    after its previous copy; the data lands ``load`` later; the consumers run the K tile's wgmma
    (``mma``) once it has landed and the previous K tile's wgmma is done, and release the stage
    when it completes; after a tile's last K tile they run its ``epilogue``, during which the
    producer keeps loading. A CTA ends after its last epilogue; the next one starts then. One
    stage reproduces steps 2-5 (load, compute, release, load). Durations are illustrative, not measured.
    """
    if stages < 1 or k_tiles < 1 or tiles_per_cta < 1 or ctas < 1:
        raise ValueError("stages, k_tiles, tiles_per_cta and ctas must be >= 1")
    events = []  # dicts: lane ('producer'/'consumer'), start, end, kind ('load'/'mma'/'epilogue'), label, stage
    start = 0.0
    boundaries = []
    for c in range(ctas):
        free = [start] * stages  # when each stage was last released
        producer, consumer = start, start
        for t in range(tiles_per_cta):
            for k in range(k_tiles):
                j = t * k_tiles + k
                s = j % stages
                issued = max(producer, free[s])
                landed = issued + load
                events.append({"lane": "producer", "start": issued, "end": landed, "kind": "load",
                               "label": f"k{k}", "stage": s, "cta": c, "tile": t})
                producer = issued + issue
                begin = max(landed, consumer)
                consumer = begin + mma
                events.append({"lane": "consumer", "start": begin, "end": consumer, "kind": "mma",
                               "label": f"k{k}", "stage": s, "cta": c, "tile": t})
                free[s] = consumer
            events.append({"lane": "consumer", "start": consumer, "end": consumer + epilogue, "kind": "epilogue",
                           "label": f"epilogue\ntile {c * tiles_per_cta + t}", "stage": None, "cta": c, "tile": t})
            consumer += epilogue
        start = consumer
        boundaries.append(start)
    span = start
    busy = sum(e["end"] - e["start"] for e in events if e["kind"] == "mma")
    return {"events": events, "span": span, "mma_busy": busy / span, "cta_ends": boundaries[:-1],
            "params": {"stages": stages, "k_tiles": k_tiles, "tiles_per_cta": tiles_per_cta, "ctas": ctas,
                       "load": load, "mma": mma, "epilogue": epilogue, "issue": issue}}


def persistent_schedule(clusters_m: int, clusters_n: int, num_clusters: int, cluster_tile) -> dict:
    """Which cluster computes which cluster-tile, and in which of its iterations (its *wave*).

    The static scheduler of step 8 (and 9, 10): a grid of ``min(tiles, num_clusters)`` clusters;
    cluster c computes the cluster-tiles with index c, c + G, c + 2G, ... (G clusters), and
    ``cluster_tile(index, clusters_m, clusters_n)`` maps an index to its (m, n): pass the step's own.
    """
    total = clusters_m * clusters_n
    grid = min(total, num_clusters)
    owner = np.full((clusters_m, clusters_n), -1, dtype=int)
    wave = np.full((clusters_m, clusters_n), -1, dtype=int)
    per_cluster = []
    for c in range(grid):
        count = -(-(total - c) // grid)  # the kernel's num_tiles: ceil_div(tiles - cluster_id, clusters)
        per_cluster.append(count)
        for i in range(count):
            m, n = (int(v) for v in cluster_tile(c + i * grid, clusters_m, clusters_n))
            if owner[m, n] != -1:
                raise ValueError(f"cluster-tile ({m}, {n}) is scheduled twice")
            owner[m, n], wave[m, n] = c, i
    if (owner < 0).any():
        raise ValueError("the schedule leaves a cluster-tile uncomputed")
    waves = int(wave.max()) + 1
    last = int((wave == waves - 1).sum())
    return {"owner": owner, "wave": wave, "tiles_per_cluster": per_cluster, "clusters": grid, "waves": waves,
            "last_wave_tiles": last, "idle_in_last_wave": grid - last, "tiles": total}
