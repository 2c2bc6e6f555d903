"""NOTES.md's measured block is generated from the committed records, never typed."""

import pytest
from synthetic import bench_record, write_runs

from gemm_course.measure import notes
from gemm_course.runtime import ladder

pytestmark = pytest.mark.fast


def test_notes_block_matches_records():
    with open(notes.NOTES) as f:
        text = f.read()
    assert notes.BEGIN in text and notes.END in text
    assert notes.render(text, notes.measured_block()) == text, "run: python -m gemm_course.measure.notes"


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


def _with_energy(rec, step_mj, cublas_mj, note=None):
    return dict(rec, energy_j_per_gemm={"step": step_mj / 1e3, "cublas": cublas_mj / 1e3},
                sm_clock_mhz_median={"step": 1700.0, "cublas": 1650.0}, b2b_ms={"step": 0.1, "cublas": 0.095},
                b2b_graph_ms={"step": 0.09, "cublas": 0.09}, host_launch_us={"step": 24.0, "cublas": 7.5},
                energy_note=note)


def test_notes_block_shows_energy_by_class_and_shape_only_when_records_have_it(tmp_path):
    final = ladder.final("sm90").key
    shapes = [(2048, 2048, 2048), (1024, 1024, 8192)]
    sweep = {tag: [bench_record(final, 650.0, 700.0, f"2030-02-01T00:0{i}:00", shape=s) for s in shapes]
             for i, tag in enumerate(("broad_sweep", "broad_sweep_reversed"))}
    recs = write_runs(tmp_path, sweep)
    block = notes.measured_block(recs)
    assert "Broad sweep of" in block and "Energy per GEMM" not in block and "step mJ" not in block
    energy = {"broad_sweep_energy": [_with_energy(bench_record(final, 650.0, 700.0, "2030-02-02", shape=s), 2.0, 2.5)
                                     for s in shapes],
              "broad_sweep_energy_reversed": [_with_energy(bench_record(final, 650.0, 700.0, "2030-02-03", shape=s),
                                                           3.0, 2.5, note="1 block(s) (step) saw fewer than two "
                                                           "counter changes") for s in shapes[:1]]}
    recs += write_runs(tmp_path / "e", energy)
    block = notes.measured_block(recs)
    assert "| forward | square | 1 of 1 | 0.800 |" in block and "| reversed | all | 1 of 1 | 1.200 |" in block
    assert "| 2048x2048x2048 | 2.00 | 2.50 | 0.800 | 1.200 | 0.950 | 1.000 | 24.0 / 7.5 |" in block
    assert "| 1024x1024x8192 | 2.00 | 2.50 | 0.800 | - |" in block
    assert "Energy note: 1 block(s) (step) saw fewer than two counter changes" in block


@pytest.mark.fast
def test_the_notes_page_speaks_the_books_words():
    """NOTES.md is a page of the book (book/notes.md includes it): no lab words in it (issue 33)."""
    import re

    with open(notes.NOTES) as f:
        text = f.read()
    assert not re.findall(r"\bsessions?\b|\blent\b", text, flags=re.I)


def test_help_prints_help_and_writes_nothing(monkeypatch, capsys):
    """`--help` (or a stray argument) must not rewrite NOTES.md."""
    writes = []
    monkeypatch.setattr("builtins.open", lambda *a, **k: writes.append(a) or (_ for _ in ()).throw(AssertionError(a)))
    with pytest.raises(SystemExit) as e:
        notes.main(["--help"])
    assert e.value.code == 0 and not writes
    assert "measured block" in capsys.readouterr().out
