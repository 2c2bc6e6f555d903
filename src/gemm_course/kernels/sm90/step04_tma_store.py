"""Step 4 (Hopper) - epilogue through shared memory: stmatrix, then a TMA store.

Parent: step 3. Key differences (only the epilogue changes):

* The accumulator fragment is converted to bf16 and written to a small shared-memory staging
  buffer with ``stmatrix`` (8x8 matrices of 16-bit values, one warp-wide instruction per four),
  in sub-tiles of ``epi_tile`` (64 x 32) so the buffer stays small.
* One thread then issues a TMA store (``cp.async.bulk.tensor`` shared -> global) of each
  sub-tile. The copy engine writes each sub-tile as 64 contiguous 64-byte row
  segments (two full 32-byte sectors each) instead of each thread scattering 4-byte stores over
  64 rows, and it clips tiles at the matrix edge.
* ``fence.proxy.async`` makes the threads' shared-memory writes visible to the copy engine
  (a different "proxy") before the barrier that precedes the store.

Expected: the step-3 epilogue issues 64 4-byte ``STG`` per thread; at 4096^3 the epilogue is a
small share of the run (64x256 outputs per 4096-long K loop), so a modest gain; the real win is
shape freedom.

Accepts: any M >= 1, N and K multiples of 8 (TMA loads zero-fill and the TMA store clips partial
tiles).
"""

from __future__ import annotations

import dataclasses

import cutlass
import cutlass.cute as cute
import cutlass.pipeline as pipeline
import cutlass.tensor_utils as tensor_utils
import cutlass.utils.hopper_helpers as sm90_utils
from cutlass.cute.nvgpu import cpasync

from . import step03_swizzle as parent
from .step02_wgmma_tma import AB_DTYPE, ACC_DTYPE, C_DTYPE


@dataclasses.dataclass(frozen=True)
class Config(parent.Config):
    epi_n: int = 32  # columns per epilogue sub-tile (64 x 32 bf16 = 4 KiB)
    epi_stages: int = 2  # staging buffers: fill one while the copy engine drains the other


def check_epilogue(config) -> tuple:
    if config.tile_n % config.epi_n or config.epi_n % 16:
        # stmatrix stores 16 columns per instruction: on the H200 epi_n = 8 wrote wrong values and
        # epi_n = 88 faulted (results/logs/20261202T0029_check_tile_widths.log)
        return False, "epi_n must be a multiple of 16 (stmatrix's width) that divides tile_n"
    if config.epi_stages < 1 or (config.tile_n // config.epi_n) % config.epi_stages:
        return False, "epi_stages must divide the number of epilogue sub-tiles (tile_n / epi_n)"
    return True, ""


def check_config(config: Config):
    ok, why = check_epilogue(config)
    return parent.check_config(config) if ok else (ok, why)


def can_implement(problem, config: Config):
    return True, ""  # any M; validate() already requires N, K multiples of 8


EPI_BARRIER_ID = 1  # named barrier among the epilogue threads (0 is __syncthreads)


class Gemm(parent.Gemm):
    def make_epilogue_operands(self, mC: cute.Tensor):
        """The epilogue's staging layout in shared memory and its TMA store atom."""
        epi_tile = (self.tile_mnk[0], self.config.epi_n)
        self.c_layout = tensor_utils.LayoutEnum.from_tensor(mC)  # the epilogue's stmatrix follows it
        epi_smem_layout = sm90_utils.make_smem_layout_epi(C_DTYPE, self.c_layout, epi_tile, self.config.epi_stages)
        tma_atom_c, tma_tensor_c = cpasync.make_tiled_tma_atom(
            cpasync.CopyBulkTensorTileS2GOp(), mC, cute.slice_(epi_smem_layout, (None, None, 0)), epi_tile
        )
        return epi_smem_layout, tma_atom_c, tma_tensor_c

    @cute.jit
    def __call__(self, mA: cute.Tensor, mB: cute.Tensor, mC: cute.Tensor, stream):
        bm, bn, _ = self.tile_mnk
        tiled_mma, a_smem_layout, b_smem_layout, tma_atom_a, tma_a, tma_atom_b, tma_b = self.make_mainloop_operands(mA, mB)
        epi_smem_layout, tma_atom_c, tma_c = self.make_epilogue_operands(mC)

        @cute.struct
        class SharedStorage:
            full_barrier: cute.struct.MemRange[cutlass.Int64, 1]
            sA: cute.struct.Align[cute.struct.MemRange[AB_DTYPE, cute.cosize(a_smem_layout)], 1024]
            sB: cute.struct.Align[cute.struct.MemRange[AB_DTYPE, cute.cosize(b_smem_layout)], 1024]
            sC: cute.struct.Align[cute.struct.MemRange[C_DTYPE, cute.cosize(epi_smem_layout)], 1024]

        self.shared_storage = SharedStorage
        self.smem_bytes = SharedStorage.size_in_bytes()
        grid = (cute.ceil_div(mC.shape[0], bm), cute.ceil_div(mC.shape[1], bn), 1)
        self.kernel(
            tiled_mma, tma_atom_a, tma_a, tma_atom_b, tma_b, tma_atom_c, tma_c, a_smem_layout, b_smem_layout, epi_smem_layout
        ).launch(grid=grid, block=[self.threads, 1, 1], stream=stream)

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
        sC = storage.sC.get_tensor(epi_smem_layout.outer, swizzle=epi_smem_layout.inner)  # (64, epi_n, epi_stages)
        accumulators = self.mainloop(
            tiled_mma, tma_atom_a, mA, tma_atom_b, mB, sA, sB, storage.full_barrier.data_ptr(), tile_coord
        )
        store_pipeline = self.make_store_pipeline(sC, self.threads)
        self.epilogue_tma(tiled_mma, accumulators, tma_atom_c, mC, sC, tile_coord, store_pipeline, self.threads)
        if cute.arch.thread_idx()[0] == 0:
            store_pipeline.producer_tail()  # shared memory must outlive the stores that read it

    def make_store_pipeline(self, sC: cute.Tensor, epi_threads: int):
        """Bookkeeping of the bulk stores in flight, so a staging buffer is reused only once read."""
        return pipeline.PipelineTmaStore.create(
            num_stages=cute.size(sC, mode=[2]),
            producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, epi_threads),
        )

    @cute.jit
    def epilogue_tma(
        self,
        tiled_mma: cute.TiledMma,
        accumulators: cute.Tensor,
        tma_atom_c: cute.CopyAtom,
        mC: cute.Tensor,
        sC: cute.Tensor,
        tile_coord,
        store_pipeline,
        epi_threads: cutlass.Constexpr,
        first_thread: cutlass.Constexpr = 0,
    ):
        """Registers -> bf16 -> stmatrix into a staging buffer -> TMA store, one sub-tile at a time.

        ``epi_threads`` threads starting at ``first_thread`` hold the accumulator (a warpgroup
        or two); the first of them issues the stores. The stores are left in flight: the caller
        waits for them (``store_pipeline.producer_tail()``) before shared memory goes away.
        """
        tidx, _, _ = cute.arch.thread_idx()
        epi_tidx = tidx - first_thread
        gC = cute.local_tile(mC, self.tile_mnk, tile_coord, proj=(1, 1, None))  # (bM, bN)
        epi_tile = (cute.size(sC, mode=[0]), cute.size(sC, mode=[1]))

        # registers -> shared: stmatrix tiled to the MMA's accumulator layout (each 8 x 8 matrix
        # transposed when C is M-major, as the staging layout from make_epilogue_operands is then)
        stmatrix = cute.make_copy_atom(cute.nvgpu.warp.StMatrix8x8x16bOp(self.c_layout.is_m_major_c(), 4), C_DTYPE)
        r2s = cute.make_tiled_copy_S(stmatrix, cute.make_tiled_copy_C_atom(stmatrix, tiled_mma))
        thr_r2s = r2s.get_slice(epi_tidx)
        tRS_sC = thr_r2s.partition_D(sC)  # (R2S, R2S_M, R2S_N, stages)
        tRS_rAcc = r2s.retile(accumulators)  # the accumulator in stmatrix order, sub-tile after sub-tile
        frag_layout = cute.make_layout(cute.shape(thr_r2s.partition_S(sC))[:3])
        frag = cute.make_rmem_tensor_like(frag_layout, ACC_DTYPE)
        frag_size = cute.size(frag)

        # shared -> global: TMA store partitions over the sub-tiles of this CTA's tile
        gC_epi = cute.zipped_divide(gC, epi_tile)  # ((64, epi_n), (1, bN / epi_n))
        tCsC, tCgC = cpasync.tma_partition(tma_atom_c, 0, cute.make_layout(1), cute.group_modes(sC, 0, 2), gC_epi)
        num_subtiles = cute.size(gC_epi, mode=[1])
        subtile_layout = cute.make_layout(gC_epi.shape[1], stride=(gC_epi.shape[1][1], 1))
        for i in cutlass.range_constexpr(num_subtiles):
            for v in cutlass.range(frag_size, unroll_full=True):  # unrolled by the compiler: v indexes registers
                frag[v] = tRS_rAcc[i * frag_size + v]
            frag_out = cute.make_rmem_tensor_like(frag_layout, C_DTYPE)
            frag_out.store(frag.load().to(C_DTYPE))
            stage = i % cute.size(sC, mode=[2])
            if epi_tidx == 0:
                store_pipeline.producer_acquire()  # this buffer's previous store has read it (waits only if not)
            cute.arch.barrier(barrier_id=EPI_BARRIER_ID, number_of_threads=epi_threads)
            cute.copy(r2s, frag_out, tRS_sC[(None, None, None, stage)])
            cute.arch.fence_proxy("async.shared", space="cta")  # threads' writes -> visible to the copy engine
            cute.arch.barrier(barrier_id=EPI_BARRIER_ID, number_of_threads=epi_threads)
            if epi_tidx == 0:
                cute.copy(tma_atom_c, tCsC[(None, stage)], tCgC[(None, subtile_layout.get_hier_coord(i))])
                store_pipeline.producer_commit()

