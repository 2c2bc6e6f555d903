"""Step 1 - naive: one thread per element of C, walking all of K through global memory.

Parent: none (the ladder starts here). Runs on any CUDA GPU (plain SIMT, no tensor cores).

Each thread computes ``C[m, n] = sum_k A[m, k] * B[n, k]`` in float32. Per multiply-add it loads
two bf16 values (4 bytes) from global memory: an arithmetic intensity of 0.5 FLOP/byte before
caches, so the kernel is bound by load traffic through L1/L2, far from the tensor cores.
Threads of a warp walk along N, so they share ``A[m, k]`` (a broadcast) and read ``B[n, k]``
K elements apart (one 32-byte sector per thread: uncoalesced).

Accepts: any M, N, K >= 1, any alignment (loads are bounds-checked per element).
"""

from __future__ import annotations

import dataclasses

import cutlass
import cutlass.cute as cute


@dataclasses.dataclass(frozen=True)
class Config:
    block_m: int = 16  # threads along M in a CTA
    block_n: int = 16  # threads along N in a CTA (the fast-moving thread index)


def check_config(config: Config):
    threads = config.block_m * config.block_n
    if threads % 32 or threads > 1024:
        return False, f"block_m * block_n = {threads} must be a multiple of 32 and at most 1024"
    return True, ""


def can_implement(problem, config: Config):
    return True, ""


class Gemm:
    def __init__(self, config: Config):
        self.config = config

    @cute.jit
    def __call__(self, mA: cute.Tensor, mB: cute.Tensor, mC: cute.Tensor, stream):
        m, n = mC.shape
        grid = (cute.ceil_div(n, self.config.block_n), cute.ceil_div(m, self.config.block_m), 1)
        self.kernel(mA, mB, mC).launch(
            grid=grid, block=(self.config.block_n, self.config.block_m, 1), stream=stream
        )

    @cute.kernel
    def kernel(self, mA: cute.Tensor, mB: cute.Tensor, mC: cute.Tensor):
        tidx, tidy, _ = cute.arch.thread_idx()
        bidx, bidy, _ = cute.arch.block_idx()
        row = bidy * self.config.block_m + tidy
        col = bidx * self.config.block_n + tidx
        num_rows, num_cols = mC.shape
        if row < num_rows and col < num_cols:
            acc = cutlass.Float32(0.0)
            for k in cutlass.range(mA.shape[1], unroll=4):
                acc += mA[row, k].to(cutlass.Float32) * mB[col, k].to(cutlass.Float32)
            mC[row, col] = acc.to(mC.element_type)
