"""Blackwell's scheduler and tensor memory (steps 7-11): cluster launch control, the tail, TMEM over time.

Part of ``gemm_course.teaching.sim`` (its docstring says what each model is for)."""

from __future__ import annotations

import collections
import dataclasses
from typing import Dict, List, Optional, Sequence, Tuple

from ... import hardware
from ...rules import tile_order

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

    from ...rules import schedule

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
