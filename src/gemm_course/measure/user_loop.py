"""As a user's loop sees a GEMM: back to back with the host in the loop, in a CUDA graph, and its
energy.

:func:`back_to_back` launches with no GPU sleep ahead (wall clock and CUDA events around the
loop), :func:`graph_back_to_back` the same launches captured in one CUDA graph
(:func:`capture_graph`), and :func:`sustained` runs them and :mod:`.energy`'s blocks for each
provider in turn, in the opposite order every other round, into a record's fields.
:mod:`gemm_course.measure.bench` describes the protocol and re-exports these names.
"""

from __future__ import annotations

import math
import statistics
from typing import Callable, Optional

from . import timing
from .energy import EnergyMeter, energy_block, energy_fields

B2B_MIN_LAUNCHES = 10
B2B_MAX_LAUNCHES = 5000


def b2b_launches(per_launch_ms: float, seconds: float) -> int:
    """Launches of a back-to-back block: enough to cover ``seconds`` at ``per_launch_ms``, at least
    :data:`B2B_MIN_LAUNCHES`, at most :data:`B2B_MAX_LAUNCHES`."""
    n = math.ceil(seconds * 1e3 / per_launch_ms) if per_launch_ms > 0 else B2B_MAX_LAUNCHES
    return max(B2B_MIN_LAUNCHES, min(B2B_MAX_LAUNCHES, n))


def back_to_back(fn: Callable, launches: int) -> dict:
    """``launches`` calls of ``fn`` with the host in the loop (no GPU sleep ahead, as a training loop
    launches): ``wall_ms``, the host's wall clock from before the first call to after a
    synchronize at the end, and ``event_ms``, CUDA events around the loop, each per launch."""
    import torch

    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t0 = timing._now()
    start.record()
    for _ in range(launches):
        fn()
    end.record()
    torch.cuda.synchronize()
    wall = timing._now() - t0
    return {"wall_ms": wall * 1e3 / launches, "event_ms": start.elapsed_time(end) / launches}


def capture_graph(fn_on: Callable, launches: int):
    """A ``torch.cuda.CUDAGraph`` of ``launches`` calls, captured on a side stream: ``fn_on(stream)``
    returns the callable that launches on ``stream`` (a launcher bound to it; ``torch.mm`` takes
    the current stream, which is ``stream`` during the capture). One call on the side stream
    before the capture, as torch asks; the capture is relaxed (a launch path that makes a call CUDA
    deems unsafe during capture is not refused for it)."""
    import torch

    side = torch.cuda.Stream()
    fn = fn_on(side)
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=side, capture_error_mode="relaxed"):
        for _ in range(launches):
            fn()
    return graph


def graph_back_to_back(fn_on: Callable, launches: int, replays: int = 1) -> float:
    """ms per launch of ``launches`` calls captured in one CUDA graph (:func:`capture_graph`),
    from CUDA events around ``replays`` replays after one untimed replay."""
    import torch

    graph = capture_graph(fn_on, launches)
    graph.replay()  # the first replay uploads the graph
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(replays):
        graph.replay()
    end.record()
    torch.cuda.synchronize()
    ms = start.elapsed_time(end) / (launches * replays)
    graph.reset()
    return ms


def sustained(providers: dict, per_launch_ms: dict, b2b_seconds: float = 0.0, b2b_rounds: int = 2,
              energy_seconds: float = 0.0, energy_rounds: int = 2, graph_providers: Optional[dict] = None,
              meter: Optional[EnergyMeter] = None, meter_note: Optional[str] = None, chunk_ms: float = 1.0) -> dict:
    """The record fields of the user's-loop measurements of ``providers`` (``{name: fn}``, each's
    per-launch median in ``per_launch_ms``): back-to-back blocks (:func:`back_to_back`, when
    ``b2b_seconds``) and energy blocks (:func:`energy_block`, when ``energy_seconds``; None
    with ``meter_note`` as the reason when ``meter`` is None), a provider's back-to-back block
    before its energy block, providers in turn and in the opposite order every other round; then,
    with ``graph_providers`` (``{name: fn_on(stream)}``), each provider's launches in a CUDA graph
    (:func:`graph_back_to_back`, as many as its back-to-back block). Back-to-back values are
    medians over the rounds."""
    names = list(providers)
    launches = {n: b2b_launches(per_launch_ms[n], b2b_seconds or 0.05) for n in names}
    chunks = {n: max(1, round(chunk_ms / per_launch_ms[n])) for n in names}
    b2b = {n: [] for n in names}
    energy = {n: [] for n in names}
    measure_energy = energy_seconds > 0 and meter is not None
    rounds = max(b2b_rounds if b2b_seconds > 0 else 0, energy_rounds if measure_energy else 0)
    for i in range(rounds):
        for name in names if i % 2 == 0 else names[::-1]:
            if b2b_seconds > 0 and i < b2b_rounds:
                b2b[name].append(back_to_back(providers[name], launches[name]))
            if measure_energy and i < energy_rounds:
                energy[name].append(energy_block(providers[name], energy_seconds, chunks[name], meter))
    out: dict = {}
    if b2b_seconds > 0:
        out["b2b_ms"] = {n: statistics.median(b["wall_ms"] for b in b2b[n]) for n in names}
        out["b2b_event_ms"] = {n: statistics.median(b["event_ms"] for b in b2b[n]) for n in names}
    if b2b_seconds > 0 or graph_providers:
        out["b2b_launches"] = launches
    if graph_providers:
        out["b2b_graph_ms"], notes = {}, []
        for name, fn_on in graph_providers.items():
            try:
                out["b2b_graph_ms"][name] = graph_back_to_back(fn_on, launches[name])
            except Exception as e:  # capture refused: recorded, not fatal
                out["b2b_graph_ms"][name] = None
                notes.append(f"{name}: {type(e).__name__}: {str(e)[:200]}")
        out["b2b_graph_note"] = "; ".join(notes) or None
    if energy_seconds > 0:
        out.update(energy_fields(energy, None if measure_energy else meter_note))
    return out
