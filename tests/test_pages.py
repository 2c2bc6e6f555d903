"""The book's pages as a reader on a rented B200 follows them (issue 42), checked on their Markdown
sources and on the package functions their cells call, without building the book: the intro's
first screen says what runs where (from the records), setup's B200 path comes in the safe order,
the course's address comes from one setting, and every command a page suggests runs here or is
marked GPU-only and answers ``--help``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from synthetic import bench_record

from gemm_course import b200, stepwise

pytestmark = pytest.mark.fast

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"


def _page(name: str) -> str:
    return (BOOK / f"{name}.md").read_text()


def _code_cells(text: str) -> list:
    return re.findall(r"```\{code-cell\}[^\n]*\n(.*?)```", text, re.S)


def _b200(step, date="2027-01-02T00:00:00+00:00"):
    return dict(bench_record(step, 1000.0, 1500.0, date, gpu="NVIDIA B200"), _file="results/nvidia-b200/x_ladder.json")


def _h200(step):
    return dict(bench_record(step, 700.0, 750.0, "2026-12-01T00:00:00+00:00", gpu="NVIDIA H200"), _file="results/h.json")


def _publish_kit_run(results: Path, rows: list, stamp="20270102T0000"):
    """A kit run's stepwise log as the kit publishes it: results/logs/<stamp>_b200_stepwise.log."""
    logs = results / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    text = "sm100/1 debug: ok (8 s)\n...\n\n" + stepwise.table(rows) + "\n"
    (logs / f"{stamp}_b200_stepwise.log").write_text(text)


def _row(step, failed=""):
    phases = {"debug": "ok", "timed": "ok", "sanitizer": "ok"}
    if failed:
        phases[failed.split(":")[0]] = "FAILED"
    return {"step": step, **phases, "failed": failed, "seconds": 1.0, "passed": not failed}


# ---- the first screen: what runs where, from the records ----


def test_the_intro_opens_with_the_status_box():
    """The first code cell of the intro, before any section, shows b200.first_screen(): the box."""
    text = _page("intro")
    body = text.split("\n# ", 1)[1]
    first_section = body.index("\n## ")
    cell = body.index("```{code-cell}")
    assert cell < first_section and "first_screen()" in _code_cells(body)[0]
    assert len(body[:cell].split()) < 120, "the box must come within the intro's first screen"
    assert "remove-input" in body[cell:cell + 80]


def test_the_box_says_nothing_ran_on_a_b200_without_a_record(tmp_path):
    box = b200.first_screen([_h200("sm90/11")], results_dir=str(tmp_path))
    assert box.startswith(":::{admonition}") and box.rstrip().endswith(":::")
    assert "none has run on a B200 yet" in box and "compiled and checked on the CPU" in box
    assert "NVIDIA H200" in box and "[Setup](setup.md)" in box


def test_the_box_changes_by_itself_when_a_b200_record_lands(tmp_path):
    records = [_h200("sm90/11"), _b200("sm100/2"), _b200("sm100/3")]
    box = b200.first_screen(records, results_dir=str(tmp_path))
    assert "none has run" not in box
    assert "steps 2, 3 measured on a B200 (records of 2027-01-02)" in box
    assert "steps 1, 4, 5, 6, 7, 8, 9, 10, 11 compiled and checked on the CPU, not yet run" in box
    assert b200.has_b200_record(records=records) and b200.has_b200_record("sm100/2", records)
    assert not b200.has_b200_record("sm100/11", records)
    assert not b200.has_b200_record(records=[_h200("sm90/2"), dict(_b200("sm100/2"), gpu="Synthetic GPU")])


def test_a_step_the_kit_failed_is_marked_failed_with_its_log(tmp_path):
    _publish_kit_run(tmp_path, [_row("sm100/1"), _row("sm100/7", "debug: watchdog: acc_pipeline.consumer_wait (3 warp reports)"),
                                _row("sm100/11", "timed: wrong result: sm100/11 1000x1000x4000 FAIL")])
    status = b200.step_status([_b200("sm100/1"), _b200("sm100/11")], results_dir=str(tmp_path))
    assert status["sm100/1"][0] == "measured" and status["sm100/2"] == ("compiled", "")
    state, detail = status["sm100/7"]
    assert state == "failed" and "watchdog: acc_pipeline.consumer_wait" in detail
    assert "results/logs/20270102T0000_b200_step_sm100-7_debug.log" in detail
    assert status["sm100/11"][0] == "failed" and "_b200_step_sm100-11_timed.log" in status["sm100/11"][1]
    box = b200.first_screen([_b200("sm100/1")], results_dir=str(tmp_path))
    assert "steps 7, 11 failed in the B200 kit" in box and "step 1 measured on a B200" in box


def test_the_newest_kit_run_decides(tmp_path):
    _publish_kit_run(tmp_path, [_row("sm100/7", "debug: hung: no exit within 600 s")], stamp="20270101T0000")
    _publish_kit_run(tmp_path, [_row("sm100/7")], stamp="20270102T0000")
    assert b200.step_status([], results_dir=str(tmp_path))["sm100/7"] == ("compiled", "")
