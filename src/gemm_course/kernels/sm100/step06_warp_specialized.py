"""Step 6 (Blackwell) - a multistage pipeline with warp specialization: a TMA warp, an MMA warp, epilogue warps.

Parent: step 5. Key differences:

* ``stages`` shared-memory buffers (default 6, as many as fit: each stage is 16 KiB of A and
  16 KiB of B per CTA): TMA fills stages ahead while the tensor cores work on earlier ones.
* Six warps (192 threads) with one job each. Warp 5 (*TMA*) only issues loads, waiting on each
  stage's *empty* barrier; warp 4 (*MMA*, in the leader CTA of the pair) only waits on *full*
  barriers, issues ``tcgen05.mma`` and commits each stage back; warps 0-3 (*epilogue*) wait for
  the accumulator and store it. CuTeDSL's ``PipelineTmaUmma`` (TMA -> MMA, per stage) and
  ``PipelineUmmaAsync`` (MMA -> epilogue, per accumulator) carry the barriers.
* The epilogue warps must cover w % 4 = 0, 1, 2, 3 (here warps 0-3): warp w may read only TMEM
  lanes 32 * (w % 4) to 32 * (w % 4) + 31, and the accumulator's row r sits in lane r.
* No ``setmaxnreg``: on Hopper the consumers needed registers for the accumulator; here it lives
  in tensor memory, and the MMA warp needs almost none.

Expected: loads overlap the MMAs, so the loop approaches the tensor-core rate. Per K tile the
pair computes 2 * 256 * 256 * 64 FLOP = 8.4 MFLOP; at ~2.25 PFLOP/s (B200 dense BF16) over 148 SMs,
15.2 TFLOP/s per SM, that is 0.28 us, while each CTA loads 32 KiB: 119 GB/s per SM, about 17.6 TB/s
from L2 in all with a 2 x 1 cluster (larger clusters multicast and need less).

Accepts: any M; N and K multiples of 8.
"""

import dataclasses

import cutlass
import cutlass.cute as cute
import cutlass.pipeline as pipeline
from cutlass._mlir.dialects import nvvm
from cutlass.cute.nvgpu import cpasync, tcgen05

from ... import hardware
from . import step05_cta_pair_multicast as parent
from .step02_tcgen05_tma import tmem_fence_after_sync
from .step04_tma_store import EPI_BARRIER_ID, can_implement  # noqa: F401  (same shapes as step 4)
from .step05_cta_pair_multicast import SMEM_CAPACITY, smem_estimate

EPILOGUE_WARPS = (0, 1, 2, 3)
MMA_WARP = 4
TMA_WARP = 5
TMEM_FREE_BARRIER_ID = EPI_BARRIER_ID + 1  # the epilogue warps, once they have all read tensor memory


def tmem_fence_before_sync():
    """``tcgen05.fence::before_thread_sync``: this thread's completed tcgen05 work is ordered before
    the barrier arrive that follows (e.g. releasing an accumulator to the MMA warp)."""
    nvvm.tcgen05_fence(nvvm.Tcgen05FenceKind.BEFORE_THREAD_SYNC)


def max_stages(config) -> int:
    """The most A/B stages that fit in a CTA's shared memory with this epilogue."""
    fixed = smem_estimate(dataclasses.replace(config, stages=0))
    per_stage = smem_estimate(dataclasses.replace(config, stages=1)) - fixed
    return hardware.stages_that_fit(per_stage, fixed, SMEM_CAPACITY)


@dataclasses.dataclass(frozen=True)
class Config(parent.Config):
    stages: int = 6  # as many 32 KiB stages as fit beside the epilogue's staging buffers


def check_config(config: Config):
    ok, why = parent.check_config(config)
    if not ok:
        if config.stages > max_stages(config):
            return False, f"{config.stages} stages do not fit in shared memory; at most {max_stages(config)} do with this tile"
        return ok, why
    if config.stages < 2:
        return False, "stages must be at least 2: one to load while the tensor cores read another"
    return True, ""


class Gemm(parent.Gemm):
    threads = 32 * (len(EPILOGUE_WARPS) + 2)
    epilogue_threads = 32 * len(EPILOGUE_WARPS)

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
        bidx, bidy, _ = cute.arch.block_idx()
        warp_idx = cute.arch.make_warp_uniform(cute.arch.warp_idx())
        cta_in_cluster, pair_tile, is_leader = self.pair_coords(tiled_mma)
        if warp_idx == TMA_WARP:
            cpasync.prefetch_descriptor(tma_atom_a)
            cpasync.prefetch_descriptor(tma_atom_b)
            cpasync.prefetch_descriptor(tma_atom_c)

        # 1. shared memory and pipelines; barriers visible cluster-wide before any use
        storage, sA, sB, sC = self.allocate_shared_storage(a_smem_layout, b_smem_layout, epi_smem_layout)
        mainloop_pipeline = self.make_mainloop_pipeline(storage, tiled_mma)
        accumulator_pipeline = self.make_accumulator_pipeline(storage, tiled_mma, self.epilogue_threads)
        # the MMA and epilogue warps use tensor memory; the TMA warp does not wait for it
        tmem = self.make_tmem_allocator(storage, self.epilogue_threads + 32, allocator_warp=EPILOGUE_WARPS[0])
        pipeline.pipeline_init_arrive(cluster_shape_mn=self.cluster_shape_mnk[:2], is_relaxed=True)
        pipeline.pipeline_init_wait(cluster_shape_mn=self.cluster_shape_mnk[:2])
        num_k_tiles = cute.ceil_div(mA.shape[1], self.tile_mnk[2])

        if warp_idx == TMA_WARP:
            # 2a. loads: this CTA's share of every K tile, up to `stages` ahead of the MMAs
            tAsA, tAgA, tBsB, tBgB, a_mask, b_mask = self.load_partitions(
                tiled_mma, tma_atom_a, mA, tma_atom_b, mB, sA, sB, pair_tile, cta_in_cluster
            )
            load_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, self.stages)
            for k_tile in cutlass.range(num_k_tiles, unroll=1):
                self.load_k_tile(
                    mainloop_pipeline, load_state, k_tile, tma_atom_a, tAgA, tAsA, a_mask, tma_atom_b, tBgB, tBsB, b_mask
                )
                load_state.advance()
            mainloop_pipeline.producer_tail(load_state)  # no commit may arrive after this CTA is gone

        if warp_idx == MMA_WARP:
            # 2b. MMAs (leader CTA): wait for a stage, issue its MMAs, commit it back to the loaders
            tmem.wait_for_alloc()
            tCtAcc = self.accumulator_in(tmem, tiled_mma)
            if is_leader:
                tCrA = tiled_mma.make_fragment_A(sA)
                tCrB = tiled_mma.make_fragment_B(sB)
                read_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, self.stages)
                acc_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, 1)
                for k_tile in cutlass.range(num_k_tiles, unroll=1):
                    mainloop_pipeline.consumer_wait(read_state)
                    tiled_mma.set(tcgen05.Field.ACCUMULATE, k_tile != 0)  # the tile's first MMA overwrites TMEM
                    self.mma_k_tile(tiled_mma, tCtAcc, tCrA, tCrB, read_state.index)
                    mainloop_pipeline.consumer_release(read_state)
                    read_state.advance()
                accumulator_pipeline.producer_commit(acc_state)  # both CTAs: the accumulator is complete

        if warp_idx < MMA_WARP:
            # 2c. epilogue: allocate tensor memory (warp 0, with the peer CTA), then store this
            #     CTA's 128 rows once the accumulator is complete
            tCtAcc = self.take_tensor_memory(tmem, tiled_mma)
            acc_read = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, 1)
            accumulator_pipeline.consumer_wait(acc_read)
            tmem_fence_after_sync()
            store_pipeline = self.make_store_pipeline(self.epilogue_threads)
            self.epilogue_tma(tCtAcc, tma_atom_c, mC, sC, (bidx, bidy, None), store_pipeline, 0)
            if tidx == 0:
                store_pipeline.producer_tail()
            # 3. free tensor memory when both CTAs of the pair have read theirs
            cute.arch.fence_view_async_tmem_load()
            pipeline.NamedBarrier(barrier_id=TMEM_FREE_BARRIER_ID, num_threads=self.epilogue_threads).arrive_and_wait()
            tmem.free(tCtAcc.iterator)

        cute.arch.cluster_arrive_relaxed()
        cute.arch.cluster_wait()
