"""Step 9 (Hopper) - thread-block swizzle: a grouped raster order for L2 reuse.

Parent: step 8. Key difference: only ``cluster_tile`` changes. Consecutive cluster-tiles walk
down a band of ``group`` tile-rows before moving right (Triton's GROUP_SIZE_M order), instead
of along a whole row of tiles.

Why: the 132 tiles in flight at once read their A row-panels and B column-panels from L2. A
row raster's wave covers few rows but a long stretch of columns: every B panel of the wave is
new. A band of ``group`` rows makes a wave roughly square in tiles, so the panels it touches
are fewer and more of them are already in L2 (``gemm_course.teaching.sim.l2_traffic`` counts them).

Expected: no gain at 4096^3, where the DRAM traffic is far below what HBM delivers either way; a
few percent at 8192^3 and on long-K LLM shapes, where the row raster streams B from DRAM over and
over.

Accepts: any M; N and K multiples of 8.
"""

import dataclasses

import cutlass

from ...rules import tile_order
from . import step08_persistent as parent
from .step04_tma_store import can_implement  # noqa: F401  (same shapes as step 4)


@dataclasses.dataclass(frozen=True)
class Config(parent.Config):
    group: int = 8  # cluster-tile rows per band


def check_config(config: Config):
    if config.group < 1:
        return False, "group must be at least 1"
    return parent.check_config(config)


class Gemm(parent.Gemm):
    def cluster_tile(self, index, clusters_m, clusters_n):
        return tile_order.grouped_tile(index, clusters_m, clusters_n, self.config.group, minimum=cutlass.min)
