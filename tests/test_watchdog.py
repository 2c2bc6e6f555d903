"""The watchdog's debug builds: bounded waits that name their barrier, absent from default builds."""

import os
import re
import sys

import pytest

from gemm_course.runtime import arch, ladder, watchdog

SCRIPTS = os.path.join(os.path.dirname(__file__), "..", "scripts")


def report_strings(ptx: str) -> list:
    """The watchdog's printf format strings in a PTX module."""
    out = []
    for m in re.finditer(r"\.b8 \w+\[\d+\] = \{([^}]*)\}", ptx):
        text = bytes(int(x) for x in m.group(1).split(",")).decode(errors="replace")
        if text.startswith(watchdog.PREFIX):
            out.append(text)
    return out


@pytest.mark.fast
def test_setting_parses_the_switch():
    assert watchdog.setting("") is None and watchdog.setting("0") is None and watchdog.setting("off") is None
    assert watchdog.setting("1") == watchdog.DEFAULT_SECONDS
    assert watchdog.setting("2.5") == 2.5
    for bad in ("soon", "-1", "1e9"):
        with pytest.raises(ValueError, match=watchdog.ENV):
            watchdog.setting(bad)


@pytest.mark.fast
def test_parse_reports_groups_warps_by_barrier():
    head = "watchdog: sm90/6 timed out after 2 s waiting on "
    log = "\n".join([
        "noise",
        head + "a.producer_acquire(s) (empty barrier) at f.py:1 in k, phase 1, block (0,0,0) warp 0 thread 0",
        head + "a.producer_acquire(s) (empty barrier) at f.py:1 in k, phase 1, block (1,0,0) warp 0 thread 0",
        head + "a.consumer_wait(s) (full barrier) at f.py:2 in k, phase 0, block (0,0,0) warp 4 thread 128",
    ])
    reports = watchdog.parse_reports(log)
    assert [n for n, _ in reports] == [2, 1]
    assert "producer_acquire" in reports[0][1] and "block" not in reports[0][1]


@pytest.mark.fast
def test_call_site_names_the_kernel_line_and_the_pipeline_role():
    # a stand-in kernel file: the innermost frame under gemm_course/kernels/ is the one named
    code = compile("def consumer_wait():\n    return watchdog.call_site()\n", "/x/gemm_course/kernels/sm90/fake.py", "exec")
    scope = {"watchdog": watchdog}
    exec(code, scope)
    site = scope["consumer_wait"]()
    assert site["file"] == "fake.py" and site["line"] == 2 and site["role"] == "full barrier"
    assert "expects 64 tx bytes" in watchdog.describe(site, 64)


def compile_with(monkeypatch, key, bound):
    if bound is None:
        monkeypatch.delenv(watchdog.ENV, raising=False)
    else:
        monkeypatch.setenv(watchdog.ENV, str(bound))
    step = ladder.get(key)
    return arch.compile_step(step, target=step.target).ptx


# step -> source lines whose waits a debug build must bound and name
NAMED = {
    "sm90/2": ["cute.arch.mbarrier_wait(full_barrier, phase)"],
    "sm90/6": ["mainloop_pipeline.consumer_wait(read_state) (full barrier, expects", "mainloop_pipeline.producer_acquire"],
    "sm90/11": ["the stream-K flag of a slot"],
    "sm100/2": ["cute.arch.mbarrier_wait(load_barrier, phase)", "cute.arch.mbarrier_wait(mma_barrier, phase)"],
    "sm100/6": ["mainloop_pipeline.consumer_wait(read_state) (full barrier, expects", "accumulator_pipeline.consumer_wait"],
    "sm100/8": ["clc_pipeline.consumer_wait"],
    "sm100/11": ["the stream-K flag of a slot", "accumulator_pipeline.consumer_wait(acc_state)"],
}


@pytest.mark.compile
@pytest.mark.parametrize("key", sorted(NAMED))
def test_debug_build_bounds_every_wait_and_default_build_has_none(monkeypatch, key):
    plain = compile_with(monkeypatch, key, None)
    debug = compile_with(monkeypatch, key, 3)
    again = compile_with(monkeypatch, key, None)
    assert again == plain, "a debug build must leave the next default build unchanged (the patch is undone)"
    for marker in ("%globaltimer", "trap;", "activemask", "WATCHDOG_GRACE"):
        assert marker not in plain, f"default build of {key} has {marker}"
        assert marker in debug, f"debug build of {key} lacks {marker}"
    reports = report_strings(debug)
    assert not report_strings(plain)
    assert all(f"{key} timed out after 3 s waiting on " in r for r in reports)
    assert debug.count("trap;") >= len(reports) >= len(NAMED[key]), "a report for every bounded wait"
    for name in NAMED[key]:
        assert any(name in r for r in reports), f"{key}: no report names {name!r}: {reports}"
    # no wait is left unbounded: the default build's poll loop (LAB_WAIT, no time limit) is gone
    assert "LAB_WAIT" in plain and "LAB_WAIT" not in debug
    assert "WATCHDOG_POLL" in debug and "WATCHDOG_POLL" not in plain


@pytest.mark.compile
def test_drills_break_what_they_say(monkeypatch):
    """Each H200 drill's broken copy compiles, and its debug build names the barrier the drill expects."""
    sys.path.insert(0, SCRIPTS)
    try:
        import watchdog_drills
    finally:
        sys.path.remove(SCRIPTS)
    monkeypatch.setenv(watchdog.ENV, "2")
    for name, (_, _, _, _, expected, _) in watchdog_drills.DRILLS.items():
        step = watchdog_drills.make_copy(name)
        ptx = arch.compile_step(step, target=step.target).ptx
        if expected and expected != watchdog_drills.FAULT:
            assert any(expected in r for r in report_strings(ptx)), name
        assert watchdog_drills.verdict(name, 124, "")[0] is False
    ok, _ = watchdog_drills.verdict("wrong_expect_tx", 3, "watchdog: sm90/1002 timed out after 2 s waiting on "
                                    "cute.arch.mbarrier_wait(full_barrier, phase) at step02_wgmma_tma.py:211 in kernel, "
                                    "phase 0, block (0,0,0) warp 0 thread 0\n")
    assert ok
    other = "watchdog: x timed out after 2 s waiting on other at f:1 in k, block (0,0,0) warp 0 thread 0\n"
    ok, what = watchdog_drills.verdict("missing_arrive", 3, other)
    assert not ok and "not 'producer_acquire'" in what
    assert watchdog_drills.verdict("double_release", 3, "CUDA error: unspecified launch failure")[0]
    assert not watchdog_drills.verdict("double_release", 3, other)[0]
    assert not watchdog_drills.verdict("double_release", 0, "")[0]
