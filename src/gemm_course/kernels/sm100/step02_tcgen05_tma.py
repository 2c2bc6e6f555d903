"""Step 2 (Blackwell) - tensor cores, TMA and tensor memory: tcgen05 from shared memory, no swizzle.

Parent: step 1 (naive). Key differences:

* One CTA computes a ``tile_m x tile_n`` tile of C (default 64 x 256) with 4 warps (128 threads).
  ``tcgen05.mma`` with ``cta_group::1`` computes 64 or 128 rows; 64 x 256 is the Hopper twin's
  tile, so the two chapters compare like with like.
* Tiles of A and B reach shared memory by TMA (``cp.async.bulk.tensor``); an mbarrier counts the
  bytes that land and warp 0 waits on its *phase* (0, 1, 0, ...), which flips per K tile.
* One thread issues ``tcgen05.mma`` m64n256k16 from shared memory: four per 64-wide K tile.
  Unlike wgmma, the MMA is fully asynchronous and its fp32 accumulator lives in *tensor memory*
  (TMEM, 128 lanes x 512 columns of 32 bits per SM), not in registers: the 64 x 256 accumulator
  takes 256 columns, and registers stay free. ``tcgen05.commit`` makes a second mbarrier flip
  when the issued MMAs are done, so TMA does not overwrite a stage the tensor core still reads.
* Shared memory is in the *interleaved* (unswizzled) K-major layout: 8 x 8 bf16 "core matrices"
  of 128 contiguous bytes. Through CuTe's 2-D tensor map TMA writes it 16 bytes of a row at a time.
* One stage: load, wait, multiply, wait, repeat. Nothing overlaps (step 6 fixes that).
* Epilogue: TMEM -> registers with ``tcgen05.ld.16x256b`` (x8: a 16 x 64 block per warp per
  instruction), one 64 x 64 sub-tile at a time, -> bf16 -> global memory directly.

Who reads which accumulator element: warp w of a warpgroup may only access TMEM lanes
32w..32w+31, and ``tcgen05.mma`` with M = 64 puts one 16-row band in each warp's quarter: rows
16w..16w+15 in lanes 32w..32w+15. So warp w reads its band with the 16-lane shape 16x256b;
lane t of the warp receives rows t//4 and t//4+8 of the band, columns 2*(t%4) and 2*(t%4)+1
of every 8-column group (:func:`gemm_course.kernels.sm100.layouts.accumulator_ownership`
derives this table from the copy below).

Expected: as on Hopper, 2 * 64 * 256 * 64 FLOP per K tile against 40 KiB moved per K tile with
no overlap: latency-bound (the seed's figure for its step 2 is quoted in ``book/references.md``).

Accepts: M a multiple of tile_m, N a multiple of tile_n, K a multiple of 8 (TMA zero-fills the
last partial K tile). Step 4 lifts the M/N rule with a TMA store.
"""

from __future__ import annotations

import dataclasses
import enum

import cutlass
import cutlass.cute as cute
import cutlass.pipeline as pipeline
from cutlass._mlir.dialects import nvvm
from cutlass.cute.nvgpu import OperandMajorMode, cpasync, tcgen05
from cutlass.memory import TmemAllocator

from ... import hardware
from ..common import check_tile_divides

AB_DTYPE = cutlass.BFloat16
ACC_DTYPE = cutlass.Float32
EPI_TILE_N = 64  # columns per epilogue sub-tile: one 16x256b load covers 8 fp32 columns, x8 covers 64


class Barrier(enum.IntEnum):
    """Named barriers (id 0 is ``sync_threads``)."""

    TMEM = 1  # the TMEM address is in shared memory / everyone is done reading TMEM



def tmem_fence_after_sync():
    """``tcgen05.fence::after_thread_sync``: tcgen05 work after a barrier wait is ordered after it
    (the PTX memory model's pattern for an accumulator handed over through an mbarrier)."""
    nvvm.tcgen05_fence(nvvm.Tcgen05FenceKind.AFTER_THREAD_SYNC)

TMEM_COLUMNS_PER_SM = hardware.SM100A.tmem_columns  # 512 columns (of 128 lanes x 32 bits) per SM


def smem_to_fit_tmem(storage_bytes: int, tmem_cols: int) -> int:
    """Shared memory a CTA asks for at launch: its storage, or more, so that no more CTAs share an SM
    than their tensor-memory allocations fit. A CTA beyond that would wait in ``tcgen05.alloc`` for
    another to finish, and with CTA pairs (step 5) two halves could wait on each other's SMs."""
    fit = TMEM_COLUMNS_PER_SM // tmem_cols
    per_sm, reserved = hardware.SM100A.smem_per_sm, hardware.SM100A.smem_reserved_per_cta
    one_too_many = per_sm // (fit + 1) - reserved + 1  # (fit + 1) CTAs of this size no longer fit
    return max(storage_bytes, one_too_many)


@dataclasses.dataclass(frozen=True)
class Config:
    tile_m: int = 64  # tcgen05 M: 64 rows, 16 per warp in the epilogue
    tile_n: int = 256  # tcgen05 N, and TMEM columns allocated (a power of two >= 32)
    tile_k: int = 64  # K per TMA load: four tcgen05 k16 steps


def check_config(config: Config):
    if config.tile_m != 64:
        return False, "tile_m must be 64: the 16x256b epilogue reads a 64-row accumulator, 16 rows per warp"
    if config.tile_n not in (64, 128, 256):
        return False, "tile_n must be 64, 128 or 256 (a tcgen05 N that is a whole number of 64-column sub-tiles)"
    if config.tile_k % 16 or not 16 <= config.tile_k <= 128:
        return False, "tile_k must be a multiple of 16 (tcgen05 K for bf16) between 16 and 128"
    return True, ""


def can_implement(problem, config: Config):
    return check_tile_divides(problem, config.tile_m, config.tile_n, step_with_any_mn=4)


class Gemm:
    threads = 128  # 4 warps: warp 0 issues TMA and MMA, all 4 read the accumulator

    def __init__(self, config: Config):
        self.config = config
        self.tile_mnk = (config.tile_m, config.tile_n, config.tile_k)
        self.tmem_cols = config.tile_n  # fp32 accumulator: one 32-bit column per output column

    # ---- the MMA and the shared-memory layouts: the layouts are the one thing step 3 changes ---

    def make_tiled_mma(self):
        op = tcgen05.MmaF16BF16Op(
            AB_DTYPE,
            ACC_DTYPE,
            (self.config.tile_m, self.config.tile_n, 16),
            tcgen05.CtaGroup.ONE,
            tcgen05.OperandSource.SMEM,
            OperandMajorMode.K,
            OperandMajorMode.K,
        )
        return cute.make_tiled_mma(op)

    def smem_layout_atom_kind(self):
        return tcgen05.SmemLayoutAtomKind.K_INTER

    def make_smem_layouts(self, tiled_mma):
        """A as (MMA, MMA_M, MMA_K), B as (MMA, MMA_N, MMA_K): the atom tiled over M/N first, then K."""
        atom = tcgen05.make_smem_layout_atom(self.smem_layout_atom_kind(), AB_DTYPE)
        bm, bn, bk = self.tile_mnk
        a_layout = tcgen05.tile_to_mma_shape(atom, tiled_mma.partition_shape_A((bm, bk)), order=(1, 2))
        b_layout = tcgen05.tile_to_mma_shape(atom, tiled_mma.partition_shape_B((bn, bk)), order=(1, 2))
        return a_layout, b_layout

    def make_accumulator(self, tiled_mma):
        """(MMA, MMA_M, MMA_N) fp32 accumulator in TMEM, at column 0 until the kernel gives it its address.

        For M = 64 its layout is ((16, 4), N) : ((1 lane, 32 lanes), 1 column): rows 16g..16g+15
        sit in lanes 32g..32g+15.
        """
        return tiled_mma.make_fragment_C(tiled_mma.partition_shape_C((self.config.tile_m, self.config.tile_n)))

    def epi_tile(self):
        return (self.config.tile_m, EPI_TILE_N)

    def tmem_load_op(self):
        return tcgen05.Ld16x256bOp(tcgen05.Repetition.x8)  # 16 lanes x 256 bits, x8: 16 rows x 64 columns per warp

    def make_epilogue_copy(self, tCtAcc, gC, tidx):
        """The TMEM -> register tiled copy, and thread ``tidx``'s partitions of the accumulator and of C.

        ``tCtAcc``: (MMA, MMA_M, MMA_N) accumulator in TMEM; ``gC``: (bM, bN) tile of C (or any
        tensor of that shape, e.g. an identity tensor to see who owns which element).
        """
        epi_tile = self.epi_tile()
        tAcc_epi = cute.flat_divide(tCtAcc[((None, None), 0, 0)], epi_tile)  # (bM, 64, 1, bN/64)
        gC_epi = cute.flat_divide(gC, epi_tile)  # (bM, 64, 1, bN/64)
        atom = cute.make_copy_atom(self.tmem_load_op(), ACC_DTYPE)
        tiled_copy = tcgen05.make_tmem_copy(atom, tAcc_epi[(None, None, 0, 0)])
        thr_copy = tiled_copy.get_slice(tidx)
        tDtAcc = thr_copy.partition_S(tAcc_epi)  # (T2R, T2R_M, T2R_N, 1, bN/64)
        tDgC = thr_copy.partition_D(gC_epi)  # (T2R, T2R_M, T2R_N, 1, bN/64)
        return tiled_copy, tDtAcc, tDgC

    # ---- host side ----------------------------------------------------------------------------

    @cute.jit
    def __call__(self, mA: cute.Tensor, mB: cute.Tensor, mC: cute.Tensor, stream):
        bm, bn, _ = self.tile_mnk
        tiled_mma = self.make_tiled_mma()
        a_smem_layout, b_smem_layout = self.make_smem_layouts(tiled_mma)
        tma_op = cpasync.CopyBulkTensorTileG2SOp(tcgen05.CtaGroup.ONE)
        tma_atom_a, tma_tensor_a = cute.nvgpu.make_tiled_tma_atom_A(
            tma_op, mA, a_smem_layout, self.tile_mnk, tiled_mma
        )
        tma_atom_b, tma_tensor_b = cute.nvgpu.make_tiled_tma_atom_B(
            tma_op, mB, b_smem_layout, self.tile_mnk, tiled_mma
        )

        @cute.struct
        class SharedStorage:
            load_barrier: cute.struct.MemRange[cutlass.Int64, 1]  # TMA bytes of a K tile landed
            mma_barrier: cute.struct.MemRange[cutlass.Int64, 1]  # the MMAs of a K tile finished
            tmem_address: cutlass.Int32  # where tcgen05.alloc writes the accumulator's TMEM address
            sA: cute.struct.Align[cute.struct.MemRange[AB_DTYPE, cute.cosize(a_smem_layout)], 1024]
            sB: cute.struct.Align[cute.struct.MemRange[AB_DTYPE, cute.cosize(b_smem_layout)], 1024]

        self.shared_storage = SharedStorage
        self.storage_bytes = SharedStorage.size_in_bytes()
        self.smem_bytes = smem_to_fit_tmem(self.storage_bytes, self.tmem_cols)
        grid = (cute.ceil_div(mC.shape[0], bm), cute.ceil_div(mC.shape[1], bn), 1)
        self.kernel(
            tiled_mma, tma_atom_a, tma_tensor_a, tma_atom_b, tma_tensor_b, mC, a_smem_layout, b_smem_layout
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
        mC: cute.Tensor,
        a_smem_layout: cute.ComposedLayout,
        b_smem_layout: cute.ComposedLayout,
    ):
        bidx, bidy, _ = cute.arch.block_idx()
        tile_coord = (bidx, bidy, None)
        smem = cutlass.memory.SmemAllocator()
        storage = smem.allocate(self.shared_storage)
        sA = storage.sA.get_tensor(a_smem_layout.outer, swizzle=a_smem_layout.inner)  # (MMA, MMA_M, MMA_K)
        sB = storage.sB.get_tensor(b_smem_layout.outer, swizzle=b_smem_layout.inner)  # (MMA, MMA_N, MMA_K)
        tmem, tCtAcc = self.allocate_accumulator(tiled_mma, storage, tma_atom_a, tma_atom_b)
        self.mainloop(tiled_mma, tCtAcc, tma_atom_a, mA, tma_atom_b, mB, sA, sB, storage, tile_coord)
        self.epilogue(tCtAcc, mC, tile_coord)
        self.free_accumulator(tmem, tCtAcc)

    @cute.jit
    def allocate_accumulator(self, tiled_mma: cute.TiledMma, storage, tma_atom_a: cute.CopyAtom, tma_atom_b: cute.CopyAtom):
        """Barriers initialized and tensor memory allocated (warp 0); returns the allocator and the accumulator.

        The accumulator is a (MMA, MMA_M, MMA_N) fp32 tensor in TMEM at the address the allocation returned.
        """
        warp_idx = cute.arch.make_warp_uniform(cute.arch.warp_idx())
        if warp_idx == 0:
            cpasync.prefetch_descriptor(tma_atom_a)
            cpasync.prefetch_descriptor(tma_atom_b)
            with cute.arch.elect_one():
                cute.arch.mbarrier_init(storage.load_barrier.data_ptr(), 1)  # one arrival: the thread that expects the bytes
                cute.arch.mbarrier_init(storage.mma_barrier.data_ptr(), 1)  # one arrival: tcgen05.commit
            cute.arch.mbarrier_init_fence()
        tmem_barrier = pipeline.NamedBarrier(barrier_id=int(Barrier.TMEM), num_threads=self.threads)
        tmem = TmemAllocator(storage.tmem_address.ptr, barrier_for_retrieve=tmem_barrier)
        tmem.allocate(self.tmem_cols)  # warp 0 allocates
        tmem.wait_for_alloc()  # a CTA-wide barrier: also publishes the mbarrier inits
        tmem.relinquish_alloc_permit()  # this CTA allocates nothing more; others on the SM may
        tmem_ptr = tmem.retrieve_ptr(ACC_DTYPE)
        return tmem, cute.make_tensor(tmem_ptr, self.make_accumulator(tiled_mma).layout)

    @cute.jit
    def free_accumulator(self, tmem: TmemAllocator, tCtAcc: cute.Tensor):
        """Free tensor memory once every warp has read it."""
        cute.arch.fence_view_async_tmem_load()  # tcgen05.wait::ld: this thread's TMEM reads are done
        tmem_barrier = pipeline.NamedBarrier(barrier_id=int(Barrier.TMEM), num_threads=self.threads)
        tmem_barrier.arrive_and_wait()
        tmem.free(tCtAcc.iterator)

    @cute.jit
    def mainloop(
        self,
        tiled_mma: cute.TiledMma,
        tCtAcc: cute.Tensor,
        tma_atom_a: cute.CopyAtom,
        mA: cute.Tensor,
        tma_atom_b: cute.CopyAtom,
        mB: cute.Tensor,
        sA: cute.Tensor,
        sB: cute.Tensor,
        storage,
        tile_coord,
    ):
        """Warp 0: load a K tile, wait for its phase, four MMAs, wait for them, repeat. Then every
        thread waits until the last MMAs are complete, so the accumulator in TMEM is final."""
        warp_idx = cute.arch.make_warp_uniform(cute.arch.warp_idx())
        load_barrier = storage.load_barrier.data_ptr()
        mma_barrier = storage.mma_barrier.data_ptr()

        # this CTA's tiles and their TMA / MMA partitions
        gA = cute.local_tile(mA, self.tile_mnk, tile_coord, proj=(1, None, 1))  # (bM, bK, k_tiles)
        gB = cute.local_tile(mB, self.tile_mnk, tile_coord, proj=(None, 1, 1))  # (bN, bK, k_tiles)
        thr_mma = tiled_mma.get_slice(0)  # one thread issues the whole MMA
        tCgA = thr_mma.partition_A(gA)  # (MMA, MMA_M, MMA_K, k_tiles)
        tCgB = thr_mma.partition_B(gB)  # (MMA, MMA_N, MMA_K, k_tiles)
        tCrA = tiled_mma.make_fragment_A(sA)  # (MMA, MMA_M, MMA_K) shared-memory descriptors
        tCrB = tiled_mma.make_fragment_B(sB)  # (MMA, MMA_N, MMA_K)
        tAsA, tAgA = cpasync.tma_partition(
            tma_atom_a, 0, cute.make_layout(1), cute.group_modes(sA, 0, 3), cute.group_modes(tCgA, 0, 3)
        )  # (TMA, ), (TMA, k_tiles)
        tBsB, tBgB = cpasync.tma_partition(
            tma_atom_b, 0, cute.make_layout(1), cute.group_modes(sB, 0, 3), cute.group_modes(tCgB, 0, 3)
        )
        tma_bytes = cute.size_in_bytes(AB_DTYPE, sA.layout) + cute.size_in_bytes(AB_DTYPE, sB.layout)

        num_k_tiles = cute.size(gA, mode=[2])
        num_k_blocks = cute.size(tCrA, mode=[2])
        phase = cutlass.Int32(0)
        tiled_mma.set(tcgen05.Field.ACCUMULATE, False)  # the first MMA overwrites stale TMEM
        if warp_idx == 0:
            for k_tile in cutlass.range(num_k_tiles, unroll=1):
                with cute.arch.elect_one():
                    cute.arch.mbarrier_arrive_and_expect_tx(load_barrier, tma_bytes)
                cute.copy(tma_atom_a, tAgA[(None, k_tile)], tAsA, tma_bar_ptr=load_barrier)
                cute.copy(tma_atom_b, tBgB[(None, k_tile)], tBsB, tma_bar_ptr=load_barrier)
                cute.arch.mbarrier_wait(load_barrier, phase)

                for k_block in cutlass.range_constexpr(num_k_blocks):
                    cute.gemm(tiled_mma, tCtAcc, tCrA[(None, None, k_block)], tCrB[(None, None, k_block)], tCtAcc)
                    tiled_mma.set(tcgen05.Field.ACCUMULATE, True)
                with cute.arch.elect_one():
                    tcgen05.commit(mma_barrier)  # arrives once the MMAs issued so far are complete
                cute.arch.mbarrier_wait(mma_barrier, phase)  # only then may TMA overwrite sA / sB
                phase ^= 1

        # Warps 1-3 pass this barrier only after warp 0 saw the last MMA phase complete, so their
        # own wait below names that phase and no earlier one with the same parity.
        cute.arch.sync_threads()
        cute.arch.mbarrier_wait(mma_barrier, (num_k_tiles - 1) % 2)  # each thread observes the MMAs' completion
        tmem_fence_after_sync()  # and its tcgen05.ld of the accumulator come after that observation

    @cute.jit
    def epilogue(self, tCtAcc: cute.Tensor, mC: cute.Tensor, tile_coord):
        """Every warp: TMEM -> registers -> bf16 -> global memory, one 64 x 64 sub-tile at a time."""
        tidx, _, _ = cute.arch.thread_idx()
        gC = cute.local_tile(mC, self.tile_mnk, tile_coord, proj=(1, 1, None))  # (bM, bN)
        tiled_copy, tDtAcc, tDgC = self.make_epilogue_copy(tCtAcc, gC, tidx)
        tDrAcc = cute.make_rmem_tensor(tDgC[(None, None, None, 0, 0)].shape, ACC_DTYPE)  # 32 fp32 per thread
        tDrC = cute.make_rmem_tensor(tDgC[(None, None, None, 0, 0)].shape, mC.element_type)
        for sub in cutlass.range_constexpr(cute.size(tDtAcc, mode=[4])):
            cute.copy(tiled_copy, tDtAcc[(None, None, None, 0, sub)], tDrAcc)
            tDrC.store(tDrAcc.load().to(mC.element_type))
            cute.autovec_copy(tDrC, tDgC[(None, None, None, 0, sub)])
