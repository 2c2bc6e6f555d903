"""Step 5 (Blackwell) - clusters: the 2-CTA MMA (``cta_group::2``) and TMA multicast.

Parent: step 4. Key differences:

* CTAs run in clusters of ``cluster_m x cluster_n`` (default 2 x 1), and the two CTAs of each
  *pair* along M share one ``tcgen05.mma.cta_group::2`` of 256 x 256 x 16: CTA 0 of the pair
  (the *leader*) issues it, and the tensor cores of both SMs compute it. Each CTA holds its own
  128 rows of A and *half* of B (128 of the 256 columns) in shared memory, and its own 128 x 256
  half of the accumulator in its own tensor memory. Per K tile a CTA loads 16 + 16
  KiB instead of the 16 + 32 KiB a 128 x 256 tile on one SM needs: the pair reads each byte of
  B from L2 once for 256 rows.
* TMA loads from both CTAs signal the *leader's* full barrier (``.cta_group::2``), whose
  ``expect_tx`` counts the bytes of the whole pair; the leader's ``tcgen05.commit`` multicasts
  the "stage consumed" arrival to the empty barriers of every CTA that fed it.
* With more than one pair in the cluster (``cluster_m`` = 4, or ``cluster_n`` = 2) the operand
  the pairs share is *multicast*: one TMA load writes it into several CTAs' shared memory
  (``.multicast::cluster`` and a CTA mask), as on Hopper.
* Tensor memory is allocated by both CTAs together (``tcgen05.alloc.cta_group::2``) and freed
  only when both are done with it: the allocator's dealloc mbarrier makes each CTA wait for its
  peer. A final cluster barrier keeps every CTA alive until no peer can still write to it.
* Still one stage, one warp issuing loads and MMAs: step 6 separates them.

Expected: the single-stage latency chain of step 4, but each K tile of the pair does 4x the
FLOPs of step 4's 64 x 256 tile for 1.6x its bytes (per CTA: 2x the FLOPs for 0.8x the bytes).

Accepts: any M; N and K multiples of 8.
"""


import dataclasses

import cutlass
import cutlass.cute as cute
import cutlass.pipeline as pipeline
from cutlass.cute.nvgpu import OperandMajorMode, cpasync, tcgen05
from cutlass.memory import TmemAllocator

from ... import hardware
from . import step04_tma_store as parent
from .step02_tcgen05_tma import AB_DTYPE, ACC_DTYPE, Barrier, smem_to_fit_tmem, tmem_fence_after_sync
from .step04_tma_store import C_DTYPE, can_implement  # noqa: F401  (same shapes as step 4)

SMEM_CAPACITY = hardware.SM100A.smem_per_cta  # 232448 B of shared memory a CTA may have on sm_100 (the opt-in maximum)
PAIR = 2  # CTAs per tcgen05.mma.cta_group::2


@dataclasses.dataclass(frozen=True)
class Config(parent.Config):
    tile_m: int = 128  # rows of C per CTA; the pair's MMA is 2 * tile_m = 256 rows
    cluster_m: int = 2  # CTAs along M: pairs, and pairs that share (multicast) B
    cluster_n: int = 1  # CTAs along N that share (multicast) A
    stages: int = 1


def smem_estimate(config) -> int:
    """Bytes of shared memory: A and B stages (each CTA holds half of B), staging buffers, barriers."""
    ab = (config.tile_m + config.tile_n // PAIR) * config.tile_k * 2 * config.stages
    epi = config.tile_m * config.epi_n * 2 * config.epi_stages
    return ab + epi + 1024 + 3 * 1024  # barriers, and 1 KiB alignment of the three buffers


def check_config(config: Config):
    if config.tile_m != 128:
        return False, "tile_m must be 128: each CTA of the pair holds 128 rows of the 256-row MMA"
    if config.tile_n not in (64, 128, 256):
        return False, "tile_n must be 64, 128 or 256 (a tcgen05 N; each CTA loads half of B)"
    if config.tile_k != 64:
        return False, "tile_k must be 64: one 128-byte swizzle row of bf16"
    if config.cluster_m not in (2, 4) or config.cluster_n not in (1, 2):
        return False, "cluster_m must be 2 or 4 (whole CTA pairs) and cluster_n 1 or 2"
    if config.stages < 1:
        return False, "stages must be at least 1"
    ok, why = parent.check_epilogue(config)
    if not ok:
        return ok, why
    smem = smem_estimate(config)
    if smem > SMEM_CAPACITY:
        return False, f"needs about {smem} B of shared memory, more than the {SMEM_CAPACITY} B a CTA can have"
    return True, ""


class Gemm(parent.Gemm):
    def __init__(self, config: Config):
        super().__init__(config)
        self.cluster_shape_mnk = (config.cluster_m, config.cluster_n, 1)
        self.mma_tiler = (PAIR * config.tile_m, config.tile_n, config.tile_k)  # the pair's tile
        self.stages = config.stages
        self.acc_stages = 1  # accumulators in tensor memory

    # ---- the MMA and the layouts ----------------------------------------------------------------

    def make_tiled_mma(self):
        op = tcgen05.MmaF16BF16Op(
            AB_DTYPE,
            ACC_DTYPE,
            self.mma_tiler[:2] + (16,),
            tcgen05.CtaGroup.TWO,
            tcgen05.OperandSource.SMEM,
            OperandMajorMode.K,
            OperandMajorMode.K,
        )
        return cute.make_tiled_mma(op)

    def make_smem_layouts(self, tiled_mma):
        """A as (MMA, MMA_M, MMA_K, stages), B as (MMA, MMA_N, MMA_K, stages): this CTA's share."""
        atom = tcgen05.make_smem_layout_atom(self.smem_layout_atom_kind(), AB_DTYPE)
        bm, bn, bk = self.mma_tiler
        a_shape = cute.append(tiled_mma.partition_shape_A((bm, bk)), self.stages)
        b_shape = cute.append(tiled_mma.partition_shape_B((bn, bk)), self.stages)
        a_layout = tcgen05.tile_to_mma_shape(atom, a_shape, order=(1, 2, 3))
        b_layout = tcgen05.tile_to_mma_shape(atom, b_shape, order=(1, 2, 3))
        return a_layout, b_layout

    def make_accumulator(self, tiled_mma):
        """This CTA's half of the pair's accumulator: (MMA, MMA_M, MMA_N) = ((128, tile_n), 1, 1)."""
        return tiled_mma.make_fragment_C(tiled_mma.partition_shape_C(self.mma_tiler[:2]))

    def cta_layout_vmnk(self, tiled_mma):
        """The cluster as (V, M, N, K): V = the CTA's place in its pair; M, N = pairs along M, N."""
        return cute.tiled_divide(cute.make_layout(self.cluster_shape_mnk), (tiled_mma.thr_id,))

    # ---- host side ----------------------------------------------------------------------------

    def make_mainloop_operands(self, mA: cute.Tensor, mB: cute.Tensor):
        tiled_mma = self.make_tiled_mma()
        a_smem_layout, b_smem_layout = self.make_smem_layouts(tiled_mma)
        cluster = self.cta_layout_vmnk(tiled_mma)
        op = cpasync.CopyBulkTensorTileG2SMulticastOp(tcgen05.CtaGroup.TWO)
        one_stage = (None, None, None, 0)
        tma_atom_a, tma_a = cute.nvgpu.make_tiled_tma_atom_A(
            op, mA, cute.slice_(a_smem_layout, one_stage), self.mma_tiler, tiled_mma, cluster.shape
        )
        tma_atom_b, tma_b = cute.nvgpu.make_tiled_tma_atom_B(
            op, mB, cute.slice_(b_smem_layout, one_stage), self.mma_tiler, tiled_mma, cluster.shape
        )
        return tiled_mma, a_smem_layout, b_smem_layout, tma_atom_a, tma_a, tma_atom_b, tma_b

    def grid(self, mA: cute.Tensor, mC: cute.Tensor):
        """One CTA per 128 x tile_n tile of C, rounded up to whole clusters."""
        bm, bn, _ = self.tile_mnk
        cm, cn, _ = self.cluster_shape_mnk
        return (cute.ceil_div(mC.shape[0], bm * cm) * cm, cute.ceil_div(mC.shape[1], bn * cn) * cn, 1)

    def make_shared_storage(self, a_smem_layout, b_smem_layout, epi_smem_layout):
        stages, acc_stages = self.stages, self.acc_stages

        @cute.struct
        class SharedStorage:
            mainloop_barriers: cute.struct.MemRange[cutlass.Int64, 2 * stages]  # full + empty per stage
            accumulator_barriers: cute.struct.MemRange[cutlass.Int64, 2 * acc_stages]  # full + empty per accumulator
            tmem_dealloc_barrier: cutlass.Int64  # each CTA of the pair waits for its peer before freeing
            tmem_address: cutlass.Int32
            sA: cute.struct.Align[cute.struct.MemRange[AB_DTYPE, cute.cosize(a_smem_layout)], 1024]
            sB: cute.struct.Align[cute.struct.MemRange[AB_DTYPE, cute.cosize(b_smem_layout)], 1024]
            sC: cute.struct.Align[cute.struct.MemRange[C_DTYPE, cute.cosize(epi_smem_layout)], 1024]

        return SharedStorage

    @cute.jit
    def __call__(self, mA: cute.Tensor, mB: cute.Tensor, mC: cute.Tensor, stream):
        self.launch_kernel(mA, mB, mC, stream)

    def launch_kernel(self, mA: cute.Tensor, mB: cute.Tensor, mC: cute.Tensor, stream, *extra):
        """Build the operands, then launch; ``extra`` arguments (later steps) go to the kernel last."""
        tiled_mma, a_smem_layout, b_smem_layout, tma_atom_a, tma_a, tma_atom_b, tma_b = self.make_mainloop_operands(mA, mB)
        epi_smem_layout, tma_atom_c, tma_c = self.make_epilogue_operands(mC)
        self.shared_storage = self.make_shared_storage(a_smem_layout, b_smem_layout, epi_smem_layout)
        self.storage_bytes = self.shared_storage.size_in_bytes()
        self.smem_bytes = smem_to_fit_tmem(self.storage_bytes, self.tmem_cols)
        self.kernel(
            tiled_mma, tma_atom_a, tma_a, tma_atom_b, tma_b, tma_atom_c, tma_c, a_smem_layout, b_smem_layout, epi_smem_layout,
            *extra,
        ).launch(grid=self.grid(mA, mC), block=[self.threads, 1, 1], cluster=self.cluster_shape_mnk, smem=self.smem_bytes,
                 stream=stream, **self.launch_options())

    def launch_options(self) -> dict:
        """More keyword arguments for the launch: none here (step 12 can add programmatic dependent launch)."""
        return {}

    # ---- device side: the pair, its pipelines and its tensor memory -----------------------------

    def tma_bytes_per_stage(self, tiled_mma) -> int:
        """What the leader's full barrier expects per stage: A and B of *both* CTAs of the pair."""
        bm, bn, bk = self.mma_tiler
        return (bm + bn) * bk * AB_DTYPE.width // 8

    def make_mainloop_pipeline(self, storage, tiled_mma):
        """Full/empty barriers per stage. The leader's full barrier counts the pair's bytes; the
        leader's commit arrives once on the empty barrier of every CTA that loaded into the stage."""
        cluster = self.cta_layout_vmnk(tiled_mma)
        loaders = cute.size(cluster, mode=[1]) + cute.size(cluster, mode=[2]) - 1  # commits that arrive per stage
        return pipeline.PipelineTmaUmma.create(
            barrier_storage=storage.mainloop_barriers.data_ptr(),
            num_stages=self.stages,
            producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread),
            consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, loaders),
            tx_count=self.tma_bytes_per_stage(tiled_mma),
            cta_layout_vmnk=cluster,
            defer_sync=True,
        )

    def make_accumulator_pipeline(self, storage, tiled_mma, epi_threads: int):
        """The leader's commit tells both CTAs that the accumulator is complete; the epilogue threads
        of both CTAs tell the leader that they have read it."""
        cluster = self.cta_layout_vmnk(tiled_mma)
        return pipeline.PipelineUmmaAsync.create(
            barrier_storage=storage.accumulator_barriers.data_ptr(),
            num_stages=self.acc_stages,
            producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread),
            consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, PAIR * epi_threads),
            cta_layout_vmnk=cluster,
            defer_sync=True,
        )

    def make_tmem_allocator(self, storage, threads: int, allocator_warp: int = 0):
        return TmemAllocator(
            storage.tmem_address.ptr,
            barrier_for_retrieve=pipeline.NamedBarrier(barrier_id=int(Barrier.TMEM), num_threads=threads),
            allocator_warp_id=allocator_warp,
            is_two_cta=True,
            two_cta_tmem_dealloc_mbar_ptr=storage.tmem_dealloc_barrier.ptr,
        )

    def allocate_shared_storage(self, a_smem_layout, b_smem_layout, epi_smem_layout):
        """Shared memory as the kernel's SharedStorage, and the A, B and staging tensors in it."""
        storage = cutlass.memory.SmemAllocator().allocate(self.shared_storage)
        sA = storage.sA.get_tensor(a_smem_layout.outer, swizzle=a_smem_layout.inner)  # (MMA, MMA_M, MMA_K, stages)
        sB = storage.sB.get_tensor(b_smem_layout.outer, swizzle=b_smem_layout.inner)  # (MMA, MMA_N, MMA_K, stages)
        sC = storage.sC.get_tensor(epi_smem_layout.outer, swizzle=epi_smem_layout.inner)  # (tile_m, epi_n, epi_stages)
        return storage, sA, sB, sC

    def accumulator_in(self, tmem, tiled_mma):
        """The accumulator tensor at the tensor-memory address the allocation left in shared memory."""
        return cute.make_tensor(tmem.retrieve_ptr(ACC_DTYPE), self.make_accumulator(tiled_mma).layout)

    def take_tensor_memory(self, tmem, tiled_mma):
        """The allocator warp allocates (together with the peer CTA's); everyone waits for the address;
        this CTA allocates nothing more. Returns the accumulator."""
        tmem.allocate(self.tmem_cols)
        tmem.wait_for_alloc()
        tmem.relinquish_alloc_permit()
        return self.accumulator_in(tmem, tiled_mma)

    @cute.jit
    def pair_coords(self, tiled_mma):
        """(the CTA's place in the cluster as VMNK, the pair's tile (m, n), whether it leads the pair)."""
        bidx, bidy, _ = cute.arch.block_idx()
        cluster = self.cta_layout_vmnk(tiled_mma)
        cta_in_cluster = cluster.get_flat_coord(cute.arch.make_warp_uniform(cute.arch.block_idx_in_cluster()))
        pair_tile = (bidx // PAIR, bidy, None)
        return cta_in_cluster, pair_tile, bidx % PAIR == 0

    @cute.jit
    def load_partitions(self, tiled_mma, tma_atom_a, mA, tma_atom_b, mB, sA, sB, pair_tile, cta_in_cluster):
        """TMA partitions of this CTA's share of the pair's tile (with the stage mode), and the multicast masks."""
        cluster = self.cta_layout_vmnk(tiled_mma)
        gA = cute.local_tile(mA, self.mma_tiler, pair_tile, proj=(1, None, 1))  # (2 * bM, bK, k_tiles)
        gB = cute.local_tile(mB, self.mma_tiler, pair_tile, proj=(None, 1, 1))  # (bN, bK, k_tiles)
        thr_mma = tiled_mma.get_slice(cta_in_cluster[0])
        tCgA = thr_mma.partition_A(gA)  # (MMA, MMA_M, MMA_K, k_tiles): this CTA's 128 rows
        tCgB = thr_mma.partition_B(gB)  # (MMA, MMA_N, MMA_K, k_tiles): this CTA's half of B
        tAsA, tAgA = cpasync.tma_partition(
            tma_atom_a, cta_in_cluster[2], cute.make_layout(cute.size(cluster, mode=[2])),
            cute.group_modes(sA, 0, 3), cute.group_modes(tCgA, 0, 3),
        )  # (TMA, stages), (TMA, k_tiles)
        tBsB, tBgB = cpasync.tma_partition(
            tma_atom_b, cta_in_cluster[1], cute.make_layout(cute.size(cluster, mode=[1])),
            cute.group_modes(sB, 0, 3), cute.group_modes(tCgB, 0, 3),
        )
        a_mask = cpasync.create_tma_multicast_mask(cluster, cta_in_cluster, mcast_mode=2)  # pairs along N share A
        b_mask = cpasync.create_tma_multicast_mask(cluster, cta_in_cluster, mcast_mode=1)  # pairs along M share B
        return tAsA, tAgA, tBsB, tBgB, a_mask, b_mask

    @cute.jit
    def load_k_tile(self, mainloop_pipeline, state, k_tile, tma_atom_a, tAgA, tAsA, a_mask, tma_atom_b, tBgB, tBsB, b_mask):
        """Wait until the stage is empty, (leader) announce the pair's bytes, TMA this CTA's share."""
        mainloop_pipeline.producer_acquire(state)
        barrier = mainloop_pipeline.producer_get_barrier(state)
        cute.copy(tma_atom_a, tAgA[(None, k_tile)], tAsA[(None, state.index)], tma_bar_ptr=barrier, mcast_mask=a_mask)
        cute.copy(tma_atom_b, tBgB[(None, k_tile)], tBsB[(None, state.index)], tma_bar_ptr=barrier, mcast_mask=b_mask)

    @cute.jit
    def mma_k_tile(self, tiled_mma, tCtAcc, tCrA, tCrB, stage):
        """The leader: every k16 MMA of one K tile (one ``cute.gemm`` over the K-block mode; it
        accumulates after the first k16 step, which follows the caller's ``ACCUMULATE`` flag)."""
        cute.gemm(tiled_mma, tCtAcc, tCrA[(None, None, None, stage)], tCrB[(None, None, None, stage)], tCtAcc)

    # ---- device side: the kernel --------------------------------------------------------------

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
        if warp_idx == 0:
            cpasync.prefetch_descriptor(tma_atom_a)
            cpasync.prefetch_descriptor(tma_atom_b)

        # 1. shared memory, pipelines, tensor memory; barriers visible cluster-wide before any use
        storage, sA, sB, sC = self.allocate_shared_storage(a_smem_layout, b_smem_layout, epi_smem_layout)
        mainloop_pipeline = self.make_mainloop_pipeline(storage, tiled_mma)
        accumulator_pipeline = self.make_accumulator_pipeline(storage, tiled_mma, self.threads)
        tmem = self.make_tmem_allocator(storage, self.threads)
        pipeline.pipeline_init_arrive(cluster_shape_mn=self.cluster_shape_mnk[:2], is_relaxed=True)
        pipeline.pipeline_init_wait(cluster_shape_mn=self.cluster_shape_mnk[:2])
        # a 2-CTA allocation needs the peer CTA running: only after the cluster wait
        tCtAcc = self.take_tensor_memory(tmem, tiled_mma)  # warp 0 of each CTA: the pair allocates together

        # 2. partitions
        tAsA, tAgA, tBsB, tBgB, a_mask, b_mask = self.load_partitions(
            tiled_mma, tma_atom_a, mA, tma_atom_b, mB, sA, sB, pair_tile, cta_in_cluster
        )
        tCrA = tiled_mma.make_fragment_A(sA)  # (MMA, MMA_M, MMA_K, stages) descriptors
        tCrB = tiled_mma.make_fragment_B(sB)

        # 3. main loop (warp 0): load this CTA's share of a K tile; the leader waits for the pair's
        #    bytes, issues the MMAs, and its commit frees the stage in every CTA that loaded it
        num_k_tiles = cute.size(tAgA, mode=[1])
        if warp_idx == 0:
            load_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, self.stages)
            read_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, self.stages)
            acc_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, 1)
            for k_tile in cutlass.range(num_k_tiles, unroll=1):
                self.load_k_tile(
                    mainloop_pipeline, load_state, k_tile, tma_atom_a, tAgA, tAsA, a_mask, tma_atom_b, tBgB, tBsB, b_mask
                )
                load_state.advance()
                if is_leader:
                    mainloop_pipeline.consumer_wait(read_state)
                    tiled_mma.set(tcgen05.Field.ACCUMULATE, k_tile != 0)  # the tile's first MMA overwrites TMEM
                    self.mma_k_tile(tiled_mma, tCtAcc, tCrA, tCrB, read_state.index)
                    mainloop_pipeline.consumer_release(read_state)  # tcgen05.commit, multicast to the loaders
                    read_state.advance()
            if is_leader:
                accumulator_pipeline.producer_commit(acc_state)  # both CTAs: the accumulator is complete
            mainloop_pipeline.producer_tail(load_state)  # no commit may arrive after this CTA is gone

        # 4. epilogue: each CTA stores its own 128 rows of the pair's tile
        acc_read = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, 1)
        accumulator_pipeline.consumer_wait(acc_read)
        tmem_fence_after_sync()  # the accumulator's tcgen05.ld come after the wait
        store_pipeline = self.make_store_pipeline(self.threads)
        self.epilogue_tma(tCtAcc, tma_atom_c, mC, sC, (bidx, bidy, None), store_pipeline, 0)
        if tidx == 0:
            store_pipeline.producer_tail()

        # 5. tensor memory is freed when both CTAs of the pair are done with it; then the cluster
        #    leaves together, so no peer writes into a CTA that has exited
        cute.arch.fence_view_async_tmem_load()
        pipeline.NamedBarrier(barrier_id=int(Barrier.TMEM), num_threads=self.threads).arrive_and_wait()
        tmem.free(tCtAcc.iterator)
        cute.arch.cluster_arrive_relaxed()
        cute.arch.cluster_wait()
