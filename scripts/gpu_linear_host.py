"""Where linear's host time goes, per call, on a course GPU: each part of a call timed on its own.

    python3 scripts/gpu_linear_host.py [--m 16] [--n 4096] [--k 4096] [--calls 300]

A decode GEMM runs for 10-30 us on the GPU; a call of ``gemm_course.runtime.linear`` from Python also does
host work (its checks, the route, the CuTe views of the tensors, the launch through the compiled
function). This prints the median microseconds of each part (route_plan, linear's own checks,
run.prepare, the launch alone, a kept call's launch with views per call and with kept arguments, a
whole call through the custom op, with kept arguments off, as by default, and on, and with direct
calls too) and of F.linear,
each over ``--calls`` calls after a warm-up, with the GPU synchronised outside the timed loops.
Before the timings, both kept launches are checked against F.linear on the same inputs.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch
import torch.nn.functional as F

from gemm_course.runtime import linear as lin
from gemm_course.runtime import linear_checks, linear_kept, run
from gemm_course.runtime.problem import relative_error


def median_us(fn, calls: int) -> float:
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    torch.cuda.synchronize()
    return statistics.median(times) * 1e6


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--m", type=int, default=16)
    p.add_argument("--n", type=int, default=4096)
    p.add_argument("--k", type=int, default=4096)
    p.add_argument("--calls", type=int, default=300)
    args = p.parse_args(argv)
    x = torch.randn(args.m, args.k, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(args.n, args.k, device="cuda", dtype=torch.bfloat16)
    y = torch.empty(args.m, args.n, device="cuda", dtype=torch.bfloat16)
    with torch.inference_mode():
        lin.linear(x, w, out=y)  # compile, scratch
        torch.cuda.synchronize()
        arch_name = lin.machine_arch()
        plan = lin.route_plan(arch_name, args.m, args.n, args.k)
        key, workspace = linear_kept._workspace(plan.step, plan.config, x.device, (args.m, args.n, args.k))
        launcher = run.prepare(plan, x, w, y, workspace=workspace)
        # kept arguments take over a launcher's views: one of their own
        relaunch, kept = launcher.relauncher(), run.KeptArguments(run.prepare(plan, x, w, y, workspace=workspace))
        for name, launch in (("views per call", relaunch), ("kept arguments", kept)):
            z = torch.full_like(y, float("nan"))
            x2 = torch.randn_like(x)
            launch(x2, w, z)
            err = relative_error(z, F.linear(x2.float(), w.float()))
            print(f"a kept call's launch, {name}: rel. error {err:.2e} against float32")
            if not err < run.TOLERANCE:
                return 1

        whole_call = lambda: lin.linear(x, w, out=y)  # noqa: E731
        defaults = linear_kept._kept_arguments, linear_kept._direct_calls
        off, kept_only, both = (False, False), (True, False), (True, True)
        parts = {  # name: ((kept arguments, direct calls) for linear, the part)
            "route_plan (cached)": (off, lambda: lin.route_plan(arch_name, args.m, args.n, args.k)),
            "linear's own checks (_operands)": (off, lambda: linear_checks._operands(x, w, None, y, "cuda")),
            "run.prepare with the plan": (off, lambda: run.prepare(plan, x, w, y, workspace=workspace)),
            "the launch alone (Launcher())": (off, launcher),
            "a kept launch, views per call (Relauncher)": (off, lambda: relaunch(x, w, y)),
            "a kept launch, kept arguments": (off, lambda: kept(x, w, y)),
            "a whole call, both options off (custom op)": (off, whole_call),
            "a whole call, kept arguments": (kept_only, whole_call),
            "a whole call, + direct calls (the default)": (both, whole_call),
            "F.linear (cuBLAS)": (off, lambda: F.linear(x, w)),
        }
        print(f"{torch.cuda.get_device_name(0)}, {plan.step.key} {plan.config}, {args.m}x{args.n}x{args.k}")
        for name, ((kept_arguments, direct_calls), fn) in parts.items():
            lin.use_kept_arguments(kept_arguments)  # forgets kept calls: the warm-up call keeps one again
            lin.use_direct_calls(direct_calls)
            fn()
            torch.cuda.synchronize()
            print(f"{name:44s} {median_us(fn, args.calls):8.1f} us per call (median of {args.calls})")
        lin.use_kept_arguments(defaults[0])  # as they were before the timing
        lin.use_direct_calls(defaults[1])
    return 0


if __name__ == "__main__":
    sys.exit(main())
