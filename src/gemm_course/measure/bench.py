"""The measurement protocol and result records.

Protocol (every number the book shows comes from here):

* fresh random-normal inputs (never zeros), output checked against float32 before timing;
* JIT excluded: the kernel is compiled and launched once before any timing;
* host overhead excluded: each timed block starts behind a GPU sleep long enough for the host to
  queue the whole block, so the events measure the GPU, not Python's launch path (the host's
  cost per launch is recorded separately, ``host_launch_us``);
* ``warmup`` launches, then ``rounds`` rounds; in each round ``repeats`` launches of the step and
  ``repeats`` of cuBLAS (``torch.mm``) are timed *interleaved*, each launch between its own CUDA
  events, in the opposite order every other round (at the power limit a block inherits the clock
  the previous one left: a kernel timed right after cuBLAS ran up to ~2% faster than the same
  kernel timed after itself on the H200); we report the median (and min, max) over all launches;
* the seed's protocol (10 warm-up, 100 launches, mean) is reported too, from events around a
  block of 100 back-to-back launches of each;
* a record stores provenance: GPU, driver, CUDA, torch, cutlass-dsl, clocks, date, command.

On request (:func:`bench_step`'s ``b2b_seconds``, ``graph``, ``energy_seconds``,
``host_breakdown``; ``scripts/gpu_energy_b2b.py`` asks for all of them) the step and cuBLAS
are also timed as a user's loop sees them, and their energy is measured; providers alternate
and swap order every other round, as above (:func:`sustained`):

* back to back with the host in the loop (:func:`back_to_back`): N launches of the prepared
  launcher and of ``torch.mm`` with no GPU sleep ahead, wall clock around the loop with a
  synchronize at its end, and CUDA events around it; N covers ``b2b_seconds`` at the per-launch
  median (at least 10). Recorded per launch as ``b2b_ms`` (wall clock) and ``b2b_event_ms``,
  medians over ``b2b_rounds`` rounds, beside the per-launch medians above;
* the same N launches captured in one CUDA graph on a side stream and replayed
  (:func:`graph_back_to_back`): ``b2b_graph_ms``, the GPU's back-to-back time with no host in
  the loop (None, with ``b2b_graph_note``, where capture fails);
* energy per GEMM from NVML's total-energy counter (``nvmlDeviceGetTotalEnergyConsumption``,
  millijoules, :func:`open_meter`): each provider runs back to back for ``energy_seconds``
  (:func:`energy_block`: chunks of about ``chunk_ms`` of GPU work, at most two chunks queued ahead
  of the host, which polls the counter and the SM clock while it waits). The counter moves in
  coarse steps, so the board's power is taken between the first and the last step the poll saw
  (steps in the block's first 100 ms are skipped, as they may still count the idle time before
  it), and times the block's event-timed ms per launch it is the energy per GEMM;
  ``energy_j_per_gemm`` is the mean over ``energy_rounds`` rounds, ``energy_window_s`` the seconds
  between counter steps it rests on, ``sm_clock_mhz_median`` the median of the NVML clock
  samples taken during the blocks. Without NVML, or without the counter, the energy fields are
  None and ``energy_note`` says why;
* the host's time per call of the launcher and of ``torch.mm``, and of the launcher's parts
  (:func:`host_launch_breakdown`): ``host_launch_breakdown_us``.

Records are JSON files under ``results/<gpu-slug>/``, written by :func:`write_records`;
:mod:`gemm_course.measure.records` holds the writer and the schema, reads and queries the records (``write_records``,
``load_records``, ``latest``, ``RESULTS_DIR`` and the broad sweep's shapes are also reachable from here,
where the chapters and scripts look for them). This module imports :mod:`gemm_course.measure.records`,
never the other way round.
"""

from __future__ import annotations

import collections
import dataclasses
import datetime
import math
import platform
import statistics
import subprocess
import time
from typing import Callable, Optional, Sequence

from ..runtime import ladder
from ..runtime.problem import GemmProblem, make_inputs, reference, relative_error
from . import records
from .records import (  # noqa: F401  (re-exported: the chapters and scripts call bench.load_records, bench.write_records, ...)
    FEW_WAVE_KS,
    FEW_WAVE_MNS,
    LLM_MS,
    LLM_NKS,
    RESULTS_DIR,
    SCHEMA,
    SWEEP_SQUARES,
    broad_sweep_shapes,
    decode_shapes,
    dump_records,
    gpu_slug,
    latest,
    load_records,
    shape_class,
    write_records,
)

_now = time.perf_counter  # the host clock of every wall-clock measurement here (the tests replace it)


def tflops(problem: GemmProblem, ms: float) -> float:
    return problem.flops / (ms * 1e-3) / 1e12


def summarize(times_ms: list) -> dict:
    """Median, min, max and spread of per-launch times (ms)."""
    s = sorted(times_ms)
    med = statistics.median(s)
    return {
        "median": med,
        "min": s[0],
        "max": s[-1],
        "p10": s[int(0.1 * (len(s) - 1))],
        "p90": s[int(0.9 * (len(s) - 1))],
        "n": len(s),
    }


def host_seconds_per_launch(fn: Callable, launches: int = 20) -> float:
    """Host time to enqueue one launch (no synchronization inside the loop)."""
    import torch

    torch.cuda.synchronize()
    t0 = _now()
    for _ in range(launches):
        fn()
    t = (_now() - t0) / launches
    torch.cuda.synchronize()
    return t


def _queue_ahead(host_seconds: float):
    """Keep the GPU busy while the host enqueues a block, so no launch waits for Python."""
    import torch

    torch.cuda._sleep(int(min(max(host_seconds * 1.5, 1e-3) * 2.0e9, 2e10)))  # cycles at ~2 GHz


def time_each(fn: Callable, repeats: int, host_seconds: float = 0.0) -> list:
    """Per-launch times in ms, each launch between its own pair of CUDA events."""
    import torch

    starts = [torch.cuda.Event(enable_timing=True) for _ in range(repeats)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(repeats)]
    _queue_ahead(host_seconds * repeats * 1.2)
    for s, e in zip(starts, ends):
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    return [s.elapsed_time(e) for s, e in zip(starts, ends)]


def time_block(fn: Callable, launches: int, host_seconds: float = 0.0) -> float:
    """Mean ms per launch over a block of back-to-back launches (the seed's protocol)."""
    import torch

    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    _queue_ahead(host_seconds * launches)
    s.record()
    for _ in range(launches):
        fn()
    e.record()
    torch.cuda.synchronize()
    return s.elapsed_time(e) / launches


def compare(providers: dict, warmup: int = 10, repeats: int = 100, rounds: int = 5, seed_launches: int = 100) -> dict:
    """Time several providers interleaved in one process: {name: {'each': [...], 'seed_mean': ms}}."""
    import torch

    for fn in providers.values():
        for _ in range(warmup):
            fn()
    torch.cuda.synchronize()
    host = {name: host_seconds_per_launch(fn, launches=min(20, max(repeats, 2))) for name, fn in providers.items()}
    out = {name: {"each": [], "seed_mean": None, "host_launch_us": host[name] * 1e6} for name in providers}
    for name, fn in providers.items():  # the seed's protocol: 10 warm-up (done), 100 launches, mean
        out[name]["seed_mean"] = time_block(fn, seed_launches, host[name])
    names = list(providers)
    for i in range(rounds):  # every other round reversed: each block follows each provider equally often
        for name in names if i % 2 == 0 else names[::-1]:
            out[name]["each"] += time_each(providers[name], repeats, host[name])
    return out


# ---------------------------------------------------------------------------------------------
# the memory roofline: bytes over time, and operands that do not sit in L2
# ---------------------------------------------------------------------------------------------

# HBM bandwidth by the vendors' datasheets (TB/s), by a substring of the GPU's name, most specific first
DATASHEET_TB_S = (("H100 PCIe", 2.0), ("H100 NVL", 3.9), ("H100", 3.35), ("H200", 4.8), ("B200", 8.0), ("GB200", 8.0))
ROTATE_CACHE_FACTOR = 3  # operand sets in turn cover at least this many L2s, so each launch reads DRAM


def datasheet_tb_s(gpu_name: Optional[str]) -> Optional[float]:
    """The datasheet's HBM bandwidth of a GPU by its name (None where the course does not know it)."""
    for part, tb_s in DATASHEET_TB_S:
        if gpu_name and part in gpu_name:
            return tb_s
    return None


def rotation_sets(set_bytes: int, cache_bytes: int, factor: int = ROTATE_CACHE_FACTOR) -> int:
    """How many operand sets, used in turn, keep a launch's operands out of an L2 of ``cache_bytes``."""
    return max(1, math.ceil(factor * cache_bytes / max(set_bytes, 1)))


class Rotation:
    """Calls ``fns`` in turn, each bound to its own operands: in a model's decode step every layer
    has its own weights, so a GEMM finds none of them in L2; timing one set over and over would
    measure the cache."""

    def __init__(self, fns: Sequence[Callable]):
        self.fns, self.next = list(fns), 0

    def __call__(self):
        fn = self.fns[self.next]
        self.next = (self.next + 1) % len(self.fns)
        fn()


def rotated_providers(launches: dict, problem: GemmProblem, a, b, out, seed: int = 0) -> tuple:
    """({name: Rotation} for each prepared launcher of ``launches`` and for cuBLAS (``"cublas"``), the
    record's ``rotation``): the first operand set is ``a``, ``b`` (cuBLAS writes ``out``), the others
    fresh (seeds ``seed + 1`` on), enough of them for :func:`rotation_sets`; each launcher is prepared
    again, with its own config, on every other set."""
    import torch

    from ..runtime import run

    cache = torch.cuda.get_device_properties(a.device).L2_cache_size
    sets = rotation_sets(problem.min_bytes, cache)
    others = [make_inputs(problem, "cuda", seed + 1 + i) for i in range(sets - 1)]
    rotated = {name: Rotation([launch] + [run.prepare(launch.step, x, w, y, launch.config) for x, w, y in others])
               for name, launch in launches.items()}
    rotated["cublas"] = Rotation([(lambda x=x, w=w, y=y: torch.mm(x, w.t(), out=y)) for x, w, y in [(a, b, out)] + others])
    return rotated, {"sets": sets, "set_bytes": problem.min_bytes, "l2_bytes": cache,
                     "how": "each provider launches on its operand sets in turn (bench.Rotation)"}


def copy_tb_s(gib: float = 2.0, repeats: int = 20) -> float:
    """Measured device-to-device copy bandwidth, TB/s counting bytes read plus bytes written
    (median of ``repeats`` copies of ``gib`` GiB): the memory ceiling this GPU reaches today."""
    import torch

    n = int(gib * 2**30) // 2
    src, dst = torch.empty(n, dtype=torch.bfloat16, device="cuda").normal_(), torch.empty(n, dtype=torch.bfloat16, device="cuda")
    for _ in range(3):
        dst.copy_(src)
    times = time_each(lambda: dst.copy_(src), repeats)
    return 2 * n * 2 / (statistics.median(times) * 1e-3) / 1e12


def bandwidth_fields(problem: GemmProblem, step_ms: float, cublas_ms: float, gpu_name: Optional[str],
                     copy: Optional[float] = None) -> dict:
    """A record's memory roofline: the fewest bytes (A and B read once, C written once) over each
    median time, and their fractions of the datasheet's and of the measured copy bandwidth."""
    sheet = datasheet_tb_s(gpu_name)
    out = {"min_bytes": problem.min_bytes, "tb_s": problem.min_bytes / (step_ms * 1e-3) / 1e12,
           "cublas_tb_s": problem.min_bytes / (cublas_ms * 1e-3) / 1e12, "datasheet_tb_s": sheet, "copy_tb_s": copy}
    for name, ceiling in (("datasheet", sheet), ("copy", copy)):
        out[f"fraction_of_{name}"] = out["tb_s"] / ceiling if ceiling else None
        out[f"cublas_fraction_of_{name}"] = out["cublas_tb_s"] / ceiling if ceiling else None
    return out


# ---------------------------------------------------------------------------------------------
# as a user's loop sees it: back to back with the host in the loop, a CUDA graph, energy
# ---------------------------------------------------------------------------------------------

B2B_MIN_LAUNCHES = 10
B2B_MAX_LAUNCHES = 5000
ENERGY_SKIP_S = 0.1  # counter steps in a block's first 100 ms are not used (they may count the idle time before it)


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
    t0 = _now()
    start.record()
    for _ in range(launches):
        fn()
    end.record()
    torch.cuda.synchronize()
    wall = _now() - t0
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


class EnergyMeter:
    """NVML's total-energy counter (millijoules since the driver loaded) and SM clock of one GPU."""

    def __init__(self, nvml, handle):
        self.nvml, self.handle = nvml, handle

    def energy_mj(self) -> int:
        return self.nvml.nvmlDeviceGetTotalEnergyConsumption(self.handle)

    def sm_clock_mhz(self) -> Optional[float]:
        try:
            return float(self.nvml.nvmlDeviceGetClockInfo(self.handle, self.nvml.NVML_CLOCK_SM))
        except Exception:
            return None


def _nvml_handle(nvml, device: int):
    """The NVML handle of torch's CUDA device ``device``: by PCI bus id (CUDA and NVML may number
    GPUs differently), else NVML's index ``device``."""
    try:
        import torch

        p = torch.cuda.get_device_properties(device)
        bus = f"{p.pci_domain_id:08X}:{p.pci_bus_id:02X}:{p.pci_device_id:02X}.0"
        for key in (bus, bus.encode()):
            try:
                return nvml.nvmlDeviceGetHandleByPciBusId(key)
            except Exception:
                continue
    except Exception:
        pass
    return nvml.nvmlDeviceGetHandleByIndex(device)


def open_meter(device: int = 0) -> tuple:
    """``(EnergyMeter, None)``, or ``(None, why not)`` where ``pynvml`` (nvidia-ml-py) is missing,
    NVML does not start or the GPU has no total-energy counter. Imports ``pynvml`` only here."""
    try:
        import pynvml
    except ImportError as e:
        return None, f"no NVML: the pynvml module (nvidia-ml-py) is not installed ({e})"
    try:
        pynvml.nvmlInit()
    except Exception as e:
        return None, f"NVML did not start: {type(e).__name__}: {e}"
    try:
        handle = _nvml_handle(pynvml, device)
        pynvml.nvmlDeviceGetTotalEnergyConsumption(handle)
    except Exception as e:
        return None, f"NVML's total-energy counter is not available on this GPU: {type(e).__name__}: {e}"
    return EnergyMeter(pynvml, handle), None


def energy_block(fn: Callable, seconds: float, chunk: int, meter: EnergyMeter, in_flight: int = 2,
                 clock_every_s: float = 0.01, skip_s: float = ENERGY_SKIP_S) -> dict:
    """Energy per launch of ``fn`` run back to back for ``seconds``, from NVML's counter.

    The host enqueues ``chunk`` launches at a time and records an event after each chunk; it keeps
    at most ``in_flight`` chunks queued ahead of the GPU and, while it waits for the oldest to
    finish (and once after every chunk), polls the counter, noting each time the value changed,
    and the SM clock every ``clock_every_s``. Power is the energy between the first and the last
    change after ``skip_s`` over the host time between them; times the block's event-timed ms per
    launch it is the energy per launch. Where the host launches more slowly than the GPU runs, the
    gaps between launches count too, as they do in a user's loop. With fewer than two such changes,
    the counter's readings before and after the block (``method: whole block``: coarse).

    Returns ``{launches, event_ms, power_w, window_s, j_per_gemm, clocks_mhz, changes, method}``."""
    import torch

    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    pending: collections.deque = collections.deque()
    changes, clocks_mhz = [], []
    e0 = last = meter.energy_mj()
    t0 = _now()
    next_clock = t0

    def poll():
        nonlocal last, next_clock
        e, t = meter.energy_mj(), _now()
        if e != last:
            changes.append((t, e))
            last = e
        if t >= next_clock:
            mhz = meter.sm_clock_mhz()
            if mhz is not None:
                clocks_mhz.append(mhz)
            next_clock = t + clock_every_s

    launches = 0
    start.record()
    while _now() - t0 < seconds:
        for _ in range(chunk):
            fn()
        launches += chunk
        ev = torch.cuda.Event()
        ev.record()
        pending.append(ev)
        poll()
        while len(pending) > in_flight:
            while not pending[0].query():
                poll()
            pending.popleft()
    end.record()
    torch.cuda.synchronize()
    t1, e1 = _now(), meter.energy_mj()
    event_ms = start.elapsed_time(end) / launches
    used = [(t, e) for t, e in changes if t - t0 >= skip_s]
    if len(used) >= 2 and used[-1][0] > used[0][0]:
        (ta, ea), (tb, eb) = used[0], used[-1]
        power, window, method = (eb - ea) / 1e3 / (tb - ta), tb - ta, "counter changes"
    else:
        power, window, method = (e1 - e0) / 1e3 / (t1 - t0), t1 - t0, "whole block"
    return {"launches": launches, "event_ms": event_ms, "power_w": power, "window_s": window,
            "j_per_gemm": power * event_ms / 1e3, "clocks_mhz": clocks_mhz, "changes": len(changes), "method": method}


def energy_fields(blocks: dict, note: Optional[str] = None) -> dict:
    """A record's energy fields from each provider's :func:`energy_block` results (``{name: [block,
    ...]}``, one per round): per provider the mean energy per GEMM over the rounds and each round's,
    the seconds of counter window it rests on, the launches, the mean power and the median SM clock
    of all samples. A provider without blocks gets None; ``energy_note`` is ``note`` (why there is
    no energy) or, where a block fell back to the whole-block reading, says so."""
    out = {"energy_j_per_gemm": {}, "energy_j_per_gemm_rounds": {}, "energy_window_s": {}, "energy_launches": {},
           "energy_power_w": {}, "sm_clock_mhz_median": {}}
    whole = []
    for name, rounds in blocks.items():
        if not rounds:
            for key in out:
                out[key][name] = None
            continue
        out["energy_j_per_gemm"][name] = statistics.mean(b["j_per_gemm"] for b in rounds)
        out["energy_j_per_gemm_rounds"][name] = [b["j_per_gemm"] for b in rounds]
        out["energy_window_s"][name] = sum(b["window_s"] for b in rounds)
        out["energy_launches"][name] = sum(b["launches"] for b in rounds)
        out["energy_power_w"][name] = statistics.mean(b["power_w"] for b in rounds)
        samples = [mhz for b in rounds for mhz in b["clocks_mhz"]]
        out["sm_clock_mhz_median"][name] = statistics.median(samples) if samples else None
        whole += [name for b in rounds if b["method"] != "counter changes"]
    if note is None and whole:
        note = (f"{len(whole)} block(s) ({', '.join(sorted(set(whole)))}) saw fewer than two counter changes: "
                "energy read before and after the block (coarse)")
    out["energy_note"] = note
    return out


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


def host_launch_breakdown(launch, cublas: Callable, check: Optional[Callable] = None, launches: int = 200,
                          repeats: int = 5) -> dict:
    """The host's time per call, in us (median over ``repeats`` loops of ``launches`` calls, each
    loop behind a GPU sleep so no call waits for the GPU): the prepared launcher (``launcher``,
    a ``run.Launcher``), ``torch.mm`` (``torch_mm``), and the launcher's parts: building its
    argument tuple (``call_arguments``), the DSL turning it into C pointers
    (``execution_args``, no launch) and a launch from C pointers built once beforehand
    (``prebuilt``: the compiled function's executor, ``compiled.to(None)``, its
    ``run_compiled_program``; no Python argument handling). ``check(launch_fn)``,
    if given, runs ``launch_fn`` once on a poisoned output and returns its relative error
    (``prebuilt_rel_error``): the prebuilt path must compute the same GEMM. Parts this DSL
    version lacks are None, with ``note``."""
    import torch

    from ..runtime import arch

    def per_call(fn) -> float:
        values = []
        for _ in range(repeats):
            torch.cuda.synchronize()
            _queue_ahead(launches * 100e-6)  # 100 us of GPU sleep per call queued
            t0 = _now()
            for _ in range(launches):
                fn()
            values.append((_now() - t0) / launches * 1e6)
            torch.cuda.synchronize()
        return statistics.median(values)

    out = {"launcher": per_call(launch), "torch_mm": per_call(cublas), "launches": launches, "repeats": repeats,
           "call_arguments": None, "execution_args": None, "prebuilt": None, "prebuilt_rel_error": None, "note": None}
    out["call_arguments"] = per_call(lambda: arch.call_arguments(launch.operands, launch.stream))
    compiled = launch.artifacts.compiled
    try:
        args = arch.call_arguments(launch.operands, launch.stream)
        executor = compiled.to(None)  # bound to the current device, as a call's default executor is
        out["execution_args"] = per_call(lambda: executor.generate_execution_args(*args))
        exe_args, adapted = executor.generate_execution_args(*args)  # adapted: kept alive while exe_args are used

        def prebuilt():
            executor.run_compiled_program(exe_args)

        if check is not None:
            out["prebuilt_rel_error"] = check(prebuilt)
        out["prebuilt"] = per_call(prebuilt)
        del adapted
    except Exception as e:
        out["note"] = f"{type(e).__name__}: {str(e)[:200]}"
    return out


def bench_seconds(step_ms: float, cublas_ms: float, warmup: int = 10, repeats: int = 100, rounds: int = 5,
                  seed_launches: int = 100, b2b_seconds: float = 0.0, b2b_rounds: int = 2, graph: bool = False,
                  energy_seconds: float = 0.0, energy_rounds: int = 2, peers_ms: Sequence[float] = (),
                  overhead_s: float = 0.5) -> float:
    """An estimate of :func:`bench_step`'s seconds on one shape from the providers' per-launch ms:
    GPU time of every launch it makes, the energy blocks, and ``overhead_s`` for inputs, the check
    and Python (not the first compile of a config)."""
    every = step_ms + cublas_ms + sum(peers_ms)
    seconds = every * (warmup + min(20, max(repeats, 2)) + seed_launches + rounds * repeats) / 1e3 + overhead_s
    for ms in (step_ms, cublas_ms):
        n = b2b_launches(ms, b2b_seconds or 0.05)
        seconds += (b2b_rounds * n * ms / 1e3 if b2b_seconds > 0 else 0.0) + (2 * n * ms / 1e3 if graph else 0.0)
        seconds += energy_rounds * max(energy_seconds, ms / 1e3) if energy_seconds > 0 else 0.0
    return seconds


# ---------------------------------------------------------------------------------------------
# provenance
# ---------------------------------------------------------------------------------------------


def _nvidia_smi(query: str) -> Optional[list]:
    try:
        out = subprocess.run(
            ["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader,nounits", "-i", "0"],
            capture_output=True, text=True, timeout=10,
        )
        return [v.strip() for v in out.stdout.strip().split(",")] if out.returncode == 0 else None
    except Exception:
        return None


def clocks() -> Optional[dict]:
    vals = _nvidia_smi("clocks.sm,clocks.mem,clocks.max.sm,power.draw,temperature.gpu")
    if not vals or len(vals) < 5:
        return None
    keys = ("sm_mhz", "mem_mhz", "max_sm_mhz", "power_w", "temperature_c")
    res = {}
    for k, v in zip(keys, vals):
        try:
            res[k] = float(v)
        except ValueError:
            res[k] = None
    return res


def environment() -> dict:
    import torch

    env = {
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
    }
    try:
        import cutlass

        env["cutlass_dsl"] = cutlass.__version__
    except Exception:
        env["cutlass_dsl"] = None
    drv = _nvidia_smi("driver_version")
    env["driver"] = drv[0] if drv else None
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        env["sm_count"] = p.multi_processor_count
        env["capability"] = f"{p.major}.{p.minor}"
    return env


# ---------------------------------------------------------------------------------------------
# benchmarks
# ---------------------------------------------------------------------------------------------


PEERS = ("triton",)  # kernels a reader would otherwise use, timed beside cuBLAS on request


def _peer(name: str, a, b):
    """(launch, output) of a peer kernel on these operands, warmed up (Triton autotunes on its first call)."""
    import torch

    if name != "triton":
        raise ValueError(f"unknown peer {name!r}: choose from {', '.join(PEERS)}")
    from . import triton_peer

    out = torch.empty(a.shape[0], b.shape[0], dtype=torch.bfloat16, device=a.device)

    def launch():
        triton_peer.matmul(a, b, out)

    launch()
    torch.cuda.synchronize()
    return launch, out


def bench_step(step, problem: GemmProblem, config=None, warmup: int = 10, repeats: int = 100, rounds: int = 5,
               seed: int = 0, command: str = "", env: Optional[dict] = None, seed_launches: int = 100,
               peers: Sequence[str] = (), b2b_seconds: float = 0.0, b2b_rounds: int = 2, graph: bool = False,
               energy_seconds: float = 0.0, energy_rounds: int = 2, meter: Optional[tuple] = None,
               host_breakdown: bool = False, rotate: bool = False, copy: Optional[float] = None) -> dict:
    """Check, then time ``step`` and cuBLAS (and any ``peers``) interleaved on ``problem``; return a record.

    Then, on request, the step and cuBLAS as a user's loop sees them (:func:`sustained`): back to
    back with the host in the loop (``b2b_seconds`` > 0), in a CUDA graph (``graph``), and their
    energy per GEMM (``energy_seconds`` > 0; ``meter`` is :func:`open_meter`'s pair, opened here when
    not given), and the host's time per launch in parts (``host_breakdown``,
    :func:`host_launch_breakdown`). Without a request the record has none of these fields.

    With ``rotate`` the step and cuBLAS each take enough operand sets in turn (:class:`Rotation`,
    :func:`rotation_sets`) that no launch finds its operands in L2, as in a model whose layers each
    have their own weights (the first set is the one checked; the record's ``rotation`` says how
    many). Every record carries its memory roofline (``bandwidth``, :func:`bandwidth_fields`;
    ``copy``: a measured copy bandwidth to compare with, :func:`copy_tb_s`)."""
    import torch

    from ..runtime import run

    step = ladder.get(step)
    chosen = config is None  # the step's choice for this shape (run.prepare)
    a, b, c = make_inputs(problem, "cuda", seed)
    launch = run.prepare(step, a, b, c, config)
    config = launch.config
    launch()  # JIT and first launch outside the timing
    torch.cuda.synchronize()
    err = relative_error(c, reference(a, b))
    c_ref = torch.empty_like(c)

    def cublas():
        torch.mm(a, b.t(), out=c_ref)

    providers = {"step": launch, "cublas": cublas}
    rotation = None
    if rotate:
        providers, rotation = rotated_providers({"step": launch}, problem, a, b, c_ref, seed)
    peer_outputs = {}
    for name in peers:
        providers[name], peer_outputs[name] = _peer(name, a, b)
    clocks_before = clocks()
    timed = compare(providers, warmup, repeats, rounds, seed_launches)
    clocks_after = clocks()
    ours, theirs = summarize(timed["step"]["each"]), summarize(timed["cublas"]["each"])
    extra, protocol = {}, {}
    if b2b_seconds > 0 or graph or energy_seconds > 0:
        if energy_seconds > 0 and meter is None:
            meter = open_meter(torch.cuda.current_device())
        graphs = None
        if graph:
            from cuda.bindings import driver as cuda

            graphs = {"step": lambda stream: dataclasses.replace(launch, stream=cuda.CUstream(stream.cuda_stream)),
                      "cublas": lambda stream: cublas}
        extra = sustained({"step": launch, "cublas": cublas}, {"step": ours["median"], "cublas": theirs["median"]},
                          b2b_seconds, b2b_rounds, energy_seconds, energy_rounds, graphs,
                          *(meter if energy_seconds > 0 else (None, None)))
        if b2b_seconds > 0 or graph:
            protocol["b2b"] = {"seconds": b2b_seconds, "rounds": b2b_rounds, "graph": graph, "timing": (
                "host in the loop: N launches with no GPU sleep ahead, wall clock around the loop and a synchronize at "
                "its end (b2b_ms) and CUDA events around it (b2b_event_ms), medians over rounds; b2b_graph_ms: the "
                "same N launches captured in one CUDA graph on a side stream, events around a replay")}
        if energy_seconds > 0:
            protocol["energy"] = {"seconds": energy_seconds, "rounds": energy_rounds, "skip_s": ENERGY_SKIP_S,
                                  "source": "NVML nvmlDeviceGetTotalEnergyConsumption (mJ)", "method": (
                                      "back to back, at most two chunks of ~1 ms queued ahead of the host; power "
                                      "between the first and last counter change the host's poll saw, times the "
                                      "block's event-timed ms per launch; SM clock: NVML samples during the blocks")}
    if host_breakdown:
        nan = float("nan")

        def check(fn):
            c.fill_(nan)
            fn()
            torch.cuda.synchronize()
            return relative_error(c, reference(a, b))

        extra["host_launch_breakdown_us"] = host_launch_breakdown(launch, cublas, check)

    def as_tflops(summary, seed_mean):
        return {
            "median": tflops(problem, summary["median"]),
            "min": tflops(problem, summary["max"]),
            "max": tflops(problem, summary["min"]),
            "p10": tflops(problem, summary["p90"]),
            "p90": tflops(problem, summary["p10"]),
            "seed_mean": tflops(problem, seed_mean),
        }

    return {
        "schema": SCHEMA,
        "kind": "bench",
        "step": step.key,
        "title": step.title,
        "config": dataclasses.asdict(config),
        "config_source": records.CHOSEN_PER_SHAPE if chosen else "given",
        "shape": {"m": problem.m, "n": problem.n, "k": problem.k},
        **(env or environment()),
        "clocks_before": clocks_before,
        "clocks_after": clocks_after,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "protocol": {
            "warmup": warmup, "repeats": repeats, "rounds": rounds, "timing": "CUDA events per launch, "
            "step and cuBLAS interleaved by round, in the opposite order every other round, each block queued "
            "behind a GPU sleep (host overhead excluded); seed_mean = mean of seed_launches back-to-back launches",
            "version": 3,
            "seed_launches": seed_launches,
            "inputs": "torch.randn bf16 (fresh, seeded)", "cublas": "torch.mm(a, b.t(), out=c)",
            **protocol,
        },
        "time_ms": ours,
        "cublas_time_ms": theirs,
        "tflops": as_tflops(ours, timed["step"]["seed_mean"]),
        "cublas_tflops": as_tflops(theirs, timed["cublas"]["seed_mean"]),
        "ratio_to_cublas": theirs["median"] / ours["median"],
        "host_launch_us": {"step": timed["step"]["host_launch_us"], "cublas": timed["cublas"]["host_launch_us"]},
        "rel_error": err,
        "bandwidth": bandwidth_fields(problem, ours["median"], theirs["median"], (env or {}).get("gpu")
                                      or torch.cuda.get_device_name(a.device), copy),
        **({"rotation": rotation} if rotation else {}),
        "command": command,
        **extra,
        **({"peers": {name: _peer_entry(name, problem, timed[name], theirs, peer_outputs[name], a, b, as_tflops)
                      for name in peers}} if peers else {}),
    }


def _peer_entry(name, problem, timed, cublas_summary, out, a, b, as_tflops) -> dict:
    summary = summarize(timed["each"])
    entry = {"time_ms": summary, "tflops": as_tflops(summary, timed["seed_mean"]),
             "ratio_to_cublas": cublas_summary["median"] / summary["median"], "rel_error": relative_error(out, reference(a, b))}
    if name == "triton":
        from . import triton_peer

        entry["config"] = triton_peer.best_config(problem.m, problem.n, problem.k)
    return entry
