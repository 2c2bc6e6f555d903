"""Step 5 (Hopper) - clusters with TMA multicast, and a 128 x 256 tile on two warpgroups.

Parent: step 4. Key differences:

* Two consumer warpgroups (256 threads) split a 128 x 256 tile: each owns 64 rows, i.e. a
  64 x 256 accumulator. Per K tile the CTA loads 128x64 of A and 256x64 of B (48 KiB) for
  2*128*256*64 FLOP: 1.67x the FLOP per byte loaded of a 64 x 256 tile (85 against 51).
* CTAs are launched in clusters of ``cluster_m x cluster_n`` (default 2 x 1). The two CTAs of
  a 2 x 1 cluster compute vertically adjacent tiles that need the *same* B tile: each CTA
  loads half of it and the TMA *multicasts* that half into both CTAs' shared memory. The bytes
  read from L2 for B halve (each SM still receives all of its B).
* Because a peer CTA writes into our shared memory, "may I overwrite this buffer?" needs
  an answer from every CTA that reads it: each stage gets an *empty* barrier besides the *full*
  one, and consumers arrive on the empty barriers of all CTAs that multicast into them. We use
  CuTeDSL's ``PipelineTmaAsync``, which implements exactly this full/empty protocol.
* Still one stage (``stages`` = 1): load, wait, compute, release, load. Step 6 deepens it.
* Each warpgroup covers its 64 x 256 with one ``wgmma`` 64 x 256 x 16 per k16 step, the largest
  instruction: it reads the warpgroup's A slice (2 KiB) and B (8 KiB) from shared memory once.
  ``mma_n`` = 128 splits it into two 64 x 128 x 16, which read A twice (12 KiB per k16 step,
  20% more); chapter 11 counts, and the book's appendix measures, what that costs.

Expected: a single stage like step 4, but with 1.67x the FLOP per byte loaded (2.5x per byte read
from L2, with B multicast); a clear gain if step 4 is bound by its bytes. (Step 4 runs several
CTAs per SM, which hide one another's loads; this step's registers leave room for one.)

Accepts: any M; N and K multiples of 8.
"""


import dataclasses

import cutlass
import cutlass.cute as cute
import cutlass.pipeline as pipeline
from cutlass.cute.nvgpu import cpasync, warpgroup

from ... import hardware
from . import step04_tma_store as parent
from .step02_wgmma_tma import AB_DTYPE, ACC_DTYPE, C_DTYPE
from .step04_tma_store import can_implement  # noqa: F401  (same shapes as step 4)

WARPGROUP = 128


@dataclasses.dataclass(frozen=True)
class Config(parent.Config):
    tile_m: int = 128  # two warpgroups of 64 rows
    cluster_m: int = 2  # CTAs of a cluster along M share (multicast) the B tile
    cluster_n: int = 1  # CTAs of a cluster along N share the A tile
    stages: int = 1
    mma_n: int = 0  # wgmma N; 0: tile_n, one instruction per warpgroup and k16 step


def tile_n_ok(n: int) -> bool:
    """wgmma takes N in multiples of 8 up to 256; the epilogue's ``stmatrix`` writes 16 columns at a
    time (168, a multiple of 8 but not of 16, aborts the compiler)."""
    return 64 <= n <= 256 and n % 16 == 0


def check_config(config: Config):
    if config.tile_m not in (64, 128):
        return False, "tile_m must be 64 (one warpgroup) or 128 (two)"
    if not tile_n_ok(config.tile_n):
        return False, "tile_n must be a multiple of 16 from 64 to 256 (a wgmma N whose stmatrix epilogue takes 16 columns)"
    if config.mma_n and (config.mma_n not in (64, 128, 192, 256) or config.tile_n % config.mma_n):
        return False, "mma_n must be 0 (tile_n), 64, 128, 192 or 256, and divide tile_n"
    if config.tile_k != 64:
        return False, "tile_k must be 64: one 128-byte swizzle row of bf16"
    if config.cluster_m not in (1, 2) or config.cluster_n not in (1, 2):
        return False, "cluster_m and cluster_n must be 1 or 2"
    if config.stages < 1:
        return False, "stages must be at least 1"
    ok, why = parent.check_epilogue(config)
    if not ok:
        return ok, why
    smem = smem_estimate(config)
    if smem > SMEM_CAPACITY:
        return False, f"needs {smem} B of shared memory, more than the {SMEM_CAPACITY} B a CTA can have"
    return True, ""


SMEM_CAPACITY = hardware.SM90A.smem_per_cta  # 227 KiB = 232448 B per CTA on sm_90 (the opt-in maximum)


def smem_estimate(config) -> int:
    """Bytes of shared memory: A and B stages, the epilogue staging buffers, barriers (rounded)."""
    ab = (config.tile_m + config.tile_n) * config.tile_k * 2 * config.stages
    epi = config.tile_m * config.epi_n * 2 * config.epi_stages
    return ab + epi + 1024 + 2 * 1024  # barriers, and alignment of the buffers to 1 KiB


class Gemm(parent.Gemm):
    def __init__(self, config: Config):
        super().__init__(config)
        self.mma_warpgroups = config.tile_m // 64
        self.mma_n = config.mma_n or config.tile_n
        self.threads = WARPGROUP * self.mma_warpgroups
        self.cluster_shape_mnk = (config.cluster_m, config.cluster_n, 1)
        self.stages = config.stages

    # ---- host side ----------------------------------------------------------------------------

    def make_smem_layouts(self):
        """As in step 3, with a stage mode: (tile, tile_k, stages)."""
        atom = warpgroup.make_smem_layout_atom(self.smem_layout_atom_kind(), AB_DTYPE)
        bm, bn, bk = self.tile_mnk
        a_layout = cute.tile_to_shape(atom, (bm, bk, self.stages), order=(0, 1, 2))
        b_layout = cute.tile_to_shape(atom, (bn, bk, self.stages), order=(0, 1, 2))
        return a_layout, b_layout

    def make_mainloop_operands(self, mA: cute.Tensor, mB: cute.Tensor):
        """Two warpgroups along M, staged layouts, and multicast TMA where the cluster shares a tile."""
        bm, bn, bk = self.tile_mnk
        tiled_mma = self.make_tiled_mma()  # step 2's, with self.mma_warpgroups = 2
        a_smem_layout, b_smem_layout = self.make_smem_layouts()

        def tma_load(tensor, smem_layout, tile, num_multicast):
            op = cpasync.CopyBulkTensorTileG2SMulticastOp() if num_multicast > 1 else cpasync.CopyBulkTensorTileG2SOp()
            one_stage = cute.slice_(smem_layout, (None, None, 0))
            return cpasync.make_tiled_tma_atom(op, tensor, one_stage, tile, num_multicast=num_multicast)

        tma_atom_a, tma_tensor_a = tma_load(mA, a_smem_layout, (bm, bk), self.config.cluster_n)
        tma_atom_b, tma_tensor_b = tma_load(mB, b_smem_layout, (bn, bk), self.config.cluster_m)
        return tiled_mma, a_smem_layout, b_smem_layout, tma_atom_a, tma_tensor_a, tma_atom_b, tma_tensor_b

    def grid(self, mA: cute.Tensor, mC: cute.Tensor):
        """One CTA per tile, rounded up to whole clusters."""
        bm, bn, _ = self.tile_mnk
        cm, cn, _ = self.cluster_shape_mnk
        return (cute.ceil_div(mC.shape[0], bm * cm) * cm, cute.ceil_div(mC.shape[1], bn * cn) * cn, 1)

    def make_shared_storage(self, a_smem_layout, b_smem_layout, epi_smem_layout):
        stages = self.stages

        @cute.struct
        class SharedStorage:
            mainloop_barriers: cute.struct.MemRange[cutlass.Int64, 2 * stages]  # full + empty per stage
            sA: cute.struct.Align[cute.struct.MemRange[AB_DTYPE, cute.cosize(a_smem_layout)], 1024]
            sB: cute.struct.Align[cute.struct.MemRange[AB_DTYPE, cute.cosize(b_smem_layout)], 1024]
            sC: cute.struct.Align[cute.struct.MemRange[C_DTYPE, cute.cosize(epi_smem_layout)], 1024]

        return SharedStorage

    @cute.jit
    def __call__(self, mA: cute.Tensor, mB: cute.Tensor, mC: cute.Tensor, stream):
        self.launch_kernel(mA, mB, mC, stream)

    def launch_kernel(self, mA: cute.Tensor, mB: cute.Tensor, mC: cute.Tensor, stream, *workspace):
        """Build the operands, then launch; ``workspace`` tensors (step 11's) go to the kernel last."""
        tiled_mma, a_smem_layout, b_smem_layout, tma_atom_a, tma_a, tma_atom_b, tma_b = self.make_mainloop_operands(mA, mB)
        epi_smem_layout, tma_atom_c, tma_c = self.make_epilogue_operands(mC)
        self.shared_storage = self.make_shared_storage(a_smem_layout, b_smem_layout, epi_smem_layout)
        self.smem_bytes = self.shared_storage.size_in_bytes()
        self.kernel(
            tiled_mma, tma_atom_a, tma_a, tma_atom_b, tma_b, tma_atom_c, tma_c, a_smem_layout, b_smem_layout, epi_smem_layout,
            *workspace,
        ).launch(
            grid=self.grid(mA, mC), block=[self.threads, 1, 1], cluster=self.cluster_shape_mnk, stream=stream,
            **self.launch_options(),
        )

    def launch_options(self) -> dict:
        return {}

    # ---- device side --------------------------------------------------------------------------

    def make_mainloop_pipeline(self, storage, consumer_warps: int):
        """Full/empty barriers per stage; consumers release to every CTA that multicasts into them."""
        cm, cn, _ = self.cluster_shape_mnk
        bm, bn, bk = self.tile_mnk
        tma_bytes = (bm + bn) * bk * AB_DTYPE.width // 8
        return pipeline.PipelineTmaAsync.create(
            barrier_storage=storage.mainloop_barriers.data_ptr(),
            num_stages=self.stages,
            producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread),
            consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, (cm + cn - 1) * consumer_warps),
            tx_count=tma_bytes,
            cta_layout_vmnk=cute.make_layout((1, *self.cluster_shape_mnk)),
            defer_sync=True,
        )

    @cute.jit
    def load_partitions(self, tma_atom_a, mA, tma_atom_b, mB, sA, sB, tile_coord):
        """TMA partitions of this CTA's slice of a multicast tile, and the multicast masks."""
        cta_layout = cute.make_layout(self.cluster_shape_mnk)
        cta_rank = cute.arch.make_warp_uniform(cute.arch.block_idx_in_cluster())
        cluster_coord = cta_layout.get_flat_coord(cta_rank)
        gA = cute.local_tile(mA, self.tile_mnk, tile_coord, proj=(1, None, 1))  # (bM, bK, k_tiles)
        gB = cute.local_tile(mB, self.tile_mnk, tile_coord, proj=(None, 1, 1))  # (bN, bK, k_tiles)
        tAsA, tAgA = cpasync.tma_partition(
            tma_atom_a, cluster_coord[1], cute.make_layout(self.cluster_shape_mnk[1]),
            cute.group_modes(sA, 0, 2), cute.group_modes(gA, 0, 2),
        )  # (TMA, stages), (TMA, k_tiles)
        tBsB, tBgB = cpasync.tma_partition(
            tma_atom_b, cluster_coord[0], cute.make_layout(self.cluster_shape_mnk[0]),
            cute.group_modes(sB, 0, 2), cute.group_modes(gB, 0, 2),
        )
        a_mask = cute.make_layout_image_mask(cta_layout, cluster_coord, mode=1) if self.cluster_shape_mnk[1] > 1 else 0
        b_mask = cute.make_layout_image_mask(cta_layout, cluster_coord, mode=0) if self.cluster_shape_mnk[0] > 1 else 0
        return tAsA, tAgA, tBsB, tBgB, a_mask, b_mask

    @cute.jit
    def load_k_tile(self, mainloop_pipeline, state, k_tile, tma_atom_a, tAgA, tAsA, a_mask, tma_atom_b, tBgB, tBsB, b_mask):
        """Producer: wait until the stage is empty everywhere, then TMA (multicast) K tile k_tile into it."""
        mainloop_pipeline.producer_acquire(state)
        barrier = mainloop_pipeline.producer_get_barrier(state)
        cute.copy(tma_atom_a, tAgA[(None, k_tile)], tAsA[(None, state.index)], tma_bar_ptr=barrier, mcast_mask=a_mask)
        cute.copy(tma_atom_b, tBgB[(None, k_tile)], tBsB[(None, state.index)], tma_bar_ptr=barrier, mcast_mask=b_mask)
        mainloop_pipeline.producer_commit(state)

    @cute.jit
    def mma_k_tile(self, tiled_mma, accumulators, tCrA, tCrB, stage):
        """Consumer: the wgmma of one K tile (tile_k / 16 instructions), committed as one group.

        The MMA always accumulates (the caller zeroes the accumulator per tile): toggling the
        accumulate flag inside staged loops would carry a traced value out of the loop.
        """
        warpgroup.fence()
        for k_block in cutlass.range_constexpr(cute.size(tCrA, mode=[2])):
            a, b = tCrA[(None, None, k_block, stage)], tCrB[(None, None, k_block, stage)]
            cute.gemm(tiled_mma, accumulators, a, b, accumulators)
        warpgroup.commit_group()

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
        tile_coord = (bidx, bidy, None)
        if warp_idx == 0:
            cpasync.prefetch_descriptor(tma_atom_a)
            cpasync.prefetch_descriptor(tma_atom_b)

        # 1. shared memory, the pipeline, and a cluster-wide wait until every barrier is initialized
        smem = cutlass.memory.SmemAllocator()
        storage = smem.allocate(self.shared_storage)
        mainloop_pipeline = self.make_mainloop_pipeline(storage, self.threads // 32)
        pipeline.pipeline_init_arrive(cluster_shape_mn=self.cluster_shape_mnk[:2], is_relaxed=True)
        sA = storage.sA.get_tensor(a_smem_layout.outer, swizzle=a_smem_layout.inner)  # (bM, bK, stages)
        sB = storage.sB.get_tensor(b_smem_layout.outer, swizzle=b_smem_layout.inner)  # (bN, bK, stages)
        sC = storage.sC.get_tensor(epi_smem_layout.outer, swizzle=epi_smem_layout.inner)

        # 2. partitions
        tAsA, tAgA, tBsB, tBgB, a_mask, b_mask = self.load_partitions(tma_atom_a, mA, tma_atom_b, mB, sA, sB, tile_coord)
        thr_mma = tiled_mma.get_slice(tidx)
        tCrA = tiled_mma.make_fragment_A(thr_mma.partition_A(sA))  # (MMA, MMA_M, MMA_K, stages)
        tCrB = tiled_mma.make_fragment_B(thr_mma.partition_B(sB))  # (MMA, MMA_N, MMA_K, stages)
        accumulators = cute.make_rmem_tensor(tiled_mma.partition_shape_C(self.tile_mnk[:2]), ACC_DTYPE)
        pipeline.pipeline_init_wait(cluster_shape_mn=self.cluster_shape_mnk[:2])

        # 3. main loop: warp 0 keeps up to `stages` K tiles in flight; everyone computes and releases
        num_k_tiles = cute.size(tAgA, mode=[1])
        load_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, self.stages)
        read_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, self.stages)
        if warp_idx == 0:
            for _ in cutlass.range(cutlass.min(self.stages, num_k_tiles), unroll=1):
                self.load_k_tile(
                    mainloop_pipeline, load_state, load_state.count,
                    tma_atom_a, tAgA, tAsA, a_mask, tma_atom_b, tBgB, tBsB, b_mask,
                )
                load_state.advance()
        accumulators.fill(0.0)
        tiled_mma.set(warpgroup.Field.ACCUMULATE, True)
        for _ in cutlass.range(num_k_tiles, unroll=1):
            mainloop_pipeline.consumer_wait(read_state)
            self.mma_k_tile(tiled_mma, accumulators, tCrA, tCrB, read_state.index)
            warpgroup.wait_group(0)
            mainloop_pipeline.consumer_release(read_state)
            read_state.advance()
            if warp_idx == 0 and load_state.count < num_k_tiles:
                self.load_k_tile(
                    mainloop_pipeline, load_state, load_state.count,
                    tma_atom_a, tAgA, tAsA, a_mask, tma_atom_b, tBgB, tBsB, b_mask,
                )
                load_state.advance()

        # 4. epilogue (step 4's, over both warpgroups), then keep our shared memory alive until
        #    no peer can still arrive on our barriers
        store_pipeline = self.make_store_pipeline(sC, self.threads)
        self.epilogue_tma(tiled_mma, accumulators, tma_atom_c, mC, sC, tile_coord, store_pipeline, self.threads)
        if tidx == 0:
            store_pipeline.producer_tail()
        cute.arch.cluster_arrive_relaxed()
        cute.arch.cluster_wait()
