"""Step 2 (Hopper) - tensor cores and TMA: wgmma from shared memory, TMA + mbarrier, no swizzle.

Parent: step 1 (naive). Key differences:

* One CTA computes a ``tile_m x tile_n`` tile of C (default 64 x 256) with one warpgroup
  (4 warps, 128 threads). Why 64 x 256: ``wgmma`` computes at most 64 rows per warpgroup and
  at most 256 columns per instruction; N = 256 reuses each 64 x 16 slice of A across the
  widest instruction, and the 64 x 256 fp32 accumulator (128 registers per thread) still fits
  one warpgroup. It is also the Blackwell twin's tile (tcgen05 64 x 256 x 16).
* Tiles of A and B reach shared memory by TMA (``cp.async.bulk.tensor``): one thread issues the
  copies, and an mbarrier counts the bytes that land; every thread waits on the barrier's
  *phase* (0, 1, 0, ...), which flips each time a K tile has fully arrived.
* ``wgmma.mma_async`` m64n256k16 reads both operands from shared memory: four per 64-wide K
  tile. The accumulator lives in registers (fp32), 128 per thread.
* Shared memory is in the *interleaved* (unswizzled) layout wgmma accepts: 8 x 8 bf16 "core
  matrices" of 128 contiguous bytes. Through CuTe's 2-D tensor map TMA writes it 16 bytes of a row at a time.
* One stage: load, wait, multiply, wait, repeat. Nothing overlaps (later steps fix that).
* Epilogue: registers -> bf16 -> global memory, each thread storing its fragment directly.

Expected: 2 * 64 * 256 * 64 FLOP per K tile against 40 KiB moved per K tile with no overlap
between TMA and MMA: latency-bound, a few hundred TFLOP/s at best (the seed's Blackwell step 2
is quoted in ``book/references.md``).

Accepts: M a multiple of tile_m, N a multiple of tile_n, K a multiple of 8 (TMA zero-fills the
last partial K tile). Step 4 lifts the M/N rule with a TMA store.
"""

from __future__ import annotations

import dataclasses

import cutlass
import cutlass.cute as cute
import cutlass.utils.hopper_helpers as sm90_utils
from cutlass.cute.nvgpu import cpasync, warpgroup

from ..common import check_tile_divides

AB_DTYPE = cutlass.BFloat16
ACC_DTYPE = cutlass.Float32
C_DTYPE = cutlass.BFloat16


@dataclasses.dataclass(frozen=True)
class Config:
    tile_m: int = 64  # one warpgroup's wgmma rows
    tile_n: int = 256  # wgmma N: 64, 128 or 256
    tile_k: int = 64  # K per TMA load: four wgmma k16 steps


def check_config(config: Config):
    if config.tile_m != 64:
        return False, "tile_m must be 64 (one warpgroup); two warpgroups come in step 5"
    if config.tile_n not in (64, 128, 256):
        return False, "tile_n must be 64, 128 or 256 (a wgmma N)"
    if config.tile_k % 16 or not 16 <= config.tile_k <= 128:
        return False, "tile_k must be a multiple of 16 (wgmma K) between 16 and 128"
    return True, ""


def can_implement(problem, config: Config):
    return check_tile_divides(problem, config.tile_m, config.tile_n, step_with_any_mn=4)


class Gemm:
    threads = 128  # one warpgroup

    def __init__(self, config: Config):
        self.config = config
        self.tile_mnk = (config.tile_m, config.tile_n, config.tile_k)
        self.mma_warpgroups = 1
        self.mma_n = config.tile_n  # wgmma N: one instruction spans the tile's columns

    # ---- shared-memory layouts: the one thing step 3 changes -------------------------------

    def smem_layout_atom_kind(self):
        return warpgroup.SmemLayoutAtomKind.K_INTER

    def make_smem_layouts(self):
        """(tile_m, tile_k) for A and (tile_n, tile_k) for B, tiled from the atom, K-major."""
        atom = warpgroup.make_smem_layout_atom(self.smem_layout_atom_kind(), AB_DTYPE)
        bm, bn, bk = self.tile_mnk
        a_layout = cute.tile_to_shape(atom, (bm, bk), order=(0, 1))
        b_layout = cute.tile_to_shape(atom, (bn, bk), order=(0, 1))
        return a_layout, b_layout

    # ---- host side ----------------------------------------------------------------------------

    def make_tiled_mma(self):
        """wgmma 64 x mma_n x 16, bf16 in, fp32 out, both operands K-major; warpgroups along M."""
        return sm90_utils.make_trivial_tiled_mma(
            AB_DTYPE,
            AB_DTYPE,
            cute.nvgpu.OperandMajorMode.K,
            cute.nvgpu.OperandMajorMode.K,
            ACC_DTYPE,
            atom_layout_mnk=(self.mma_warpgroups, 1, 1),
            tiler_mn=(64, self.mma_n),
        )

    def make_mainloop_operands(self, mA: cute.Tensor, mB: cute.Tensor):
        """The tiled MMA, the A/B shared-memory layouts, and a TMA load atom per operand."""
        bm, bn, bk = self.tile_mnk
        tiled_mma = self.make_tiled_mma()
        a_smem_layout, b_smem_layout = self.make_smem_layouts()
        tma_atom_a, tma_tensor_a = cpasync.make_tiled_tma_atom(
            cpasync.CopyBulkTensorTileG2SOp(), mA, a_smem_layout, (bm, bk)
        )
        tma_atom_b, tma_tensor_b = cpasync.make_tiled_tma_atom(
            cpasync.CopyBulkTensorTileG2SOp(), mB, b_smem_layout, (bn, bk)
        )
        return tiled_mma, a_smem_layout, b_smem_layout, tma_atom_a, tma_tensor_a, tma_atom_b, tma_tensor_b

    @cute.jit
    def __call__(self, mA: cute.Tensor, mB: cute.Tensor, mC: cute.Tensor, stream):
        bm, bn, _ = self.tile_mnk
        tiled_mma, a_smem_layout, b_smem_layout, tma_atom_a, tma_a, tma_atom_b, tma_b = self.make_mainloop_operands(mA, mB)

        @cute.struct
        class SharedStorage:
            full_barrier: cute.struct.MemRange[cutlass.Int64, 1]
            sA: cute.struct.Align[cute.struct.MemRange[AB_DTYPE, cute.cosize(a_smem_layout)], 1024]
            sB: cute.struct.Align[cute.struct.MemRange[AB_DTYPE, cute.cosize(b_smem_layout)], 1024]

        self.shared_storage = SharedStorage
        self.smem_bytes = SharedStorage.size_in_bytes()
        grid = (cute.ceil_div(mC.shape[0], bm), cute.ceil_div(mC.shape[1], bn), 1)
        self.kernel(tiled_mma, tma_atom_a, tma_a, tma_atom_b, tma_b, mC, a_smem_layout, b_smem_layout).launch(
            grid=grid, block=[self.threads, 1, 1], stream=stream
        )

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
        sA = storage.sA.get_tensor(a_smem_layout.outer, swizzle=a_smem_layout.inner)  # (bM, bK)
        sB = storage.sB.get_tensor(b_smem_layout.outer, swizzle=b_smem_layout.inner)  # (bN, bK)
        accumulators = self.mainloop(
            tiled_mma, tma_atom_a, mA, tma_atom_b, mB, sA, sB, storage.full_barrier.data_ptr(), tile_coord
        )
        self.epilogue(tiled_mma, accumulators, mC, tile_coord)

    @cute.jit
    def mainloop(
        self,
        tiled_mma: cute.TiledMma,
        tma_atom_a: cute.CopyAtom,
        mA: cute.Tensor,
        tma_atom_b: cute.CopyAtom,
        mB: cute.Tensor,
        sA: cute.Tensor,
        sB: cute.Tensor,
        full_barrier: cute.Pointer,
        tile_coord,
    ):
        """Load a K tile by TMA, wait for its phase, run the wgmma of the tile, repeat; returns the accumulator."""
        tidx, _, _ = cute.arch.thread_idx()
        warp_idx = cute.arch.make_warp_uniform(cute.arch.warp_idx())

        # 1. the barrier: one arrival (the thread that announces the bytes) plus the TMA bytes
        if warp_idx == 0:
            cpasync.prefetch_descriptor(tma_atom_a)
            cpasync.prefetch_descriptor(tma_atom_b)
            with cute.arch.elect_one():
                cute.arch.mbarrier_init(full_barrier, 1)
            cute.arch.mbarrier_init_fence()
        cute.arch.sync_threads()

        # 2. this CTA's tiles and their TMA / MMA partitions
        gA = cute.local_tile(mA, self.tile_mnk, tile_coord, proj=(1, None, 1))  # (bM, bK, k_tiles)
        gB = cute.local_tile(mB, self.tile_mnk, tile_coord, proj=(None, 1, 1))  # (bN, bK, k_tiles)
        tAsA, tAgA = cpasync.tma_partition(
            tma_atom_a, 0, cute.make_layout(1), cute.group_modes(sA, 0, 2), cute.group_modes(gA, 0, 2)
        )  # (TMA), (TMA, k_tiles)
        tBsB, tBgB = cpasync.tma_partition(
            tma_atom_b, 0, cute.make_layout(1), cute.group_modes(sB, 0, 2), cute.group_modes(gB, 0, 2)
        )
        tma_bytes = cute.size_in_bytes(AB_DTYPE, sA.layout) + cute.size_in_bytes(AB_DTYPE, sB.layout)
        thr_mma = tiled_mma.get_slice(tidx)
        tCrA = tiled_mma.make_fragment_A(thr_mma.partition_A(sA))  # (MMA, MMA_M, MMA_K) descriptors
        tCrB = tiled_mma.make_fragment_B(thr_mma.partition_B(sB))  # (MMA, MMA_N, MMA_K)
        acc_shape = tiled_mma.partition_shape_C((self.tile_mnk[0], self.tile_mnk[1]))
        accumulators = cute.make_rmem_tensor(acc_shape, ACC_DTYPE)  # (MMA, MMA_M, MMA_N) fp32
        accumulators.fill(0.0)

        # 3. one stage: load, wait for the phase, four wgmma, wait, repeat
        num_k_tiles = cute.size(gA, mode=[2])
        num_k_blocks = cute.size(tCrA, mode=[2])
        phase = cutlass.Int32(0)
        tiled_mma.set(warpgroup.Field.ACCUMULATE, True)
        for k_tile in cutlass.range(num_k_tiles, unroll=1):
            if warp_idx == 0:
                with cute.arch.elect_one():
                    cute.arch.mbarrier_arrive_and_expect_tx(full_barrier, tma_bytes)
                cute.copy(tma_atom_a, tAgA[(None, k_tile)], tAsA, tma_bar_ptr=full_barrier)
                cute.copy(tma_atom_b, tBgB[(None, k_tile)], tBsB, tma_bar_ptr=full_barrier)
            cute.arch.mbarrier_wait(full_barrier, phase)
            phase ^= 1

            warpgroup.fence()
            for k_block in cutlass.range_constexpr(num_k_blocks):
                cute.gemm(tiled_mma, accumulators, tCrA[(None, None, k_block)], tCrB[(None, None, k_block)], accumulators)
            warpgroup.commit_group()
            warpgroup.wait_group(0)
            cute.arch.sync_threads()  # every warp is done reading the stage before TMA overwrites it
        return accumulators

    @cute.jit
    def epilogue(self, tiled_mma: cute.TiledMma, accumulators: cute.Tensor, mC: cute.Tensor, tile_coord):
        """fp32 registers -> bf16 -> global memory, each thread storing its own fragment."""
        tidx, _, _ = cute.arch.thread_idx()
        gC = cute.local_tile(mC, self.tile_mnk, tile_coord, proj=(1, 1, None))  # (bM, bN)
        tCgC = tiled_mma.get_slice(tidx).partition_C(gC)  # (MMA, MMA_M, MMA_N)
        tCrC = cute.make_rmem_tensor(tCgC.shape, mC.element_type)
        tCrC.store(accumulators.load().to(mC.element_type))
        cute.autovec_copy(tCrC, tCgC)
