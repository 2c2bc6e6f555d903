"""Chapters 0-3: layouts, the naive kernel, tensor cores and TMA, swizzling.

Part of ``gemm_course.teaching.exercises`` (its docstring says how the checks work)."""

from __future__ import annotations

import functools
import math
import numbers

from .common import NOT_ANSWERED, attempt, unanswered  # noqa: F401

# ---------------------------------------------------------------------------------------------
# chapter 0: layouts
# ---------------------------------------------------------------------------------------------


def check_column_major_stride(stride) -> str:
    """Give the stride that makes a (4, 8) layout column-major: (i, j) -> i + 4 * j."""
    from ..cute_basics import layout_table

    stride = tuple(stride) if isinstance(stride, (tuple, list)) else (stride,)
    if len(stride) != 2 or not all(isinstance(s, int) for s in stride):
        raise AssertionError(f"a stride for a rank-2 shape is two ints, e.g. (8, 1); got {stride!r}")
    table = layout_table((4, 8), stride)["offsets"]
    wrong = [(i, j, table[i][j]) for i in range(4) for j in range(8) if table[i][j] != i + 4 * j]
    assert not wrong, (
        f"with stride {stride}, CuTe puts (row {wrong[0][0]}, col {wrong[0][1]}) at offset {wrong[0][2]}, "
        f"but column-major stores it at {wrong[0][0] + 4 * wrong[0][1]}. Hint: moving down a column "
        "should move 1 element; moving right should skip a whole column of 4."
    )
    return f"right: (4,8):{stride} is column-major"


def check_offset(shape, stride, coord, offset: int) -> str:
    """Predict where ``coord`` (row, col) lands in the layout ``shape:stride``; CuTe evaluates it."""
    from ..cute_basics import layout_table

    row, col = coord
    actual = layout_table(shape, stride)["offsets"][row][col]
    assert isinstance(offset, numbers.Integral), f"an offset is one int (a count of elements), not {offset!r}"
    assert offset == actual, (
        f"not quite: the offset of ({row}, {col}) in {shape}:{stride} is not {offset}. Hint: split each "
        "coordinate into the sub-modes of its mode (colexicographically: the leftmost sub-mode varies "
        "fastest), multiply each part by its stride and add."
    )
    return f"right: ({row}, {col}) -> {actual}"


# ---------------------------------------------------------------------------------------------
# chapter 1: the naive kernel
# ---------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=None)
def naive_hot_loop(target: str = "sm_90a") -> dict:
    """Opcode counts in the naive kernel's main (unrolled) K loop, read from its SASS."""
    from ...runtime import arch, ladder
    from .. import inspect

    art = arch.compile_step(ladder.get("sm90/1"), None, target)
    loops = inspect.sass_loops(inspect.sass(art.cubin))
    main = max(loops, key=lambda lp: _count(lp["opcodes"], FMA_OPCODES))
    return main


FMA_OPCODES = ("FFMA", "FHFMA")  # fp32 FMA; sm_100a fuses the bf16->fp32 widening into FHFMA.BF16
LOAD_OPCODES = ("LDG",)


def _count(opcodes, prefixes) -> int:
    return sum(n for op, n in opcodes.items() if op.split(".")[0] in prefixes)


def check_naive_loads_per_fma(loads_per_fma: float, target: str = "sm_90a") -> str:
    """How many global loads (LDG) does the naive kernel issue per fused multiply-add (FFMA)?"""
    loop = naive_hot_loop(target)
    ops = loop["opcodes"]
    loads, fmas = _count(ops, LOAD_OPCODES), _count(ops, FMA_OPCODES)
    assert math.isclose(loads_per_fma, loads / fmas), (
        f"count again in the main loop of the SASS (label {loop['label']}): it has {fmas} FMA. "
        "Hint: every FMA needs one element of A and one of B, and nothing is kept between iterations."
    )
    return f"right: {loads} LDG for {fmas} FMA in the unrolled loop, {loads / fmas:g} loads per FMA"


def check_gemm_intensity(m: int, n: int, k: int, flop_per_byte: float) -> str:
    """The GEMM's arithmetic intensity if A, B and C each cross DRAM exactly once (bf16)."""
    from ...runtime.problem import GemmProblem

    p = GemmProblem(m, n, k)
    assert math.isclose(flop_per_byte, p.arithmetic_intensity, rel_tol=0.01), (
        f"not {flop_per_byte:g} FLOP/byte. Hint: FLOPs = 2*M*N*K; bytes = 2 bytes x (M*K + N*K + M*N)."
    )
    return f"right: {p.label} needs {p.flops:.3g} FLOP over {p.min_bytes:.3g} bytes: {p.arithmetic_intensity:.1f} FLOP/byte"


# ---------------------------------------------------------------------------------------------
# chapter 2: tensor cores and TMA
# ---------------------------------------------------------------------------------------------


def check_mma_per_k_tile(tile_k: int, count: int, step: str = "sm90/2") -> str:
    """How many MMA instructions does one K tile of ``tile_k`` take? Checked in the compiled PTX."""
    from ...runtime import arch, ladder
    from .. import inspect

    s = ladder.get(step)
    art = arch.compile_step(s, s.config(tile_k=tile_k))
    marker = "wgmma.mma_async" if s.arch == "sm90" else "tcgen05.mma.cta_group"
    actual = inspect.ptx_count(art.ptx, marker)
    assert count == actual, (
        f"not {count}: the compiled PTX of {s.key} with tile_k={tile_k} has another count of {marker}. "
        "Hint: one instruction covers K = 16 for bf16."
    )
    return f"right: tile_k={tile_k} -> {actual} x {marker} per K tile"


@functools.lru_cache(maxsize=None)
def _sm90_owners():
    from ..cute_basics import wgmma_accumulator_owners

    return wgmma_accumulator_owners("sm90/2")


def check_accumulator_owner(row: int, col: int, thread: int) -> str:
    """Which thread of the warpgroup holds accumulator element (row, col) of the wgmma tile?"""
    owners = _sm90_owners()["thread"]
    actual = owners[row][col]
    assert thread == actual, (
        f"({row}, {col}) is not held by thread {thread}. Hint: warp = row // 16; inside the warp, "
        "lane // 4 picks the row (mod 8) and lane % 4 picks a pair of columns (mod 8)."
    )
    return f"right: thread {actual} (warp {actual // 32}, lane {actual % 32}) holds ({row}, {col})"


# ---------------------------------------------------------------------------------------------
# chapter 3: swizzling
# ---------------------------------------------------------------------------------------------


def check_swizzled_chunk(row: int, chunk: int, physical_chunk: int) -> str:
    """Under step 3's 128-byte swizzle, where does 16-byte chunk ``chunk`` of tile row ``row`` land?"""
    from .. import sim

    table = sim.xor_pattern("sm90/3")
    actual = int(table[row % 8][chunk])
    assert physical_chunk == actual, (
        f"chunk {chunk} of row {row} does not land in chunk {physical_chunk}. Hint: write row mod 8 and "
        "the chunk in binary (3 bits each) and XOR them."
    )
    return f"right: row {row} ({row % 8:03b}) XOR chunk {chunk} ({chunk:03b}) = {actual} ({actual:03b})"


def check_wavefronts(layout: str, pattern: str, wavefronts: int) -> str:
    """Predict the wavefronts of an access ``pattern`` (``"core-matrix column"`` or ``"row"``) on a
    layout (``"row-major"``, ``"sm90/2"``, ``"sm90/3"``); the bank model checks it."""
    from .. import sim

    actual = sim.conflicts(sim.offsets(layout), pattern).wavefronts
    assert wavefronts == actual, (
        f"not {wavefronts}. Hint: list the banks the 8 threads' 16-byte pieces fall in; the request "
        "takes as many wavefronts as the busiest bank has distinct words."
    )
    return f"right: a {pattern} access on {layout} takes {actual} wavefront{'s' if actual > 1 else ''}"
