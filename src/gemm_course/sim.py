"""CPU models that teach: shared-memory bank conflicts (chapter 3) and L2 reuse of tile orders
(chapters 9 and 10).

Shared-memory banks (chapter 3)
-------------------------------
Hopper and Blackwell shared memory has 32 banks of 4 bytes. A warp's request is served in
*wavefronts*; one wavefront delivers at most one distinct 4-byte word per bank (128 bytes),
and threads asking for the same word share it. A request therefore needs as many wavefronts
as the busiest bank has distinct words; the *conflicts* are the wavefronts beyond the
``ceil(words / 32)`` that the bytes alone require.

The byte addresses come from the kernels' own layouts, not from restated formulas:
:func:`offsets` traces a tiny ``@cute.jit`` function that calls the step's
``Gemm(config).make_smem_layouts()`` and evaluates the layout at every (row, k) while tracing,
where static layouts give Python ints. One subtlety, checked against the compiler's PTX in
tests/test_sim.py: the kernel hands the layout's swizzle to the shared-memory *pointer*
(``get_tensor(layout.outer, swizzle=layout.inner)``), and a swizzled pointer XORs *byte*
address bits (``Swizzle<3,4,3>``: bits 4-6, the 16-byte chunk, with bits 7-9, the row within
8 rows of 128 bytes). Calling the ComposedLayout itself applies the same swizzle to *element*
offsets, which for bf16 is a different permutation. So :func:`offsets` recasts the element
layout to bytes (``cute.recast_layout``) and composes the real swizzle object with that.
Offsets are from the start of the buffer; the steps' ``SharedStorage`` aligns it to 1024 bytes,
so swizzling the offset is the same as swizzling the address.

L2 reuse of a tile order (chapters 9-10)
----------------------------------------
:func:`l2_traffic` cuts an order (:mod:`gemm_course.tile_order`) into waves of ``sms``
concurrently running tiles and counts the distinct A row panels (``tile_m x K``) and B column
panels (``K x tile_n``) each wave touches: the DRAM traffic if L2 holds exactly one wave's working
set and nothing survives from one wave to the next. A coarse proxy: real waves drift apart and
L2 keeps some panels longer, so compare its ranking with measured DRAM bytes (ncu) before
leaning on its absolute numbers.

Shared-memory traffic of the main loop (chapters 5 and 11)
----------------------------------------------------------
:func:`smem_traffic` counts, for one K tile of one CTA, the operand bytes the ``wgmma``
instructions read from shared memory and the bytes TMA writes into it, and divides by the
clocks the tensor cores need for the K tile's FLOPs. Each ``wgmma`` is 64 rows x ``mma_n``
columns x 16 deep and reads its own A (64 x 16) and B (``mma_n`` x 16), so a B slice is read
once per 64 rows of the tile. Where the sum reaches :data:`SMEM_BYTES_PER_CLOCK`, shared memory,
not the tensor cores, sets the pace. A model: whether ``wgmma``'s operand reads share the banks'
bandwidth is not documented; the measurements in ``NOTES.md`` are consistent with it.

Blackwell's scheduler and tensor memory (steps 7-10)
----------------------------------------------------
The Blackwell steps cannot run without a B200, so these twins of their rules are their safety
net (tests/test_sm100_twins.py compares them with the kernels' own objects):
:func:`clc_schedule` is an event model of step 8's cluster launch control (clusters that run
take over the tiles of launches they cancel) and :func:`check_clc_schedule` what it must
guarantee; :func:`cluster_cta_tiles` is the tile each CTA of a cluster computes for a
cluster-tile index; :func:`tmem_plan` shows step 7's accumulator stages in tensor memory over time;
:func:`dynamic_tail` plays step 11's units (``schedule.dynamic_plan``) on the resident clusters.

Hopper's SM, stages and schedule (chapters 5-11)
------------------------------------------------
:func:`occupancy` counts the CTAs of a compiled kernel that fit on one SM (limits quoted in
:data:`HOPPER_SM`); :func:`pipeline_model` is an event model of the producer, the shared-memory
stages and the consumers, with made-up durations; :func:`persistent_schedule` replays the static
scheduler of the persistent steps with the step's own ``cluster_tile``.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import math
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

from . import hardware, tile_order

BANKS = 32
BANK_BYTES = 4
WAVEFRONT_BYTES = BANKS * BANK_BYTES  # 128
CHUNK_BYTES = 16  # one ldmatrix row / one TMA and swizzle unit
H100_SMS = hardware.H100_SXM.sms  # 132: H100 SXM and H200
SMEM_BYTES_PER_CLOCK = WAVEFRONT_BYTES  # one wavefront per clock per SM
TENSOR_FLOP_PER_CLOCK = 4096  # dense bf16 per SM and clock on Hopper: 989 TFLOP/s / (132 SMs x 1.83 GHz)
ROW_MAJOR = "row-major"  # a first attempt's layout: plain rows, no swizzle, no interleave
PATTERNS = ("core-matrix column", "row")


# ---------------------------------------------------------------------------------------------
# layouts -> byte offsets, evaluated at trace time
# ---------------------------------------------------------------------------------------------


def _layouts_factory(step_key: str, config):
    """(function building the (A, B) shared-memory layouts inside a jit trace, element bits, target)."""
    import cutlass

    from .ladder import get

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

    from . import arch

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


# ---------------------------------------------------------------------------------------------
# L2 reuse of a tile order
# ---------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class L2Traffic:
    """Panels (and bytes) an order reads from DRAM in the one-wave-in-L2 model."""

    waves: int
    a_panels: int  # sum over waves of distinct A row panels
    b_panels: int  # sum over waves of distinct B column panels
    a_panel_bytes: int  # tile_m x K
    b_panel_bytes: int  # K x tile_n
    unique_a: int  # distinct A panels over the whole order: the floor if L2 held everything
    unique_b: int
    a_per_wave: Tuple[int, ...]
    b_per_wave: Tuple[int, ...]

    @property
    def panels(self) -> int:
        return self.a_panels + self.b_panels

    @property
    def bytes(self) -> int:
        return self.a_panels * self.a_panel_bytes + self.b_panels * self.b_panel_bytes

    @property
    def min_bytes(self) -> int:
        return self.unique_a * self.a_panel_bytes + self.unique_b * self.b_panel_bytes


def l2_traffic(
    order: Sequence[Tuple[int, int]],
    sms: int = H100_SMS,
    tile_m: int = 128,
    tile_n: int = 256,
    k: int = 4096,
    elem_bytes: int = 2,
) -> L2Traffic:
    """Cut ``order`` into waves of ``sms`` tiles and count the panels each wave touches.

    Tile sizes default to the 128 x 256 tile of the later Hopper steps; ``k`` is the GEMM's K.
    """
    if sms < 1:
        raise ValueError(f"sms must be >= 1, got {sms}")
    a_per_wave, b_per_wave = [], []
    for start in range(0, len(order), sms):
        wave = order[start : start + sms]
        a_per_wave.append(len({m for m, _ in wave}))
        b_per_wave.append(len({n for _, n in wave}))
    return L2Traffic(
        waves=len(a_per_wave),
        a_panels=sum(a_per_wave),
        b_panels=sum(b_per_wave),
        a_panel_bytes=tile_m * k * elem_bytes,
        b_panel_bytes=tile_n * k * elem_bytes,
        unique_a=len({m for m, _ in order}),
        unique_b=len({n for _, n in order}),
        a_per_wave=tuple(a_per_wave),
        b_per_wave=tuple(b_per_wave),
    )


def compare_orders(
    tiles_m: int,
    tiles_n: int,
    kinds: Sequence[str] = tile_order.ORDERS,
    group: int = 8,
    **traffic,
) -> Dict[str, L2Traffic]:
    """:func:`l2_traffic` of each order kind on one grid (``traffic``: sms, tile sizes, k)."""
    return {kind: l2_traffic(tile_order.order(kind, tiles_m, tiles_n, group), **traffic) for kind in kinds}


# ---------------------------------------------------------------------------------------------
# shared-memory traffic of the main loop
# ---------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class SmemTraffic:
    """One K tile of one CTA: bytes read by wgmma, bytes written by TMA, tensor-core clocks."""

    wgmma_read: int
    tma_write: int
    clocks: float

    @property
    def bytes_per_clock(self) -> float:
        return (self.wgmma_read + self.tma_write) / self.clocks


def smem_traffic(tile_m: int, tile_n: int, mma_n: Optional[int] = None, tile_k: int = 64, elem_bytes: int = 2) -> SmemTraffic:
    """Shared-memory traffic of a ``tile_m`` x ``tile_n`` tile's K tile at the tensor cores' rate.

    ``mma_n`` is the wgmma's N (default ``tile_n``: one wgmma spans the tile's width).
    """
    mma_n = mma_n or tile_n
    if tile_m % 64 or tile_n % mma_n or tile_k % 16:
        raise ValueError("tile_m must be a multiple of 64, tile_n of mma_n, tile_k of 16")
    wgmmas = (tile_m // 64) * (tile_n // mma_n) * (tile_k // 16)
    read = wgmmas * (64 + mma_n) * 16 * elem_bytes
    write = (tile_m + tile_n) * tile_k * elem_bytes
    return SmemTraffic(read, write, 2 * tile_m * tile_n * tile_k / TENSOR_FLOP_PER_CLOCK)


# ---------------------------------------------------------------------------------------------
# Blackwell: cluster launch control (step 8), and the tiles each CTA of a cluster computes
# ---------------------------------------------------------------------------------------------

B200_SMS = hardware.B200.sms  # 148


def clc_first_cta_x(cluster: int, cluster_m: int) -> int:
    """x of cluster ``cluster``'s first CTA in step 8's grid ``(clusters * cluster_m, cluster_n, 1)``:
    what a successful ``try_cancel`` answer carries."""
    return cluster * cluster_m


def clc_decode(first_cta_x: int, cluster_m: int) -> int:
    """The cluster-tile index step 8's ``next_tile`` decodes from an answer: ``first_cta_x // cluster_m``."""
    return first_cta_x // cluster_m


@dataclasses.dataclass(frozen=True)
class ClcRun:
    """One cluster-tile computed by one resident cluster."""

    cluster: int  # the resident cluster that computed it
    tile: int  # the cluster-tile index it computed
    start: float
    end: float
    taken: bool  # True: handed over by try_cancel; False: the cluster's own tile, at launch
    source: int  # the cluster whose launch the tile belonged to (the cancelled one when taken)


@dataclasses.dataclass(frozen=True)
class ClcQuery:
    cluster: int  # whose scheduler asked
    issued: float
    answered: float
    cancelled: Optional[int]  # the cluster whose launch was cancelled; None: the answer was "invalid"


@dataclasses.dataclass(frozen=True)
class ClcSchedule:
    """What :func:`clc_schedule` simulated: runs, launches, exits, cancellations and queries."""

    num_clusters: int
    resident: int
    cluster_m: int
    policy: str
    runs: Tuple[ClcRun, ...]
    launched: Dict[int, float]  # cluster -> launch time (clusters that ran)
    exited: Dict[int, float]  # cluster -> exit time
    cancelled: Dict[int, Tuple[int, float]]  # cluster -> (the cluster that took its tile, when)
    queries: Tuple[ClcQuery, ...]

    @property
    def span(self) -> float:
        return max((r.end for r in self.runs), default=0.0)

    @property
    def per_cluster(self) -> Dict[int, List[int]]:
        """``{resident cluster: [cluster-tile, ...]}`` in the order it computed them."""
        out: Dict[int, List[int]] = {c: [] for c in sorted(self.launched)}
        for r in sorted(self.runs, key=lambda r: (r.cluster, r.start)):
            out.setdefault(r.cluster, []).append(r.tile)
        return out

    @property
    def max_resident(self) -> int:
        """The most clusters resident at one instant (an exit at t frees its slot for a launch at t)."""
        events = sorted([(t, 1) for t in self.launched.values()] + [(t, -1) for t in self.exited.values()])
        most = now = 0
        for _, step in events:  # -1 sorts before +1 at equal times
            now += step
            most = max(most, now)
        return most


def _clc_victim(policy, pending: List[int], rng) -> int:
    if callable(policy):
        return policy(pending, rng)
    if policy == "lowest":
        return pending[0]
    if policy == "highest":
        return pending[-1]
    if policy == "random":
        return rng.choice(pending)
    raise ValueError(f"unknown policy {policy!r}: 'lowest', 'highest', 'random' or a callable")


def clc_schedule(
    num_clusters: int,
    resident: int,
    policy="lowest",
    seed: int = 0,
    cluster_m: int = 2,
    tile_time: float = 1.0,
    query_time: float = 0.2,
    launch_gap: float = 0.0,
    jitter: float = 0.0,
    fail: float = 0.0,
    ahead: int = 1,
    decode=None,
    own_tile: bool = True,
) -> ClcSchedule:
    """An event model of step 8's persistent grid under cluster launch control.

    The grid has one cluster per cluster-tile (index c = 0..num_clusters-1). The hardware
    launches pending clusters in index order, one every ``launch_gap``, while fewer than
    ``resident`` run. A launched cluster computes its own tile ``decode(clc_first_cta_x(c))``
    (skipped when ``own_tile`` is False), then the cluster-tile of each answer its scheduler
    receives, and leaves after an "invalid" answer. The scheduler asks (``try_cancel``) at launch
    and again whenever fewer than ``ahead`` answers (``clc_stages``) wait unread, one question in
    flight at a time, until an answer is invalid. An answer resolves ``query_time`` after the
    question: it cancels one pending cluster chosen by ``policy`` ('lowest', 'highest', 'random'
    or ``callable(pending_sorted, rng)``) and carries its first CTA's x, or is invalid when none is
    pending, or, with probability ``fail``, even when some are (their launch then waits for a free
    slot, racing the other clusters' questions). Every duration is scaled by a factor drawn
    uniformly from [1 - jitter, 1 + jitter]; events at equal times run in a random order, so each
    ``seed`` gives another interleaving. ``decode`` (default :func:`clc_decode`) maps an answer's
    first CTA x to a cluster-tile index; a wrong ``decode``, or ``own_tile=False``, models a broken
    kernel for :func:`check_clc_schedule` to catch.
    """
    import heapq
    import itertools
    import random
    from collections import deque

    if num_clusters < 1 or resident < 1 or ahead < 1 or not 0 <= jitter <= 1 or not 0 <= fail <= 1:
        raise ValueError("num_clusters, resident and ahead must be >= 1; jitter and fail in [0, 1]")
    rng = random.Random(seed)
    decode = decode or (lambda x: clc_decode(x, cluster_m))
    order = itertools.count()
    heap: list = []
    pending = set(range(num_clusters))
    running: set = set()
    runs, queries = [], []
    launched: Dict[int, float] = {}
    exited: Dict[int, float] = {}
    cancelled: Dict[int, Tuple[int, float]] = {}
    state: Dict[int, dict] = {}
    launch_due = False

    def later(mean: float) -> float:
        return mean * (1.0 + jitter * (2.0 * rng.random() - 1.0))

    def push(t: float, kind: str, c: Optional[int] = None, payload=None) -> None:
        heapq.heappush(heap, (t, rng.random(), next(order), kind, c, payload))  # random tie-break

    def start(c: int, t: float, tile: int, taken: bool, source: int) -> None:
        state[c]["current"] = (tile, t, taken, source)
        push(t + later(tile_time), "finish", c)

    def ask(c: int, t: float) -> None:
        s = state[c]
        if not s["stopped"] and not s["asking"] and len(s["answers"]) < ahead:
            s["asking"] = True
            push(t + later(query_time), "answer", c, t)

    def kick(t: float) -> None:
        nonlocal launch_due
        if pending and len(running) < resident and not launch_due:
            launch_due = True
            push(t + later(launch_gap), "launch")

    def consume(c: int, t: float) -> None:
        s = state[c]
        victim = s["answers"].popleft()
        if victim is None:  # invalid: the cluster leaves and its slot frees
            running.discard(c)
            exited[c] = t
            kick(t)
            return
        start(c, t, decode(clc_first_cta_x(victim, cluster_m)), True, victim)
        ask(c, t)

    kick(0.0)
    while heap:
        t, _, _, kind, c, payload = heapq.heappop(heap)
        if kind == "launch":
            launch_due = False
            if pending and len(running) < resident:
                c = min(pending)
                pending.remove(c)
                running.add(c)
                launched[c] = t
                state[c] = {"current": None, "answers": deque(), "asking": False, "stopped": False}
                if own_tile:
                    start(c, t, decode(clc_first_cta_x(c, cluster_m)), False, c)
                ask(c, t)
            kick(t)
        elif kind == "answer":
            s = state[c]
            s["asking"] = False
            victim = None
            if pending and not rng.random() < fail:
                victim = _clc_victim(policy, sorted(pending), rng)
                pending.remove(victim)
                cancelled[victim] = (c, t)
            else:
                s["stopped"] = True  # issuing try_cancel after a failed one is undefined
            s["answers"].append(victim)
            queries.append(ClcQuery(c, payload, t, victim))
            if s["current"] is None:
                consume(c, t)
            else:
                ask(c, t)
        elif kind == "finish":
            s = state[c]
            tile, begun, taken, source = s["current"]
            runs.append(ClcRun(c, tile, begun, t, taken, source))
            s["current"] = None
            if s["answers"]:
                consume(c, t)
    return ClcSchedule(num_clusters, resident, cluster_m, policy if isinstance(policy, str) else "custom",
                       tuple(runs), launched, exited, cancelled, tuple(queries))


def check_clc_schedule(schedule: ClcSchedule) -> List[str]:
    """What is wrong with a :class:`ClcSchedule` (empty: nothing).

    Every cluster-tile computed exactly once; every cluster either launched or cancelled, never
    both; a launched cluster computes its own tile first; a cluster's runs do not overlap and lie
    between its launch and its exit; never more than ``resident`` clusters at once.
    """
    problems = []
    g = schedule.num_clusters
    counts = collections.Counter(r.tile for r in schedule.runs)
    for tile in range(g):
        if counts[tile] != 1:
            problems.append(f"cluster-tile {tile} computed {counts[tile]} times")
    for tile in sorted(set(counts) - set(range(g))):
        problems.append(f"cluster-tile {tile} is outside the grid of {g}")
    both = set(schedule.launched) & set(schedule.cancelled)
    neither = set(range(g)) - set(schedule.launched) - set(schedule.cancelled)
    problems += [f"cluster {c} both launched and cancelled" for c in sorted(both)]
    problems += [f"cluster {c} neither launched nor cancelled" for c in sorted(neither)]
    for c, tiles in schedule.per_cluster.items():
        if not tiles or tiles[0] != c:
            problems.append(f"cluster {c} does not start with its own tile {c}: {tiles[:3]}")
        mine = sorted((r for r in schedule.runs if r.cluster == c), key=lambda r: r.start)
        for a, b in zip(mine, mine[1:]):
            if b.start < a.end:
                problems.append(f"cluster {c} computes tiles {a.tile} and {b.tile} at once")
        leave = schedule.exited.get(c)
        if leave is None:
            problems.append(f"cluster {c} never leaves")
        elif mine and (mine[0].start < schedule.launched[c] or mine[-1].end > leave):
            problems.append(f"cluster {c} computes outside its residency")
    if schedule.max_resident > schedule.resident:
        problems.append(f"{schedule.max_resident} clusters resident at once, more than {schedule.resident}")
    return problems


@dataclasses.dataclass(frozen=True)
class TailRun:
    """One unit of the Blackwell step 11 on one resident cluster (times in K tiles of work)."""

    cluster: int
    tile: int
    part: int
    start: float
    loop_end: float  # its K loop done
    end: float  # and, for the last part, the others' partial sums added
    kind: str  # "whole", "part" (hands its partial sum over) or "last" (adds the others' and stores C)


def dynamic_tail(tiles: int, clusters: int, k_tiles: int, split: bool = True, fixup=None) -> List[TailRun]:
    """The units of ``schedule.dynamic_plan`` (``split``) or the whole tiles (step 10), taken in
    launch order by whichever of ``clusters`` resident clusters is free first, every K tile taking
    one unit of time. The part of a tail tile taken last finishes it: it waits until every part's
    K loop is done, then adds the others' partial sums, ``fixup`` (default
    ``schedule.FIXUP_K_TILES``) per other part, the price ``schedule.tail_parts`` assumes. A
    model: no launch latency, no scheduler query, no jitter."""
    import heapq

    from . import schedule

    fixup = schedule.FIXUP_K_TILES if fixup is None else fixup
    units = (schedule.dynamic_plan(tiles, clusters, k_tiles) if split
             else [(t, 0, 0, k_tiles) for t in range(tiles)])
    parts = collections.Counter(index for index, _, b, e in units if e - b < k_tiles)
    loops_done = collections.defaultdict(list)  # tail tile -> when each part's K loop ended
    free = [(0.0, c) for c in range(min(clusters, len(units)))]
    runs = []
    for index, part, k_begin, k_end in units:  # launch order: the free cluster that asked first takes the next
        start, cluster = heapq.heappop(free)
        loop_end = end = start + (k_end - k_begin)
        kind = "whole"
        if index in parts:
            loops_done[index].append(end)
            kind = "part"
            if len(loops_done[index]) == parts[index]:
                end, kind = max(loops_done[index]) + fixup * (parts[index] - 1), "last"
        runs.append(TailRun(cluster, index, part, start, loop_end, end, kind))
        heapq.heappush(free, (end, cluster))
    return runs


def sm100_cluster_tile(index: int, clusters_m: int, clusters_n: int, order: str = "row", group: int = 8,
                       cluster_size: int = 2, sms: int = B200_SMS) -> Tuple[int, int]:
    """The (m, n) of cluster-tile ``index`` as steps 8 (``row``), 9 (``grouped``) and 10 (``gilbert``)
    map it; step 10 keeps the row order when the grid fits in one wave of ``sms // cluster_size`` clusters."""
    if order == "row":
        return tile_order.row_tile(index, clusters_m, clusters_n)
    if order == "grouped":
        return tile_order.grouped_tile(index, clusters_m, clusters_n, group)
    if order == "gilbert":
        if clusters_m * clusters_n > sms // cluster_size:
            return tile_order.gilbert_tile(index, clusters_m, clusters_n)
        return tile_order.row_tile(index, clusters_m, clusters_n)
    raise ValueError(f"unknown order {order!r}: 'row', 'grouped' or 'gilbert'")


def cluster_cta_tiles(index: int, cluster_m: int, cluster_n: int, clusters_m: int, clusters_n: int,
                      order: str = "row", group: int = 8, sms: int = B200_SMS, pair: int = 2) -> dict:
    """``{(x, y): (pair tile (m, n), CTA tile (m, n))}`` for the CTAs of a cluster computing
    cluster-tile ``index`` (x = CTA x within the cluster, y = its y), as step 8's ``tile_coords``:
    the CTA tile is (tile_m * cluster_m + x, tile_n * cluster_n + y), its pair's tile has m // 2."""
    tm, tn = sm100_cluster_tile(index, clusters_m, clusters_n, order, group, cluster_m * cluster_n, sms)
    out = {}
    for x in range(cluster_m):
        for y in range(cluster_n):
            cta_m, n = tm * cluster_m + x, tn * cluster_n + y
            out[(x, y)] = ((cta_m // pair, n), (cta_m, n))
    return out


# ---------------------------------------------------------------------------------------------
# Blackwell: accumulators in tensor memory over time (steps 7 and 8)
# ---------------------------------------------------------------------------------------------

TMEM_COLUMNS = 512  # per SM: 128 lanes x 512 columns of 32 bits


def tmem_columns(acc_stages: int, tile_n: int) -> int:
    """Columns allocated: ``acc_stages * tile_n`` rounded up to a power of two, at least 32."""
    need = acc_stages * tile_n
    return max(32, 1 << (need - 1).bit_length())


@dataclasses.dataclass(frozen=True)
class TmemInterval:
    stage: int
    tile: int
    who: str  # "mma" (writes the stage) or "epilogue" (reads it)
    start: float
    end: float


@dataclasses.dataclass(frozen=True)
class TmemPlan:
    """Accumulator stages in tensor memory over time: who writes or reads which stage when."""

    acc_stages: int
    tile_n: int
    allocated: int  # columns allocated (:func:`tmem_columns`)
    intervals: Tuple[TmemInterval, ...]

    def columns(self, stage: int) -> Tuple[int, int]:
        """[first, end) TMEM columns of accumulator ``stage``: stage s starts at column s * tile_n."""
        return stage * self.tile_n, (stage + 1) * self.tile_n

    @property
    def span(self) -> float:
        return max((i.end for i in self.intervals), default=0.0)

    def of(self, who: str) -> List[TmemInterval]:
        return [i for i in self.intervals if i.who == who]

    @property
    def overlap(self) -> float:
        """Time during which an MMA and an epilogue run at once (on different stages)."""
        return sum(max(0.0, min(m.end, e.end) - max(m.start, e.start)) for m in self.of("mma") for e in self.of("epilogue"))


def tmem_plan(mma: Sequence[float], epilogue: Sequence[float], acc_stages: int = 2, tile_n: int = 256) -> TmemPlan:
    """The MMA warp and the epilogue warps of one CTA over its tiles, with per-tile durations.

    Tile t uses accumulator stage ``t % acc_stages``. The MMA warp fills it once its previous
    tile's MMAs are issued and the epilogue has released the stage (after reading tile
    t - acc_stages); the epilogue drains tile t once its MMAs are committed and the previous
    tile is drained, and releases the stage at its end. ``acc_stages`` = 1 is step 6;
    2 is steps 7 and 8.
    """
    if len(mma) != len(epilogue):
        raise ValueError("one MMA and one epilogue duration per tile")
    if acc_stages < 1 or tmem_columns(acc_stages, tile_n) > TMEM_COLUMNS:
        raise ValueError(f"{acc_stages} x {tile_n} columns do not fit in {TMEM_COLUMNS} TMEM columns")
    intervals = []
    mma_end = epi_end = 0.0
    released: List[float] = []
    for t, (m, e) in enumerate(zip(mma, epilogue)):
        stage = t % acc_stages
        begin = max(mma_end, released[t - acc_stages] if t >= acc_stages else 0.0)
        mma_end = begin + m
        intervals.append(TmemInterval(stage, t, "mma", begin, mma_end))
        drain = max(mma_end, epi_end)
        epi_end = drain + e
        intervals.append(TmemInterval(stage, t, "epilogue", drain, epi_end))
        released.append(epi_end)
    return TmemPlan(acc_stages, tile_n, tmem_columns(acc_stages, tile_n), tuple(intervals))


# ---------------------------------------------------------------------------------------------
# Hopper: CTAs per SM (chapter 5), the stage pipeline (chapters 6-7), the static persistent
# schedule (chapters 8-11)
# ---------------------------------------------------------------------------------------------

# Hopper (compute capability 9.0) per-SM limits, from the CUDA C++ Programming Guide's table of
# technical specifications; quoted, not measured. Nsight Compute reports the same 1 KiB of
# "driver shared memory" per block (results/logs/*ncu*).
HOPPER_SM = hardware.SM90A.occupancy_limits()  # registers, register_unit, smem_per_sm, smem_per_cta, ...


def occupancy(registers: int, threads: int, smem_bytes: int, stages: int = 1, limits: Optional[dict] = None) -> dict:
    """How many CTAs of a kernel fit on one Hopper SM, and what limits it.

    ``registers`` per thread and ``smem_bytes`` per CTA as the compiled kernel reports them
    (:func:`gemm_course.inspect.report`), ``threads`` per CTA. ``stages``: shared-memory stages
    per CTA, to count the K tiles an SM can have in flight (``ctas * stages``).
    """
    lim = dict(HOPPER_SM, **(limits or {}))
    warps = -(-threads // 32)
    unit = lim["register_unit"]
    regs_per_warp = -(-registers * 32 // unit) * unit
    by_registers = (lim["registers"] // regs_per_warp) // warps if regs_per_warp else lim["ctas"]
    by_smem = lim["smem_per_sm"] // (smem_bytes + lim["smem_reserved_per_cta"]) if smem_bytes <= lim["smem_per_cta"] else 0
    by_warps = lim["warps"] // warps
    limits_ = {"registers": by_registers, "shared memory": by_smem, "warps": by_warps, "CTA slots": lim["ctas"]}
    ctas = min(limits_.values())
    return {
        "registers": registers, "threads": threads, "warps": warps, "smem_bytes": smem_bytes, "stages": stages,
        "registers_per_warp": regs_per_warp, "limits": limits_, "ctas": ctas,
        "limiter": [name for name, v in limits_.items() if v == ctas],
        "warps_per_sm": ctas * warps, "k_tiles_in_flight": ctas * stages,
    }


def pipeline_model(stages: int, k_tiles: int, tiles_per_cta: int = 1, ctas: int = 1, load: float = 3.0,
                   mma: float = 1.0, epilogue: float = 2.5, issue: float = 0.2) -> dict:
    """A small event model of one SM running ``ctas`` CTAs one after the other (one fits at a time),
    each computing ``tiles_per_cta`` tiles of ``k_tiles`` K tiles through ``stages`` shared-memory stages.

    Rules (the kernels' protocol, with made-up durations): the producer issues K tile j into
    stage ``j % stages`` once the tile that used the stage before has been released, ``issue``
    after its previous copy; the data lands ``load`` later; the consumers run the K tile's wgmma
    (``mma``) once it has landed and the previous K tile's wgmma is done, and release the stage
    when it completes; after a tile's last K tile they run its ``epilogue``, during which the
    producer keeps loading. A CTA ends after its last epilogue; the next one starts then. One
    stage reproduces steps 2-5 (load, compute, release, load). Durations are illustrative, not measured.
    """
    if stages < 1 or k_tiles < 1 or tiles_per_cta < 1 or ctas < 1:
        raise ValueError("stages, k_tiles, tiles_per_cta and ctas must be >= 1")
    events = []  # dicts: lane ('producer'/'consumer'), start, end, kind ('load'/'mma'/'epilogue'), label, stage
    start = 0.0
    boundaries = []
    for c in range(ctas):
        free = [start] * stages  # when each stage was last released
        producer, consumer = start, start
        for t in range(tiles_per_cta):
            for k in range(k_tiles):
                j = t * k_tiles + k
                s = j % stages
                issued = max(producer, free[s])
                landed = issued + load
                events.append({"lane": "producer", "start": issued, "end": landed, "kind": "load",
                               "label": f"k{k}", "stage": s, "cta": c, "tile": t})
                producer = issued + issue
                begin = max(landed, consumer)
                consumer = begin + mma
                events.append({"lane": "consumer", "start": begin, "end": consumer, "kind": "mma",
                               "label": f"k{k}", "stage": s, "cta": c, "tile": t})
                free[s] = consumer
            events.append({"lane": "consumer", "start": consumer, "end": consumer + epilogue, "kind": "epilogue",
                           "label": f"epilogue\ntile {c * tiles_per_cta + t}", "stage": None, "cta": c, "tile": t})
            consumer += epilogue
        start = consumer
        boundaries.append(start)
    span = start
    busy = sum(e["end"] - e["start"] for e in events if e["kind"] == "mma")
    return {"events": events, "span": span, "mma_busy": busy / span, "cta_ends": boundaries[:-1],
            "params": {"stages": stages, "k_tiles": k_tiles, "tiles_per_cta": tiles_per_cta, "ctas": ctas,
                       "load": load, "mma": mma, "epilogue": epilogue, "issue": issue}}


def persistent_schedule(clusters_m: int, clusters_n: int, num_clusters: int, cluster_tile) -> dict:
    """Which cluster computes which cluster-tile, and in which of its iterations (its *wave*).

    The static scheduler of step 8 (and 9, 10): a grid of ``min(tiles, num_clusters)`` clusters;
    cluster c computes the cluster-tiles with index c, c + G, c + 2G, ... (G clusters), and
    ``cluster_tile(index, clusters_m, clusters_n)`` maps an index to its (m, n): pass the step's own.
    """
    total = clusters_m * clusters_n
    grid = min(total, num_clusters)
    owner = np.full((clusters_m, clusters_n), -1, dtype=int)
    wave = np.full((clusters_m, clusters_n), -1, dtype=int)
    per_cluster = []
    for c in range(grid):
        count = -(-(total - c) // grid)  # the kernel's num_tiles: ceil_div(tiles - cluster_id, clusters)
        per_cluster.append(count)
        for i in range(count):
            m, n = (int(v) for v in cluster_tile(c + i * grid, clusters_m, clusters_n))
            if owner[m, n] != -1:
                raise ValueError(f"cluster-tile ({m}, {n}) is scheduled twice")
            owner[m, n], wave[m, n] = c, i
    if (owner < 0).any():
        raise ValueError("the schedule leaves a cluster-tile uncomputed")
    waves = int(wave.max()) + 1
    last = int((wave == waves - 1).sum())
    return {"owner": owner, "wave": wave, "tiles_per_cluster": per_cluster, "clusters": grid, "waves": waves,
            "last_wave_tiles": last, "idle_in_last_wave": grid - last, "tiles": total}
