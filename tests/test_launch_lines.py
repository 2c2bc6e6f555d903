"""Chapter 12's line per kernel (``gemm_course.viz.launch_lines``): time = fixed + bytes / rate, fitted
over a decode run's layers, from synthetic records whose times are made on known lines."""

from __future__ import annotations

import pytest
import test_viz
from synthetic import decode_record

from gemm_course.measure import bench
from gemm_course.measure import records as rec
from gemm_course.runtime.problem import GemmProblem
from gemm_course.viz import launch_lines as ll
from gemm_course.viz import memory_roofline as mr

pytestmark = pytest.mark.fast

GPU = "NVIDIA H100 80GB HBM3"
LAYERS = ((4096, 4096), (14336, 4096), (4096, 14336), (6144, 4096))
# (fixed microseconds, TB/s) each provider's times are made on
PER_LAUNCH = {"sm90/12": (7.0, 3.2), "sm90/11": (15.0, 2.4), "cuBLAS": (7.5, 3.1)}
IN_GRAPHS = {"sm90/12": (2.0, 3.0), "sm90/11": (14.0, 2.5), "cuBLAS": (6.0, 3.2)}


def _ms(line, shape):
    fixed, tb_s = line
    return (fixed + GemmProblem(*shape).min_bytes / (tb_s * 1e6)) * 1e-3


def _records(ms=(1, 8, 16, 64)):
    out = []
    for m in ms:
        for n, k in LAYERS:
            shape = (m, n, k)
            cublas = _ms(PER_LAUNCH["cuBLAS"], shape)
            for step in ("sm90/12", "sm90/11"):
                t = _ms(PER_LAUNCH[step], shape)
                r = decode_record(shape, t, cublas, "2026-12-07T01:00:00", name="20261207T010000Z_decode12.json", gpu=GPU)
                out.append(dict(r, step=step, kind="bench", time_ms={"median": t}, cublas_time_ms={"median": cublas},
                                ratio_to_cublas=cublas / t))
            for step in ("sm90/12", "sm90/11"):
                t, c = _ms(IN_GRAPHS[step], shape), _ms(IN_GRAPHS["cuBLAS"], shape)
                out.append({"kind": "decode_graph", "step": step, "shape": dict(zip("mnk", shape)), "gpu": GPU,
                            "date": "2026-12-07T02:00:00", "torch": "2.11", "cutlass_dsl": "4.8.1",
                            "_file": "results/x/20261207T020000Z_decode_graph.json", "step_ms": t, "cublas_ms": c,
                            "bandwidth": bench.bandwidth_fields(GemmProblem(*shape), t, c, GPU, 3.0),
                            "protocol": {"sets": 3, "launches_per_graph": 200, "replays": 5, "rounds": 5}})
    return out


def test_fit_finds_the_line_and_refuses_points_that_make_none():
    points = [(b, 2.5 + b / 3.0e6) for b in (32e6, 50e6, 118e6)]  # 2.5 us + bytes at 3 TB/s
    fixed, tb_s, worst = ll.fit(points)
    assert fixed == pytest.approx(2.5) and tb_s == pytest.approx(3.0) and worst == pytest.approx(0, abs=1e-9)
    assert ll.fit(points[:1]) is None  # one size: no slope
    assert ll.fit([(32e6, 10.0), (33e6, 11.0)]) is None  # sizes within 10%: a slope from noise
    assert ll.fit([(32e6, 20.0), (118e6, 10.0)]) is None  # faster with more bytes: no rate
    _, _, worst = ll.fit([(32e6, 13.0), (50e6, 20.0), (118e6, 41.0)])
    assert worst > 0.5  # a point off the line shows in the worst residual


def test_launch_lines_recover_each_providers_line_per_launch_and_in_graphs():
    lines = {(line.source, line.provider): line for line in ll.launch_lines(_records())}
    assert set(lines) == {(s, p) for s in ll.SOURCES for p in PER_LAUNCH}
    for source, made in zip(ll.SOURCES, (PER_LAUNCH, IN_GRAPHS)):
        for provider, (fixed, tb_s) in made.items():
            line = lines[(source, provider)]
            assert line.fixed_us == pytest.approx(fixed, rel=1e-6) and line.tb_s == pytest.approx(tb_s, rel=1e-6)
            # the layers at up to MAX_M tokens only, cuBLAS's once per shape
            assert len(line.points) == len(LAYERS) * len([m for m in (1, 8, 16, 64) if m <= ll.MAX_M])
    assert ll.launch_lines(_records(), max_m=64)[0].points != lines[("per launch", "sm90/12")].points


def test_the_graph_lines_come_from_the_per_launch_runs_gpu():
    h200_graphs = [dict(r, gpu="NVIDIA H200", _file="results/y/20261208T000000Z_decode_graph.json")
                   for r in _records() if r["kind"] == "decode_graph"]  # newer, but another card's
    lines = ll.launch_lines(_records() + h200_graphs)
    graph = [line for line in lines if line.source == "CUDA graph"]
    assert graph and all(len(line.points) == len(LAYERS) * 3 for line in graph)
    assert ll._runs(_records() + h200_graphs, "sm90")["CUDA graph"][0]["gpu"] == GPU


def test_the_table_and_figure_read_the_lines_and_say_when_there_are_none():
    records = _records()
    table = mr.launch_table(records)
    assert "| per launch | sm90/12 | 7.0 us | 3.20 TB/s (107% of copy) |" in table
    assert "| CUDA graph | sm90/12 | 2.0 us | 3.00 TB/s (100% of copy) |" in table
    fig = mr.launch_figure(records)
    legends = [t.get_text() for ax in fig.axes for t in ax.get_legend().get_texts()]
    assert "sm90/12: 7.0 us + bytes at 3.20 TB/s" in legends and "cuBLAS: 6.0 us + bytes at 3.20 TB/s" in legends
    assert len(fig.axes) == 2
    assert mr.launch_table(records, arch="sm100").startswith("No record yet")  # the Hopper run is not the B200's
    blackwell = [dict(r, step=r["step"].replace("sm90", "sm100")) for r in records]
    assert "| per launch | sm100/12 | 7.0 us |" in mr.launch_table(blackwell, arch="sm100")
    assert mr.launch_table(blackwell).startswith("No record yet")
    empty = rec.load_records("/nonexistent", kind=None)
    assert mr.launch_table(empty).startswith("No record yet")
    assert "No record yet" in " ".join(t.get_text() for ax in mr.launch_figure(empty).axes for t in ax.texts)


def test_the_size_at_which_a_line_reaches_a_share_of_the_copy_bandwidth():
    line = ll.Line("CUDA graph", "sm90/12", (), 2.0, 3.0, 0.0, 3.0)  # 2 us + the bytes at the copy bandwidth
    need = mr.bytes_for_share(line, 0.85)
    assert need / (3.0e6 * (2.0 + need / 3.0e6)) == pytest.approx(0.85)  # at that size, exactly the share
    assert mr.bytes_for_share(line._replace(fixed_us=4.0), 0.85) == pytest.approx(2 * need)  # twice the fixed cost
    assert mr.bytes_for_share(line._replace(tb_s=2.5), 0.85) is None  # streaming below the share: never
    assert mr.bytes_for_share(line._replace(copy_tb_s=None), 0.85) is None
    lines = {(x.source, x.provider): x for x in ll.launch_lines(_records())}
    assert lines[("CUDA graph", "sm90/12")].copy_tb_s == pytest.approx(3.0)  # the run's own copy, carried by its lines


def test_chapter_12_draws_the_lines():
    from pathlib import Path

    source = (Path(__file__).resolve().parents[1] / "notebooks" / "12_memory_roofline.md").read_text()
    assert "mroof.launch_figure(" in source and "mroof.launch_table(" in source and 'arch="sm100"))' in source


CASES = {"launch_figure": lambda tmp_path: mr.launch_figure(_records()),
         "launch_figure_empty": lambda tmp_path: mr.launch_figure([])}


@pytest.mark.parametrize("name", sorted(CASES))
def test_figure_is_legible(name, tmp_path, monkeypatch):
    monkeypatch.setitem(test_viz.CASES, name, (None, "fast", CASES[name]))
    test_viz.test_figure_is_legible_at_page_width(name, tmp_path)


def test_the_b200_kit_prints_each_kernels_line():
    from gemm_course.measure import b200_records

    blackwell = [dict(r, step=r["step"].replace("sm90", "sm100"), _tag="decode12") for r in _records() if r["kind"] == "bench"]
    lines = b200_records.decode_lines(blackwell)
    assert "decode12 sm100/12 at up to 16 tokens: 7.0 us per launch + the bytes at 3.20 TB/s" in "\n".join(lines)
    text = "\n".join(lines)
    assert "decode12 cuBLAS at up to 16 tokens: 7.5 us per launch + the bytes at 3.10 TB/s (farthest of 12 shapes" in text
    without = [{k: v for k, v in r.items() if k != "bandwidth"} for r in blackwell]  # no bytes recorded: no line
    assert not any("per launch" in line for line in b200_records.decode_lines(without))
