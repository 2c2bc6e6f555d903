"""Timing a launch on the GPU, and the host's time per launch.

The host clock of every wall-clock measurement of the bench (:data:`_now`; the tests replace it
here, and :mod:`.user_loop` and :mod:`.energy` read it from here), per-launch CUDA events behind a
GPU sleep (:func:`time_each`), the seed's block mean (:func:`time_block`), providers timed
interleaved round by round (:func:`compare`), and the host's time per call of a prepared launcher
and its parts (:func:`host_launch_breakdown`). :mod:`gemm_course.measure.bench` describes the
protocol and re-exports these names.
"""

from __future__ import annotations

import statistics
import time
from typing import Callable, Optional

from ..runtime.problem import GemmProblem

# the host clock of every wall-clock measurement of the bench; user_loop and energy call it as timing._now(), so that
# the tests' one patch of it here reaches them all
_now = time.perf_counter


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
