"""NOTES.md's measured block is generated from the committed records, never typed."""

import pytest
from synthetic import bench_record, write_runs

from gemm_course import ladder, notes

pytestmark = pytest.mark.fast


def test_notes_block_matches_records():
    with open(notes.NOTES) as f:
        text = f.read()
    assert notes.BEGIN in text and notes.END in text
    assert notes.render(text, notes.measured_block()) == text, "run: python -m gemm_course.notes"


def test_block_lists_every_hopper_step():
    block = notes.measured_block()
    for step in ladder.steps("sm90"):
        assert f"| {step.key} " in block


def test_notes_block_reports_the_newest_sweep(tmp_path):
    final = ladder.final("sm90").key
    recs = write_runs(tmp_path, {"x_sweep": [bench_record(final, 567.0, 700.0, "2030-02-01", shape=4096),
                                             bench_record(final, 700.0, 700.0, "2030-02-01", shape=8192)]})
    block = notes.measured_block(recs)
    assert f"Sweep of {final} (" in block and "2 shapes): geometric mean of the ratio to cuBLAS 0.900" in block
    assert "1 of 2 shapes at or above cuBLAS" in block and "| 4096x4096x4096 | 567 | 700 | 0.810 |" in block
