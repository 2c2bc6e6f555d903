"""Where linear's host time goes, per call, on a course GPU: each part of a call timed on its own.

    python3 scripts/gpu_linear_host.py [--m 16] [--n 4096] [--k 4096] [--calls 300]

A decode GEMM runs for 10-30 us on the GPU; a call of ``gemm_course.linear`` from Python also does
host work (its checks, the route, the CuTe views of the tensors, the launch through the compiled
function). This prints the median microseconds of each part (route_plan, linear's own checks,
run.prepare, the launch alone, a whole call through the custom op) and of F.linear, each over
``--calls`` calls after a warm-up, with the GPU synchronised outside the timed loops.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch
import torch.nn.functional as F

from gemm_course import linear as lin
from gemm_course import run


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
        key, workspace = lin._workspace(plan.step, plan.config, x.device, (args.m, args.n, args.k))
        launcher = run.prepare(plan, x, w, y, workspace=workspace)
        parts = {
            "route_plan (cached)": lambda: lin.route_plan(arch_name, args.m, args.n, args.k),
            "linear's own checks (_operands)": lambda: lin._operands(x, w, None, y, "cuda"),
            "run.prepare with the plan": lambda: run.prepare(plan, x, w, y, workspace=workspace),
            "the launch alone (Launcher())": launcher,
            "a whole call (linear, custom op)": lambda: lin.linear(x, w, out=y),
            "F.linear (cuBLAS)": lambda: F.linear(x, w),
        }
        for name, fn in parts.items():
            fn()
        torch.cuda.synchronize()
        print(f"{torch.cuda.get_device_name(0)}, {plan.step.key} {plan.config}, {args.m}x{args.n}x{args.k}")
        for name, fn in parts.items():
            print(f"{name:40s} {median_us(fn, args.calls):8.1f} us per call (median of {args.calls})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
