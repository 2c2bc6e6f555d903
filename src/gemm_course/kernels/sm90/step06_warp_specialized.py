"""Step 6 (Hopper) - a multistage pipeline with warp specialization and register reallocation.

Parent: step 5. Key differences:

* ``stages`` = 4 shared-memory buffers (4 x 48 KiB): TMA fills stages ahead while the tensor
  cores work on earlier ones, so loads and math overlap instead of alternating.
* Warp specialization: a third warpgroup (the *producer*) only issues TMA; one of its warps
  loops over K tiles, waiting on each stage's *empty* barrier and arming its *full* barrier.
  The two *consumer* warpgroups only wait on *full* barriers, issue wgmma, and release stages.
* Consumers keep one wgmma batch in flight (``wait_group(1)``): the stage of K tile k-1 is
  released once k-1's wgmma complete, while k's run.
* ``setmaxnreg``: the producer gives registers back (40 per thread) and the consumers take them
  (232 per thread). This step's consumers fit within the launch count already; the headroom is
  what later steps use (the epilogue's staging and the schedule's state). The split needs a
  register cap at launch, hence ``min_blocks_per_mp=1``.

Expected: with loads overlapped, the loop approaches the tensor-core rate: per K tile
2*128*256*64 FLOP = 4.2 MFLOP at ~7.5 TFLOP/s per SM (989 / 132) is 0.56 us, against 48 KiB per
0.56 us = 88 GB/s per SM, 11.6 TB/s over 132 SMs into shared memory; B multicast cuts the
reads from L2 to 7.7 TB/s (chapter 5).

Accepts: any M; N and K multiples of 8.
"""

import dataclasses

import cutlass
import cutlass.cute as cute
import cutlass.pipeline as pipeline
from cutlass.cute.nvgpu import cpasync, warpgroup

from ... import hardware
from . import step05_cluster_multicast as parent
from .step02_wgmma_tma import ACC_DTYPE
from .step04_tma_store import can_implement  # noqa: F401  (same shapes as step 4)
from .step05_cluster_multicast import WARPGROUP


@dataclasses.dataclass(frozen=True)
class Config(parent.Config):
    stages: int = 4
    producer_registers: int = 40  # per thread of the producer warpgroup
    consumer_registers: int = 232  # per thread of each consumer warpgroup


SM_REGISTERS = hardware.SM90A.registers_per_sm  # 65536 32-bit registers per SM


def check_config(config: Config):
    ok, why = parent.check_config(config)
    if not ok:
        return ok, why
    threads = WARPGROUP * (1 + config.tile_m // 64)
    launch = threads * (SM_REGISTERS // threads // 8 * 8)  # setmaxnreg moves registers within this allocation
    regs = WARPGROUP * (config.producer_registers + (config.tile_m // 64) * config.consumer_registers)
    if regs > launch:
        return False, (f"register split needs {regs} registers, the CTA's launch allocation holds {launch} "
                       f"({threads} threads x {launch // threads}, of the SM's {SM_REGISTERS})")
    if config.producer_registers % 8 or config.consumer_registers % 8:
        return False, "setmaxnreg takes multiples of 8"
    return True, ""


class Gemm(parent.Gemm):
    def __init__(self, config: Config):
        super().__init__(config)
        self.consumer_threads = self.threads  # the MMA warpgroups, as in step 5
        self.threads = WARPGROUP + self.consumer_threads  # + the producer warpgroup (warpgroup 0)

    def launch_options(self) -> dict:
        return {"min_blocks_per_mp": 1}  # a register cap at launch, so setmaxnreg can move registers

    # ---- device side: one method per role -----------------------------------------------------

    @cute.jit
    def produce_tile(self, mainloop_pipeline, load_state, tma_atom_a, mA, tma_atom_b, mB, sA, sB, tile_coord, k_begin, k_end):
        """Producer warp: stream K tiles k_begin .. k_end - 1 of one output tile through the stages.

        The K-tile coordinate is the loop counter, not the state's count (a state that runs on
        across tiles, from step 7 on, counts them all). States are returned, not mutated in place:
        the tracer follows locals only.
        """
        tAsA, tAgA, tBsB, tBgB, a_mask, b_mask = self.load_partitions(tma_atom_a, mA, tma_atom_b, mB, sA, sB, tile_coord)
        for k_tile in cutlass.range(k_begin, k_end, unroll=1):
            self.load_k_tile(
                mainloop_pipeline, load_state, k_tile, tma_atom_a, tAgA, tAsA, a_mask, tma_atom_b, tBgB, tBsB, b_mask
            )
            load_state.advance()
        return load_state

    @cute.jit
    def consume_tile(self, mainloop_pipeline, read_state, release_state, tiled_mma, accumulators, tCrA, tCrB, num_k_tiles):
        """Consumer warpgroups: wgmma over every K tile, one batch in flight, releasing stages behind."""
        accumulators.fill(0.0)
        mainloop_pipeline.consumer_wait(read_state)
        self.mma_k_tile(tiled_mma, accumulators, tCrA, tCrB, read_state.index)
        read_state.advance()
        for _ in cutlass.range(1, num_k_tiles, unroll=1):
            mainloop_pipeline.consumer_wait(read_state)
            self.mma_k_tile(tiled_mma, accumulators, tCrA, tCrB, read_state.index)
            warpgroup.wait_group(1)  # the previous K tile's wgmma are done: its stage can be refilled
            mainloop_pipeline.consumer_release(release_state)
            release_state.advance()
            read_state.advance()
        warpgroup.wait_group(0)
        mainloop_pipeline.consumer_release(release_state)
        release_state.advance()
        return read_state, release_state

    @cute.jit
    def roles(self, tma_atom_a: cute.CopyAtom, tma_atom_b: cute.CopyAtom):
        """(thread, warp, warpgroup) indices, warp-uniform; warp 0 prefetches the TMA descriptors."""
        tidx, _, _ = cute.arch.thread_idx()
        warp_idx = cute.arch.make_warp_uniform(cute.arch.warp_idx())
        warpgroup_idx = cute.arch.make_warp_uniform(tidx // WARPGROUP)
        if warp_idx == 0:
            cpasync.prefetch_descriptor(tma_atom_a)
            cpasync.prefetch_descriptor(tma_atom_b)
        return tidx, warp_idx, warpgroup_idx

    def shared_memory(self, a_smem_layout, b_smem_layout, epi_smem_layout, wait_for_cluster: bool = True):
        """Allocate shared memory and initialize the mainloop pipeline's barriers, cluster-wide.

        Without ``wait_for_cluster`` the caller must call ``pipeline.pipeline_init_wait`` itself
        before touching a barrier (work placed in between overlaps the cluster's set-up)."""
        smem = cutlass.memory.SmemAllocator()
        storage = smem.allocate(self.shared_storage)
        mainloop_pipeline = self.make_mainloop_pipeline(storage, self.consumer_threads // 32)
        pipeline.pipeline_init_arrive(cluster_shape_mn=self.cluster_shape_mnk[:2], is_relaxed=True)
        sA = storage.sA.get_tensor(a_smem_layout.outer, swizzle=a_smem_layout.inner)  # (bM, bK, stages)
        sB = storage.sB.get_tensor(b_smem_layout.outer, swizzle=b_smem_layout.inner)  # (bN, bK, stages)
        sC = storage.sC.get_tensor(epi_smem_layout.outer, swizzle=epi_smem_layout.inner)
        if wait_for_cluster:
            pipeline.pipeline_init_wait(cluster_shape_mn=self.cluster_shape_mnk[:2])
        return storage, mainloop_pipeline, sA, sB, sC

    def consumer_setup(self, tiled_mma, sA, sB, sC):
        """A consumer thread's MMA fragments, accumulator, pipeline states and store bookkeeping."""
        tidx, _, _ = cute.arch.thread_idx()
        thr_mma = tiled_mma.get_slice(tidx - WARPGROUP)
        tCrA = tiled_mma.make_fragment_A(thr_mma.partition_A(sA))  # (MMA, MMA_M, MMA_K, stages)
        tCrB = tiled_mma.make_fragment_B(thr_mma.partition_B(sB))  # (MMA, MMA_N, MMA_K, stages)
        accumulators = cute.make_rmem_tensor(tiled_mma.partition_shape_C(self.tile_mnk[:2]), ACC_DTYPE)
        tiled_mma.set(warpgroup.Field.ACCUMULATE, True)
        read_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, self.stages)
        release_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, self.stages)
        store_pipeline = self.make_store_pipeline(sC, self.consumer_threads)
        return tCrA, tCrB, accumulators, read_state, release_state, store_pipeline

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

        bidx, bidy, _ = cute.arch.block_idx()
        tile_coord = (bidx, bidy, None)
        num_k_tiles = cute.ceil_div(mA.shape[1], self.tile_mnk[2])
        if warpgroup_idx == 0:
            # producer warpgroup: one warp issues every TMA load
            cute.arch.setmaxregister_decrease(self.config.producer_registers)
            if warp_idx == 0:
                load_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, self.stages)
                load_state = self.produce_tile(
                    mainloop_pipeline, load_state, tma_atom_a, mA, tma_atom_b, mB, sA, sB, tile_coord, 0, num_k_tiles
                )
                mainloop_pipeline.producer_tail(load_state)
        else:
            # consumer warpgroups: wgmma over the K tiles, then the epilogue
            cute.arch.setmaxregister_increase(self.config.consumer_registers)
            tCrA, tCrB, accumulators, read_state, release_state, store_pipeline = self.consumer_setup(tiled_mma, sA, sB, sC)
            self.consume_tile(mainloop_pipeline, read_state, release_state, tiled_mma, accumulators, tCrA, tCrB, num_k_tiles)
            self.epilogue_tma(
                tiled_mma, accumulators, tma_atom_c, mC, sC, tile_coord, store_pipeline, self.consumer_threads, WARPGROUP
            )
            if tidx == WARPGROUP:
                store_pipeline.producer_tail()
        cute.arch.cluster_arrive_relaxed()
        cute.arch.cluster_wait()
