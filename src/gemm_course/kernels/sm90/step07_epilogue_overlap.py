"""Step 7 (Hopper) - the epilogue overlaps the next tile's main loop.

Parent: step 6. Key differences:

* A CTA computes ``tiles_per_cta`` output tiles (default 2, neighbours along N) instead of one;
  the grid shrinks by that factor.
* The producer warp does not stop at a tile boundary: while the consumer warpgroups run the
  epilogue of tile t (stmatrix + TMA store), it is already filling the stages with tile t+1's
  K tiles, so the consumers find data waiting when they come back.
* The TMA stores are *asynchronous*: consumers only wait for a staging buffer to be read
  before refilling it, and for all stores once, before the CTA exits - not at every tile.

Only the tile schedule changes in the code (``grid``, ``num_tiles``, ``tile_coord``): step 6
already wrote its roles as a loop over the CTA's tiles, with one pipeline state carried across
them.

Expected: a tile's epilogue (128x256 outputs, ~2 us) was exposed once per tile in step 6, and
so was the pipeline fill at each tile start; both are now hidden for all but the CTA's first
tile: up to a few percent at 4096^3.

Accepts: any M; N and K multiples of 8.
"""

import dataclasses

import cutlass.cute as cute

from . import step06_warp_specialized as parent
from .step04_tma_store import can_implement  # noqa: F401  (same shapes as step 4)


@dataclasses.dataclass(frozen=True)
class Config(parent.Config):
    tiles_per_cta: int = 2


def check_config(config: Config):
    if config.tiles_per_cta < 1:
        return False, "tiles_per_cta must be at least 1"
    return parent.check_config(config)


class Gemm(parent.Gemm):
    def grid(self, mA: cute.Tensor, mC: cute.Tensor):
        """Clusters along N cover tiles_per_cta cluster-tiles each."""
        bm, bn, _ = self.tile_mnk
        cm, cn, _ = self.cluster_shape_mnk
        clusters_n = cute.ceil_div(cute.ceil_div(mC.shape[1], bn * cn), self.config.tiles_per_cta)
        return (cute.ceil_div(mC.shape[0], bm * cm) * cm, clusters_n * cn, 1)

    def num_tiles(self, mC: cute.Tensor):
        return self.config.tiles_per_cta

    def tile_coord(self, i, mC: cute.Tensor):
        bidx, bidy, _ = cute.arch.block_idx()
        cn = self.cluster_shape_mnk[1]
        cluster_tile_n = (bidy // cn) * self.config.tiles_per_cta + i
        return (bidx, cluster_tile_n * cn + bidy % cn, None)
