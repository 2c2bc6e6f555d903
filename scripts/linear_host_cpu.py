"""linear's host time per call without a GPU: each part that runs on the CPU, timed on its own.

    python3 scripts/linear_host_cpu.py [--m 16] [--n 4096] [--k 4096] [--calls 3000] [--no-compile]

CPU tensors stand in for CUDA ones; the numbers are this CPU's, with no GPU (a GPU's host adds the
CUDA calls: the stream, the allocator, the launch itself; ``scripts/gpu_linear_host.py`` times those).
Printed: the median microseconds over ``--calls`` calls of each part (linear's own checks, the
route, the GEMM's tensor checks, the CuTe views, the launcher, the launch's argument marshalling)
and of a whole call of ``linear`` through its custom op with the GPU faked: everything up to the
compiled function's C call, which is replaced by its argument marshalling: with both of linear's
options off, then with kept arguments (``linear.use_kept_arguments``) and direct calls
(``linear.use_direct_calls``), on by default, rows marked (opt.). Without
``--no-compile`` the step is compiled on the CPU (sm_90a, fake operands) so that the marshalling
is the compiled function's own.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import statistics
import sys
import time
import types

import torch

from gemm_course.runtime import arch, linear_checks, linear_kept, problem, run
from gemm_course.runtime import linear as lin

H100 = arch.Machine("NVIDIA H100 80GB HBM3 (faked)", (9, 0), 132, "sm_90a")


def median_us(fn, calls: int) -> float:
    for _ in range(min(calls, 100)):
        fn()
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e6


@contextlib.contextmanager
def faked_gpu(compiled):
    """linear on CPU tensors: a course GPU, its stream and device index, CPU tensors taken as on
    it, and the compiled function's C call replaced by ``compiled`` (its marshalling, or nothing)."""
    saved = []

    def patch(owner, name, value):
        if hasattr(owner, name):
            saved.append((owner, name, getattr(owner, name)))
            setattr(owner, name, value)

    on_cpu = functools.partial(problem.validate, device_type="cpu")
    patch(arch, "machine", lambda: H100)
    for module in (run, lin):
        patch(module, "validate", on_cpu)
    patch(lin, "validate_gemm", on_cpu)
    patch(linear_checks, "_device_rule", lambda weight, bias, device_type: "")
    patch(linear_kept, "_KEPT_DEVICE_TYPE", "cpu")  # CPU tensors take the kept path
    patch(torch.cuda, "current_device", lambda: None)  # a CPU tensor's device index
    stream = types.SimpleNamespace(cuda_stream=7)
    patch(torch.cuda, "current_stream", lambda device=None: stream)
    patch(torch.cuda, "is_current_stream_capturing", lambda: False)

    def allocate(step, config, device):
        tensors = tuple(torch.zeros(shape, dtype=getattr(torch, dtype), device=device)
                        for dtype, shape in arch.workspace_shapes(step, config))
        return run.Workspace(step.key, config, torch.device(device), tensors, arch.runtime_workspace(tensors))

    patch(run, "allocate_workspace", allocate)

    def compile_plan(plan, operands=None, shape_class="runtime"):
        return arch.Artifacts(plan.step.key, plan.config, plan.target, shape_class, "", b"", compiled)

    patch(arch, "compile_plan", compile_plan)
    lin.clear_cache()
    try:
        yield
    finally:
        for owner, name, value in reversed(saved):
            setattr(owner, name, value)
        lin.clear_cache()


class Marshalling:
    """A compiled function with its C call left out: it marshals its arguments and launches nothing."""

    def __init__(self, real):
        self.execution_args = real.execution_args

    def __call__(self, *args):
        self.execution_args.generate_execution_args(args, {})

    def run_compiled_program(self, exe_args):
        pass


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--m", type=int, default=16)
    p.add_argument("--n", type=int, default=4096)
    p.add_argument("--k", type=int, default=4096)
    p.add_argument("--calls", type=int, default=3000)
    p.add_argument("--no-compile", action="store_true", help="skip the compile: the launch's marshalling is not timed")
    args = p.parse_args(argv)
    m, n, k = args.m, args.n, args.k
    x = torch.randn(m, k).to(torch.bfloat16)
    w = torch.randn(n, k).to(torch.bfloat16)
    y = torch.empty(m, n, dtype=torch.bfloat16)
    plan = lin.route_plan("sm90", m, n, k)  # before the GPU is faked: step 11's rule would probe it
    if args.no_compile:
        real = None
        compiled = lambda *a: None  # noqa: E731
    else:
        real = arch.compile_plan(plan, shape_class="dynamic").compiled  # fake operands: the same signature
        compiled = Marshalling(real)
    workspace = arch.runtime_workspace(tuple(torch.zeros(s, dtype=getattr(torch, d)) for d, s in plan.workspace))
    views = arch.runtime_operands(x, w, y)

    def views_and_marshal():
        compiled(*arch.call_arguments(arch.runtime_operands(x, w, y) + workspace, 7))

    from cuda.bindings import driver as cuda

    parts = {
        "route_plan (cached)": lambda: lin.route_plan("sm90", m, n, k),
        "linear's own checks (_operands)": lambda: linear_checks._operands(x, w, None, y, "cpu"),
        "problem.validate (run.prepare's)": lambda: problem.validate(x, w, y, device_type="cpu"),
        "CuTe views of A, B, C": lambda: arch.runtime_operands(x, w, y),
        "CUstream + Launcher()": lambda: run.Launcher(plan.step, plan.config, plan.problem, None, views,
                                                      cuda.CUstream(7), ()),
    }
    if real is not None:
        parts["marshalling, views made once"] = lambda: compiled(*arch.call_arguments(views + workspace, 7))
        parts["CuTe views + marshalling"] = views_and_marshal
        art = arch.Artifacts(plan.step.key, plan.config, plan.target, "runtime", "", b"", compiled)
        launcher = run.Launcher(plan.step, plan.config, plan.problem, art, views + workspace, cuda.CUstream(7))
        if hasattr(launcher, "relauncher"):
            parts["a kept launch, views per call (Relauncher)"] = functools.partial(launcher.relauncher(), x, w, y)
        if hasattr(run, "KeptArguments"):  # it takes over the launcher's views: a launcher of its own
            own = run.Launcher(plan.step, plan.config, plan.problem, art, arch.runtime_operands(x, w, y) + workspace,
                               cuda.CUstream(7))
            parts["a kept launch, kept arguments"] = functools.partial(run.KeptArguments(own), x, w, y)
    kept_option = real is not None and hasattr(lin, "use_kept_arguments")
    defaults = (linear_kept._kept_arguments, linear_kept._direct_calls) if kept_option else None
    with torch.inference_mode(), faked_gpu(compiled):
        parts["whole call: linear(x, w, out=y), GPU faked"] = lambda: lin.linear(x, w, out=y)
        parts["whole call: linear(x, w), GPU faked"] = lambda: lin.linear(x, w)
        parts["the op's body alone (_linear, out=y)"] = lambda: lin._linear(x, w, None, y)
        if hasattr(linear_kept, "_signature"):
            parts["the call's signature (_signature)"] = lambda: linear_kept._signature(x, w, None, y)
        if kept_option:
            parts["whole call, out=y, kept arguments (opt.)"] = lambda: lin.linear(x, w, out=y)
            parts["whole call, kept arguments (opt.)"] = lambda: lin.linear(x, w)
            parts["whole call, out=y, + direct calls (opt.)"] = lambda: lin.linear(x, w, out=y)
            parts["whole call, + direct calls (opt.)"] = lambda: lin.linear(x, w)
        print(f"this CPU, no GPU: {plan.step.key} {m}x{n}x{k}, median of {args.calls} calls")
        for name, fn in parts.items():
            if kept_option:
                lin.use_kept_arguments("(opt.)" in name)
                lin.use_direct_calls("direct calls" in name)
            print(f"{name:48s} {median_us(fn, args.calls):8.1f} us")  # its warm-up makes the first calls
        if kept_option:
            lin.use_kept_arguments(defaults[0])  # as they were before the timing
            lin.use_direct_calls(defaults[1])
    return 0


if __name__ == "__main__":
    sys.exit(main())
