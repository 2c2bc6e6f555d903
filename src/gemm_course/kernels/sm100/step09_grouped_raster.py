"""Step 9 (Blackwell) - thread-block swizzle: a grouped raster order for L2 reuse.

Parent: step 8. Key difference: only ``cluster_tile`` changes. Consecutive cluster-tiles walk
down a band of ``group`` tile-rows before moving right (Triton's GROUP_SIZE_M order), instead of
along a whole row of tiles; the function is the course's one ``tile_order.grouped_tile``, shared
with the Hopper step 9.

Why it matters here too: if cluster launch control hands out cluster indices in launch order, as
the course's model assumes (PTX does not promise which pending cluster a cancellation takes, and
no B200 has run this step), the clusters that run at the same time hold consecutive indices, and
the order decides how many A and B panels they read from L2 at once
(``gemm_course.teaching.sim.l2_traffic`` counts them).

Expected: nothing where A and B fit in L2 together (4096^3: 64 MiB of inputs, 126 MB of L2 on a
B200); a few percent at 8192^3 and on long-K LLM shapes.

Accepts: any M; N and K multiples of 8.
"""

import dataclasses

import cutlass

from ...rules import tile_order
from . import step08_persistent_clc as parent
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
