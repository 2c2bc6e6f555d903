"""One process per step: check each step of a ladder in a debug build, then as timed, each in a child
process with a time limit, so that a step that hangs or traps is reported and the run goes on.

    python -m gemm_course.measure.stepwise run OUT sm100/1 sm100/2 ...   # the table last
    python -m gemm_course.measure.stepwise run OUT --arch sm90            # every step of an architecture
    python -m gemm_course.measure.stepwise check sm100/5 --mode debug     # one child (what `run` starts)
    python -m gemm_course.measure.stepwise table OUT                      # the table of the last run
    python -m gemm_course.measure.stepwise passed OUT                     # the steps that passed, one line

Per step, in order, each phase only if the one before passed:

1. ``debug``: a watchdog build (``GEMM_COURSE_WATCHDOG``, :mod:`gemm_course.runtime.watchdog`) on small
   shapes, ragged ones included (K = 72 and 200, partial tiles where the step takes them): a wait
   that never completes prints which barrier and traps within the bound instead of hanging;
2. ``timed``: the build that is timed, on the GPU tests' random shapes (``run.shapes_for``);
3. ``sanitizer``: compute-sanitizer's memcheck on the debug shapes, where a sanitizer is given.

A child that exits non-zero, prints a wrong result or outlives its limit fails its step; its log is
kept as ``OUT/step_<arch>-<n>_<phase>.log`` and the table names the first watchdog report, the
first wrong shape or the time-out. ``OUT/stepwise/summary.json`` keeps the table's rows and the
steps that passed, which are what the B200 kit times.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Callable, Optional

PHASES = ("debug", "timed", "sanitizer")
LIMITS_S = {"debug": 600, "timed": 900, "sanitizer": 1800}
DEBUG_BOUND_S = 5.0
# small shapes, ragged in K (72 and 200: TMA boxes that end past K) and in M and N where the step allows
DEBUG_SHAPES = [(256, 256, 64), (128, 256, 72), (384, 512, 200), (200, 264, 136), (1000, 1000, 1000)]
# persistent steps (8 on): more tiles than a wave, so CTAs loop (and CLC cancels on a B200)
MANY_TILES = [(4096, 2048, 64)]
# step 11: grids whose last wave is cut along K (schedule.tail_parts), one with ragged edges
SPLIT_TAILS = [(1024, 1024, 4096), (1000, 1000, 4000)]
# steps built for the memory roofline (step 12): decode-sized GEMMs, one token to 256, split along K
DECODE = [(1, 4096, 4096), (16, 1024, 520), (100, 2048, 1000), (256, 1024, 4096)]


def debug_shapes(step) -> list:
    """``DEBUG_SHAPES`` that ``step`` takes, each rounded up to a tile it takes if it refuses it."""
    from ..runtime.problem import GemmProblem

    out = []
    extra = (MANY_TILES if step.number >= 8 else []) + (SPLIT_TAILS if step.number >= 11 else [])
    extra += DECODE if step.roofline == "memory" else []
    for m, n, k in DEBUG_SHAPES + extra:
        for tm, tn in ((1, 1), (64, 256), (128, 256), (128, 128), (256, 256)):
            shape = (-(-m // tm) * tm, -(-n // tn) * tn, k)
            if step.can_implement(GemmProblem(*shape))[0]:
                if shape not in out:
                    out.append(shape)
                break
    return out


def shapes_for(key: str, mode: str) -> list:
    from ..runtime import ladder, run

    step = ladder.get(key)
    if mode == "timed":
        shapes = run.shapes_for(step, count=6, seed=step.number)
        return [s for s in shapes if s[0] * s[1] * s[2] <= 2**31] if step.any_shape else shapes
    return debug_shapes(step)


def check(key: str, mode: str) -> int:
    """The child: check ``key`` on ``mode``'s shapes, one line per shape; exit 1 if any is wrong."""
    from ..runtime import run

    if mode == "debug":
        os.environ.setdefault("GEMM_COURSE_WATCHDOG", str(DEBUG_BOUND_S))
    else:  # the build that is timed, whatever the caller's environment says
        os.environ.pop("GEMM_COURSE_WATCHDOG", None)
    shapes = shapes_for(key, mode)
    print(f"{key} ({mode}): {len(shapes)} shapes", flush=True)
    bad = 0
    for i, shape in enumerate(shapes):
        t0 = time.perf_counter()
        result = run.check(key, [shape], seed=1000 + i)[0]
        bad += not result.ok
        print(f"{result} ({time.perf_counter() - t0:.1f} s)", flush=True)
    print(f"{len(shapes) - bad} ok, {bad} wrong", flush=True)
    return 1 if bad else 0


def child_command(key: str, phase: str, sanitizer: Optional[str] = None) -> list:
    """The command line of ``key``'s ``phase``."""
    mode = "debug" if phase == "sanitizer" else phase
    cmd = [sys.executable, "-m", "gemm_course.measure.stepwise", "check", key, "--mode", mode]
    if phase == "sanitizer":
        cmd = [sanitizer, "--tool", "memcheck", "--error-exitcode", "86"] + cmd
    return cmd


def why_failed(rc: Optional[int], output: str, limit: float) -> str:
    """One line: what stopped a failed phase (time-out, the first watchdog report, a wrong shape...)."""
    from ..runtime import watchdog

    reports = watchdog.parse_reports(output)
    if reports:
        first = reports[0][1].split(" waiting on ", 1)[-1]
        return f"watchdog: {first} ({sum(n for n, _ in reports)} warp reports)"
    if rc is None:
        return f"hung: no exit within {limit:.0f} s"
    lines = output.splitlines()
    wrong = [line for line in lines if line.endswith(" FAIL")]
    if wrong:
        return f"wrong result: {wrong[0]}" + (f" (+{len(wrong) - 1} more)" if len(wrong) > 1 else "")
    errors = [line for line in lines if "Error" in line or "error" in line or "FAILED" in line]
    if rc == 86:
        return "memcheck: " + (next((line for line in lines if line.startswith("=========")), "errors found"))
    return f"exit {rc}" + (f": {errors[-1].strip()[:200]}" if errors else "")


# the process groups of the children running now, and whether the runner is stopping: an interrupt or
# SIGTERM reaches the main thread, which waits on the pool, while a worker thread waits on each child
_RUNNING: set = set()
_STOPPING = threading.Event()


def end_children() -> None:
    """Stops the run: no further child starts, and every running one is killed with its own children."""
    _STOPPING.set()
    for pgid in list(_RUNNING):
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def run_phase(cmd: list, limit: float, log_path: str) -> tuple:
    """(passed, return code or None on time-out, output, seconds). The child runs in a session of its
    own, and a time-out kills the whole session: a sanitizer's Python child with a hung kernel too."""
    t0 = time.time()
    if _STOPPING.is_set():
        raise KeyboardInterrupt("the run is stopping")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL,
                            start_new_session=True)
    _RUNNING.add(proc.pid)
    try:
        stdout, stderr = proc.communicate(timeout=limit)
        rc = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        rc = None
    except BaseException:  # Ctrl-C reaches only this process (the child has a session of its own): end the child too
        os.killpg(proc.pid, signal.SIGKILL)
        raise
    finally:
        _RUNNING.discard(proc.pid)
    output = (stdout or "") + (stderr or "")
    seconds = time.time() - t0
    with open(log_path, "w") as f:
        f.write(f"$ {' '.join(cmd)}\n{output}\n# exit {rc if rc is not None else 'none: killed at the limit'}, "
                f"{seconds:.0f} s\n")
    return rc == 0, rc, output, seconds


def run_step(out: str, key: str, sanitizer: Optional[str], limits: dict, command: Callable) -> dict:
    """Every phase of one step, in order, each only if the one before passed: a row of the table."""
    row = {"step": key, **{phase: "-" for phase in PHASES}, "failed": "", "seconds": 0.0}
    for phase in PHASES:
        if phase == "sanitizer" and not sanitizer:
            row[phase] = "skipped"
            continue
        log = os.path.join(out, f"step_{key.replace('/', '-')}_{phase}.log")
        ok, rc, output, seconds = run_phase(command(key, phase, sanitizer), limits[phase], log)
        row["seconds"] += seconds
        row[phase] = "ok" if ok else ("hung" if rc is None else "FAILED")
        print(f"{key} {phase}: {row[phase]} ({seconds:.0f} s)", flush=True)
        if not ok:
            row["failed"] = f"{phase}: {why_failed(rc, output, limits[phase])}"
            print(f"  {key} {row['failed']}", flush=True)
            break
    row["passed"] = not row["failed"]
    return row


def run_steps(out: str, keys: list, sanitizer: Optional[str] = None, limits: Optional[dict] = None,
              command: Callable = child_command, jobs: int = 1) -> list:
    """Every phase of every step in ``keys``, a child each (``jobs`` steps at a time; the GPU is shared,
    the compiles run on the CPU's cores); rows of the table (and OUT/stepwise/summary.json). Ctrl-C or
    SIGTERM (under ``main``) ends the running children and raises ``KeyboardInterrupt``: the summary
    keeps what ended."""
    from concurrent.futures import ThreadPoolExecutor

    limits = {**LIMITS_S, **(limits or {})}
    os.makedirs(os.path.join(out, "stepwise"), exist_ok=True)
    done, lock = {}, threading.Lock()

    def one(key):  # the summary is rewritten as each step ends: a run cut short keeps what passed
        row = run_step(out, key, sanitizer, limits, command)
        if _STOPPING.is_set():  # its child was killed by the stop, not failed by the step
            return row
        with lock:
            done[key] = row
            save_summary(out, [done[k] for k in keys if k in done], complete=len(done) == len(keys))
        return row

    _STOPPING.clear()
    pool = ThreadPoolExecutor(max_workers=max(1, jobs))
    try:
        return list(pool.map(one, keys))
    except BaseException:
        end_children()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def save_summary(out: str, rows: list, complete: bool) -> None:
    """OUT/stepwise/summary.json: the rows so far, the steps that passed, whether every step ran."""
    path = summary_path(out)
    with open(path + ".tmp", "w") as f:
        json.dump({"rows": rows, "passed": [r["step"] for r in rows if r["passed"]], "complete": complete}, f, indent=1)
    os.replace(path + ".tmp", path)  # a reader never sees half a file


def summary_path(out: str) -> str:
    return os.path.join(out, "stepwise", "summary.json")


def load_summary(out: str) -> dict:
    with open(summary_path(out)) as f:
        return json.load(f)


def table(rows: list) -> str:
    head = f"{'step':<10} {'debug':<7} {'timed':<7} {'sanitizer':<9}  what failed"
    lines = [head] + [f"{r['step']:<10} {r['debug']:<7} {r['timed']:<7} {r['sanitizer']:<9}  {r['failed'] or '-'}"
                      for r in rows]
    return "\n".join(lines)


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m gemm_course.measure.stepwise", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="every phase of every step, one child process each; the table last")
    r.add_argument("out", help="folder for the logs and stepwise/summary.json")
    r.add_argument("steps", nargs="*", help="step keys, e.g. sm100/2 (default: every step of --arch)")
    r.add_argument("--arch", choices=("sm100", "sm90"), help="every step of this architecture")
    r.add_argument("--sanitizer", help="compute-sanitizer's path: adds a memcheck phase per step")
    r.add_argument("--jobs", type=int, default=1, help="steps checked at a time (default 1)")
    c = sub.add_parser("check", help="one child: check a step on its phase's shapes")
    c.add_argument("step", help="step key, e.g. sm100/5")
    c.add_argument("--mode", choices=("debug", "timed"), default="debug", help="debug: a watchdog build on small shapes")
    for name, what in (("table", "the table of the run in OUT"), ("passed", "the steps of the run in OUT that passed")):
        sub.add_parser(name, help=what).add_argument("out", help="the folder a `run` wrote")
    args = p.parse_args(argv)
    if args.command == "check":
        return check(args.step, args.mode)
    if args.command in ("table", "passed"):
        summary = load_summary(args.out)
        print(table(summary["rows"]) if args.command == "table" else " ".join(summary["passed"]))
        return 0
    from ..runtime import ladder

    keys = args.steps or [s.key for s in ladder.steps(args.arch)] if (args.steps or args.arch) else None
    if not keys:
        p.error("name steps or --arch")
    signal.signal(signal.SIGTERM, _interrupt)  # a phase limit's SIGTERM ends the children as Ctrl-C does
    rows = run_steps(args.out, keys, sanitizer=args.sanitizer, jobs=args.jobs)
    print()
    print(table(rows))
    return 0 if all(r["passed"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
