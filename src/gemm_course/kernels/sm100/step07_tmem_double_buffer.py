"""Step 7 (Blackwell) - two accumulators in tensor memory: the epilogue of one tile overlaps the MMAs of the next.

Parent: step 6. Key differences:

* A CTA computes ``tiles_per_cta`` output tiles (default 2, neighbours along N); the grid shrinks
  by that factor. Each warp loops over the CTA's tiles with its pipeline states carried along.
* Tensor memory holds ``acc_stages`` = 2 accumulators of 256 columns: all 512 columns of the
  SM. The MMA warp fills accumulator 1 with tile t+1 while the epilogue warps drain accumulator
  0 of tile t. ``PipelineUmmaAsync`` has two stages (one in step 6): the MMA warp *acquires* an accumulator
  (waits until the epilogue of both CTAs of the pair released it), fills it, and commits it; the
  epilogue waits for it, reads it and releases it as soon as its last ``tcgen05.ld`` is done,
  before its own TMA stores finish.
* The TMA warp streams the next tile's K tiles while the MMA warp finishes the current one, so
  the pipeline does not drain between tiles.

On Hopper the same overlap (chapter 7) needs a second accumulator in *registers*: 2 x 128 x 256
fp32 is 256 KiB, the whole register file, so Hopper kernels ping-pong two consumer warpgroups
instead. Here the second accumulator costs only tensor-memory columns.

Expected: the epilogue (about 2 us per 128 x 256 tile per CTA) is exposed once per tile in
step 6; here only the CTA's first tile fills the pipeline and only its last epilogue is exposed.

Accepts: any M; N and K multiples of 8.
"""

import dataclasses

import cutlass
import cutlass.cute as cute
import cutlass.pipeline as pipeline
from cutlass.cute.nvgpu import cpasync, tcgen05

from . import step06_warp_specialized as parent
from .step04_tma_store import can_implement  # noqa: F401  (same shapes as step 4)
from .step05_cta_pair_multicast import PAIR
from .step06_warp_specialized import MMA_WARP, TMA_WARP, TMEM_FREE_BARRIER_ID, tmem_fence_after_sync, tmem_fence_before_sync

TMEM_COLUMNS = 512  # per SM: 128 lanes x 512 columns of 32 bits


def tmem_columns(config) -> int:
    """Columns to allocate: every accumulator stage's tile_n fp32 columns, as a power of two >= 32."""
    need = config.acc_stages * config.tile_n
    return max(32, 1 << (need - 1).bit_length())


@dataclasses.dataclass(frozen=True)
class OverlapConfig(parent.Config):
    """Step 7's Config less ``tiles_per_cta``: what step 8, whose scheduler decides the tiles, keeps."""

    acc_stages: int = 2  # accumulators in tensor memory: 2 x 256 columns


@dataclasses.dataclass(frozen=True)
class Config(OverlapConfig):
    tiles_per_cta: int = 2


def check_accumulators(config) -> tuple:
    if config.acc_stages < 1 or tmem_columns(config) > TMEM_COLUMNS:
        return False, f"acc_stages x tile_n = {config.acc_stages * config.tile_n} columns: tensor memory has {TMEM_COLUMNS}"
    return True, ""


def check_overlap_config(config: OverlapConfig):
    """What step 7 checks but ``tiles_per_cta``: the accumulators, then step 6's rules."""
    ok, why = check_accumulators(config)
    return parent.check_config(config) if ok else (ok, why)


def check_config(config: Config):
    if config.tiles_per_cta < 1:
        return False, "tiles_per_cta must be at least 1"
    return check_overlap_config(config)


class Gemm(parent.Gemm):
    def __init__(self, config: Config):
        super().__init__(config)
        self.acc_stages = config.acc_stages
        self.tmem_cols = tmem_columns(config)

    def make_accumulator(self, tiled_mma):
        """This CTA's accumulators: (MMA, MMA_M, MMA_N, acc_stages), stage s at column s * tile_n."""
        shape = tiled_mma.partition_shape_C(self.mma_tiler[:2])
        return tiled_mma.make_fragment_C(cute.append(shape, self.acc_stages))

    # ---- which tiles this CTA computes (step 8 replaces the schedule) --------------------------

    def grid(self, mA: cute.Tensor, mC: cute.Tensor):
        """Clusters along N cover tiles_per_cta cluster-tiles each."""
        bm, bn, _ = self.tile_mnk
        cm, cn, _ = self.cluster_shape_mnk
        clusters_n = cute.ceil_div(cute.ceil_div(mC.shape[1], bn * cn), self.config.tiles_per_cta)
        return (cute.ceil_div(mC.shape[0], bm * cm) * cm, clusters_n * cn, 1)

    def num_tiles(self, mC: cute.Tensor):
        """This cluster's tiles: tiles_per_cta, fewer at the right edge of C."""
        _, bidy, _ = cute.arch.block_idx()
        cn = self.cluster_shape_mnk[1]
        cluster_tiles_n = cute.ceil_div(mC.shape[1], self.tile_mnk[1] * cn)
        return cutlass.min(self.config.tiles_per_cta, cluster_tiles_n - (bidy // cn) * self.config.tiles_per_cta)

    def tile_coords(self, i):
        """(the pair's tile (m, n), this CTA's tile (m, n)) of the CTA's i-th tile."""
        bidx, bidy, _ = cute.arch.block_idx()
        cn = self.cluster_shape_mnk[1]
        n = ((bidy // cn) * self.config.tiles_per_cta + i) * cn + bidy % cn
        return (bidx // PAIR, n, None), (bidx, n, None)

    # ---- one tile of each role ----------------------------------------------------------------

    @cute.jit
    def load_tile(
        self, mainloop_pipeline, load_state, tiled_mma, tma_atom_a, mA, tma_atom_b, mB, sA, sB, pair_tile, cta_in_cluster
    ):
        """TMA warp: this CTA's share of every K tile of one tile; the state runs on across tiles."""
        tAsA, tAgA, tBsB, tBgB, a_mask, b_mask = self.load_partitions(
            tiled_mma, tma_atom_a, mA, tma_atom_b, mB, sA, sB, pair_tile, cta_in_cluster
        )
        for k_tile in cutlass.range(cute.size(tAgA, mode=[1]), unroll=1):
            self.load_k_tile(
                mainloop_pipeline, load_state, k_tile, tma_atom_a, tAgA, tAsA, a_mask, tma_atom_b, tBgB, tBsB, b_mask
            )
            load_state.advance()
        return load_state

    @cute.jit
    def mma_tile(
        self, mainloop_pipeline, read_state, accumulator_pipeline, acc_state, tiled_mma, tCtAcc, tCrA, tCrB, num_k_tiles
    ):
        """MMA warp of the leader: wait for a free accumulator, fill it over every K tile, commit it."""
        accumulator_pipeline.producer_acquire(acc_state)
        tmem_fence_after_sync()  # after both epilogues released this accumulator
        accumulator = tCtAcc[(None, None, None, acc_state.index)]
        for k_tile in cutlass.range(num_k_tiles, unroll=1):
            mainloop_pipeline.consumer_wait(read_state)
            tiled_mma.set(tcgen05.Field.ACCUMULATE, k_tile != 0)
            self.mma_k_tile(tiled_mma, accumulator, tCrA, tCrB, read_state.index)
            mainloop_pipeline.consumer_release(read_state)
            read_state.advance()
        accumulator_pipeline.producer_commit(acc_state)
        acc_state.advance()
        return read_state, acc_state

    @cute.jit
    def store_tile(self, accumulator_pipeline, acc_state, tCtAcc, tma_atom_c, mC, sC, cta_tile, store_pipeline):
        """Epilogue warps: wait for the accumulator, store it, release it to the MMA warp."""
        accumulator_pipeline.consumer_wait(acc_state)
        tmem_fence_after_sync()
        self.epilogue_tma(tCtAcc[(None, None, None, acc_state.index)], tma_atom_c, mC, sC, cta_tile, store_pipeline, 0)
        cute.arch.fence_view_async_tmem_load()  # this thread's reads of the accumulator are complete
        tmem_fence_before_sync()
        accumulator_pipeline.consumer_release(acc_state)
        acc_state.advance()
        return acc_state

    # ---- the kernel ---------------------------------------------------------------------------

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
        tidx, _, _ = cute.arch.thread_idx()
        warp_idx = cute.arch.make_warp_uniform(cute.arch.warp_idx())
        cta_in_cluster, _, is_leader = self.pair_coords(tiled_mma)
        if warp_idx == TMA_WARP:
            cpasync.prefetch_descriptor(tma_atom_a)
            cpasync.prefetch_descriptor(tma_atom_b)
            cpasync.prefetch_descriptor(tma_atom_c)

        storage, sA, sB, sC = self.allocate_shared_storage(a_smem_layout, b_smem_layout, epi_smem_layout)
        mainloop_pipeline = self.make_mainloop_pipeline(storage, tiled_mma)
        accumulator_pipeline = self.make_accumulator_pipeline(storage, tiled_mma, self.epilogue_threads)
        tmem = self.make_tmem_allocator(storage, self.epilogue_threads + 32, allocator_warp=0)
        pipeline.pipeline_init_arrive(cluster_shape_mn=self.cluster_shape_mnk[:2], is_relaxed=True)
        pipeline.pipeline_init_wait(cluster_shape_mn=self.cluster_shape_mnk[:2])
        num_tiles = self.num_tiles(mC)
        num_k_tiles = cute.ceil_div(mA.shape[1], self.tile_mnk[2])

        if warp_idx == TMA_WARP:
            load_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, self.stages)
            for i in cutlass.range(num_tiles, unroll=1):
                pair_tile, _ = self.tile_coords(i)
                load_state = self.load_tile(
                    mainloop_pipeline, load_state, tiled_mma, tma_atom_a, mA, tma_atom_b, mB, sA, sB, pair_tile, cta_in_cluster
                )
            mainloop_pipeline.producer_tail(load_state)

        if warp_idx == MMA_WARP:
            tmem.wait_for_alloc()
            tCtAcc = self.accumulator_in(tmem, tiled_mma)
            if is_leader:
                tCrA = tiled_mma.make_fragment_A(sA)
                tCrB = tiled_mma.make_fragment_B(sB)
                read_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, self.stages)
                acc_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, self.acc_stages)
                for i in cutlass.range(num_tiles, unroll=1):
                    read_state, acc_state = self.mma_tile(
                        mainloop_pipeline, read_state, accumulator_pipeline, acc_state, tiled_mma, tCtAcc, tCrA, tCrB, num_k_tiles
                    )
                accumulator_pipeline.producer_tail(acc_state)  # the last accumulators were read

        if warp_idx < MMA_WARP:
            tCtAcc = self.take_tensor_memory(tmem, tiled_mma)
            acc_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, self.acc_stages)
            store_pipeline = self.make_store_pipeline(self.epilogue_threads)
            for i in cutlass.range(num_tiles, unroll=1):
                _, cta_tile = self.tile_coords(i)
                acc_state = self.store_tile(accumulator_pipeline, acc_state, tCtAcc, tma_atom_c, mC, sC, cta_tile, store_pipeline)
            if tidx == 0:
                store_pipeline.producer_tail()
            pipeline.NamedBarrier(barrier_id=TMEM_FREE_BARRIER_ID, num_threads=self.epilogue_threads).arrive_and_wait()
            tmem.free(tCtAcc.iterator)

        cute.arch.cluster_arrive_relaxed()
        cute.arch.cluster_wait()
