"""Shared-memory bank conflicts of the kernels' own layouts (chapter 3).

Part of ``gemm_course.teaching.sim`` (its docstring says what each model is for)."""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Iterable, List, Optional, Tuple

import numpy as np

from .constants import BANK_BYTES, BANKS, CHUNK_BYTES, PATTERNS, ROW_MAJOR, WAVEFRONT_BYTES

# ---------------------------------------------------------------------------------------------
# layouts -> byte offsets, evaluated at trace time
# ---------------------------------------------------------------------------------------------


def _layouts_factory(step_key: str, config):
    """(function building the (A, B) shared-memory layouts inside a jit trace, element bits, target)."""
    import cutlass

    from ...runtime.ladder import get

    if step_key == ROW_MAJOR:
        step = get("sm90/2")
        config = step.default if config is None else config
        bits = cutlass.BFloat16.width  # the course's operands

        def build():
            import cutlass.cute as cute

            a = cute.make_layout((config.tile_m, config.tile_k), stride=(config.tile_k, 1))
            b = cute.make_layout((config.tile_n, config.tile_k), stride=(config.tile_k, 1))
            return a, b

        return build, bits, step.target

    step = get(step_key)
    module = step.load()
    if step.arch != "sm90" or not hasattr(module.Gemm, "make_smem_layouts"):
        raise ValueError(
            f"{step.key} has no (rows, k) shared-memory layouts to read: use a Hopper step from 2 on "
            f"('sm90/2', 'sm90/3', ...) or {ROW_MAJOR!r}. Blackwell steps tile the same atoms into "
            "MMA-shaped layouts, so their banks behave the same."
        )
    config = step.default if config is None else config
    gemm = module.Gemm(config)
    return gemm.make_smem_layouts, getattr(module, "AB_DTYPE", cutlass.BFloat16).width, step.target


def _byte_offsets(layout, elem_bits: int) -> List[List[int]]:
    """Byte offset of every (row, k) element of a (rows, k[, stages]) layout; called while tracing."""
    import cutlass.cute as cute

    swizzle = cute.get_swizzle_portion(layout)  # identity S<0,4,3> for a plain layout
    if isinstance(layout, cute.ComposedLayout) and layout.offset != 0:
        raise ValueError(f"expected a swizzle composed at offset 0, got {layout}")
    elements = cute.get_nonswizzle_portion(layout)
    in_bytes = cute.recast_layout(8, elem_bits, elements)  # each element becomes elem_bits/8 bytes
    addressed = cute.make_composed_layout(swizzle, 0, in_bytes)  # swizzle acts on byte offsets
    rows, cols = cute.size(elements, mode=[0]), cute.size(elements, mode=[1])
    elem_bytes = elem_bits // 8
    stage0 = (0,) * (cute.rank(elements) - 2)  # staged layouts (rows, k, stages): the first stage
    return [[addressed((r, k * elem_bytes) + stage0) for k in range(cols)] for r in range(rows)]


@functools.lru_cache(maxsize=None)
def _offsets_cached(step_key: str, operand: str, config) -> Tuple[np.ndarray, str]:
    import cutlass.cute as cute

    from ...runtime import arch

    build, bits, target = _layouts_factory(step_key, config)
    index = {"A": 0, "B": 1}[operand]
    found: dict = {}

    def evaluate():  # plain Python: the jit preprocessor leaves a called helper's loops alone
        layout = build()[index]
        found["text"] = str(layout)
        found["offsets"] = _byte_offsets(layout, bits)

    @cute.jit
    def probe():
        evaluate()

    arch.trace(probe, target=target)
    table = np.array(found["offsets"], dtype=np.int64)
    table.flags.writeable = False
    return table, found["text"]


def offsets(step_key: str, operand: str = "A", config=None) -> np.ndarray:
    """Byte offsets ``[row, k]`` of (the first) stage of operand A (tile_m x tile_k) or B (tile_n x tile_k).

    ``step_key``: a ladder key (``"sm90/2"`` interleaved, ``"sm90/3"`` 128-byte swizzle) or
    ``"row-major"`` (a plain ``(rows, 64):(64, 1)`` layout of step 2's tile). Read-only; cached.
    """
    if operand not in ("A", "B"):
        raise ValueError(f"operand must be 'A' or 'B', got {operand!r}")
    return _offsets_cached(step_key, operand, config)[0]


def layout_text(step_key: str, operand: str = "A", config=None) -> str:
    """The CuTe layout the offsets came from, as CuTe prints it (for captions)."""
    return _offsets_cached(step_key, operand, config)[1]


def bank_map(offsets: np.ndarray) -> np.ndarray:
    """The bank (0-31) of every element: which 4-byte column of a 128-byte line it falls in."""
    return (np.asarray(offsets) // BANK_BYTES) % BANKS


def xor_pattern(step_key: str = "sm90/3", operand: str = "A") -> np.ndarray:
    """8 x 8 table: the physical 16-byte chunk of (row mod 8, logical chunk) under the 128B swizzle.

    Read from the kernel's real swizzled layout; for ``Swizzle<3,4,3>`` it is ``row ^ chunk``.
    """
    table = offsets(step_key, operand)
    per_chunk = CHUNK_BYTES // _elem_bytes(table)
    return (table[:8, ::per_chunk][:, :8] % WAVEFRONT_BYTES) // CHUNK_BYTES


def _elem_bytes(table: np.ndarray) -> int:
    """Bytes per element: the step from k to k+1 inside a 16-byte chunk (the same in every layout)."""
    return int(table[0, 1] - table[0, 0])


# ---------------------------------------------------------------------------------------------
# wavefronts and conflicts
# ---------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Wavefronts:
    wavefronts: int  # what the request takes: the busiest bank's distinct words
    ideal: int  # what its bytes need: ceil(distinct words / 32)
    words: int  # distinct 4-byte words requested

    @property
    def conflicts(self) -> int:
        """Extra wavefronts beyond the ideal (0: conflict-free)."""
        return self.wavefronts - self.ideal

    @property
    def ways(self) -> int:
        """An n-way conflict takes n times the ideal number of wavefronts."""
        return self.wavefronts // self.ideal


def wavefronts(accesses: Iterable[Tuple[int, int]]) -> Wavefronts:
    """Wavefronts of one request given as (byte address, bytes) per thread access.

    Models one phase of a request (up to 128 bytes asked at once, e.g. 8 threads x 16 bytes):
    the wavefront count is the busiest bank's number of distinct 4-byte words.
    """
    words = {b // BANK_BYTES for address, size in accesses for b in range(address, address + size)}
    if not words:
        raise ValueError("an empty request")
    per_bank = np.bincount(np.fromiter(words, dtype=np.int64) % BANKS, minlength=BANKS)
    return Wavefronts(int(per_bank.max()), math.ceil(len(words) / BANKS), len(words))


def pattern_accesses(offsets: np.ndarray, pattern: str, row: int = 0, k: int = 0) -> List[List[Tuple[int, int]]]:
    """Per thread, the (row, k) elements it touches in a named access pattern starting at (row, k).

    ``"core-matrix column"``: 8 threads, thread t reads 16 bytes of row ``row + t`` from column
    ``k``: one 8 x 8 bf16 core matrix, as ldmatrix and wgmma fetch it.
    ``"row"``: 8 threads, thread t reads the t-th 16 bytes of row ``row`` from ``k``: one
    128-byte row, as a TMA box row or a row-wise store covers it.
    """
    per_chunk = CHUNK_BYTES // _elem_bytes(offsets)
    rows, cols = offsets.shape
    if pattern == "core-matrix column":
        cells = [[(row + t, k + j) for j in range(per_chunk)] for t in range(8)]
    elif pattern == "row":
        cells = [[(row, k + t * per_chunk + j) for j in range(per_chunk)] for t in range(8)]
    else:
        raise ValueError(f"unknown pattern {pattern!r}: choose one of {', '.join(PATTERNS)}")
    if any(not (0 <= r < rows and 0 <= c < cols) for thread in cells for r, c in thread):
        raise ValueError(f"pattern {pattern!r} at ({row}, {k}) leaves the {rows} x {cols} tile")
    return cells


def conflicts(offsets: np.ndarray, pattern: str, row: int = 0, k: int = 0) -> Wavefronts:
    """Wavefronts of a named pattern (:func:`pattern_accesses`) on a layout's byte offsets."""
    size = _elem_bytes(offsets)
    cells = pattern_accesses(offsets, pattern, row, k)
    return wavefronts((int(offsets[r, c]), size) for thread in cells for r, c in thread)


def conflict_table(offsets: np.ndarray, pattern: str) -> np.ndarray:
    """Wavefronts of ``pattern`` at every aligned start (for heat maps and sweeping tests).

    Core-matrix reads: ``[row // 8, 16-byte chunk of k]``. Rows: ``[row, 128-byte block of k]``.
    """
    per_chunk = CHUNK_BYTES // _elem_bytes(offsets)
    rows, cols = offsets.shape
    if pattern == "core-matrix column":
        starts_r, starts_k = range(0, rows - 7, 8), range(0, cols - per_chunk + 1, per_chunk)
    else:
        starts_r, starts_k = range(rows), range(0, cols - 8 * per_chunk + 1, 8 * per_chunk)
    return np.array([[conflicts(offsets, pattern, r, c).wavefronts for c in starts_k] for r in starts_r])


def segments(offsets: np.ndarray, row: int = 0, k: int = 0, length: Optional[int] = None) -> List[Tuple[int, int]]:
    """Contiguous byte ranges (start, bytes), by address, that ``length`` elements of a row occupy.

    The default is the whole row (64 bf16 = 128 bytes with tile_k = 64). TMA writes a box row
    into contiguous memory in one piece only if it lands in one range; the interleaved layout
    scatters it into 16-byte pieces, each its own box.
    """
    size = _elem_bytes(offsets)
    length = offsets.shape[1] - k if length is None else length
    starts = sorted(int(b) for b in offsets[row, k : k + length])
    ranges: List[List[int]] = []
    for b in starts:
        if ranges and b == ranges[-1][0] + ranges[-1][1]:
            ranges[-1][1] += size
        else:
            ranges.append([b, size])
    return [(s, n) for s, n in ranges]
