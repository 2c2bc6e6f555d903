"""The final Hopper kernel's tile per problem shape, chosen on the host before the launch.

A persistent kernel runs its cluster-tiles in *waves* of G clusters (66 on an H200: 132 SMs,
clusters of two). A grid of T cluster-tiles takes T / G waves, but the GPU pays for
ceil(T / G): the last wave's idle clusters are lost time. The stream-K tail (``schedule``)
wins part of it back, at the cost of handing partial sums over; with many waves the loss is a
small fraction of the run anyway. With few waves it is not: 3072^3 has 144 cluster-tiles of
256 x 256 (2.18 waves, 73% of the three it pays for), and the kernel ran at 0.85 of cuBLAS there
on the H200, whose library picks a different tile for such shapes.

So the host compares the candidate tile widths (:data:`TILE_NS`; tile_m 128, clusters of two CTAs,
:data:`CLUSTERS`):

* with at least :data:`MANY_WAVES` waves of the widest tile, it keeps the widest (fewest bytes
  per FLOP, and the tail is a small share);
* otherwise it takes the width whose waves are filled best (``wave_fill``: T / G over
  ceil(T / G)), the wider of any within :data:`FILL_TIE` of the best.

Each width comes with the stage count its shared memory allows (:data:`STAGES`); the widest tile
trades its half-tile epilogue for a fourth stage when K is long (:data:`LONG_K`). The narrowest
pairs its CTAs along N (they share A): on the few-wave shapes it is picked for, as fast or faster
than pairs along M, up to 13% at 2048 x 1024 x 16384. Chapter 11 shows the measurements behind
every constant (``results/tuning``).
"""

from __future__ import annotations

import math
from typing import Dict, NamedTuple

from .. import hardware

TILE_M = 128
CLUSTER_SIZE = 2
TILE_NS = (256, 192, 128)  # widest first: ties go to the wider tile
MANY_WAVES = 4  # from here on the widest tile's quantization loss is at most 1/8, the tail split recovers most
FILL_TIE = 0.02  # wave fills this close count as equal

TILE_K = 64  # K per stage: one 128-byte swizzle row of bf16
# (epi_n, epi_stages) per width: the epilogue's staging buffers, chosen; the A/B stages are what fits beside them
EPILOGUES: Dict[int, tuple] = {256: (128, 2), 192: (96, 2), 128: (32, 2)}
LONG_K = 16384  # K from which the widest tile runs four stages with a 32-column epilogue (16 KiB staging)
LONG_K_EPILOGUE = (32, 2)


def stages_that_fit(tile_n: int, epi_n: int, epi_stages: int) -> int:
    """A/B stages of a 128 x ``tile_n`` tile that fit in a CTA's shared memory (227 KiB on sm_90a,
    :mod:`gemm_course.hardware`) beside the epilogue's staging buffers, counted as step 5 counts them
    (``kernels.sm90.step05_cluster_multicast.smem_estimate``: 1 KiB of barriers, 2 KiB of alignment)."""
    stage = (TILE_M + tile_n) * TILE_K * 2
    fixed = TILE_M * epi_n * 2 * epi_stages + 1024 + 2 * 1024
    return hardware.stages_that_fit(stage, fixed, hardware.SM90A.smem_per_cta)


# (stages, epi_n, epi_stages) per width: {256: (3, 128, 2), 192: (4, 96, 2), 128: (6, 32, 2)}
STAGES: Dict[int, tuple] = {tn: (stages_that_fit(tn, *epi), *epi) for tn, epi in EPILOGUES.items()}
LONG_K_STAGES = (stages_that_fit(TILE_NS[0], *LONG_K_EPILOGUE), *LONG_K_EPILOGUE)  # (4, 32, 2)
CLUSTERS: Dict[int, tuple] = {256: (2, 1), 192: (2, 1), 128: (1, 2)}  # (cluster_m, cluster_n) per width


class Choice(NamedTuple):
    """A tile width, its pipeline and its cluster: the fields of step 11's ``Config`` the rule sets."""

    tile_n: int
    stages: int
    epi_n: int
    epi_stages: int
    cluster_m: int
    cluster_n: int

    def fields(self) -> dict:
        return self._asdict()


def cluster_tiles(m: int, n: int, tile_n: int) -> int:
    """Cluster-tiles of a 128 x ``tile_n`` tile in its clusters (:data:`CLUSTERS`) covering an m x n output."""
    cluster_m, cluster_n = CLUSTERS[tile_n]
    return math.ceil(math.ceil(m / TILE_M) / cluster_m) * math.ceil(math.ceil(n / tile_n) / cluster_n)


def waves(m: int, n: int, tile_n: int, clusters: int) -> float:
    return cluster_tiles(m, n, tile_n) / clusters


def wave_fill(w: float) -> float:
    """Share of the paid-for waves doing work: w / ceil(w) (1.0 for whole waves)."""
    return w / math.ceil(w)


def choose_tile_n(m: int, n: int, clusters: int) -> int:
    """The tile width for an m x n output on a GPU running ``clusters`` clusters at once."""
    widest = TILE_NS[0]
    if waves(m, n, widest, clusters) >= MANY_WAVES:
        return widest
    fills = {tn: wave_fill(waves(m, n, tn, clusters)) for tn in TILE_NS}
    best = max(fills.values())
    return next(tn for tn in TILE_NS if fills[tn] >= best - FILL_TIE)


def choose(m: int, n: int, k: int, clusters: int) -> Choice:
    """The tile and pipeline step 11 runs an m x n x k problem with."""
    tile_n = choose_tile_n(m, n, clusters)
    stages = LONG_K_STAGES if tile_n == TILE_NS[0] and k >= LONG_K else STAGES[tile_n]
    return Choice(tile_n, *stages, *CLUSTERS[tile_n])
