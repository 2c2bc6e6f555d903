"""The phase runner's time limit ends the whole process tree (gemm_course.measure.bounded)."""

import os
import signal
import subprocess
import sys
import time

import pytest

from gemm_course.measure import bounded

pytestmark = [pytest.mark.fast, pytest.mark.skipif(not hasattr(os, "killpg"), reason="process groups are POSIX")]

# a child that starts a grandchild (as compute-sanitizer starts Python) and waits on it
PARENT = """
import subprocess, sys
flag = sys.argv[1]
g = subprocess.Popen([sys.executable, "-c", f"import time; open({flag!r}, 'w').write('up'); time.sleep(60)"])
print(g.pid, flush=True)
g.wait()
"""


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is gone for our purpose
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except FileNotFoundError:
        return False


def test_exit_status_passes_through():
    assert bounded.run([sys.executable, "-c", "import sys; sys.exit(3)"], limit=30) == 3
    assert bounded.run([sys.executable, "-c", "pass"], limit=30) == 0


def test_limit_ends_the_grandchild_too(tmp_path):
    flag = tmp_path / "up"
    script = tmp_path / "parent.py"
    script.write_text(PARENT)
    out = tmp_path / "out.txt"
    t0 = time.monotonic()
    with open(out, "w") as f:
        proc = subprocess.Popen([sys.executable, "-m", "gemm_course.measure.bounded", "3", "--kill-after", "2", "--",
                                 sys.executable, str(script), str(flag)], stdout=f)
        rc = proc.wait(timeout=30)
    assert rc == bounded.TIMED_OUT
    assert time.monotonic() - t0 < 20
    grandchild = int(out.read_text().split()[0])
    assert flag.exists()
    deadline = time.monotonic() + 5
    while alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(grandchild), "the grandchild outlived the limit"


def test_sigterm_reaches_the_command_first(tmp_path):
    """At the limit the command gets SIGTERM and time to write what it measured before SIGKILL."""
    written = tmp_path / "records.json"
    code = ("import signal, sys, time\n"
            "def on_term(s, f):\n"
            f"    open({str(written)!r}, 'w').write('kept'); sys.exit(0)\n"
            "signal.signal(signal.SIGTERM, on_term)\n"
            "time.sleep(60)\n")
    assert bounded.run([sys.executable, "-c", code], limit=2, kill_after=10) == bounded.TIMED_OUT
    assert written.read_text() == "kept"


def test_a_command_deaf_to_sigterm_is_killed():
    code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"
    t0 = time.monotonic()
    assert bounded.run([sys.executable, "-c", code], limit=1, kill_after=1) == bounded.KILLED
    assert time.monotonic() - t0 < 15


def test_an_interrupt_is_passed_on(tmp_path):
    flag = tmp_path / "up"
    script = tmp_path / "parent.py"
    script.write_text(PARENT)
    out = tmp_path / "out.txt"
    with open(out, "w") as f:
        proc = subprocess.Popen([sys.executable, "-m", "gemm_course.measure.bounded", "60", "--kill-after", "2", "--",
                                 sys.executable, str(script), str(flag)], stdout=f)
        deadline = time.monotonic() + 20
        while not flag.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        rc = proc.wait(timeout=30)
    assert rc == -signal.SIGINT  # ended by the signal itself: the script around it stops too
    grandchild = int(out.read_text().split()[0])
    deadline = time.monotonic() + 5
    while alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(grandchild)
