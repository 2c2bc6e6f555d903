"""Step 10 (Hopper) - tiles in the order of a generalized Hilbert curve (Gilbert path).

Parent: step 9. Key difference: only ``cluster_tile`` changes (so the class subclasses step 8,
replacing step 9's grouped order in the same one function), and the config turns on step 8's
``gpc_order`` (below). The scheduler's cluster-tile
index is mapped to (m, n) along a *Gilbert* curve: a generalized Hilbert curve that fills any
rectangle (not just 2^k squares), moving between neighbouring tiles at every step (one diagonal
step at most, on some odd-by-even grids). Consecutive tiles stay close in both m and n at every
scale, so each wave of concurrent tiles covers a compact patch of C: few A row-panels and few
B column-panels, as with a grouped raster, but without choosing a group size and without the
seams at band edges.

The kernel computes its tile from its index with ``gemm_course.tile_order.gilbert_tile``: a
non-recursive descent through the curve's splits (a few dozen integer operations per level,
five or six levels on a 16 x 16 grid). Only the producer warp runs it, ahead of the tile's
loads, and hands the result to the consumers through step 8's tile ring; run by the consumers
between a tile's last wgmma and its epilogue, it cost 2-4% (NOTES.md). A cluster's first tile
still waits for it (about 0.6 us at 4096^3 on the H200), so a grid that fits in one wave, where
the order cannot matter, takes the row order instead. The curve is Jakub Cerveny's "gilbert" (2018, BSD-2-Clause); the course's
implementation is written from the published description.

Neighbours on the curve share panels only if they also share a GPC: Hopper's L2 request
coalescer merges two SMs' loads of the same sector only within one GPC (measured, NOTES.md), and
the hardware deals a grid's clusters out to the GPCs in turn, so clusters c and c + 1 sit in
different GPCs. With ``gpc_order`` (step 8's knob, on here) the host probes once where the
clusters land (``gemm_course.placement``) and the kernel permutes each full wave's indices so
that each GPC's clusters take consecutive places on the curve. A permutation of the cluster
indices, so every tile is still computed once wherever the GPU happens to place the clusters.

Expected: like step 9 at 4096^3 (inputs nearly fit in L2); at 8192^3 and large LLM shapes the
wave's footprint is as small as a well-chosen group's, on any grid.

Accepts: any M; N and K multiples of 8.
"""

import dataclasses

import cutlass.cute as cute

from ... import tile_order
from . import step08_persistent as parent
from .step04_tma_store import can_implement  # noqa: F401  (same shapes as step 4)

gilbert_tile = tile_order.for_kernel(tile_order.gilbert_tile)


@dataclasses.dataclass(frozen=True)
class Config(parent.Config):
    gpc_order: bool = True  # neighbouring tiles of a wave to clusters of one GPC (``gemm_course.placement``)


check_config = parent.check_config


class Gemm(parent.Gemm):
    @cute.jit
    def cluster_tile(self, index, clusters_m, clusters_n):
        # a grid that fits in one wave runs every tile at once, so its order cannot matter: skip
        # the descent, which delays the first load (2% at 2048^3, NOTES.md)
        tile_m, tile_n = index // clusters_n, index % clusters_n
        if clusters_m * clusters_n > self.max_clusters:
            tile_m, tile_n = gilbert_tile(index, clusters_m, clusters_n)
        return tile_m, tile_n
