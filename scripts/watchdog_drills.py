"""Deliberately broken copies of Hopper kernels, run as watchdog debug builds (GPU machine).

    python3 scripts/watchdog_drills.py OUT          # every drill, each in its own process; a table last
    python3 scripts/watchdog_drills.py --list       # the drills and the barrier each must name

Each drill copies the course's Hopper kernels (``kernel_copies``, under ``.cache/kernels/``), breaks
one synchronisation in the copy, and launches it with ``GEMM_COURSE_WATCHDOG`` set in a child
process with a time limit. A drill passes when the child's kernel traps within the limit and its
watchdog report names the barrier the drill broke. A broken copy that finishes instead is checked
against the float32 reference (a bug that shows as wrong numbers, not as a hang). Logs: OUT/drills.log.
"""

import argparse
import os
import re
import subprocess
import sys
import time

from kernel_copies import ROOT, step_from, write_package

KERNELS = os.path.join(ROOT, "src", "gemm_course", "kernels", "sm90")
BOUND_S = 2.0  # the drills' watchdog bound: short, so that a drill takes seconds
LIMIT_S = 240  # a child that outlives this has hung despite the watchdog (or compiles slowly)

RELEASE = "            mainloop_pipeline.consumer_release(release_state)\n"
ADVANCE = "            release_state.advance()\n            read_state.advance()"
# name: (step, file, the line to change, its replacement, what the report must name, shape M,N,K);
# FAULT: the right outcome is the GPU stopping the kernel at once, with no hang to report
FAULT = "a launch failure without a hang"
DRILLS = {
    "wrong_expect_tx": (
        "sm90/2", "step02_wgmma_tma.py",
        "cute.arch.mbarrier_arrive_and_expect_tx(full_barrier, tma_bytes)",
        "cute.arch.mbarrier_arrive_and_expect_tx(full_barrier, tma_bytes + 128)",
        "mbarrier_wait(full_barrier, phase)", (256, 256, 512),
    ),
    "missing_arrive": (
        "sm90/6", "step06_warp_specialized.py",
        RELEASE + ADVANCE,
        ADVANCE,
        "producer_acquire", (256, 256, 1024),
    ),
    "double_release": (
        "sm90/6", "step06_warp_specialized.py",
        RELEASE + ADVANCE,
        RELEASE + RELEASE + ADVANCE,
        FAULT, (256, 256, 1024),  # an arrival past the barrier's count: on the H200, an error at once
    ),
}


def make_copy(name: str) -> object:
    """The broken copy's ladder step (package ``drill_NAME``)."""
    from gemm_course.runtime import ladder

    step_key, file_name, old, new, _, _ = DRILLS[name]
    files = {}
    for entry in sorted(os.listdir(KERNELS)):
        if entry.endswith(".py"):
            with open(os.path.join(KERNELS, entry)) as f:
                files[entry] = f.read()
    text = files[file_name]
    if text.count(old) < 1:
        raise SystemExit(f"drill {name}: {file_name} no longer has the line to break: {old!r}")
    files[file_name] = text.replace(old, new, 1)
    write_package(f"drill_{name}", files)
    return step_from(f"drill_{name}", ladder.get(step_key))


def child(name: str) -> int:
    """Run one drill here (a process of its own: a trap leaves the CUDA context unusable)."""
    import torch

    from gemm_course.runtime import run
    from gemm_course.runtime.problem import GemmProblem, make_inputs, reference, relative_error

    os.environ["GEMM_COURSE_WATCHDOG"] = str(BOUND_S)
    step = make_copy(name)
    m, n, k = DRILLS[name][5]
    a, b, c = make_inputs(GemmProblem(m, n, k), "cuda", seed=7)
    launch = run.prepare(step, a, b, c)
    print(f"drill {name}: launching the broken copy of {DRILLS[name][0]} at {m}x{n}x{k}", flush=True)
    t0 = time.perf_counter()
    try:
        launch()
        torch.cuda.synchronize()
    except Exception as e:  # the trap surfaces as a launch failure at the next synchronisation
        print(f"drill {name}: kernel stopped after {time.perf_counter() - t0:.1f} s: {type(e).__name__}: {e}", flush=True)
        return 3
    err = relative_error(c, reference(a, b))
    print(f"drill {name}: kernel finished in {time.perf_counter() - t0:.1f} s, rel. error {err:.2e}"
          f" ({'wrong' if not err < run.TOLERANCE else 'right'} numbers)", flush=True)
    return 4 if not err < run.TOLERANCE else 0


def verdict(name: str, rc: int, output: str) -> tuple:
    """(passed, what happened) for one drill's child process."""
    from gemm_course.runtime import watchdog

    expected = DRILLS[name][4]
    reports = watchdog.parse_reports(output)
    if rc in (124, -9):
        return False, f"hung: no exit within {LIMIT_S} s"
    if expected == FAULT:
        if rc == 3 and not reports:
            return True, "the GPU stopped the kernel at once (no hang, no watchdog report)"
        return False, f"expected {FAULT}; got exit {rc} with {len(reports)} watchdog reports"
    if rc == 3 and reports:
        named = [line for _, line in reports if expected and expected in line]
        top = reports[0][1].split(" waiting on ")[-1]
        if expected and not named:
            return False, f"trapped, but named {top!r}, not {expected!r}"
        others = sorted({line.split(" waiting on ")[-1].split(" at ")[0] for _, line in reports})
        return True, f"trapped; {sum(n for n, _ in reports)} warp reports on {len(others)} barrier(s): {'; '.join(others)}"
    if rc == 3:
        return False, "the kernel failed without a watchdog report"
    if rc == 4:
        return not expected, "finished with wrong numbers (no hang to report)"
    if rc == 0:
        return not expected, "finished with right numbers"
    return False, f"child exited {rc}"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", nargs="?")
    p.add_argument("--one", help=argparse.SUPPRESS)
    p.add_argument("--list", action="store_true", help="print the drills and exit")
    p.add_argument("--only", nargs="*", help="run only these drills")
    args = p.parse_args(argv)
    if args.one:
        return child(args.one)
    if args.list or not args.out:
        for name, (step, file_name, _, _, expected, shape) in DRILLS.items():
            print(f"{name}: {step} ({file_name}) at {'x'.join(map(str, shape))}; the report must name "
                  f"{expected!r}" if expected else f"{name}: {step} ({file_name}); any outcome is reported")
        return 0
    os.makedirs(args.out, exist_ok=True)
    rows, failed = [], 0
    with open(os.path.join(args.out, "drills.log"), "w") as log:
        for name in args.only or DRILLS:
            t0 = time.time()
            try:
                proc = subprocess.run([sys.executable, __file__, "--one", name], capture_output=True, text=True,
                                      timeout=LIMIT_S, cwd=ROOT)
                rc, output = proc.returncode, proc.stdout + proc.stderr
            except subprocess.TimeoutExpired as e:
                rc, output = 124, (e.stdout or b"").decode(errors="replace") + (e.stderr or b"").decode(errors="replace")
            seconds = time.time() - t0
            ok, what = verdict(name, rc, output)
            failed += not ok
            log.write(f"==== drill {name} (exit {rc}, {seconds:.0f} s)\n{output}\n")
            rows.append((name, DRILLS[name][0], "pass" if ok else "FAIL", f"{seconds:.0f} s", what))
    print(f"{'drill':<18} {'step':<7} {'result':<6} {'time':>6}  what happened")
    for name, step, result, seconds, what in rows:
        print(f"{name:<18} {step:<7} {result:<6} {seconds:>6}  {re.sub(chr(10), ' ', what)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
