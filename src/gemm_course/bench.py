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

Records are JSON files under ``results/<gpu-slug>/``, written by :func:`write_records`;
:mod:`gemm_course.records` reads and queries them (``load_records``, ``latest`` and ``RESULTS_DIR``
are also reachable from here, where the chapters look for them).
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import platform
import statistics
import subprocess
from typing import Callable, Optional, Sequence

from . import ladder, records
from .problem import GemmProblem, make_inputs, reference, relative_error
from .records import RESULTS_DIR, latest, load_records  # noqa: F401  (the chapters call bench.load_records, bench.latest)

SCHEMA = 1


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
    import time

    import torch

    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(launches):
        fn()
    t = (time.perf_counter() - t0) / launches
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


def gpu_slug(name: str) -> str:
    return "".join(ch if ch.isalnum() else "-" for ch in name.lower()).strip("-")


# ---------------------------------------------------------------------------------------------
# benchmarks
# ---------------------------------------------------------------------------------------------


# ---------------------------------------------------------------------------------------------
# the broad sweep: the shape classes the final kernel is judged on
# ---------------------------------------------------------------------------------------------

SWEEP_SQUARES = (2048, 3072, 4096, 6144, 7168, 8192, 10240, 12288, 16384)
LLM_MS = (4096, 8192, 16384)
LLM_NKS = (1536, 2048, 3584, 4096, 5120, 7168, 11008, 14336, 28672)
FEW_WAVE_MNS = (1024, 2048, 3072)
FEW_WAVE_KS = (8192, 16384, 32768)


def broad_sweep_shapes() -> dict:
    """{class: [(m, n, k), ...]}: squares 2048-16384 (non-powers of two included); LLM shapes, for
    each M every N and every K once (a Latin square over the nine values: 27 of the 243); few-wave
    long-K shapes, every (M, N) pair with the three Ks in turn, plus 2304 x 2304 x 9216."""
    values = len(LLM_NKS)
    llm = [(m, LLM_NKS[j], LLM_NKS[(j + 3 * i + 1) % values]) for i, m in enumerate(LLM_MS) for j in range(values)]
    pairs = [(m, n) for m in FEW_WAVE_MNS for n in FEW_WAVE_MNS]
    few = [(m, n, FEW_WAVE_KS[(i + i // 3) % len(FEW_WAVE_KS)]) for i, (m, n) in enumerate(pairs)] + [(2304, 2304, 9216)]
    return {"square": [(s, s, s) for s in SWEEP_SQUARES], "llm": llm, "few-wave long-K": few}


def shape_class(m: int, n: int, k: int) -> str:
    """The broad sweep's class of a shape (``other`` outside it)."""
    for name, shapes in broad_sweep_shapes().items():
        if (m, n, k) in shapes:
            return name
    return "other"


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
               peers: Sequence[str] = ()) -> dict:
    """Check, then time ``step`` and cuBLAS (and any ``peers``) interleaved on ``problem``; return a record."""
    import torch

    from . import run

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
    peer_outputs = {}
    for name in peers:
        providers[name], peer_outputs[name] = _peer(name, a, b)
    clocks_before = clocks()
    timed = compare(providers, warmup, repeats, rounds, seed_launches)
    clocks_after = clocks()
    ours, theirs = summarize(timed["step"]["each"]), summarize(timed["cublas"]["each"])

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
        },
        "time_ms": ours,
        "cublas_time_ms": theirs,
        "tflops": as_tflops(ours, timed["step"]["seed_mean"]),
        "cublas_tflops": as_tflops(theirs, timed["cublas"]["seed_mean"]),
        "ratio_to_cublas": theirs["median"] / ours["median"],
        "host_launch_us": {"step": timed["step"]["host_launch_us"], "cublas": timed["cublas"]["host_launch_us"]},
        "rel_error": err,
        "command": command,
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


def write_records(records: list, tag: str, out_dir: Optional[str] = None) -> str:
    """Write one JSON file of records under ``results/<gpu-slug>/``; return its path."""
    if not records:
        raise ValueError("no records to write")
    gpu = records[0].get("gpu") or "unknown-gpu"
    folder = out_dir or os.path.join(RESULTS_DIR, gpu_slug(gpu))
    os.makedirs(folder, exist_ok=True)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    path = os.path.join(folder, f"{stamp}_{tag}.json")
    with open(path, "w") as f:
        f.write(dump_records(records))
    return path


def dump_records(records: list, schema: int = SCHEMA) -> str:
    """A records file's text: one compact JSON line per record, so files stay small (the tree travels
    to the GPU machine) and a diff still shows records one by one."""
    lines = ",\n".join(json.dumps(r, sort_keys=True, separators=(",", ":")) for r in records)
    return f'{{"schema": {schema}, "records": [\n{lines}\n]}}\n'
