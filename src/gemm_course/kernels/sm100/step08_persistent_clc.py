"""Step 8 (Blackwell) - a persistent kernel with a dynamic scheduler: cluster launch control (CLC).

Parent: step 7. Key differences:

* The grid has one cluster per *cluster-tile* of C again (as in step 6), laid out along x so that
  cluster c is a linear index: ``cluster_tile`` maps c to the tile (m, n), here in row-raster
  order (steps 9 and 10 change only that function).
* A cluster does not stop after its tile. Warp 6 of the cluster's first CTA (the *scheduler*)
  asks the hardware, with ``clusterlaunchcontrol.try_cancel``, to cancel the launch of a cluster
  that has not started yet, and to hand over its coordinates instead. The answer (16 bytes,
  written asynchronously into every CTA of the cluster, signalled on an mbarrier) is decoded by
  the scheduler warp and every role warp (TMA, MMA, epilogue) of each CTA with
  ``clusterlaunchcontrol.query_cancel``: either the first CTA of the cancelled cluster, whose tile
  this cluster computes next, or "nothing left", and the warps leave their loops. CuTeDSL's
  ``PipelineClcFetchAsync`` carries the barriers: the scheduler may ask again only once all those
  warps have read the answer.
* So the clusters that run take over the tiles of clusters that never launch: as many clusters
  stay resident as the GPU holds, each running tile after tile with step 7's two accumulators,
  and a cluster that started late, or an SM taken by another kernel, costs no idle wave. On
  Hopper (chapter 8) a static schedule assigns tiles c, c + G, c + 2G, ... in advance instead.
* The answer is read before the ``fence.proxy.async.shared::cta`` that orders that generic-proxy
  read before the next asynchronous ``try_cancel`` write; only then is it released.

Expected: at 4096^3 the 256 cluster-tiles of 256 x 256 (2 x 1 clusters) are 3.5 waves of the 74
clusters a B200 (148 SMs) holds: the fill and epilogue of every tile but each cluster's first and
last are hidden, a few percent over step 7.

Accepts: any M; N and K multiples of 8.
"""

import dataclasses

import cutlass
import cutlass.cute as cute
import cutlass.pipeline as pipeline
from cutlass.cute.nvgpu import cpasync

from . import step07_tmem_double_buffer as parent
from .step02_tcgen05_tma import AB_DTYPE
from .step04_tma_store import C_DTYPE, can_implement  # noqa: F401  (same shapes as step 4)
from .step05_cta_pair_multicast import PAIR
from .step06_warp_specialized import EPILOGUE_WARPS, MMA_WARP, TMA_WARP, TMEM_FREE_BARRIER_ID

SCHEDULER_WARP = 6
CLC_RESPONSE_BYTES = 16  # try_cancel writes one 128-bit answer


@dataclasses.dataclass(frozen=True)
class Config(parent.OverlapConfig):  # step 7's less tiles_per_cta: the scheduler decides the tiles
    clc_stages: int = 1  # answers in flight: the scheduler asks one tile ahead of the cluster (only 1 is admitted)


def check_config(config: Config):
    if config.clc_stages != 1:  # NVIDIA's B200-tested CLC kernels keep one answer in flight; more was never run
        return False, f"clc_stages = {config.clc_stages}: only 1 is supported (one scheduler answer in flight)"
    return parent.check_overlap_config(config)


class Gemm(parent.Gemm):
    threads = 32 * (len(EPILOGUE_WARPS) + 3)  # + MMA, TMA and scheduler warps
    cta_group = PAIR  # CTAs per tcgen05.mma tile

    def __init__(self, config: Config):
        super().__init__(config)
        self.clc_stages = config.clc_stages

    def make_shared_storage(self, a_smem_layout, b_smem_layout, epi_smem_layout):
        stages, acc_stages, clc_stages = self.stages, self.acc_stages, self.clc_stages

        @cute.struct
        class SharedStorage:
            mainloop_barriers: cute.struct.MemRange[cutlass.Int64, 2 * stages]
            accumulator_barriers: cute.struct.MemRange[cutlass.Int64, 2 * acc_stages]
            clc_barriers: cute.struct.MemRange[cutlass.Int64, 2 * clc_stages]  # full + empty per answer
            clc_responses: cute.struct.Align[cute.struct.MemRange[cutlass.Int128, clc_stages], CLC_RESPONSE_BYTES]
            tmem_dealloc_barrier: cutlass.Int64
            tmem_address: cutlass.Int32
            sA: cute.struct.Align[cute.struct.MemRange[AB_DTYPE, cute.cosize(a_smem_layout)], 1024]
            sB: cute.struct.Align[cute.struct.MemRange[AB_DTYPE, cute.cosize(b_smem_layout)], 1024]
            sC: cute.struct.Align[cute.struct.MemRange[C_DTYPE, cute.cosize(epi_smem_layout)], 1024]

        return SharedStorage

    # ---- the schedule -------------------------------------------------------------------------

    def cluster_grid(self, mC: cute.Tensor):
        """Cluster-tiles along M and N (a cluster-tile is cluster_m / 2 pair tiles by cluster_n tiles)."""
        bm, bn, _ = self.tile_mnk
        cm, cn, _ = self.cluster_shape_mnk
        return cute.ceil_div(mC.shape[0], bm * cm), cute.ceil_div(mC.shape[1], bn * cn)

    def grid(self, mA: cute.Tensor, mC: cute.Tensor):
        """One cluster per cluster-tile, numbered along x: cluster c is CTAs c * cluster_m ... along x."""
        clusters_m, clusters_n = self.cluster_grid(mC)
        cm, cn, _ = self.cluster_shape_mnk
        return (clusters_m * clusters_n * cm, cn, 1)

    def cluster_tile(self, index, clusters_m, clusters_n):
        """Row raster: consecutive cluster-tiles walk along N, sharing A's row panel."""
        return index // clusters_n, index % clusters_n

    def tile_coords(self, index, mC: cute.Tensor):
        """(the pair's tile (m, n), this CTA's tile (m, n)) in cluster-tile ``index``."""
        bidx, bidy, _ = cute.arch.block_idx()
        cm, cn, _ = self.cluster_shape_mnk
        clusters_m, clusters_n = self.cluster_grid(mC)
        tile_m, tile_n = self.cluster_tile(index, clusters_m, clusters_n)
        cta_m = tile_m * cm + bidx % cm
        n = tile_n * cn + bidy
        return (cta_m // self.cta_group, n, None), (cta_m, n, None)

    def make_clc_pipeline(self, storage, tiled_mma):
        """The scheduler produces answers; it and every role warp of each CTA of the cluster consume each one."""
        cluster = self.cta_layout_vmnk(tiled_mma)
        cluster_size = self.cluster_shape_mnk[0] * self.cluster_shape_mnk[1]
        consumer_warps = 1 + cluster_size * (len(EPILOGUE_WARPS) + 2)  # the scheduler, and every role warp
        return pipeline.PipelineClcFetchAsync.create(
            barrier_storage=storage.clc_barriers.data_ptr(),
            num_stages=self.clc_stages,
            producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread),
            consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, 32 * consumer_warps),
            tx_count=CLC_RESPONSE_BYTES,
            cta_layout_vmnk=cluster,
            defer_sync=True,
        )

    def clc_response(self, storage, stage):
        return storage.clc_responses.data_ptr() + stage  # 16-byte elements keep the 16-byte alignment

    @cute.jit
    def next_tile(self, clc_pipeline, clc_state, storage):
        """Wait for the scheduler's next answer and decode it: (cluster-tile index, valid, state).

        Every warp reads the same 16 bytes, so every warp decodes the same tile. The read is
        ordered before the release by a proxy fence: the next ``try_cancel`` writes the buffer
        through the async proxy."""
        cm = self.cluster_shape_mnk[0]
        clc_pipeline.consumer_wait(clc_state)
        first_cta_x, _, _, valid = cute.arch.clc_response(self.clc_response(storage, clc_state.index))
        cute.arch.fence_proxy("async.shared", space="cta")
        clc_pipeline.consumer_release(clc_state)
        clc_state.advance()
        return first_cta_x // cm, valid != 0, clc_state

    @cute.jit
    def schedule(self, clc_pipeline, storage):
        """Scheduler warp of the cluster's first CTA: ask for the next cluster's tile, one ahead of the
        cluster, until the hardware answers that every cluster has launched or been taken."""
        ask_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, self.clc_stages)
        read_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, self.clc_stages)
        valid = cutlass.Boolean(True)
        while valid:
            clc_pipeline.producer_acquire(ask_state)  # every warp has read the previous answer
            with cute.arch.elect_one():
                cute.arch.issue_clc_query(
                    clc_pipeline.producer_get_barrier(ask_state), self.clc_response(storage, ask_state.index)
                )
            ask_state.advance()
            _, valid, read_state = self.next_tile(clc_pipeline, read_state, storage)
        clc_pipeline.producer_tail(ask_state)

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
        bidx, _, _ = cute.arch.block_idx()
        warp_idx = cute.arch.make_warp_uniform(cute.arch.warp_idx())
        cta_in_cluster, _, is_leader = self.pair_coords(tiled_mma)
        first_in_cluster = cute.arch.make_warp_uniform(cute.arch.block_idx_in_cluster()) == 0
        if warp_idx == TMA_WARP:
            cpasync.prefetch_descriptor(tma_atom_a)
            cpasync.prefetch_descriptor(tma_atom_b)
            cpasync.prefetch_descriptor(tma_atom_c)

        storage, sA, sB, sC = self.allocate_shared_storage(a_smem_layout, b_smem_layout, epi_smem_layout)
        mainloop_pipeline = self.make_mainloop_pipeline(storage, tiled_mma)
        accumulator_pipeline = self.make_accumulator_pipeline(storage, tiled_mma, self.epilogue_threads)
        clc_pipeline = self.make_clc_pipeline(storage, tiled_mma)
        tmem = self.make_tmem_allocator(storage, self.epilogue_threads + 32, allocator_warp=0)
        pipeline.pipeline_init_arrive(cluster_shape_mn=self.cluster_shape_mnk[:2], is_relaxed=True)
        pipeline.pipeline_init_wait(cluster_shape_mn=self.cluster_shape_mnk[:2])
        num_k_tiles = cute.ceil_div(mA.shape[1], self.tile_mnk[2])
        own_index = bidx // self.cluster_shape_mnk[0]  # the cluster's own tile comes first

        if warp_idx == SCHEDULER_WARP:
            if first_in_cluster:
                self.schedule(clc_pipeline, storage)

        if warp_idx == TMA_WARP:
            load_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, self.stages)
            clc_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, self.clc_stages)
            index, valid = own_index, cutlass.Boolean(True)
            while valid:
                pair_tile, _ = self.tile_coords(index, mC)
                load_state = self.load_tile(
                    mainloop_pipeline, load_state, tiled_mma, tma_atom_a, mA, tma_atom_b, mB, sA, sB, pair_tile, cta_in_cluster
                )
                index, valid, clc_state = self.next_tile(clc_pipeline, clc_state, storage)
            mainloop_pipeline.producer_tail(load_state)

        if warp_idx == MMA_WARP:
            tmem.wait_for_alloc()
            tCtAcc = self.accumulator_in(tmem, tiled_mma)
            tCrA = tiled_mma.make_fragment_A(sA)
            tCrB = tiled_mma.make_fragment_B(sB)
            read_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, self.stages)
            acc_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, self.acc_stages)
            clc_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, self.clc_stages)
            valid = cutlass.Boolean(True)
            while valid:
                if is_leader:  # the peer's MMA warp only follows the schedule
                    read_state, acc_state = self.mma_tile(
                        mainloop_pipeline, read_state, accumulator_pipeline, acc_state, tiled_mma, tCtAcc, tCrA, tCrB, num_k_tiles
                    )
                _, valid, clc_state = self.next_tile(clc_pipeline, clc_state, storage)
            if is_leader:
                accumulator_pipeline.producer_tail(acc_state)

        if warp_idx < MMA_WARP:
            tCtAcc = self.take_tensor_memory(tmem, tiled_mma)
            acc_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, self.acc_stages)
            clc_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, self.clc_stages)
            store_pipeline = self.make_store_pipeline(self.epilogue_threads)
            index, valid = own_index, cutlass.Boolean(True)
            while valid:
                _, cta_tile = self.tile_coords(index, mC)
                acc_state = self.store_tile(accumulator_pipeline, acc_state, tCtAcc, tma_atom_c, mC, sC, cta_tile, store_pipeline)
                index, valid, clc_state = self.next_tile(clc_pipeline, clc_state, storage)
            if tidx == 0:
                store_pipeline.producer_tail()
            pipeline.NamedBarrier(barrier_id=TMEM_FREE_BARRIER_ID, num_threads=self.epilogue_threads).arrive_and_wait()
            tmem.free(tCtAcc.iterator)

        cute.arch.cluster_arrive_relaxed()
        cute.arch.cluster_wait()
