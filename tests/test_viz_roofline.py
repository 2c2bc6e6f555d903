"""Chapter 12's figures (``gemm_course.viz.memory_roofline``): the rooflines from the hardware
table, and the decode run's figures, drawn from synthetic records (never under results/) and
saying "no record yet" without them. Each figure also passes test_viz's legibility check."""

from __future__ import annotations

import pytest
import test_viz
from synthetic import decode_record

from gemm_course import hardware
from gemm_course.measure import records as rec
from gemm_course.runtime.problem import GemmProblem
from gemm_course.viz import memory_roofline as mr

pytestmark = pytest.mark.fast

GPU = "NVIDIA H100 80GB HBM3"
MS = (1, 16, 64, 128, 256)
NKS = ((4096, 4096), (14336, 4096))


def _bench(step, shape, step_ms, cublas_ms, name="20261207T010000Z_decode12.json"):
    r = decode_record(shape, step_ms, cublas_ms, "2026-12-07T01:00:00", name=name, gpu=GPU, copy=3.0)
    return dict(r, step=step, kind="bench", ratio_to_cublas=cublas_ms / step_ms, time_ms={"median": step_ms},
                cublas_time_ms={"median": cublas_ms})


def decode12_records(name="20261207T010000Z_decode12.json"):
    out = []
    for m in MS:
        for n, k in NKS:
            floor_ms = GemmProblem(m, n, k).min_bytes / 3.0e12 * 1e3  # at the copy bandwidth
            out.append(_bench("sm90/12", (m, n, k), floor_ms / 0.88, floor_ms / 0.8, name))
            out.append(_bench("sm90/11", (m, n, k), floor_ms / 0.6, floor_ms / 0.8, name))
    return out


def graph_records():
    out = []
    for m, (n, k) in [(1, (4096, 4096)), (16, (4096, 4096)), (128, (14336, 4096))]:
        problem = GemmProblem(m, n, k)
        floor_ms = problem.min_bytes / 3.0e12 * 1e3
        for step, share in (("sm90/12", 0.9), ("sm90/11", 0.6)):
            from gemm_course.measure import bench

            out.append({"kind": "decode_graph", "step": step, "shape": {"m": m, "n": n, "k": k}, "gpu": GPU,
                        "date": "2026-12-07T02:00:00", "torch": "2.11", "cutlass_dsl": "4.8.1",
                        "_file": "results/x/20261207T020000Z_decode_graph.json",
                        "step_ms": floor_ms / share, "cublas_ms": floor_ms / 0.8, "ratio": 0.8 / share,
                        "bandwidth": bench.bandwidth_fields(problem, floor_ms / share, floor_ms / 0.8, GPU, 3.0),
                        "protocol": {"sets": 3, "launches_per_graph": 200, "replays": 5, "rounds": 5}})
    return out


def _texts(fig):
    return " ".join(t.get_text() for ax in fig.axes for t in ax.texts)


def test_ridges_and_littles_law_come_from_the_hardware_table():
    for card in hardware.CARDS.values():
        r = mr.ridge_points(card)
        assert r["datasheet"] == pytest.approx(card.bf16_dense_tflops / card.hbm_tb_s)
        if card.measured_copy_tb_s:
            assert r["measured"] == pytest.approx(card.measured_bf16_tflops / card.measured_copy_tb_s)
        else:
            assert r["measured"] is None
    h100 = hardware.H100_SXM
    assert mr.littles_law_bytes(h100, 1.0) == pytest.approx(h100.measured_copy_tb_s * 1e12 / h100.sms * 1e-6)
    assert mr.littles_law_bytes(hardware.B200, 2.0) == pytest.approx(2 * hardware.B200.hbm_tb_s * 1e12 / hardware.B200.sms * 1e-6)
    # a decode GEMM is about M FLOP per byte: under every ridge for M <= 128
    for m in (1, 16, 128):
        ai = GemmProblem(m, 4096, 4096).arithmetic_intensity
        assert ai < m + 1 and all(ai < mr.ridge_points(c)["datasheet"] for c in hardware.CARDS.values())


def test_rooflines_draw_both_roofs_where_measured():
    fig = mr.rooflines(mr.problems(MS, 4096, 4096))
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert any("B200, measured: not yet" in t for t in labels)
    for card in (hardware.H100_SXM, hardware.H200):
        assert any(t.startswith(f"{card.name}, measured: copy {card.measured_copy_tb_s:g}") for t in labels)
    assert sum("FLOP/B" in t and t.startswith("M = ") for t in labels) == len(MS)
    assert fig.axes[0].get_xscale() == "log" and "not a timing" in fig.caption


def test_without_records_every_figure_says_so(tmp_path):
    empty = rec.load_records(str(tmp_path / "results"), kind=None)
    assert mr.decode_runs(empty) == [] and mr.graph_runs(empty) == [] and mr.headline(empty) is None
    assert "No record yet" in _texts(mr.decode_bandwidth(empty))
    assert "No record yet" in _texts(mr.graph_times(empty))
    assert mr.decode_table(empty).startswith("No record yet")
    # the committed results: a message until a step-12 run is recorded, then the run
    committed = rec.load_records()
    assert ("No record yet" in _texts(mr.decode_bandwidth(committed))) is (not mr.decode_runs(committed))
    graphs = rec.load_records(kind="decode_graph")
    assert ("No record yet" in _texts(mr.graph_times(graphs))) is (not mr.graph_runs(graphs))


def test_decode_runs_keep_the_newest_decode12_file_only():
    old = decode12_records("20261201T000000Z_decode12.json")
    new = decode12_records()
    other = [dict(r, _file="20261207T030000Z_decode.json") for r in new]  # step 11's older decode class
    found = mr.decode_runs(old + new + other)
    assert len(found) == len(new) and {r["_file"] for r in found} == {"20261207T010000Z_decode12.json"}


def test_decode_figure_and_table_from_records():
    records = decode12_records()
    fig = mr.decode_bandwidth(records)
    lines = [ln for ln in fig.axes[0].get_lines() if ln.get_linestyle() == "-" and len(ln.get_xdata()) == len(MS)]
    medians = {ln.get_label(): list(ln.get_ydata()) for ln in lines}
    twelve = medians["sm90/12 (median over shapes)"]
    assert twelve == pytest.approx([0.88 * 3.0] * len(MS))  # the synthetic step 12 at 88% of the copy bandwidth
    assert medians["cuBLAS, same rounds (median)"] == pytest.approx([0.8 * 3.0] * len(MS))
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert "copy, measured in the run: 3.00 TB/s" in legend and "datasheet HBM: 3.35 TB/s" in legend
    assert GPU in fig.caption and "decode12" in fig.caption
    table = mr.decode_table(records)
    assert table.count("| sm90/12 |") == len(MS) and "88%" in table and "80%" in table
    assert all(row.endswith("| - |") for row in table.splitlines() if "| sm90/" in row)  # no run in the other order
    reversed_ = [dict(r, _file="20261207T011000Z_decode12_reversed.json", ratio_to_cublas=r["ratio_to_cublas"] * 0.95)
                 for r in records if r["step"] == "sm90/12" and r["shape"]["m"] != 1]
    assert mr.decode_runs(records + reversed_) == mr.decode_runs(records)  # the other order is not the run
    both = mr.decode_table(records + reversed_)
    rows = {(row.split("|")[1].strip(), row.split("|")[3].strip()): row for row in both.splitlines() if "| sm90/" in row}
    assert rows["16", "sm90/12"].endswith(f"| {0.88 / 0.8 * 0.95:.3f} ({len(NKS)} shapes) |")
    assert rows["1", "sm90/12"].endswith("| - |") and rows["16", "sm90/11"].endswith("| - |")
    elsewhere = [dict(r, gpu="NVIDIA H200") for r in reversed_]  # another card's run in the other order is not this one's
    assert all(row.endswith("| - |") for row in mr.decode_table(records + elsewhere).splitlines() if "| sm90/" in row)
    h200 = [dict(r, gpu="NVIDIA H200", date="2026-12-08T00:00:00", _file="20261208T000000Z_decode12.json") for r in records]
    assert mr.decode_gpus(records + h200) == ["NVIDIA H200", GPU] and mr.decode_gpus(reversed_) == []
    h = mr.headline(records)
    assert h["to_cublas"] == pytest.approx(0.88 / 0.8) and h["over_step11"] == pytest.approx(0.88 / 0.6)
    assert h["copy_share_small_m"] == pytest.approx(0.88) and h["shapes"] == len(MS) * len(NKS)


def test_each_card_reads_its_own_decode_run():
    """The Blackwell table reads sm100/12 and sm100/11 (the B200 kit's run, same tags), never Hopper's
    records, and says what writes it until then."""
    hopper = decode12_records()
    assert mr.decode_table(hopper, arch="sm100") == mr.decode_table([], arch="sm100")
    assert "No record yet of sm100/12's decode run" in mr.decode_table(hopper, arch="sm100")
    assert "B200 kit" in mr.decode_table([], arch="sm100") and "gpu_decode12.sh" in mr.decode_table([])
    blackwell = [dict(r, step=r["step"].replace("sm90", "sm100"), gpu="NVIDIA B200",
                      _file="20270101T000000Z_decode12.json") for r in hopper]
    table = mr.decode_table(hopper + blackwell, arch="sm100")
    assert table.count("| sm100/12 |") == len(MS) and "| sm90/" not in table and "NVIDIA B200" in table
    assert mr.decode_table(hopper + blackwell) == mr.decode_table(hopper)  # the Hopper table keeps to Hopper's run


def test_graph_figure_from_records():
    fig = mr.graph_times(graph_records())
    bars = [p.get_width() for p in fig.axes[0].patches]
    assert len(bars) == 3 * 3  # three shapes: step 12, step 11, cuBLAS
    assert "90% of copy" in _texts(fig) and "200 launches per graph" in fig.caption


def test_pdl_figure_compares_runs_with_and_without_it():
    """A dot per run and M for sm90/12 (with pdl where the record's config says so) and cuBLAS, at the
    smallest weight only; the caption says where a run without pdl had the same tile."""
    before = graph_records()
    after = [dict(r, _file="results/x/20261207T030000Z_decode_graph.json", date="2026-12-07T03:00:00",  # and the
                  config={"tile_m": 64, "pdl": True, "prefetch_w": 8, "launch_after_loads": True})  # fields pdl brings
             for r in graph_records()]
    for r in before:
        r["config"] = {"tile_m": 64} if r["shape"]["m"] == 1 else {"tile_m": 128}
    for r in after:
        r["bandwidth"] = dict(r["bandwidth"], fraction_of_copy=0.85)
    fig = mr.graph_pdl(before + after)
    dots = {line.get_label(): len(line.get_xdata()) for line in fig.axes[0].lines if not line.get_label().startswith("_")}
    assert dots["sm90/12 with pdl"] == dots["sm90/12 without pdl"] == 2  # M = 1 and 16 at 4096 x 4096, not 14336
    assert dots["cuBLAS"] == 4
    assert "At M = 1 a run without pdl had the same tile" in fig.caption and "at M = 16 the tile differs" in fig.caption
    assert "No record yet" in _texts(mr.graph_pdl([]))
    blackwell = [dict(r, step=r["step"].replace("sm90", "sm100"), gpu="NVIDIA B200", date="2026-12-09T00:00:00",
                      _file="results/nvidia-b200/20261209T000000Z_decode_graph.json") for r in after]
    newer = mr.graph_pdl(before + after + blackwell)  # the B200 kit's run, newer, leaves the Hopper figure as it was
    assert {line.get_label(): len(line.get_xdata()) for line in newer.axes[0].lines
            if not line.get_label().startswith("_")} == dots


def test_two_floors_are_the_models_beside_the_run():
    """Each layer's panel: the bytes' and the MMAs' floors over every M of the decode run (the model, for the
    run's config where recorded), and the recorded medians of step 12 and cuBLAS at the run's shapes only."""
    from gemm_course.measure.sweep_shapes import DECODE12_LAYERS, DECODE12_MS
    from gemm_course.teaching import decode_explorer as de

    model = mr.two_floors([])
    panels = [ax for ax in model.axes if ax.get_title()]
    assert [ax.get_title() for ax in panels] == [f"{n} x {k}" for n, k in DECODE12_LAYERS]
    for ax, (n, k) in zip(panels, DECODE12_LAYERS):
        styles = [line.get_linestyle() for line in ax.get_lines()]
        assert styles == ["--", ":"]  # no run: the two floors alone
        mma = ax.get_lines()[1].get_ydata()
        want = [de.mma_floor_us(de.layout("sm90/12", m, n, k), hardware.H100_SXM) for m in DECODE12_MS]
        assert list(mma) == pytest.approx(want)
    assert "no decode run recorded yet" in model.caption
    six = [ax for ax in model.axes if ax.get_title() == "6144 x 4096"][0]
    assert six.get_lines()[1].get_ydata()[-1] < six.get_lines()[0].get_ydata()[-1]  # 256 tokens, step 11's kernel: under
    fig = mr.two_floors(decode12_records())
    panel = [ax for ax in fig.axes if ax.get_title() == "4096 x 4096"][0]
    measured = {line.get_label(): list(line.get_ydata()) for line in panel.get_lines() if line.get_linestyle() == "None"}
    floor_ms = {m: GemmProblem(m, 4096, 4096).min_bytes / 3.0e12 * 1e3 for m in MS}
    assert measured["sm90/12, measured"] == pytest.approx([floor_ms[m] / 0.88 * 1e3 for m in MS])
    assert measured["cuBLAS, same rounds"] == pytest.approx([floor_ms[m] / 0.8 * 1e3 for m in MS])
    assert "bytes at 3.00 TB/s" in panel.get_lines()[0].get_label() and GPU in fig.caption


def _pairs_run(tmp_path):
    """A synthetic A/B file as scripts/gpu_tune.py writes it: rows with their configs, at M = 128 and 256."""
    import gzip
    import json

    def row(shape, tile_n, cm, cn, ratio, stream_k=False, stages=13):
        return {"shape": shape, "variant": "x", "ratio_to_cublas": ratio, "median_ms": 0.02,
                "config": {"swap_ab": True, "tile_m": 64, "tile_n": tile_n, "cluster_m": cm, "cluster_n": cn,
                           "stream_k": stream_k, "stages": stages}}

    rows = []
    for shape, base in (("128x4096x4096", 0.9), ("128x2048x8192", 0.8)):
        rows += [row(shape, 128, 1, 1, base, stages=9), row(shape, 128, 1, 1, 0.1, stages=9), row(shape, 64, 1, 1, base + 0.02),
                 row(shape, 64, 2, 1, base + 0.04), row(shape, 64, 1, 2, base + 0.1), row(shape, 64, 1, 1, 0.2, stream_k=True)]
    rows.append(row("256x4096x4096", 128, 1, 2, 0.3))  # another M: left out
    folder = tmp_path / "results" / "tuning"
    folder.mkdir(parents=True)
    with gzip.open(folder / "tune_run99_pairs.json.gz", "wt") as f:
        json.dump({"env": {"gpu": GPU, "driver": "580", "torch": "2.11", "cutlass_dsl": "4.8.1"}, "rows": rows}, f)
    return str(tmp_path / "results")


def test_the_pairs_ab_draws_each_sharing_from_its_recorded_config(tmp_path):
    fig = mr.pairs_ab(_pairs_run(tmp_path), run="tune_run99_pairs")
    ax = fig.axes[0]
    bars = [round(p.get_height(), 3) for p in ax.patches]
    assert bars == [0.9, 0.8, 0.92, 0.82, 0.94, 0.84, 1.0, 0.9]  # per kind, both layers: the first row of a config, no split K
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels[1:] == ["one CTA, all tokens", "two CTAs, nothing shared", "two W tiles share x (2 x 1)",
                          "a pair shares W (1 x 2)"]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["4096 x 4096", "2048 x 8192"]
    assert "one CTA, all tokens 9; two CTAs, nothing shared 13" in fig.caption and GPU in fig.caption
    assert "No A/B run" in _texts(mr.pairs_ab(str(tmp_path / "none"), run="tune_run99_pairs"))


def test_the_split_ab_compares_the_rule_then_with_k_whole(tmp_path):
    import gzip
    import json

    def row(shape, variant, tile_m, split, ratio):
        return {"shape": shape, "variant": variant, "ratio_to_cublas": ratio, "median_ms": 0.02,
                "config": {"tile_m": tile_m, "tile_n": 16, "stream_k": split, "stages": 16}}

    rows = [row("16x4096x4096", "sm90/12", 64, True, 0.99), row("16x4096x4096", "sm90/12:stream_k=false", 64, False, 1.05),
            row("16x4096x4096", "sm90/12:max_parts=8", 64, True, 0.5), row("16x1024x4096", "sm90/12", 64, True, 1.01),
            row("16x1024x4096", "sm90/12:stream_k=false", 64, False, 0.95),
            row("16x14336x4096", "sm90/12", 128, True, 0.3), row("1x4096x4096", "sm90/12", 64, True, 0.2)]
    folder = tmp_path / "results" / "tuning"
    folder.mkdir(parents=True)
    with gzip.open(folder / "tune_run98_split.json.gz", "wt") as f:
        json.dump({"env": {"gpu": GPU}, "rows": rows}, f)
    fig = mr.split_ab(str(tmp_path / "results"), run="tune_run98_split")
    ax = fig.axes[0]
    assert [round(p.get_height(), 3) for p in ax.patches] == [0.99, 1.01, 1.05, 0.95]  # split, then whole; 64-row, M = 16
    assert [t.get_text() for t in ax.get_xticklabels()] == ["4096 x 4096", "1024 x 4096"]
    assert "No A/B run" in _texts(mr.split_ab(str(tmp_path / "none"), run="tune_run98_split"))


def test_the_pdl_ab_pairs_rows_by_their_recorded_pdl(tmp_path):
    """Per shape: one launch at a time (median time without over with) and back to back (the burst's rate
    with over without); rows paired by the config each recorded, whichever variant name carried it."""
    import gzip
    import json

    def row(shape, variant, pdl, median, seed):
        return {"shape": shape, "variant": variant, "median_ms": median, "seed_tflops": seed, "ratio_to_cublas": 1.0,
                "config": {"pdl": pdl}}

    rows = [row("16x4096x4096", "sm90/12", False, 0.020, 100.0), row("16x4096x4096", "sm90/12:pdl=true", True, 0.019, 125.0),
            row("16x4096x4096", "sm90/12:max_parts=8", True, 0.5, 1.0),  # another variant: not the A/B
            row("1x1024x4096", "sm90/12", True, 0.010, 90.0), row("1x1024x4096", "sm90/12:pdl=false", False, 0.010, 60.0),
            row("16x14336x4096", "sm90/12", False, 0.04, 50.0)]  # no pair: left out
    folder = tmp_path / "results" / "tuning"
    folder.mkdir(parents=True)
    with gzip.open(folder / "tune_run97_pdl.json.gz", "wt") as f:
        json.dump({"env": {"gpu": GPU}, "rows": rows}, f)
    fig = mr.pdl_ab(str(tmp_path / "results"), run="tune_run97_pdl")
    heights = [round(p.get_height(), 3) for p in fig.axes[0].patches]
    assert heights == [round(0.020 / 0.019, 3), 1.0, 1.25, 1.5]  # per launch for both shapes, then back to back
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["M = 16\n4096x4096", "M = 1\n1024x4096"]
    assert "No A/B run" in _texts(mr.pdl_ab(str(tmp_path / "none"), run="tune_run97_pdl"))


def test_the_handover_ab_draws_the_pairs_hand_over_cold_and_warm(tmp_path):
    """Each layer's bars are the committed A/B rows of the pairs' hand-over, W from HBM then W in L2; the
    ticks say what each layer's recorded config launches, from the schedule (not typed)."""
    from gemm_course.measure.records import load_tuning

    fig = mr.handover_ab()
    ax = fig.axes[0]
    cold, warm = ({r["shape"]: r["median_ms"] * 1e3 for r in load_tuning(run)["rows"] if r["variant"] == mr.HANDOVER_VARIANT}
                  for run in mr.HANDOVER_AB_RUNS)
    shapes = list(cold)
    heights = [p.get_height() for p in ax.patches]
    assert heights == pytest.approx([cold[sh] for sh in shapes] + [warm[sh] for sh in shapes])
    ticks = [t.get_text() for t in ax.get_xticklabels()]
    assert ticks[0] == "2048 x 8192\n128 CTAs, K in 2 parts" and ticks[2] == "4096 x 4096\n128 CTAs, K whole"
    assert "No A/B runs" in _texts(mr.handover_ab(str(tmp_path / "none")))


def graph_ab_records():
    """An older and a newer A/B file inside graphs: two variants at two Ms each (the newer's shares differ)."""
    out = []
    files = (("20261207T030000Z_decode_graph_prefetch.json", 0.5), ("20261207T040000Z_decode_graph_prefetch.json", 0.8))
    for name, base in files:
        for m in (1, 64):
            for j, variant in enumerate(("sm90/12", "sm90/12:prefetch_w=8,pdl=true")):
                out.append({"kind": "decode_graph_ab", "step": "sm90/12", "variant": variant,
                            "shape": {"m": m, "n": 4096, "k": 4096},
                            "gpu": GPU, "date": name[:15], "torch": "2.11", "cutlass_dsl": "4.8.1", "driver": "580",
                            "_file": f"results/x/{name}", "bandwidth": {"fraction_of_copy": base + 0.01 * (m == 64) + 0.05 * j,
                                                                          "copy_tb_s": 3.0}})
    return out


def test_the_graph_ab_draws_the_newest_files_shares_per_variant():
    assert "No record yet" in _texts(mr.graph_ab(graph_records()))  # the chapter's graph runs are not an A/B
    fig = mr.graph_ab(graph_records() + graph_ab_records())
    ax = fig.axes[0]
    heights = sorted(round(p.get_height(), 6) for p in ax.patches)
    assert heights == sorted(round(100 * x, 6) for x in (0.8, 0.81, 0.85, 0.86))  # the newer file only
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert sorted(labels) == sorted(["the rule then", "prefetch_w=8, pdl=true", "85% of the copy bandwidth"])
    assert [t.get_text() for t in ax.get_xticklabels()] == ["M = 1", "M = 64"]
    assert "040000Z_decode_graph_prefetch" in fig.caption and GPU in fig.caption
    # a newer A/B of the Blackwell step (the B200 kit's launch A/B) is another card's: the Hopper figure keeps its own
    blackwell = [dict(r, step="sm100/12", variant=r["variant"].replace("sm90", "sm100"),
                      _file="results/y/20261208T000000Z_x.json") for r in graph_ab_records()]
    assert "040000Z_decode_graph_prefetch" in mr.graph_ab(graph_ab_records() + blackwell).caption
    assert "20261208T000000Z_x" in mr.graph_ab(graph_ab_records() + blackwell, arch="sm100").caption
    assert "the rule ran" not in fig.caption  # no config recorded: nothing to compare
    # where a variant's config is the rule's at some M, the caption says so (the same kernel twice)
    same = [dict(r, config={"pdl": True, "prefetch_w": 8 if r["shape"]["m"] == 1 or ":" in r["variant"] else 0})
            for r in graph_ab_records()]
    caption = mr.graph_ab(same).caption
    assert "at M = 1 the rule ran prefetch_w=8, pdl=true" in caption and "at M = 64" not in caption


def test_the_graph_ab_draws_one_layer_of_a_file_that_measured_two():
    """A file with one token at two layers (as the one-token A/B wrote): the bars are the layer measured most
    (here at M = 1 and 16), not a share of the other layer drawn under this one's label; the caption names it."""
    rows = [r for r in graph_ab_records() if r["_file"].endswith("040000Z_decode_graph_prefetch.json")]
    wide = [dict(r, shape={"m": 1, "n": 4096, "k": 14336}, bandwidth={"fraction_of_copy": 0.98, "copy_tb_s": 3.0})
            for r in rows if r["shape"]["m"] == 1]
    fig = mr.graph_ab(rows + wide)
    ax = fig.axes[0]
    assert 98.0 not in [round(p.get_height(), 6) for p in ax.patches]
    assert sorted(round(p.get_height(), 6) for p in ax.patches) == sorted(round(100 * x, 6) for x in (0.8, 0.81, 0.85, 0.86))
    assert ax.get_xlabel() == "tokens, layer 4096 x 4096" and "also holds the layers 4096 x 14336" in fig.caption
    assert "also holds" not in mr.graph_ab(rows).caption


def test_partly_empty_token_tiles_ab_draws_both_runs_per_series():
    """The A/B behind ROWS_IN_N_TOKENS: four series at the four shapes of its two runs (160 and 200 tokens),
    each label naming its M; the 128-row pairs ahead of the rule then at every shape, as the rule now says."""
    fig = mr.partial_tiles_ab()
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["160 x 14336 x 4096", "160 x 6144 x 4096",
                                                             "200 x 6144 x 4096", "200 x 14336 x 4096"]
    bars = {c.get_label(): [p.get_height() for p in c.patches] for c in ax.containers}
    assert len(bars) == 4 and all(len(v) == 4 for v in bars.values())
    rule_then, pairs = bars["the rule then: two 128-token tiles, W's rows in N"], bars["a pair over 128-row W tiles"]
    assert all(p > r for p, r in zip(pairs, rule_then))
    assert "tune_run63_decode12_partial_m_160" in fig.caption and "tune_run64_decode12_partial_m_200" in fig.caption
    assert "No A/B runs" in _texts(mr.partial_tiles_ab(results_dir="/nonexistent"))


CASES = {
    "graph_pdl": lambda tmp_path: mr.graph_pdl(graph_records()),
    "rooflines": lambda tmp_path: mr.rooflines(mr.problems(MS, 4096, 4096)),
    "decode_bandwidth": lambda tmp_path: mr.decode_bandwidth(decode12_records()),
    "decode_bandwidth_empty": lambda tmp_path: mr.decode_bandwidth([]),
    "graph_times": lambda tmp_path: mr.graph_times(graph_records()),
    "graph_times_empty": lambda tmp_path: mr.graph_times([]),
    "two_floors": lambda tmp_path: mr.two_floors(decode12_records()),
    "two_floors_model": lambda tmp_path: mr.two_floors([]),
    "pairs_ab": lambda tmp_path: mr.pairs_ab(_pairs_run(tmp_path), run="tune_run99_pairs"),
    "split_ab": lambda tmp_path: mr.split_ab(),
    "partial_tiles_ab": lambda tmp_path: mr.partial_tiles_ab(),
    "partial_tiles_ab_missing": lambda tmp_path: mr.partial_tiles_ab(results_dir=str(tmp_path)),
    "pdl_ab": lambda tmp_path: mr.pdl_ab(),
    "graph_ab": lambda tmp_path: mr.graph_ab(graph_ab_records()),
    "graph_ab_empty": lambda tmp_path: mr.graph_ab([]),
    "handover_ab": lambda tmp_path: mr.handover_ab(),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_figure_is_legible(name, tmp_path, monkeypatch):
    monkeypatch.setitem(test_viz.CASES, name, (None, "fast", CASES[name]))
    test_viz.test_figure_is_legible_at_page_width(name, tmp_path)
