"""Step 10 (Blackwell) - tiles in the order of a generalized Hilbert curve (Gilbert path).

Parent: step 9. Key difference: only ``cluster_tile`` changes: cluster-tile index -> (m, n) along
a Gilbert curve (the course's ``tile_order.gilbert_tile``, shared with the Hopper step 10), which
fills any rectangle moving between neighbouring tiles, so the clusters running at once cover a
compact patch of C at every scale, without choosing a group size.

Every warp that needs a tile runs the curve's descent (a few dozen integer operations per level)
after decoding the scheduler's answer. A grid that fits in one wave runs every tile at once, so
its order cannot matter and the row order is kept.

The curve is Jakub Cerveny's "gilbert" (2018, BSD-2-Clause); the course's implementation is
written from the published description.

Expected: like step 9 where the inputs fit in L2; as compact as a well-chosen group on any grid.

Accepts: any M; N and K multiples of 8.
"""

import dataclasses

import cutlass.cute as cute

from ... import hardware
from ...rules import tile_order
from . import step09_grouped_raster as parent
from .step04_tma_store import can_implement  # noqa: F401  (same shapes as step 4)

gilbert_tile = tile_order.for_kernel(tile_order.gilbert_tile)
B200_SMS = hardware.B200.sms  # 148; clusters resident at once = SMs / CTAs per cluster, on a full B200


@dataclasses.dataclass(frozen=True)
class Config(parent.Config):
    pass


check_config = parent.check_config


class Gemm(parent.Gemm):
    @cute.jit
    def cluster_tile(self, index, clusters_m, clusters_n):
        tile_m, tile_n = index // clusters_n, index % clusters_n
        if clusters_m * clusters_n > B200_SMS // (self.config.cluster_m * self.config.cluster_n):
            tile_m, tile_n = gilbert_tile(index, clusters_m, clusters_n)
        return tile_m, tile_n
