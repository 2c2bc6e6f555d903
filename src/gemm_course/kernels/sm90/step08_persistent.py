"""Step 8 (Hopper) - a persistent kernel with a static tile scheduler.

Parent: step 7. Key differences:

* The grid is as many clusters as the GPU can hold at once (66 clusters of 2 on a 132-SM H200,
  asked from the driver), not one CTA per tile or tile pair: every SM runs one CTA for the whole
  GEMM, and pays the launch, the barrier set-up and the pipeline fill once.
* A static scheduler hands out cluster-tiles: cluster c computes c, c + G, c + 2G, ... (G
  clusters in the grid), with step 7's loop over the CTA's tiles. Cluster-tile index -> (m, n) is
  a row raster here (``cluster_tile``); steps 9 and 10 change only that function.
* Step 7's ``tiles_per_cta`` knob is gone (the Config derives from step 7's ``OverlapConfig``,
  which lacks it): the scheduler decides how many tiles a CTA computes.

Expected: at 4096^3 with 128 x 256 tiles there are 512 tiles for 132 SMs: 3.9 waves. The full
waves gain the fill and drain of step 7's pairs and the CTA launches; the last wave keeps 58 of
66 clusters busy, as any one-tile-per-unit schedule does (step 11 splits that tail).

Accepts: any M; N and K multiples of 8.
"""

import dataclasses
import functools

import cutlass
import cutlass.cute as cute

from ... import hardware
from ...runtime import arch
from . import step07_epilogue_overlap as parent
from .step04_tma_store import can_implement  # noqa: F401  (same shapes as step 4)

H200_SMS = hardware.H200.sms  # 132: compile-time grid size when no GPU is present to ask


@dataclasses.dataclass(frozen=True)
class Config(parent.OverlapConfig):  # step 7's less tiles_per_cta
    pass


check_config = parent.check_overlap_config


@functools.lru_cache(maxsize=None)
def max_clusters(cluster_size: int) -> int:
    """Clusters the GPU runs at once (one CTA per SM); a full H200 when there is no GPU."""
    machine = arch.machine()
    if machine.has_gpu:
        import torch
        from cutlass.utils import HardwareInfo

        torch.zeros(1, device="cuda")  # the driver query runs in the current context: let torch create it
        return HardwareInfo().get_max_active_clusters(cluster_size)
    return H200_SMS // cluster_size


class Gemm(parent.Gemm):
    def __init__(self, config: Config):
        super().__init__(config)
        cm, cn, _ = self.cluster_shape_mnk
        self.max_clusters = max_clusters(cm * cn)

    def cluster_grid(self, mC: cute.Tensor):
        """Cluster-tiles along M and N."""
        bm, bn, _ = self.tile_mnk
        cm, cn, _ = self.cluster_shape_mnk
        return cute.ceil_div(mC.shape[0], bm * cm), cute.ceil_div(mC.shape[1], bn * cn)

    def grid(self, mA: cute.Tensor, mC: cute.Tensor):
        """As many clusters as run at once (fewer if there are fewer cluster-tiles), along x."""
        clusters_m, clusters_n = self.cluster_grid(mC)
        clusters = cutlass.min(clusters_m * clusters_n, self.max_clusters)
        cm, cn, _ = self.cluster_shape_mnk
        return (clusters * cm, cn, 1)

    def cluster_tile(self, index, clusters_m, clusters_n):
        """Row raster: consecutive cluster-tiles walk along N, sharing A's row panel."""
        return index // clusters_n, index % clusters_n

    def num_tiles(self, mC: cute.Tensor):
        """Cluster c computes c, c + G, c + 2G, ... below the number of cluster-tiles."""
        bidx, _, _ = cute.arch.block_idx()
        gdimx, _, _ = cute.arch.grid_dim()
        cm = self.cluster_shape_mnk[0]
        clusters_m, clusters_n = self.cluster_grid(mC)
        return cute.ceil_div(clusters_m * clusters_n - bidx // cm, gdimx // cm)

    def tile_coord(self, i, mC: cute.Tensor):
        """This CTA's tile in the cluster's i-th cluster-tile."""
        bidx, bidy, _ = cute.arch.block_idx()
        gdimx, _, _ = cute.arch.grid_dim()
        cm, cn, _ = self.cluster_shape_mnk
        clusters_m, clusters_n = self.cluster_grid(mC)
        tile_m, tile_n = self.cluster_tile(bidx // cm + i * (gdimx // cm), clusters_m, clusters_n)
        return (tile_m * cm + bidx % cm, tile_n * cn + bidy, None)
