"""The per-step runner of the B200 kit: a child process per step and phase, failures named, the run goes on."""

import json
import os
import sys

import pytest

from gemm_course.measure import stepwise
from gemm_course.runtime import ladder

REPORT = ("watchdog: sm100/5 timed out after 5 s waiting on mainloop_pipeline.producer_acquire(state) (empty barrier) "
          "at step05_cta_pair_multicast.py:270 in load_k_tile, phase 1, block (0,0,0) warp 5 thread 160")
BEHAVIOUR = {  # step -> the fake child's Python
    "sm100/2": "print('sm100/2 128x256x72: rel. error 3.1e-03 ok')",
    "sm100/5": f"import sys; print({REPORT!r}); print({REPORT!r}); sys.exit(1)",
    "sm100/6": "import time; time.sleep(30)",
    "sm100/7": "import sys; print('sm100/7 200x264x136: rel. error 9.9e-01 FAIL'); sys.exit(1)",
}


def fake_command(key, phase, sanitizer=None):
    code = BEHAVIOUR[key] if phase == "debug" else "print('ok')"
    return [sys.executable, "-c", code]


@pytest.mark.slow  # waits out a 3 s time limit on a child that sleeps
def test_each_failure_is_named_and_the_run_goes_on(tmp_path, capsys):
    keys = list(BEHAVIOUR)
    rows = stepwise.run_steps(str(tmp_path), keys, limits={"debug": 3}, command=fake_command, jobs=2)
    by = {r["step"]: r for r in rows}
    assert [r["step"] for r in rows] == keys, "every step runs, whatever the one before did"
    assert by["sm100/2"]["passed"] and by["sm100/2"]["timed"] == "ok" and by["sm100/2"]["sanitizer"] == "skipped"
    assert by["sm100/5"]["debug"] == "FAILED" and by["sm100/5"]["timed"] == "-"
    assert "producer_acquire(state) (empty barrier)" in by["sm100/5"]["failed"] and "2 warp reports" in by["sm100/5"]["failed"]
    assert by["sm100/6"]["debug"] == "hung" and "no exit within 3 s" in by["sm100/6"]["failed"]
    assert by["sm100/6"]["seconds"] < 15
    assert "wrong result: sm100/7 200x264x136" in by["sm100/7"]["failed"]
    capsys.readouterr()
    saved = json.loads((tmp_path / "stepwise" / "summary.json").read_text())
    assert saved["passed"] == ["sm100/2"]
    assert stepwise.main(["passed", str(tmp_path)]) == 0 and capsys.readouterr().out.strip() == "sm100/2"
    assert stepwise.main(["table", str(tmp_path)]) == 0 and "producer_acquire" in capsys.readouterr().out
    log = (tmp_path / "step_sm100-5_debug.log").read_text().splitlines()
    assert sum(line.startswith("watchdog:") for line in log) == 2
    table = stepwise.table(rows).splitlines()
    assert table[0].split()[:4] == ["step", "debug", "timed", "sanitizer"] and len(table) == 5
    assert "hung" in table[3]


@pytest.mark.fast
def test_the_summary_keeps_each_step_as_it_ends(tmp_path):
    """A run cut short (the kit's limit, a Ctrl-C) keeps the steps that passed: the summary is
    rewritten as each step ends, before the next one starts."""
    seen = []

    def command(key, phase, sanitizer=None):
        if key == "sm100/3" and phase == "debug":
            seen.append(json.loads((tmp_path / "stepwise" / "summary.json").read_text()))
        return [sys.executable, "-c", "pass"]

    stepwise.run_steps(str(tmp_path), ["sm100/2", "sm100/3"], command=command)
    assert seen == [{"rows": seen[0]["rows"], "passed": ["sm100/2"], "complete": False}]
    assert json.loads((tmp_path / "stepwise" / "summary.json").read_text())["passed"] == ["sm100/2", "sm100/3"]


@pytest.mark.fast
def test_a_time_out_kills_the_childs_children(tmp_path):
    """A sanitizer runs the step's Python as its child: the limit must stop both."""
    pid_file = tmp_path / "grandchild.pid"
    script = f"import subprocess; p = subprocess.Popen(['sleep', '60']); open({str(pid_file)!r}, 'w').write(str(p.pid)); p.wait()"
    ok, rc, _, seconds = stepwise.run_phase([sys.executable, "-c", script], 2, str(tmp_path / "log"))
    assert not ok and rc is None and seconds < 10
    import time

    pid = int(pid_file.read_text())

    def alive():  # a killed process may linger as a zombie until something reaps it: dead all the same
        try:
            with open(f"/proc/{pid}/stat") as f:
                return f.read().rsplit(")", 1)[1].split()[0] != "Z"
        except FileNotFoundError:
            return False

    for _ in range(50):
        if not alive():
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"the grandchild {pid} outlived the limit")


@pytest.mark.fast
def test_an_interrupt_ends_the_child_too(tmp_path, monkeypatch):
    """The child runs in a session of its own, out of Ctrl-C's reach: an interrupt of the runner kills it."""
    import subprocess
    import time

    started = []

    def interrupted(self, timeout=None):
        started.append(self.pid)
        raise KeyboardInterrupt

    monkeypatch.setattr(subprocess.Popen, "communicate", interrupted)
    with pytest.raises(KeyboardInterrupt):
        stepwise.run_phase([sys.executable, "-c", "import time; time.sleep(60)"], 30, str(tmp_path / "log"))
    monkeypatch.undo()
    pid = started[0]
    for _ in range(50):  # killed: reaped within moments, not after its 60 s sleep
        try:
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                break
        except ChildProcessError:  # already reaped by subprocess itself (the dropped Popen's clean-up)
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"the child {pid} outlived the interrupt")


@pytest.mark.fast
def test_sanitizer_phase_runs_only_when_given(tmp_path):
    seen = []

    def command(key, phase, sanitizer=None):
        seen.append((phase, sanitizer))
        return [sys.executable, "-c", "pass"]

    stepwise.run_steps(str(tmp_path), ["sm100/2"], sanitizer="/opt/cs", command=command)
    assert seen == [("debug", "/opt/cs"), ("timed", "/opt/cs"), ("sanitizer", "/opt/cs")]
    cmd = stepwise.child_command("sm100/2", "sanitizer", "cs")
    assert cmd[:3] == ["cs", "--tool", "memcheck"] and cmd[-2:] == ["--mode", "debug"]


@pytest.mark.fast
@pytest.mark.parametrize("key", [s.key for s in ladder.steps()])
def test_debug_shapes_are_small_ragged_and_taken(key):
    from gemm_course.runtime.problem import GemmProblem

    step = ladder.get(key)
    shapes = stepwise.debug_shapes(step)
    assert len(shapes) >= 5
    assert all(step.can_implement(GemmProblem(*s))[0] for s in shapes)
    assert any(k % 64 for _, _, k in shapes), "a K that is not a multiple of 64"
    if step.number >= 8:
        assert (4096, 2048, 64) in shapes
    if step.number == 11:
        assert (1000, 1000, 4000) in shapes


@pytest.mark.fast
def test_an_interrupt_of_the_run_ends_the_running_child(tmp_path):
    """Ctrl-C reaches the main thread, which waits on the pool; the child, run by a worker thread, is ended
    at once, no further step starts, and the summary names no step failed by the stop."""
    import signal
    import threading
    import time

    pids = []

    def sleeper(key, phase, sanitizer):
        return [sys.executable, "-c", "import time; time.sleep(60)"]

    real_popen = stepwise.subprocess.Popen

    class Recorded(real_popen):
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            pids.append(self.pid)

    stepwise.subprocess.Popen = Recorded
    try:
        threading.Timer(1.5, os.kill, (os.getpid(), signal.SIGINT)).start()  # as Ctrl-C would
        t0 = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            stepwise.run_steps(str(tmp_path), ["sm100/2", "sm100/3"], command=sleeper)
        assert time.monotonic() - t0 < 20, "the run waited for its child"
    finally:
        stepwise.subprocess.Popen = real_popen
    assert len(pids) == 1, "a step started after the interrupt"
    try:
        os.kill(pids[0], 0)
        alive = open(f"/proc/{pids[0]}/stat").read().split()[2] != "Z"
    except (ProcessLookupError, FileNotFoundError):
        alive = False
    assert not alive, "the child outlived the interrupt"
    summary = tmp_path / "stepwise" / "summary.json"
    assert not summary.exists() or json.loads(summary.read_text())["rows"] == []
