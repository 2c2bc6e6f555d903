"""The CTA pair of a 2-CTA MMA (which rows of A, B and C each CTA holds) and the TMA multicast masks
of a cluster, from the kernels' own objects and in Python (steps 5-10)."""

from __future__ import annotations

import dataclasses

from ._common import _config, _coords, _gemm, _offsets, _stage0, _static_int, trace_static


@dataclasses.dataclass(frozen=True)
class PairShare:
    """What CTA ``cta`` of a pair holds of the pair's tile, from the step's own 2-CTA tiled MMA.

    Coordinates are in the pair's tile: A is (2 * tile_m, tile_k), B is (tile_n, tile_k) (a row of
    B is a column of C), C is (2 * tile_m, tile_n).
    """

    cta: int  # place in the pair, V of the cluster's VMNK layout: 0 leads
    a: tuple  # (row, k) of A in this CTA's shared memory (partition_A), in partition order
    b: tuple  # (row, k) of B in this CTA's shared memory (partition_B)
    c: tuple  # (row, col) of C in this CTA's accumulator (partition_C)
    tmem: tuple  # (lane, column) where the accumulator keeps each element of ``c``

    @property
    def a_rows(self) -> tuple:
        return tuple(sorted({r for r, _ in self.a}))

    @property
    def b_rows(self) -> tuple:
        return tuple(sorted({r for r, _ in self.b}))

    @property
    def c_rows(self) -> tuple:
        return tuple(sorted({r for r, _ in self.c}))

    @property
    def c_cols(self) -> tuple:
        return tuple(sorted({c for _, c in self.c}))


def pair_split(step="sm100/5", config=None) -> dict:
    """``{v: PairShare}``: which rows of A and B each CTA v of the pair holds, and which of C.

    ``tiled_mma.get_slice(v).partition_A / partition_B / partition_C`` of identity tensors of the
    pair's A, B and C tiles, with the step's own ``make_tiled_mma`` (``cta_group::2``), and the
    TMEM address (lane << 16 | column) of each accumulator element from ``make_accumulator``.
    """
    import cutlass.cute as cute

    gemm = _gemm(step, config)
    found = {}

    @cute.jit
    def probe():
        tiled_mma = gemm.make_tiled_mma()
        bm, bn, bk = gemm.mma_tiler
        acc = _stage0(gemm.make_accumulator(tiled_mma))
        found.update(_pair_shares(tiled_mma, acc.layout, bm, bn, bk))

    trace_static(probe)
    return found


def _pair_shares(tiled_mma, acc_layout, bm, bn, bk) -> dict:
    import cutlass.cute as cute

    pair = cute.size(tiled_mma.thr_id)
    if pair != 2:
        raise ValueError(f"not a 2-CTA MMA: {pair} CTA(s) per MMA")
    addresses = [(a >> 16, a & 0xFFFF) for a in _offsets(acc_layout)]
    shares = {}
    for v in range(pair):
        thr = tiled_mma.get_slice(v)
        a = _coords(thr.partition_A(cute.make_identity_tensor((bm, bk))))
        b = _coords(thr.partition_B(cute.make_identity_tensor((bn, bk))))
        c = _coords(thr.partition_C(cute.make_identity_tensor((bm, bn))))
        if len(c) != len(addresses):
            raise AssertionError(f"{len(c)} C coordinates but {len(addresses)} accumulator elements")
        shares[v] = PairShare(v, tuple(a), tuple(b), tuple(c), tuple(addresses))
    return shares


def multicast_masks(cluster_m: int, cluster_n: int, pair: int = 2) -> dict:
    """``{rank: (A mask, B mask)}`` of a ``cluster_m x cluster_n`` cluster of CTA pairs, in Python.

    CTA rank r = x + cluster_m * y (x along M, y along N); x = v + pair * m (v: place in the
    pair, m: the pair along M). A load of A goes to the CTAs along N with the same x (they
    compute the same rows); a load of B to the CTAs with the same v and y, one per pair along M
    (they hold the same half of the same B tile). Bit r of a mask is CTA r.
    """
    if cluster_m % pair:
        raise ValueError(f"cluster_m {cluster_m} is not a whole number of {pair}-CTA pairs")
    masks = {}
    for y in range(cluster_n):
        for x in range(cluster_m):
            v = x % pair
            a = sum(1 << (x + cluster_m * yy) for yy in range(cluster_n))
            b = sum(1 << (v + pair * m + cluster_m * y) for m in range(cluster_m // pair))
            masks[x + cluster_m * y] = (a, b)
    return masks


def mask_ctas(mask: int) -> tuple:
    """The CTA ranks whose bits are set in a multicast mask."""
    return tuple(r for r in range(16) if mask >> r & 1)


def tma_multicast_masks(cluster_m: int, cluster_n: int, step="sm100/5") -> dict:
    """``{rank: (A mask, B mask)}`` as the step's ``load_partitions`` builds them:
    ``create_tma_multicast_mask(cluster, coord, mcast_mode=2)`` for A and ``mcast_mode=1`` for B,
    with ``cluster = Gemm.cta_layout_vmnk(tiled_mma)`` and each CTA's static VMNK coordinate."""
    import cutlass.cute as cute
    from cutlass.cute.nvgpu import cpasync

    gemm = _gemm(step, _config(step, cluster_m=cluster_m, cluster_n=cluster_n))
    found = {}

    def evaluate(cluster):
        for rank in range(cute.size(cluster)):
            coord = cluster.get_flat_coord(rank)
            a = cpasync.create_tma_multicast_mask(cluster, coord, mcast_mode=2)
            b = cpasync.create_tma_multicast_mask(cluster, coord, mcast_mode=1)
            found[rank] = (_static_int(a), _static_int(b))

    @cute.jit
    def probe():
        evaluate(gemm.cta_layout_vmnk(gemm.make_tiled_mma()))

    trace_static(probe)
    return found
