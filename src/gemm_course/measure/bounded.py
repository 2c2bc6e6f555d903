"""Run a command with a time limit that ends the command's whole process tree, and lets Ctrl-C through.

    python -m gemm_course.measure.bounded LIMIT_S [--kill-after S] -- CMD ...

coreutils' ``timeout --foreground`` (which keeps Ctrl-C reaching the command) signals only the command
itself: under ``compute-sanitizer``, the Python child that holds a hung kernel lives on past the limit.
Here the command runs in a session of its own; at the limit its whole process group gets SIGTERM (a
measuring run writes its records: :mod:`gemm_course.measure.stopping`), then SIGKILL after
``--kill-after`` seconds. Ctrl-C or SIGTERM to this process is passed on to the group the same way.
Exit status as ``timeout``'s: the command's own, 124 at the limit, 137 where SIGKILL was needed; an
interrupt ends this process by the same signal, once the group has ended.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time

TIMED_OUT, KILLED = 124, 137


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:  # the group has ended
        pass


def _end_group(proc: subprocess.Popen, sig: int, kill_after: float) -> bool:
    """``sig`` to the child's group, SIGKILL after ``kill_after`` s if the child is still there;
    True where SIGKILL was needed. The group gets SIGKILL at the end either way: no grandchild outlives it."""
    _signal_group(proc.pid, sig)
    try:
        proc.wait(timeout=kill_after)
        killed = False
    except subprocess.TimeoutExpired:
        killed = True
    _signal_group(proc.pid, signal.SIGKILL)
    proc.wait()
    return killed


def run(cmd: list, limit: float, kill_after: float = 60.0, die_by_signal: bool = False) -> int:
    """Runs ``cmd`` (output not captured) in its own session under ``limit`` seconds; its exit status.
    ``die_by_signal``: an interrupted run ends this process by the same signal, so that the shell script
    around it stops too (bash goes on past a command that merely exits 130)."""
    proc = subprocess.Popen(cmd, start_new_session=True)
    interrupted = []

    def on_signal(signum, frame):
        interrupted.append(signum)

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        deadline = time.monotonic() + limit
        while proc.poll() is None:
            if interrupted:
                _end_group(proc, interrupted[0], kill_after)
                if die_by_signal:
                    signal.signal(interrupted[0], signal.SIG_DFL)
                    os.kill(os.getpid(), interrupted[0])
                return 128 + interrupted[0]
            if time.monotonic() >= deadline:
                return KILLED if _end_group(proc, signal.SIGTERM, kill_after) else TIMED_OUT
            time.sleep(0.05)
        _signal_group(proc.pid, signal.SIGKILL)  # a grandchild left behind by a command that exited
        return proc.returncode if proc.returncode >= 0 else 128 - proc.returncode
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    p = argparse.ArgumentParser(prog="python -m gemm_course.measure.bounded", description=__doc__.splitlines()[0],
                                usage="%(prog)s LIMIT_S [--kill-after S] -- CMD ...")
    p.add_argument("limit", type=float, help="seconds before the command's group gets SIGTERM")
    p.add_argument("--kill-after", type=float, default=60.0, help="seconds from SIGTERM to SIGKILL (default 60)")
    if "--" not in argv or argv.index("--") == len(argv) - 1:
        p.error("name a command after --")
    split = argv.index("--")
    args = p.parse_args(argv[:split])
    return run(argv[split + 1:], args.limit, args.kill_after, die_by_signal=True)

if __name__ == "__main__":
    sys.exit(main())
