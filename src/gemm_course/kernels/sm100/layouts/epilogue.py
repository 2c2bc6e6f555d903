"""Every accumulator element's way through a thread's registers into the epilogue's staging buffer
(steps 4-10), worked out from the store instruction's definition."""

from __future__ import annotations

import collections
import dataclasses
from typing import Optional

from ._common import _TARGET, _coords, _gemm, _leaves, _offsets, _stage0


@dataclasses.dataclass(frozen=True)
class RegisterPath:
    """One accumulator element through one thread's registers into the staging buffer."""

    thread: int
    sub: int  # epilogue sub-tile (epi_n columns each)
    register: int  # offset in the thread's fp32 registers (tDrAcc)
    loaded: tuple  # (row, col) of the accumulator tile that tcgen05.ld put in the register
    written: Optional[tuple]  # (row, col, stage) of the staging buffer the store writes it to

    def ok(self, epi_n: int, epi_stages: int) -> bool:
        """Whether the element lands where the TMA store expects its (row, col) of the tile."""
        if self.written is None:
            return False
        row, col, stage = self.written
        return (row, self.sub * epi_n + col) == self.loaded and stage == self.sub % epi_stages


def _swizzled(offset_bytes: int, bits: int, base: int, shift: int) -> int:
    """CuTe's Swizzle<bits, base, shift> on a byte offset (the smem pointer applies it)."""
    return offset_bytes ^ ((offset_bytes >> shift) & (((1 << bits) - 1) << base))


def _store_atom(kind: str):
    import cutlass.cute as cute
    from cutlass.cute.nvgpu import warp

    from ..step04_tma_store import C_DTYPE

    if kind == "stmatrix":
        return cute.make_copy_atom(warp.StMatrix8x8x16bOp(transpose=False, num_matrices=4), C_DTYPE)
    if kind == "stmatrix.trans":
        return cute.make_copy_atom(warp.StMatrix8x8x16bOp(transpose=True, num_matrices=4), C_DTYPE)
    if kind == "st.shared":
        return cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), C_DTYPE, num_bits_per_copy=128)
    raise ValueError(f"unknown store {kind!r}: 'stmatrix', 'stmatrix.trans' or 'st.shared'")


def _written(op, vals: int, thread: int, j: int, start) -> Optional[int]:
    """Byte address where one register -> shared-memory instruction puts element ``j`` of ``thread``'s
    source fragment, by the instruction's definition (PTX), not by CuTe's partition; None where the
    address the instruction is given is not aligned to what it writes.

    ``start(t, k)``: the byte address thread t supplies for atom instance k (its first destination
    element). stmatrix m8n8.x4: register i of lane l holds row l // 4, columns 2 (l % 4) + {0, 1} of
    matrix i; lane 8 i + r supplies the address of row r of matrix i (16 contiguous bytes); .trans
    stores each matrix transposed. A vector st.shared writes a thread's elements contiguously.
    """
    from cutlass.cute.nvgpu import warp

    k, v = divmod(j, vals)
    if isinstance(op, warp.StMatrix8x8x16bOp):
        w, lane = divmod(thread, 32)
        i, e = divmod(v, 2)
        row, col = lane // 4, 2 * (lane % 4) + e
        if op.transpose:
            row, col = col, row
        base = start(32 * w + 8 * i + row, k)
        return base + 2 * col if base % 16 == 0 else None
    base = start(thread, k)
    return base + 2 * v if base % (2 * vals) == 0 else None


def epilogue_paths(step="sm100/4", config=None, store: Optional[str] = None) -> list:
    """Every accumulator element's way through the epilogue of ``Gemm.epilogue_tma``, as
    :class:`RegisterPath` (all epilogue threads, all sub-tiles).

    Load side, from the step's own objects: ``make_epilogue_copy`` (tcgen05.ld) applied to an
    identity tensor of the tile gives the (row, col) each register receives. Store side:
    ``r2s = make_tiled_copy_D(smem_store_atom(), tmem_load)``, ``r2s.retile(tDrAcc)`` orders the
    registers as the store consumes them, ``partition_D`` of an identity tensor of the staging
    buffer gives each thread's destination, and the staging layout with its swizzle (from
    ``make_epilogue_operands``) turns that into byte addresses. Where each register lands is then
    worked out from the store instruction's definition (:func:`_written`). ``store`` replaces the
    step's store atom ('stmatrix', 'stmatrix.trans', 'st.shared') to show a wrong pairing fail.
    """
    import cutlass.cute as cute

    from ....runtime import arch
    from ..step02_tcgen05_tma import ACC_DTYPE

    gemm = _gemm(step, config)
    cfg = gemm.config
    threads = getattr(gemm, "epilogue_threads", 128)
    found = {}

    def evaluate(mC):
        tiled_mma = gemm.make_tiled_mma()
        acc = _stage0(gemm.make_accumulator(tiled_mma))
        epi_layout, _, _ = gemm.make_epilogue_operands(mC)
        bm, bn = gemm.tile_mnk[0], gemm.tile_mnk[1]
        tile = cute.make_identity_tensor((bm, bn))
        staging = cute.make_identity_tensor((bm, cfg.epi_n, cfg.epi_stages))
        atom = gemm.smem_store_atom() if store is None else _store_atom(store)
        loaded, dest = {}, {}
        for t in range(threads):
            tmem_load, _, tDgC = gemm.make_epilogue_copy(acc, tile, t)
            loaded[t] = _coords(tDgC)  # (T2R, T2R_M, T2R_N, 1, subtiles): sub-tiles slowest
            if t == 0:
                tDrAcc = cute.make_rmem_tensor(tDgC[(None, None, None, 0, 0)].shape, ACC_DTYPE)
                r2s = cute.make_tiled_copy_D(atom, tmem_load)
                found["load_registers"] = _offsets(tDrAcc.layout)
                found["store_registers"] = _offsets(r2s.retile(tDrAcc).layout)
                found["store_shape"] = r2s.retile(tDrAcc).shape
                found["dst_shape"] = r2s.get_slice(0).partition_D(staging).shape
            dest[t] = _coords(r2s.get_slice(t).partition_D(staging))  # (R2S, R2S_M, R2S_N, stages)
        found.update(
            loaded=loaded, dest=dest, op=atom.op, vals=cute.size(atom.layout_src_tv, mode=[1]),
            dst_vals=cute.size(atom.layout_dst_tv, mode=[1]),
            staging=_offsets(epi_layout.outer),
            swizzle=(epi_layout.inner.num_bits, epi_layout.inner.num_base, epi_layout.inner.num_shift),
        )

    def probe(mC):
        evaluate(mC)

    probe.__annotations__ = {"mC": cute.Tensor}  # an object: this module's annotations are strings
    arch.trace(cute.jit(probe), arch.fake_operands()[2], target=_TARGET)
    return _paths(found, cfg.tile_m, cfg.epi_n, cfg.epi_stages, threads)


def _atom_mode(shape) -> int:
    """Size of the first sub-mode of a copy fragment's first mode: the atom's values per thread."""
    import math

    first = shape[0][0] if isinstance(shape[0], tuple) else shape[0]
    return math.prod(_leaves(first))


def _paths(found: dict, tile_m: int, epi_n: int, epi_stages: int, threads: int) -> list:
    vals, dst_vals = found["vals"], found["dst_vals"]
    if _atom_mode(found["store_shape"]) != vals or _atom_mode(found["dst_shape"]) != dst_vals:
        raise ValueError(f"fragments {found['store_shape']} / {found['dst_shape']} do not start with the atom's values")
    # staging buffer: (row, col, stage) -> byte address and back; column-major over (tile_m, epi_n, stages)
    byte = {}
    for index, offset in enumerate(found["staging"]):
        row, rest = index % tile_m, index // tile_m
        byte[(row, rest % epi_n, rest // epi_n)] = _swizzled(2 * offset, *found["swizzle"])
    where = {b: rc for rc, b in byte.items()}
    per_stage = len(found["dest"][0]) // epi_stages

    def start(t, k, stage):
        return byte[found["dest"][t][stage * per_stage + k * dst_vals]]

    load_regs, store_regs = found["load_registers"], found["store_registers"]
    paths = []
    for t in range(threads):
        per_sub = len(load_regs)
        for sub in range(len(found["loaded"][t]) // per_sub):
            coords = found["loaded"][t][sub * per_sub:(sub + 1) * per_sub]
            received = dict(zip(load_regs, coords))  # register offset -> accumulator (row, col)
            stage = sub % epi_stages
            for j, reg in enumerate(store_regs):
                address = _written(found["op"], vals, t, j, lambda tt, k: start(tt, k, stage))
                paths.append(RegisterPath(t, sub, reg, received[reg], where.get(address)))
    return paths


def epilogue_mismatches(paths: list, epi_n: int, epi_stages: int) -> list:
    """The paths whose element does not land at its own (row, col), and staging cells written
    other than exactly once per sub-tile; empty when the epilogue is right."""
    wrong = [p for p in paths if not p.ok(epi_n, epi_stages)]
    counts = collections.Counter((p.sub, p.written) for p in paths)
    twice = [key for key, n in counts.items() if n != 1]
    return wrong + twice
