"""Step 4 (Blackwell) - epilogue through shared memory: TMEM -> registers -> shared memory -> TMA store.

Parent: step 3. Key differences (only the epilogue changes):

* Each ``tile_m x epi_n`` sub-tile of the accumulator goes TMEM -> registers (``tcgen05.ld``)
  -> bf16 -> a swizzled shared-memory staging buffer -> global memory by one TMA store
  (``cp.async.bulk.tensor`` shared -> global). The copy engine writes whole row segments (64 bytes
  at ``epi_n`` = 32) and clips tiles at the matrix edge, so M and N need not be multiples of the tile.
* The register -> shared-memory copy follows the TMEM load's shape. With 64 accumulator rows
  (``tile_m`` = 64) the load is ``16x256b``, which hands each lane the same (row, column) pairs
  an ``mma.sync`` fragment has: exactly what ``stmatrix`` stores, one warp-wide instruction per
  four 8 x 8 matrices. With 128 rows the load is ``32x32b`` (lane i holds row i), which no
  matrix store fits: each thread writes its row with vectorized ``st.shared``.
* ``fence.proxy.async.shared::cta`` makes the threads' writes visible to the copy engine (the
  *async proxy*) before the barrier after which one thread issues the store.
* ``epi_stages`` staging buffers: the threads fill one while the copy engine drains another;
  CuTeDSL's ``PipelineTmaStore`` (bulk-async groups) tells when a buffer may be written again.

Expected: the epilogue is a small share of a 4096-long K loop, so a modest gain over step 3
(the seed's step 3, quoted in ``book/references.md``); the real win is shape freedom.

Accepts: any M >= 1, N and K multiples of 8 (TMA loads zero-fill and the TMA store clips).
"""

from __future__ import annotations

import dataclasses

import cutlass
import cutlass.cute as cute
import cutlass.pipeline as pipeline
import cutlass.tensor_utils as tensor_utils
import cutlass.utils.blackwell_helpers as sm100_utils
from cutlass.cute.nvgpu import cpasync, tcgen05, warp

from . import step03_swizzle as parent
from .step02_tcgen05_tma import AB_DTYPE, ACC_DTYPE, Barrier, smem_to_fit_tmem

C_DTYPE = cutlass.BFloat16


EPI_BARRIER_ID = int(Barrier.TMEM) + 1  # named barrier among the epilogue threads (0: sync_threads)


@dataclasses.dataclass(frozen=True)
class Config(parent.Config):
    epi_n: int = 32  # columns per epilogue sub-tile (64 x 32 bf16 = 4 KiB)
    epi_stages: int = 2  # staging buffers: fill one while the copy engine drains the other


def check_epilogue(config) -> tuple:
    if config.epi_n not in (16, 32, 64) or config.tile_n % config.epi_n:
        return False, "epi_n must be 16, 32 or 64 and divide tile_n"
    if config.epi_stages < 1 or (config.tile_n // config.epi_n) % config.epi_stages:
        return False, "epi_stages must divide the number of epilogue sub-tiles (tile_n / epi_n)"
    return True, ""


def check_config(config: Config):
    ok, why = check_epilogue(config)
    if not ok:
        return ok, why
    if config.tile_m not in (64, 128):
        return False, "tile_m must be 64 (tcgen05.ld 16x256b, stmatrix) or 128 (32x32b, st.shared)"
    return parent.check_config(dataclasses.replace(config, tile_m=64))


def can_implement(problem, config: Config):
    return True, ""  # any M; validate() already requires N, K multiples of 8


class Gemm(parent.Gemm):
    # ---- the epilogue's copies ------------------------------------------------------------------

    def epi_tile(self):
        return (self.config.tile_m, self.config.epi_n)

    def accumulator_rows(self) -> int:
        """Accumulator rows this CTA holds in TMEM (lane = row when 128; 16-row bands when 64)."""
        return self.config.tile_m

    def tmem_load_op(self):
        """16x256b for a 64-row accumulator (16 lanes per warp), 32x32b for 128 rows (32 lanes per warp)."""
        if self.accumulator_rows() == 64:
            return tcgen05.Ld16x256bOp(tcgen05.Repetition(self.config.epi_n // 8))
        return tcgen05.Ld32x32bOp(tcgen05.Repetition(self.config.epi_n))

    def smem_store_atom(self):
        """stmatrix where the TMEM load's fragment is an mma fragment (16x256b), else st.shared.

        Both follow C's layout (``make_epilogue_operands``). C row-major: stmatrix as is, and each
        thread's row of epi_n values in 128-bit stores. C M-major (Blackwell step 12 writes C^T): the
        staging buffer is M-major too, so stmatrix transposes its 8 x 8 matrices, and a thread's row
        is not contiguous there: 16-bit stores, one value each, consecutive threads (rows) at
        consecutive addresses."""
        m_major = self.c_layout.is_m_major_c()
        if self.accumulator_rows() == 64:
            return cute.make_copy_atom(warp.StMatrix8x8x16bOp(transpose=m_major, num_matrices=4), C_DTYPE)
        return cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), C_DTYPE, num_bits_per_copy=16 if m_major else 128)

    def make_epilogue_operands(self, mC: cute.Tensor):
        """The staging layout in shared memory, (tile_m, epi_n, epi_stages), and the TMA store atom."""
        self.c_layout = tensor_utils.LayoutEnum.from_tensor(mC)  # the epilogue's store atom follows it
        epi_smem_layout = sm100_utils.make_smem_layout_epi(C_DTYPE, self.c_layout, self.epi_tile(), self.config.epi_stages)
        tma_atom_c, tma_tensor_c = cpasync.make_tiled_tma_atom(
            cpasync.CopyBulkTensorTileS2GOp(), mC, cute.slice_(epi_smem_layout, (None, None, 0)), self.epi_tile()
        )
        return epi_smem_layout, tma_atom_c, tma_tensor_c

    # ---- host side ----------------------------------------------------------------------------

    @cute.jit
    def __call__(self, mA: cute.Tensor, mB: cute.Tensor, mC: cute.Tensor, stream):
        bm, bn, _ = self.tile_mnk
        tiled_mma = self.make_tiled_mma()
        a_smem_layout, b_smem_layout = self.make_smem_layouts(tiled_mma)
        tma_op = cpasync.CopyBulkTensorTileG2SOp(tcgen05.CtaGroup.ONE)
        tma_atom_a, tma_a = cute.nvgpu.make_tiled_tma_atom_A(tma_op, mA, a_smem_layout, self.tile_mnk, tiled_mma)
        tma_atom_b, tma_b = cute.nvgpu.make_tiled_tma_atom_B(tma_op, mB, b_smem_layout, self.tile_mnk, tiled_mma)
        epi_smem_layout, tma_atom_c, tma_c = self.make_epilogue_operands(mC)

        @cute.struct
        class SharedStorage:
            load_barrier: cute.struct.MemRange[cutlass.Int64, 1]
            mma_barrier: cute.struct.MemRange[cutlass.Int64, 1]
            tmem_address: cutlass.Int32
            sA: cute.struct.Align[cute.struct.MemRange[AB_DTYPE, cute.cosize(a_smem_layout)], 1024]
            sB: cute.struct.Align[cute.struct.MemRange[AB_DTYPE, cute.cosize(b_smem_layout)], 1024]
            sC: cute.struct.Align[cute.struct.MemRange[C_DTYPE, cute.cosize(epi_smem_layout)], 1024]

        self.shared_storage = SharedStorage
        self.storage_bytes = SharedStorage.size_in_bytes()
        self.smem_bytes = smem_to_fit_tmem(self.storage_bytes, self.tmem_cols)
        grid = (cute.ceil_div(mC.shape[0], bm), cute.ceil_div(mC.shape[1], bn), 1)
        self.kernel(
            tiled_mma, tma_atom_a, tma_a, tma_atom_b, tma_b, tma_atom_c, tma_c, a_smem_layout, b_smem_layout, epi_smem_layout
        ).launch(grid=grid, block=[self.threads, 1, 1], smem=self.smem_bytes, stream=stream)

    # ---- device side --------------------------------------------------------------------------

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
        bidx, bidy, _ = cute.arch.block_idx()
        tile_coord = (bidx, bidy, None)
        smem = cutlass.memory.SmemAllocator()
        storage = smem.allocate(self.shared_storage)
        sA = storage.sA.get_tensor(a_smem_layout.outer, swizzle=a_smem_layout.inner)
        sB = storage.sB.get_tensor(b_smem_layout.outer, swizzle=b_smem_layout.inner)
        sC = storage.sC.get_tensor(epi_smem_layout.outer, swizzle=epi_smem_layout.inner)  # (tile_m, epi_n, epi_stages)
        tmem, tCtAcc = self.allocate_accumulator(tiled_mma, storage, tma_atom_a, tma_atom_b)
        self.mainloop(tiled_mma, tCtAcc, tma_atom_a, mA, tma_atom_b, mB, sA, sB, storage, tile_coord)
        store_pipeline = self.make_store_pipeline(self.threads)
        self.epilogue_tma(tCtAcc, tma_atom_c, mC, sC, tile_coord, store_pipeline, 0)
        if cute.arch.thread_idx()[0] == 0:
            store_pipeline.producer_tail()  # shared memory must outlive the stores that read it
        self.free_accumulator(tmem, tCtAcc)

    def make_store_pipeline(self, epi_threads: int):
        """Bookkeeping of the bulk stores in flight, so a staging buffer is reused only once read."""
        return pipeline.PipelineTmaStore.create(
            num_stages=self.config.epi_stages,
            producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, epi_threads),
        )

    @cute.jit
    def epilogue_tma(
        self,
        tCtAcc: cute.Tensor,
        tma_atom_c: cute.CopyAtom,
        mC: cute.Tensor,
        sC: cute.Tensor,
        tile_coord,
        store_pipeline,
        first_thread: cutlass.Constexpr,
    ):
        """The four warps from ``first_thread`` on: per sub-tile TMEM -> registers -> bf16 ->
        staging buffer -> TMA store; the first of them issues the stores and leaves them in flight.

        Warp w of the four reads TMEM lanes 32w..32w+31 (the hardware's rule), so the four must be
        a whole warpgroup-aligned set of warps."""
        tidx, _, _ = cute.arch.thread_idx()
        epi_tidx = tidx - first_thread
        gC = cute.local_tile(mC, self.tile_mnk, tile_coord, proj=(1, 1, None))  # (bM, bN)
        tmem_load, tDtAcc, tDgC = self.make_epilogue_copy(tCtAcc, gC, epi_tidx)  # (T2R, T2R_M, T2R_N, 1, subtiles)
        tDrAcc = cute.make_rmem_tensor(tDgC[(None, None, None, 0, 0)].shape, ACC_DTYPE)

        # registers -> shared, tiled to match the TMEM load's fragment
        r2s = cute.make_tiled_copy_D(self.smem_store_atom(), tmem_load)
        thr_r2s = r2s.get_slice(epi_tidx)
        tRS_sC = thr_r2s.partition_D(sC)  # (R2S, R2S_M, R2S_N, epi_stages)
        tRS_rAcc = r2s.retile(tDrAcc)
        tRS_rC = cute.make_rmem_tensor(tRS_rAcc.shape, C_DTYPE)

        # shared -> global: the TMA store's view of the tile's sub-tiles
        gC_epi = cute.flat_divide(gC, self.epi_tile())  # (tile_m, epi_n, 1, subtiles)
        tCsC, tCgC = cpasync.tma_partition(
            tma_atom_c, 0, cute.make_layout(1), cute.group_modes(sC, 0, 2), cute.group_modes(gC_epi, 0, 2)
        )  # (TMA, epi_stages), (TMA, 1, subtiles)
        epi_barrier = pipeline.NamedBarrier(barrier_id=EPI_BARRIER_ID, num_threads=128)
        for sub in cutlass.range_constexpr(cute.size(tDtAcc, mode=[4])):
            cute.copy(tmem_load, tDtAcc[(None, None, None, 0, sub)], tDrAcc)
            tRS_rC.store(tRS_rAcc.load().to(C_DTYPE))
            stage = sub % self.config.epi_stages
            if epi_tidx == 0:
                store_pipeline.producer_acquire()  # this buffer's previous store has read it
            epi_barrier.arrive_and_wait()
            cute.copy(r2s, tRS_rC, tRS_sC[(None, None, None, stage)])
            cute.arch.fence_proxy("async.shared", space="cta")  # threads' writes -> visible to the copy engine
            epi_barrier.arrive_and_wait()
            if epi_tidx == 0:
                cute.copy(tma_atom_c, tCsC[(None, stage)], tCgC[(None, 0, sub)])
                store_pipeline.producer_commit()
