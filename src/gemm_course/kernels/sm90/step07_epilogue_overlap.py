"""Step 7 (Hopper) - the epilogue overlaps the next tile's main loop.

Parent: step 6. Key differences:

* A CTA computes ``tiles_per_cta`` output tiles (default 2, neighbours along N) instead of one;
  the grid shrinks by that factor.
* The producer warp does not stop at a tile boundary: while the consumer warpgroups run the
  epilogue of tile t (stmatrix + TMA store), it is already filling the stages with tile t+1's
  K tiles, so the consumers find data waiting when they come back.
* The TMA stores, asynchronous since step 4, now overlap the next tile: the consumers wait only
  until a staging buffer has been read by its earlier store (``wait_group.read``), never for the
  writes to global memory, which complete while tile t+1's main loop runs.

In the code: the kernel's roles become loops over the CTA's tiles (``num_tiles``, ``tile_coord``),
each pipeline state carried from one tile to the next, and the grid shrinks (``grid``).

Expected: step 6 pays a pipeline fill (and a CTA launch) at each tile start; here the next
tile's first K tiles land while the consumers run the epilogue (128x256 outputs, ~2 us), so
only the CTA's first tile pays the fill: up to a few percent at 4096^3. The epilogue itself
stays on the consumers' path.

Accepts: any M; N and K multiples of 8.
"""

import dataclasses

import cutlass
import cutlass.cute as cute
import cutlass.pipeline as pipeline

from . import step06_warp_specialized as parent
from .step04_tma_store import can_implement  # noqa: F401  (same shapes as step 4)
from .step05_cluster_multicast import WARPGROUP


@dataclasses.dataclass(frozen=True)
class OverlapConfig(parent.Config):
    """Step 7's Config less ``tiles_per_cta``: what step 8, whose scheduler decides the tiles, keeps."""


@dataclasses.dataclass(frozen=True)
class Config(OverlapConfig):
    tiles_per_cta: int = 2


check_overlap_config = parent.check_config  # what step 7 checks but tiles_per_cta: step 6's rules


def check_config(config: Config):
    if config.tiles_per_cta < 1:
        return False, "tiles_per_cta must be at least 1"
    return check_overlap_config(config)


class Gemm(parent.Gemm):
    def grid(self, mA: cute.Tensor, mC: cute.Tensor):
        """Clusters along N cover tiles_per_cta cluster-tiles each."""
        bm, bn, _ = self.tile_mnk
        cm, cn, _ = self.cluster_shape_mnk
        clusters_n = cute.ceil_div(cute.ceil_div(mC.shape[1], bn * cn), self.config.tiles_per_cta)
        return (cute.ceil_div(mC.shape[0], bm * cm) * cm, clusters_n * cn, 1)

    def num_tiles(self, mC: cute.Tensor):
        """Always tiles_per_cta: at the right edge a CTA's last tiles may lie wholly outside C, where
        TMA loads zeros and the store clips everything (wasted work, correct output)."""
        return self.config.tiles_per_cta

    def tile_coord(self, i, mC: cute.Tensor):
        bidx, bidy, _ = cute.arch.block_idx()
        cn = self.cluster_shape_mnk[1]
        cluster_tile_n = (bidy // cn) * self.config.tiles_per_cta + i
        return (bidx, cluster_tile_n * cn + bidy % cn, None)

    @cute.kernel
    def kernel(
        self,
        tiled_mma: cute.TiledMma,
        tma_atom_a: cute.CopyAtom,
        mA: cute.Tensor,
        tma_atom_b: cute.CopyAtom,
        mB: cute.Tensor,
        tma_atom_c: cute.CopyAtom,
        mC: cute.Tensor,
        a_smem_layout: cute.ComposedLayout,
        b_smem_layout: cute.ComposedLayout,
        epi_smem_layout: cute.ComposedLayout,
    ):
        tidx, warp_idx, warpgroup_idx = self.roles(tma_atom_a, tma_atom_b)
        storage, mainloop_pipeline, sA, sB, sC = self.shared_memory(a_smem_layout, b_smem_layout, epi_smem_layout)

        if warpgroup_idx == 0:
            # producer warpgroup: one warp issues every TMA load, tile after tile
            cute.arch.setmaxregister_decrease(self.config.producer_registers)
            if warp_idx == 0:
                load_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, self.stages)
                num_k_tiles = cute.ceil_div(mA.shape[1], self.tile_mnk[2])
                for i in cutlass.range(self.num_tiles(mC), unroll=1):
                    tile_coord = self.tile_coord(i, mC)
                    load_state = self.produce_tile(
                        mainloop_pipeline, load_state, tma_atom_a, mA, tma_atom_b, mB, sA, sB, tile_coord, 0, num_k_tiles
                    )
                mainloop_pipeline.producer_tail(load_state)
        else:
            # consumer warpgroups: wgmma, then the epilogue, tile after tile
            cute.arch.setmaxregister_increase(self.config.consumer_registers)
            tCrA, tCrB, accumulators, read_state, release_state, store_pipeline = self.consumer_setup(tiled_mma, sA, sB, sC)
            num_k_tiles = cute.ceil_div(mA.shape[1], self.tile_mnk[2])
            for i in cutlass.range(self.num_tiles(mC), unroll=1):
                read_state, release_state = self.consume_tile(
                    mainloop_pipeline, read_state, release_state, tiled_mma, accumulators, tCrA, tCrB, num_k_tiles
                )
                tile_coord = self.tile_coord(i, mC)  # only the epilogue needs it: not before the first wgmma
                self.epilogue_tma(
                    tiled_mma, accumulators, tma_atom_c, mC, sC, tile_coord, store_pipeline, self.consumer_threads, WARPGROUP
                )
            if tidx == WARPGROUP:
                store_pipeline.producer_tail()
        cute.arch.cluster_arrive_relaxed()
        cute.arch.cluster_wait()
