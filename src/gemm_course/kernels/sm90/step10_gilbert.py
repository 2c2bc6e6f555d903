"""Step 10 (Hopper) - tiles in the order of a generalized Hilbert curve (Gilbert path).

Parent: step 9. Key difference: only ``cluster_tile`` changes. The scheduler's cluster-tile index
is mapped to (m, n) along a *Gilbert* curve: a generalized Hilbert curve that fills any rectangle
(not just 2^k squares), moving between neighbouring tiles at every step (one diagonal step at
most, on some odd-by-even grids). Consecutive tiles stay close in both m and n at every scale, so
each wave of concurrent tiles covers a compact patch of C: few A row-panels and few B
column-panels, as with a grouped raster, but without choosing a group size and without the seams
at band edges. (Step 9's ``group`` knob stays in the Config and is not used.)

The kernel computes its tile from its index with ``gemm_course.rules.tile_order.gilbert_tile``: a
non-recursive descent through the curve's splits (a few dozen integer operations per level, five
or six levels on a 16 x 16 grid). The producer and the consumers each run it, the consumers
between a tile's last wgmma and its epilogue, while the tensor cores wait: step 11 has the
producer work it out once and hand it over. A grid that fits in one wave runs every tile at once,
so its order cannot matter and the row order is kept.

The curve is Jakub Cerveny's "gilbert" (2018, BSD-2-Clause); the course's implementation is
written from the published description.

Expected: like step 9 at 4096^3 (inputs nearly fit in L2); at 8192^3 and large LLM shapes a
wave's footprint close to a well-chosen group's (the L2 panel model puts it 1-13% larger at
4096^3, 8192^3 and 8192 x 28672 x 4096), on any grid and with no group size to tune.

Accepts: any M; N and K multiples of 8.
"""

import dataclasses

import cutlass.cute as cute

from ...rules import tile_order
from . import step09_grouped_raster as parent
from .step04_tma_store import can_implement  # noqa: F401  (same shapes as step 4)

gilbert_tile = tile_order.for_kernel(tile_order.gilbert_tile)


@dataclasses.dataclass(frozen=True)
class Config(parent.Config):
    pass


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
