"""A Triton matmul written by the course, the peer a reader would otherwise reach for (GPU only).

``C = A @ B.T`` for bf16 A (M, K) and B (N, K), fp32 accumulation, in the style of Triton's
matrix-multiplication tutorial: one program per ``BLOCK_M x BLOCK_N`` tile, programs numbered in a
grouped order (``GROUP_M`` tile-rows per band, chapter 9's order) for L2 reuse, and
``triton.autotune`` choosing among a handful of tile shapes and pipeline depths per problem shape
(the first call per shape times them; ``gemm_course.measure.bench`` makes that call before any
timing). ``gemm_course.measure.bench`` times it beside cuBLAS and the course's step, in one process.

Triton is imported only when :func:`matmul` is called: the CPU build of torch that CI uses has none.
"""

from __future__ import annotations

import functools

# (BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_stages, num_warps): shapes that suit Hopper's wgmma
CONFIGS = (
    (128, 256, 64, 8, 3, 8),
    (256, 128, 64, 8, 3, 8),
    (128, 128, 64, 8, 4, 4),
    (128, 128, 64, 8, 4, 8),
    (128, 256, 64, 8, 4, 8),
    (64, 256, 64, 8, 4, 4),
)


@functools.lru_cache(maxsize=1)
def _kernel():
    import triton
    import triton.language as tl

    configs = [
        triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": g}, num_stages=s, num_warps=w)
        for bm, bn, bk, g, s, w in CONFIGS
    ]

    @triton.autotune(configs=configs, key=["M", "N", "K"])
    @triton.jit
    def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bn, stride_cm,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
        pid = tl.program_id(0)
        tiles_m, tiles_n = tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N)
        band = GROUP_M * tiles_n  # programs per band of GROUP_M tile-rows
        first_m = (pid // band) * GROUP_M
        rows = min(tiles_m - first_m, GROUP_M)  # the last band may be narrower
        tile_m = first_m + (pid % band) % rows
        tile_n = (pid % band) // rows
        offs_m = (tile_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
        offs_n = (tile_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
        offs_k = tl.arange(0, BLOCK_K)
        a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :]
        b_ptrs = b_ptr + offs_n[None, :] * stride_bn + offs_k[:, None]  # B read as (K, N): B.T
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k in range(0, tl.cdiv(K, BLOCK_K)):
            k_left = K - k * BLOCK_K
            a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
            b = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
            acc = tl.dot(a, b, acc)
            a_ptrs += BLOCK_K
            b_ptrs += BLOCK_K
        rows_c = tile_m * BLOCK_M + tl.arange(0, BLOCK_M)
        cols_c = tile_n * BLOCK_N + tl.arange(0, BLOCK_N)
        c_ptrs = c_ptr + rows_c[:, None] * stride_cm + cols_c[None, :]
        tl.store(c_ptrs, acc.to(tl.bfloat16), mask=(rows_c[:, None] < M) & (cols_c[None, :] < N))

    return matmul_kernel


def matmul(a, b, c):
    """``c = a @ b.T`` (bf16, row-major, K contiguous in a and b) with the course's Triton kernel."""
    import triton

    m, k = a.shape
    n = b.shape[0]
    kernel = _kernel()

    def grid(meta):
        return (triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"]),)

    kernel[grid](a, b, c, m, n, k, a.stride(0), b.stride(0), c.stride(0))
    return c


def best_config(m: int, n: int, k: int) -> dict:
    """The configuration autotune chose for this shape (after a call), for the record."""
    kernel = _kernel()
    for key, config in getattr(kernel, "cache", {}).items():
        if tuple(key[:3]) == (m, n, k):
            return {**config.kwargs, "num_stages": config.num_stages, "num_warps": config.num_warps}
    return {}
