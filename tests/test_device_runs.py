"""``python -m gemm_course.measure.device_runs OUT``: a device run's folder filed under results/ (records,
A/B runs, logs), on a synthetic folder (never the course's results/)."""

from __future__ import annotations

import gzip
import json

import pytest

from gemm_course.measure import device_runs

pytestmark = pytest.mark.fast


def _record(gpu="NVIDIA H100 80GB HBM3", rel_error=3e-3):
    return {"kind": "bench", "step": "sm90/12", "gpu": gpu, "rel_error": rel_error, "shape": {"m": 1, "n": 8, "k": 8}}


def _out(tmp_path):
    out = tmp_path / "r1"
    (out / "tune_256b").mkdir(parents=True)
    (out / "tune_prefetch").mkdir()
    (out / "20261207T120000Z_decode12.json").write_text(json.dumps({"records": [_record()]}))
    (out / "20261207T120100Z_bad.json").write_text(json.dumps({"records": [_record(rel_error=0.5)]}))
    (out / "tune_256b" / "tune.json").write_text(json.dumps({"rows": [{"variant": "sm90/12"}] * 3, "what": "x"}))
    (out / "tune_prefetch" / "tune.json").write_text(json.dumps({"rows": [], "what": "y"}))
    (out / "check12.log").write_text(f"ran in {out}/sub and {out}\n")
    (out / "linear_host.txt").write_text("20 us\n")
    return out


def test_records_ab_runs_and_logs_go_where_the_course_keeps_them(tmp_path):
    results = tmp_path / "results"
    (results / "tuning").mkdir(parents=True)
    (results / "tuning" / "tune_run54_decode12_few_w_256.json.gz").write_bytes(gzip.compress(b"{}"))
    (results / "tuning" / "tune_run5.json.gz").write_bytes(gzip.compress(b"{}"))
    out = _out(tmp_path)
    done = {src.split("/")[-1] if not src.endswith("tune.json") else src.split("/")[-2]: (dest, why)
            for src, dest, why in device_runs.file_run(str(out), str(results), "20261207T1200", "decode12")}
    assert done["20261207T120000Z_decode12.json"][0] == "results/nvidia-h100-80gb-hbm3/20261207T120000Z_decode12.json"
    assert done["20261207T120100Z_bad.json"][0] is None  # a wrong output is never filed
    assert done["tune_256b"][0] == "results/tuning/tune_run55_decode12_256b.json.gz"  # the next free number
    assert done["tune_prefetch"][0] == "results/tuning/tune_run56_decode12_prefetch.json.gz"
    with gzip.open(results / "tuning" / "tune_run55_decode12_256b.json.gz", "rt") as f:
        assert json.load(f) == {"rows": [{"variant": "sm90/12"}] * 3, "what": "x"}
    assert done["check12.log"][0] == "results/logs/20261207T1200_check12.log"
    assert (results / "logs" / "20261207T1200_check12.log").read_text() == "ran in OUT/sub and OUT\n"  # no folder of this machine
    assert (results / "logs" / "20261207T1200_linear_host.txt").read_text() == "20 us\n"
    again = device_runs.file_run(str(out), str(results), "20261207T1200", "decode12")
    left = [why for src, _, why in again if src.endswith("check12.log")]
    assert left == ["results/logs/20261207T1200_check12.log exists: left"]
    assert device_runs.next_run_number(str(results)) == 59  # the second filing took 57 and 58


def test_a_file_cut_off_mid_write_is_left_and_the_rest_filed(tmp_path):
    """A run killed at its limit may leave half a JSON file: that file is not filed, every other one is."""
    out = _out(tmp_path)
    (out / "20261207T120200Z_decode_graph.json").write_text('{"records": [{"kind": "decode_gr')
    (out / "tune_cut").mkdir()
    (out / "tune_cut" / "tune.json").write_text('{"rows": [')
    done = {src.split("/")[-1] if not src.endswith("tune.json") else src.split("/")[-2]: (dest, why)
            for src, dest, why in device_runs.file_run(str(out), str(tmp_path / "results"), "20261207T1200", "decode12")}
    assert done["20261207T120200Z_decode_graph.json"][0] is None and "not JSON" in done["20261207T120200Z_decode_graph.json"][1]
    assert done["tune_cut"][0] is None and "not JSON" in done["tune_cut"][1]
    assert done["20261207T120000Z_decode12.json"][0] and done["tune_256b"][0] and done["check12.log"][0]


def test_the_command_line_checks_the_stamp_and_reports_a_refused_file(tmp_path, capsys):
    out = _out(tmp_path)
    with pytest.raises(SystemExit):
        device_runs.main([str(out), "--stamp", "2026-12-07", "--results", str(tmp_path / "results")])
    assert device_runs.main([str(out), "--stamp", "20261207T1200", "--results", str(tmp_path / "results")]) == 1
    printed = capsys.readouterr().out
    assert "20261207T120100Z_bad.json: 1 record(s) with rel. error" in printed and "tune_256b/tune.json: A/B run 1" in printed
    assert device_runs.next_run_number(str(tmp_path / "empty")) == 1


@pytest.mark.parametrize("where", ["archive", "folder_with_the_archive"])
def test_a_packed_run_is_unpacked_and_filed_the_same(tmp_path, where):
    """A device call returns at most 8 files, so a run packs its folder (tar czf R.tgz R): the archive, or a
    folder holding only it, files as the folder would, and its logs name the folder OUT."""
    import tarfile

    out = _out(tmp_path)
    packed = tmp_path / "device" / "R.tgz"
    packed.parent.mkdir()
    with tarfile.open(packed, "w:gz") as tar:
        tar.add(out, arcname=out.name)  # as the device packs it: the folder's own name
    results = tmp_path / "results"
    arg = str(packed) if where == "archive" else str(packed.parent)
    assert device_runs.main([arg, "--results", str(results), "--stamp", "20261207T1200", "--prefix", "p"]) == 1  # the bad file
    assert (results / "nvidia-h100-80gb-hbm3" / "20261207T120000Z_decode12.json").exists()
    assert sorted(p.name for p in (results / "tuning").iterdir()) == ["tune_run1_p_256b.json.gz", "tune_run2_p_prefetch.json.gz"]
    log = (results / "logs" / "20261207T1200_check12.log").read_text()
    assert log == "ran in OUT/sub and OUT\n" and "device-run-" not in log
