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

Where each part lives (every name is re-exported here, where the chapters, scripts and tests call
it: ``bench.compare``, ``bench.sustained``, ...): :mod:`.timing` (the host clock, per-launch
events, :func:`compare`, :func:`host_launch_breakdown`), :mod:`.bandwidth` (the memory roofline,
:class:`Rotation`), :mod:`.user_loop` (back to back, CUDA graphs, :func:`sustained`),
:mod:`.energy` (NVML's counter), :mod:`.environment` (provenance: :func:`environment`,
:func:`clocks`); here, :func:`bench_step`, which makes a record of them, the peers timed beside
cuBLAS and :func:`bench_seconds`. A patch of a name takes effect where its caller reads it:
:func:`bench_step`'s helpers here, :func:`compare`'s in :mod:`.timing`, :func:`sustained`'s in
:mod:`.user_loop`, the host clock ``timing._now``.

Records are JSON files under ``results/<gpu-slug>/``, written by :func:`write_records`;
:mod:`gemm_course.measure.records` holds the writer and the schema, reads and queries the records (``write_records``,
``load_records``, ``latest``, ``RESULTS_DIR`` and the broad sweep's shapes are also reachable from here,
where the chapters and scripts look for them). This module imports :mod:`gemm_course.measure.records`,
never the other way round.
"""

from __future__ import annotations

import dataclasses
import datetime
from typing import Optional, Sequence

from ..runtime import ladder
from ..runtime.problem import GemmProblem, make_inputs, reference, relative_error
from . import records
from .bandwidth import (  # noqa: F401  (re-exported)
    DATASHEET_TB_S,
    ROTATE_CACHE_FACTOR,
    Rotation,
    bandwidth_fields,
    copy_tb_s,
    datasheet_tb_s,
    line_fit,
    rotated_providers,
    rotation_sets,
)
from .energy import ENERGY_SKIP_S, EnergyMeter, energy_block, energy_fields, open_meter  # noqa: F401  (re-exported)
from .environment import clocks, environment, provenance_command  # noqa: F401  (re-exported)
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
from .timing import (  # noqa: F401  (re-exported)
    compare,
    host_launch_breakdown,
    host_seconds_per_launch,
    summarize,
    tflops,
    time_block,
    time_each,
)
from .user_loop import (  # noqa: F401  (re-exported)
    B2B_MAX_LAUNCHES,
    B2B_MIN_LAUNCHES,
    b2b_launches,
    back_to_back,
    capture_graph,
    graph_back_to_back,
    sustained,
)


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


class WrongOutput(RuntimeError):
    """The step's output did not match the float32 reference: a kernel that is wrong is never timed."""


def bench_step(step, problem: GemmProblem, config=None, warmup: int = 10, repeats: int = 100, rounds: int = 5,
               seed: int = 0, command: str = "", env: Optional[dict] = None, seed_launches: int = 100,
               peers: Sequence[str] = (), b2b_seconds: float = 0.0, b2b_rounds: int = 2, graph: bool = False,
               energy_seconds: float = 0.0, energy_rounds: int = 2, meter: Optional[tuple] = None,
               host_breakdown: bool = False, rotate: bool = False, copy: Optional[float] = None) -> dict:
    """Check, then time ``step`` and cuBLAS (and any ``peers``) interleaved on ``problem``; return a record.
    A step whose output misses the float32 reference (``run.TOLERANCE``) raises :class:`WrongOutput`
    before anything is timed, so every record is of a checked launch.

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
    if not err < run.TOLERANCE:  # NaN too: a poisoned element left unwritten
        raise WrongOutput(f"{step.key} {problem.label} ({config}): relative error {err:.2e} against float32 on a "
                          f"NaN-poisoned output, tolerance {run.TOLERANCE:g}; nothing was timed or recorded. "
                          f"`gemm-course check {step.key} --shapes {problem.m}x{problem.n}x{problem.k}` runs the same "
                          f"check with the step's own choice.")
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
