"""Step 8 (Hopper) - a persistent kernel with a static tile scheduler.

Parent: step 7. Key differences:

* The grid is one cluster per ``cluster_m * cluster_n`` SMs (66 clusters of 2 on a 132-SM
  H200), not one CTA per tile: every SM runs exactly one CTA for the whole GEMM.
* A static scheduler hands out cluster-tiles: cluster c computes c, c + G, c + 2G, ... (G
  clusters in the grid) until the tile grid is covered. Cluster-tile index -> (m, n) is a row
  raster here (``cluster_tile``); steps 9 and 10 change only that function.
* Launch and CTA start-up costs are paid once per SM, and the "epilogue under the next tile's
  loads" overlap of step 7 now spans every tile of the SM, not pairs.
* The producer warp is the scheduler: it computes each tile's coordinates once, before the
  tile's first load, and hands them to the consumers through a small ring in shared memory
  (``tile_ring``, ``stages + 2`` slots). The write is ordered before the consumers' read by the
  stage's *full* barrier (the producer arrives on it after writing; the consumers wait on it
  before their epilogue reads the slot). The consumers never run the scheduler's arithmetic,
  which a costlier order (step 10) would otherwise put between every tile's last wgmma and its
  epilogue.

Expected: at 4096^3 with 128x256 tiles there are 512 tiles for 132 SMs: 3.9 waves either way;
the gain is the fill/drain of step 7's pairs and of CTA launches, a few percent.

Accepts: any M; N and K multiples of 8.
"""

import dataclasses

import cutlass
import cutlass.cute as cute

from ... import arch
from . import step06_warp_specialized, step07_epilogue_overlap as parent
from .step02_wgmma_tma import AB_DTYPE, C_DTYPE
from .step04_tma_store import can_implement  # noqa: F401  (same shapes as step 4)

H200_SMS = 132  # compile-time grid size when no GPU is present to ask


@dataclasses.dataclass(frozen=True)
class Config(step06_warp_specialized.Config):
    pass  # step 7's tiles_per_cta is gone: the scheduler decides


def check_config(config: Config):
    return step06_warp_specialized.check_config(config)


class Gemm(parent.Gemm):
    def __init__(self, config: Config):
        super().__init__(config)
        cm, cn, _ = self.cluster_shape_mnk
        self.max_clusters = (arch.machine().sm_count or H200_SMS) // (cm * cn)
        # the producer runs at most `stages` K tiles ahead, so at most stages + 1 tiles' slots are live
        self.ring_depth = self.stages + 2

    def make_shared_storage(self, a_smem_layout, b_smem_layout, epi_smem_layout):
        stages, ring_depth = self.stages, self.ring_depth

        @cute.struct
        class SharedStorage:
            mainloop_barriers: cute.struct.MemRange[cutlass.Int64, 2 * stages]  # full + empty per stage
            tile_ring: cute.struct.MemRange[cutlass.Int32, 2 * ring_depth]  # (m, n) of upcoming tiles
            sA: cute.struct.Align[cute.struct.MemRange[AB_DTYPE, cute.cosize(a_smem_layout)], 1024]
            sB: cute.struct.Align[cute.struct.MemRange[AB_DTYPE, cute.cosize(b_smem_layout)], 1024]
            sC: cute.struct.Align[cute.struct.MemRange[C_DTYPE, cute.cosize(epi_smem_layout)], 1024]

        return SharedStorage

    def cluster_grid(self, mC: cute.Tensor):
        """Cluster-tiles along M and N."""
        bm, bn, _ = self.tile_mnk
        cm, cn, _ = self.cluster_shape_mnk
        return cute.ceil_div(mC.shape[0], bm * cm), cute.ceil_div(mC.shape[1], bn * cn)

    def grid(self, mC: cute.Tensor):
        clusters_m, clusters_n = self.cluster_grid(mC)
        clusters = cutlass.min(clusters_m * clusters_n, self.max_clusters)
        cm, cn, _ = self.cluster_shape_mnk
        return (clusters * cm, cn, 1)

    def cluster_tile(self, index, clusters_m, clusters_n):
        """Row raster: consecutive cluster-tiles walk along N, sharing A's row panel."""
        return index // clusters_n, index % clusters_n

    def num_tiles(self, mC: cute.Tensor):
        bidx, _, _ = cute.arch.block_idx()
        gdimx, _, _ = cute.arch.grid_dim()
        cm = self.cluster_shape_mnk[0]
        clusters_m, clusters_n = self.cluster_grid(mC)
        cluster_id, num_clusters = bidx // cm, gdimx // cm
        return cute.ceil_div(clusters_m * clusters_n - cluster_id, num_clusters)

    def tile_coord(self, i, mC: cute.Tensor):
        bidx, bidy, _ = cute.arch.block_idx()
        gdimx, _, _ = cute.arch.grid_dim()
        cm, cn, _ = self.cluster_shape_mnk
        clusters_m, clusters_n = self.cluster_grid(mC)
        index = bidx // cm + i * (gdimx // cm)
        tile_m, tile_n = self.cluster_tile(index, clusters_m, clusters_n)
        return (tile_m * cm + bidx % cm, tile_n * cn + bidy, None)

    def producer_tile(self, i, mC: cute.Tensor, storage):
        """Compute tile i and publish it in ring slot i % ring_depth before the tile's first load."""
        tile_coord = self.tile_coord(i, mC)
        ring = storage.tile_ring.get_tensor(cute.make_layout((2, self.ring_depth)))
        with cute.arch.elect_one():
            ring[0, i % self.ring_depth] = tile_coord[0]
            ring[1, i % self.ring_depth] = tile_coord[1]
        cute.arch.sync_warp()  # the write precedes whichever lane arrives on the next full barrier
        return tile_coord

    def consumer_tile(self, i, mC: cute.Tensor, storage):
        """Read tile i from the ring: its first stage's full barrier, already waited on, ordered the write."""
        ring = storage.tile_ring.get_tensor(cute.make_layout((2, self.ring_depth)))
        return (ring[0, i % self.ring_depth], ring[1, i % self.ring_depth], None)
