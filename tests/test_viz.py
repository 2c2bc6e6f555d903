"""Figures and the tile explorer, on a CPU.

Bench records here are synthetic, written to a temporary directory inside each test (never under
results/): they exercise the drawing code, not the hardware.
"""

import base64
import html
import inspect
import io
import re
import warnings

import numpy as np
import pytest
from figure_cases import CASES
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from synthetic import bench_record, clocks_record, sweep_record, write_runs

from gemm_course import viz
from gemm_course.rules import tile_order
from gemm_course.runtime import ladder
from gemm_course.runtime.problem import GemmProblem
from gemm_course.teaching import sim, widgets
from gemm_course.viz import _style


def _bars(fig):
    """(value, hatched) of every bar in the ladder chart (horizontal bars: the value is the width),
    the measured panel's first, then the seed's."""
    return [(p.get_width(), bool(p.get_hatch())) for ax in fig.axes for p in ax.patches if p.get_height() < 1]


def _seed_heights(fig):
    return sorted(h for h, hatched in _bars(fig) if hatched)


@pytest.mark.fast
def test_ladder_bars_one_run_draws_one_cublas_line(tmp_path):
    recs = write_runs(tmp_path, {"a": [bench_record("sm90/2", 50.0, 400.0, "2030-01-01T00:00:00"),
                                   bench_record("sm90/3", 90.0, 420.0, "2030-01-01T00:00:01")]})
    fig = viz.ladder_bars(recs, arch="sm90")
    measured = sorted(h for h, hatched in _bars(fig) if not hatched)
    assert measured == [50.0, 90.0]
    assert _seed_heights(fig) == sorted(viz.SEED_B200_TFLOPS.values())
    lines = [ln for ln in fig.axes[0].get_lines() if ln.get_linestyle() == "--"]
    assert len(lines) == 1 and lines[0].get_xdata()[0] == pytest.approx(420.0)  # cuBLAS timed with step 3, the highest
    assert "same run as step 3" in fig.caption and "Synthetic GPU" in fig.caption and "quoted" in fig.caption
    assert "timed cuBLAS at 400 TFLOP/s" in fig.caption  # the other bar's own cuBLAS, stated
    shown = " ".join(t.get_text() for t in fig.axes[0].texts)
    assert "21% of cuBLAS" in shown and "12% of cuBLAS" in shown  # 90 / 420 and 50 / 420: one reference
    assert fig.axes[0].get_xscale() == "linear" and fig.axes[0].get_xlim()[1] < 420.0 * 1.1
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert viz.SEED_LABEL in legend and "measured: Synthetic GPU, 2030-01-01" in legend
    # the seed's quoted bars are a group of their own, apart from the measured ones
    seed_ax = fig.axes[1]
    assert all(p.get_hatch() for p in seed_ax.patches) and "not measured" in seed_ax.get_title(loc="left")
    assert not any(p.get_hatch() for p in fig.axes[0].patches)
    # own_ratios: each bar's ratio to its own run's cuBLAS, two decimals as the tables print it
    own = " ".join(t.get_text() for t in viz.ladder_bars(recs, arch="sm90", own_ratios=True, seed=False).axes[0].texts)
    assert "0.21 of cuBLAS" in own and "0.12 of cuBLAS" in own and "%" not in own  # 90 / 420, 50 / 400


@pytest.mark.fast
def test_ladder_bars_several_runs_share_one_cublas_reference(tmp_path):
    """Records from different runs: still one cuBLAS per figure (the highest step's run), named in the
    caption with the other runs' cuBLAS beside it; no per-bar cuBLAS ticks."""
    recs = write_runs(tmp_path, {"a": [bench_record("sm90/2", 50.0, 400.0, "2030-01-01T00:00:00")],
                             "b": [bench_record("sm90/3", 90.0, 500.0, "2030-01-02T00:00:00")]})
    fig = viz.ladder_bars(recs, arch="sm90")
    lines = [ln for ln in fig.axes[0].get_lines() if ln.get_linestyle() == "--"]
    assert len(lines) == 1 and lines[0].get_xdata()[0] == pytest.approx(500.0)
    ticks = [c for c in fig.axes[0].collections if len(c.get_segments()) == 1
             and c.get_segments()[0][0][0] == c.get_segments()[0][1][0]]
    assert not ticks
    assert "one cuBLAS reference" in fig.caption and "500 TFLOP/s" in fig.caption and "400 TFLOP/s" in fig.caption
    assert fig.caption.count("measured on") == 2
    assert "10% of cuBLAS" in " ".join(t.get_text() for t in fig.axes[0].texts)  # 50 / 500


@pytest.mark.fast
def test_ladder_bars_newest_record_wins(tmp_path):
    recs = write_runs(tmp_path, {"a": [bench_record("sm90/3", 10.0, 400.0, "2030-01-01T00:00:00"),
                                   bench_record("sm90/3", 20.0, 400.0, "2030-02-01T00:00:00")]})
    assert [h for h, hatched in _bars(viz.ladder_bars(recs)) if not hatched] == [20.0]


@pytest.mark.fast
def test_ladder_bars_without_records_shows_only_the_quoted_seed(tmp_path):
    fig = viz.ladder_bars(write_runs(tmp_path, {}), arch="sm90")
    assert all(hatched for _, hatched in _bars(fig))
    assert _seed_heights(fig) == sorted(viz.SEED_B200_TFLOPS.values())
    texts = " ".join(t.get_text() for t in fig.axes[0].texts)
    assert "No measured record" in texts and "No record" in fig.caption


@pytest.mark.fast
def test_ladder_bars_other_shape_has_no_seed_bars(tmp_path):
    recs = write_runs(tmp_path, {"a": [bench_record("sm90/2", 60.0, 600.0, "2030-01-01T00:00:00", shape=8192)]})
    fig = viz.ladder_bars(recs, shape=(8192, 8192, 8192))
    assert _bars(fig) == [(60.0, False)]
    assert "quoted" not in fig.caption


@pytest.mark.fast
def test_ladder_bars_live_records_are_drawn_beside(tmp_path):
    recs = write_runs(tmp_path, {"a": [bench_record("sm90/2", 50.0, 400.0, "2030-01-01T00:00:00")]})
    live = bench_record("sm90/2", 55.0, 410.0, "2030-03-01T00:00:00")
    fig = viz.ladder_bars(recs, live=[live])
    assert sorted(h for h, hatched in _bars(fig) if not hatched) == [50.0, 55.0]
    assert "this notebook" in fig.caption


@pytest.mark.fast
def test_roofline():
    p = GemmProblem.square(4096)
    fig = viz.roofline(p, 1000.0, 5.0, [{"label": "a", "intensity": 0.5}, {"label": "b", "intensity": 10, "tflops": 20}],
                       ceilings={"fp32": 60.0})
    roof = fig.axes[0].get_lines()[0]
    assert max(roof.get_ydata()) == pytest.approx(1000.0)
    assert min(roof.get_ydata()) == pytest.approx(min(roof.get_xdata()) * 5.0)


@pytest.mark.fast
def test_layout_grid_and_ownership_figures():
    table = {"text": "(2,3):(3,1)", "offsets": [[0, 1, 2], [3, 4, 5]]}
    ax = viz.layout_grid(table, highlight=[(1, 2)]).axes[0]
    cells = {(round(t.get_position()[1]), round(t.get_position()[0])): t.get_text() for t in ax.texts}
    assert cells == {(r, c): str(table["offsets"][r][c]) for r in range(2) for c in range(3)}
    outlined = [p for p in ax.patches if isinstance(p, Rectangle)]
    assert [(p.get_y() + 0.5, p.get_x() + 0.5) for p in outlined] == [(1, 2)]
    assert "(2,3):(3,1)" in ax.get_title()
    owners = viz.owners_from_lists({0: [(0, 0), (0, 1)], 1: [(1, 0), (1, 1)]}, (2, 2), source="synthetic")
    assert owners["thread"] == [[0, 0], [1, 1]] and owners["value"] == [[0, 1], [0, 1]]
    assert "2 threads" in viz.ownership(owners, zoom=(2, 2), group_size=1).caption
    with pytest.raises(ValueError, match="owned by threads"):
        viz.owners_from_lists({0: [(0, 0)], 1: [(0, 0)]}, (1, 1))
    with pytest.raises(ValueError, match="no owner"):
        viz.owners_from_lists({0: [(0, 0)]}, (1, 2))


@pytest.mark.fast
def test_tmem_map_colours_each_used_cell_by_its_row():
    addresses = {(r, c): (32 * (r // 16) + r % 16, c) for r in range(64) for c in range(8)}
    fig = viz.tmem_map(addresses)
    grid = fig.axes[0].get_images()[0].get_array()
    assert grid.shape == (128, 8)
    for (row, _), (lane, col) in addresses.items():
        assert grid[lane, col] == row
    assert int(np.isfinite(np.ma.filled(grid, np.nan)).sum()) == len(addresses)  # lanes 16-31 of each warp unused
    notes = [t.get_text() for t in fig.axes[0].texts]
    assert notes[1] == "warp 1 may read lanes 32-63\nrows 16-31 in lanes 32-47"


@pytest.mark.fast
def test_tile_orders_number_every_tile():
    fig = viz.tile_orders(4, 6, kinds=("row", "gilbert"), group=2, wave=5)
    for ax, kind in zip(fig.axes, ("row", "gilbert")):
        numbers = sorted(int(t.get_text()) for t in ax.texts)
        assert numbers == list(range(24))
        path = tile_order.order(kind, 4, 6)
        first = [t for t in ax.texts if t.get_text() == "0"][0]
        assert first.get_position() == (path[0][1], path[0][0])


@pytest.mark.compile
def test_bank_maps_and_xor_pattern_come_from_the_bank_model():
    fig = viz.bank_maps(("sm90/2", "sm90/3"), rows=8)
    assert "sm90/3: column read 1, row 1" in fig.caption
    assert "row 8" in fig.caption  # step 2's 128-byte row: 8 wavefronts
    fig = viz.xor_pattern("sm90/3")
    cells = [t.get_text().split("\n")[0] for t in fig.axes[0].texts]
    assert cells == [str(r ^ c) for r in range(8) for c in range(8)]
    assert "row XOR chunk" in fig.caption


@pytest.mark.fast
def test_instruction_mix_and_sweep_figures():
    fig = viz.instruction_mix({"x": {"tensor-core MMA": 4, "TMA copy": 2}, "y": {"TMA copy": 16}})
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == ["tensor-core MMA", "TMA copy"]
    rows = [{"ok": True, "step": "s", "target": "t", "label": "a", "registers": 100, "smem_bytes": 2048, "spills": False},
            {"ok": False, "step": "s", "target": "t", "label": "b", "reason": "no"}]
    fig = viz.sweep(rows)
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == ["a"]
    assert "1 invalid configuration left out" in fig.caption


@pytest.mark.fast
def test_k_loop_schedule():
    for arch in ("sm90", "sm100"):
        fig = viz.k_loop_schedule(arch, 4, 2, 40960, k_tiles=2)
        texts = " ".join(t.get_text() for t in fig.axes[0].texts)
        assert "40960 B" in texts and "phase 1" in texts


# ---------------------------------------------------------------------------------------------
# widgets
# ---------------------------------------------------------------------------------------------


@pytest.mark.compile
def test_precompute_sweep_marks_invalid_combinations():
    rows = widgets.precompute_sweep("sm90/1", target="sm_90a")
    assert len(rows) == len(list(__import__("itertools").product(*(v for _, v in ladder.get("sm90/1").knobs))))
    bad = [r for r in rows if not r["ok"]]
    assert bad and all(r["reason"] for r in bad)
    good = [r for r in rows if r["ok"]]
    assert len(good) == len(list(ladder.get("sm90/1").knob_grid()))
    assert all(r["registers"] > 0 and r["smem_bytes"] == 0 for r in good)
    html = widgets.sweep_html(rows)
    assert html.count("<tr") == len(rows) + 1 and "invalid" in html


@pytest.mark.compile
def test_sweep_of_a_tensor_core_step():
    rows = widgets.precompute_sweep("sm90/2")
    by_label = {r["label"]: r for r in rows}
    small, big = by_label["tile_n=64, tile_k=32"], by_label["tile_n=256, tile_k=64"]
    assert small["smem_bytes"] < big["smem_bytes"] and small["registers"] < big["registers"]
    assert all(r["mix"]["tensor-core MMA"] > 0 for r in rows if r["ok"])


@pytest.mark.compile
def test_tile_explorer_drives_without_a_browser():
    import ipywidgets  # noqa: F401  (pinned in requirements.txt: its absence is a failure, not a skip)

    e = widgets.TileExplorer("sm90/2")
    assert e.row["ok"] and e.row["target"] == "sm_90a"
    row = e.select(tile_n=128, tile_k=32)
    assert row["label"] == "tile_n=128, tile_k=32" and "registers/thread" in e.out.value
    row = e.select("sm90/1", target="sm_100a", block_m=32, block_n=64)
    assert not row["ok"] and "invalid" in e.out.value
    labels = [label for label, _ in e.knob_boxes["block_n"].options]
    assert "64 (invalid)" in labels and "16" in labels
    assert e.time_button.disabled or e.can_time()
    with pytest.raises(KeyError):
        e.select(tile_q=1)


@pytest.mark.fast
def test_timing_html_reports_the_ratio_to_cublas():
    text = widgets.timing_html(bench_record("sm90/3", 100.0, 400.0, "2030-01-01T00:00:00"))
    assert "100.0 TFLOP/s" in text and "400.0 TFLOP/s" in text and "25.0%" in text


# ---------------------------------------------------------------------------------------------
# chapters 4-10
# ---------------------------------------------------------------------------------------------


@pytest.mark.fast
def test_ladder_bars_highlight_outlines_the_chapters_steps(tmp_path):
    recs = write_runs(tmp_path, {"a": [bench_record("sm90/3", 50.0, 400.0, "2030-01-01T00:00:00"),
                                   bench_record("sm90/4", 60.0, 400.0, "2030-01-01T00:00:01")]})
    fig = viz.ladder_bars(recs, highlight=(4,), log=False)
    outlined = [p.get_width() for p in fig.axes[0].patches if p.get_height() < 1 and p.get_linewidth() > 1.5]
    assert outlined == [60.0]
    bold = [t.get_text() for t in fig.axes[0].get_yticklabels() if t.get_fontweight() == "bold"]
    assert bold == ["step 4"] and "Outlined: step 4." in fig.caption
    only = viz.ladder_bars(recs, highlight=(4,), log=False, numbers=(4, 5))
    assert [h for h, hatched in _bars(only)] == [60.0]  # step 3 and the seed's bars left out
    assert [t.get_text() for t in only.axes[0].get_yticklabels()] == ["step 4", "step 5"]
    assert len(only.axes) == 1  # no seed panel: the seed quotes no figure for steps 4 and 5
    titles = [t.get_text() for t in only.axes[0].texts]
    assert ladder.get("sm90/4").title in titles  # each step's title above its bar, in full


@pytest.mark.fast
def test_opcode_families_draw_one_bar_per_kernel_and_family():
    ops = {"STG.E": 64, "STSM.16.M88.4": 16, "UTMASTG.2D": 8, "STS": 3}
    fig = viz.opcode_families({"a": ops, "b": {"STG.E": 2}}, {"global": ("STG",), "stmatrix": ("STSM",)})
    counts = sorted(p.get_width() for p in fig.axes[0].patches)
    assert counts == [0, 2, 16, 64]


@pytest.mark.fast
def test_epilogue_path_draws_one_subtile_per_store():
    fig = viz.epilogue_path(64, 256, 64, 32, 2, 128, 16, 8)
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert len(texts) == 8 and texts[3].startswith("sub-tile 3") and "buffer 1" in texts[3]
    assert "2 stmatrix per thread per sub-tile" in fig.caption
    with pytest.raises(ValueError):
        viz.epilogue_path(64, 256, 64, 48, 2, 128, 16, 8)


@pytest.mark.fast
def test_occupancy_bars_outline_the_binding_resource():
    four, five = sim.occupancy(154, 128, 51200), sim.occupancy(154, 256, 67584)
    fig = viz.occupancy_bars({"four": four, "five": five})
    bars = fig.axes[0].patches
    assert [round(p.get_width()) for p in bars] == [occ["limits"][r] for occ in (four, five)
                                                    for r in ("registers", "shared memory", "warps")]
    outlined = [round(p.get_width()) for p in bars if p.get_edgecolor()[3] > 0]
    assert outlined == [four["ctas"], five["ctas"]] == [3, 1]  # the registers bind both
    assert "65536 registers" in fig.caption and "quoted" in fig.caption


@pytest.mark.fast
def test_cluster_multicast_splits_the_shared_tile():
    fig = viz.cluster_multicast(2, 1, 128, 256, 64)
    texts = " ".join(t.get_text() for t in fig.axes[0].texts)
    assert "B rows 0-127\nloaded by CTA 0" in texts and "B rows 128-255\nloaded by CTA 1" in texts
    assert "16 KiB of B" in fig.axes[0].get_title()
    with pytest.raises(ValueError):
        viz.cluster_multicast(3, 1, 128, 256, 64)


@pytest.mark.fast
def test_pipeline_timeline_draws_each_load_and_mma():
    serial = sim.pipeline_model(1, 4, load=3.0, mma=1.0, epilogue=0.0, issue=0.0)
    deep = sim.pipeline_model(4, 8, load=3.0, mma=1.0, epilogue=0.0, issue=0.0)
    fig = viz.pipeline_timeline({"a": serial, "b": deep})
    assert "not a measurement" in fig.caption and len(fig.axes) == 2
    for ax, model in zip(fig.axes, (serial, deep)):
        loads = [e for e in model["events"] if e["kind"] == "load"]
        in_flight = sorted((p.get_x(), p.get_width()) for p in ax.patches if p.get_alpha() == 0.3)
        assert in_flight == sorted((e["start"], e["end"] - e["start"]) for e in loads)
        assert f"busy {model['mma_busy']:.0%}" in ax.get_title(loc="left")


@pytest.mark.fast
def test_register_split_totals():
    fig = viz.register_split(168, 128, 40, 256, 232)
    texts = " ".join(t.get_text() for t in fig.axes[0].texts)
    assert "total 64512" in texts and "65536 registers per SM" in texts
    assert "128 x 40 = 5120" in texts  # too narrow a segment for its label: the label sits above the bar


@pytest.mark.fast
def test_persistent_grid_numbers_each_tile_with_its_cluster_and_wave():
    s = sim.persistent_schedule(4, 5, 6, tile_order.row_tile)
    fig = viz.persistent_grid(s)
    assert "4 clusters are idle" in fig.caption and len(fig.axes) == 1
    ax = fig.axes[0]
    assert [int(t.get_text()) for t in ax.texts] == s["owner"].ravel().tolist()  # numbers: the cluster
    assert (ax.get_images()[0].get_array() == s["wave"]).all()  # colours: the wave
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [f"wave {w + 1}" for w in range(s["waves"])]
    assert sum(isinstance(p, Rectangle) for p in ax.patches) == s["last_wave_tiles"]  # the partial wave


@pytest.mark.fast
def test_l2_panels_draws_the_model():
    from gemm_course.teaching import sim

    traffic = sim.compare_orders(8, 8, kinds=("row", "grouped"), group=2, sms=16, tile_m=256, tile_n=256, k=1024)
    fig = viz.l2_panels(traffic, title="t")
    labels = [t.get_text() for t in fig.axes[1].texts]
    assert labels == [f"{t.bytes / 1e9:.2f} GB" for t in traffic.values()]
    assert "not a measurement" in fig.caption


@pytest.mark.fast
def test_sweep_ratios_draw_the_newest_sweep(tmp_path):
    old = [sweep_record(4096, 4096, 4096, 0.5, "2030-01-01T00:00:00")]
    new = [sweep_record(4096, 4096, 4096, 0.9, "2030-02-01T00:00:00"),
           sweep_record(8192, 4096, 4096, 1.0, "2030-02-01T00:00:01")]
    recs = write_runs(tmp_path, {"old_sweep": old, "new_sweep": new, "ladder": [bench_record("sm90/10", 1.0, 2.0, "2030-03-01")]})
    fig = viz.sweep_ratios(recs, "sm90/10")
    assert sorted(round(x, 6) for x in fig.axes[0].collections[1].get_offsets()[:, 0]) == [0.9, 1.0]
    assert "geometric mean 0.949" in [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert "Synthetic GPU" in fig.caption
    empty = viz.sweep_ratios(write_runs(tmp_path / "none", {}), "sm90/10")
    assert "No sweep" in empty.caption
    with_peer = [dict(r, peers={"triton": {"ratio_to_cublas": v}}) for r, v in zip(new, (0.7, 0.8))]
    fig = viz.sweep_ratios(write_runs(tmp_path / "peer", {"peer_sweep": with_peer}), "sm90/10")
    assert sorted(round(x, 6) for x in fig.axes[0].collections[-1].get_offsets()[:, 0]) == [0.7, 0.8]
    assert any("Triton" in t.get_text() and "0.748" in t.get_text() for t in fig.axes[0].get_legend().get_texts())


@pytest.mark.fast
def test_smem_traffic_bars_draw_each_tile_against_the_bandwidth():
    from gemm_course.teaching import sim

    rows = {"128x256": sim.smem_traffic(128, 256), "64x256": sim.smem_traffic(64, 256)}
    fig = viz.smem_traffic_bars(rows)
    ax = fig.axes[0]
    totals = sorted(round(p.get_x() + p.get_width()) for p in ax.patches if p.get_x() > 0)  # the TMA (right) segments
    assert totals == [128, 160]
    assert [line.get_xdata()[0] for line in ax.lines] == [sim.SMEM_BYTES_PER_CLOCK]
    assert "smem_traffic" in fig.caption


def _timeline_record(step, size, scale):
    names = ["entry", "smem + arrive", "plan", "num_units", "first tile", "cluster wait", "P setmaxreg",
             "P unit 0 published", "P unit 0 loads issued", "C setup", "C first stage full", "C unit 0 main loop done",
             "C last epilogue issued", "C stores drained", "exit"]
    times = [0.1, 0.3, 0.4, 0.45, 0.5, 0.5, 0.55, 0.7, 20.0, 0.55, 1.9, 22.0, 22.8, 24.0, 24.1]
    return {"kind": "timeline", "step": step, "shape": {"m": size, "n": size, "k": size}, "gpu": "NVIDIA H200",
            "date": "2026-11-30T00:00:00+00:00", "last_exit_us": 24.4 * scale,
            "points_us": {n: t * scale for n, t in zip(names, times)}}


@pytest.mark.fast
def test_launch_timeline_cuts_each_bar_at_the_recorded_points():
    records = [_timeline_record("sm90/8", 2048, 1.0), _timeline_record("sm90/10", 2048, 1.1),
               _timeline_record("sm90/10", 4096, 7.0)]
    fig = viz.launch_timeline(records)
    assert len(fig.axes) == 2  # one panel per shape
    first = fig.axes[0]
    widths = [round(p.get_width(), 3) for p in first.patches][:6]
    assert widths == [0.5, 1.4, 20.9, 1.2, 0.1, 0.3]  # start-up .. exit, then the slowest CTA's extra
    assert [t.get_text() for t in first.texts][:2] == ["86%", "  24.4 us"]
    assert "gpu_timeline" in fig.caption


@pytest.mark.fast
def test_power_limit_bars_end_at_the_ratios():
    records = [clocks_record("sm90/10", 4096, 650.0, 1470.0, 690.0), clocks_record("cublas", 4096, 660.0, 1500.0, 690.0),
               clocks_record("sm90/10", 4096, 652.0, 1470.0, 690.0),
               clocks_record("sm90/10", 4096, 700.0, 1600.0, 600.0, file="run2")]  # no cuBLAS in run2: left out
    fig = viz.power_limit_bars(records)
    assert len(fig.axes[0].patches) == 3 and "gpu_clocks" in fig.caption
    bars = sorted((round(p.get_y(), 2), p.get_x() + p.get_width()) for p in fig.axes[0].patches)
    assert [right for _, right in bars] == pytest.approx([651.0 / 660.0, 1470.0 / 1500.0, 651.0 / 660.0 / (1470.0 / 1500.0)])


@pytest.mark.fast
def test_order_energy_draws_one_point_per_step():
    cfg = {"tile_m": 128, "tile_n": 256, "cluster_m": 2, "cluster_n": 1, "group": 8}
    records = [dict(clocks_record(step, 8192, tflops, 1400.0, 690.0), config=cfg, sm_count=132)
               for step, tflops in (("sm90/8", 660.0), ("sm90/9", 690.0), ("sm90/10", 688.0), ("cublas", 670.0))]
    fig = viz.order_energy(records)
    assert "gpu_clocks" in fig.caption and "l2_traffic" in fig.caption
    line = fig.axes[0].get_lines()[0]  # the shape's line through the steps, fewest modelled bytes first
    assert list(line.get_ydata()) == pytest.approx([690.0 / 690.0, 690.0 / 688.0, 690.0 / 660.0])  # 9, 10, 8
    assert [t.get_text() for t in fig.axes[0].texts] == ["sm90/9 (grouped)", "sm90/10 (gilbert)", "sm90/8 (row)"]


# ---------------------------------------------------------------------------------------------
# every figure: legible at page width, its caption in the page (not in the image), real alt text
# ---------------------------------------------------------------------------------------------


def _figure_functions() -> list:
    return sorted(name for name in viz.__all__ if callable(getattr(viz, name))
                  and inspect.signature(getattr(viz, name)).return_annotation in (Figure, "Figure"))


@pytest.mark.fast
def test_every_public_figure_function_is_checked():
    covered = {fn for fn, _, _ in CASES.values()}
    assert covered == set(_figure_functions()), f"figure functions without a case in tests/figure_cases.py: " \
                                                f"{sorted(set(_figure_functions()) - covered)}"


def _case(name):
    """The case as a parameter: compile where its figure traces a kernel's layouts; else slow, not
    fast (drawing and measuring every text takes about half a second a figure, 15-25 s together)."""
    fn, mark, builder = CASES[name]
    return pytest.param(name, marks=getattr(pytest.mark, "slow" if mark == "fast" else mark), id=name)


@pytest.mark.parametrize("name", [_case(name) for name in CASES])
def test_figure_is_legible_at_page_width(name, tmp_path):
    """Drawn for the content column: at most PAGE_WIDTH wide and shown at its own size, so every
    text drawn (min font size x page width / figure width) is 9 pt or more; drawing it raises no
    warning (matplotlib's would print into the page); no text sticks out of the image or is clipped,
    no two texts overlap; the caption is not drawn into the image."""
    fig = CASES[name][2](tmp_path)
    width = fig.get_size_inches()[0]
    assert width <= viz.PAGE_WIDTH + 1e-9, f"{name}: {width:.2f} in wide, the page is {viz.PAGE_WIDTH}"
    with warnings.catch_warnings(record=True) as caught:  # a warning would print, with a machine path, in the page
        warnings.simplefilter("always")
        r = _style.render(fig, dpi=72)
        fig._repr_html_()
    assert not caught, f"{name}: drawing it warns: {[str(w.message)[:80] for w in caught]}"
    assert r.texts, f"{name}: no text drawn"
    at_page = r.min_pt() * min(1.0, viz.PAGE_WIDTH / width)
    small = sorted({(t.size, t.text[:30]) for t in r.shown if t.size < viz.TEXT_PT})
    assert at_page >= viz.TEXT_PT, f"{name}: text at {at_page:.1f} pt at page width: {small[:5]}"
    assert not r.cut(), f"{name}: texts cut at the figure's edge or clipped: {[t.text[:30] for t in r.cut()]}"
    assert not r.overlaps(), f"{name}: overlapping texts: {r.overlaps()[:5]}"
    # the caption: an attribute the HTML shows under the image, never drawn into it
    assert fig.caption.strip(), f"{name}: no caption"
    assert fig._supxlabel is None and fig._supylabel is None
    drawn = " ".join(" ".join(t.text.split()) for t in r.shown)
    first = " ".join(fig.caption.split())[:40]
    assert first not in drawn, f"{name}: the caption is drawn into the image"


_HEX = re.compile(r"[0-9a-f]{16,}", re.I)


@pytest.mark.slow  # draws five figures to PNG
def test_html_repr_has_an_alt_text_and_a_figcaption(tmp_path):
    """What a notebook and the book show: ``<figure>``, the PNG (base64) at the figure's own size
    with a real alt text (its title and what it plots, not a file name or a hash) and the caption
    as ``<figcaption>``; IPython puts it in the output beside the image/png."""
    from IPython.core.formatters import DisplayFormatter

    for name in ("ladder_intro", "ladder_blackwell", "roofline_naive", "tmem_timeline", "tile_orders"):
        fig = CASES[name][2](tmp_path)
        data, _ = DisplayFormatter().format(fig)
        assert "text/html" in data, f"{name}: IPython shows no HTML for it"
        page = data["text/html"]
        assert page.startswith('<figure class="gemm-figure"') and page.count("<img ") == 1
        alt = html.unescape(re.search(r' alt="([^"]*)"', page).group(1))
        assert len(alt) > 40 and not _HEX.search(alt) and ".png" not in alt, f"{name}: alt text {alt!r}"
        titles = [fig._suptitle.get_text() if fig._suptitle else ""] + [ax.get_title(loc) for ax in fig.axes
                                                                        for loc in ("left", "center")]
        assert any(t.strip() and " ".join(t.split()) in alt for t in titles), f"{name}: alt lacks the title: {alt!r}"
        assert _style._first_sentence(fig.caption) in alt
        caption = re.search(r"<figcaption[^>]*>(.*)</figcaption>", page, re.S).group(1)
        assert " ".join(html.unescape(re.sub(r"<[^>]+>", " ", caption)).split()) == " ".join(fig.caption.split())
        width_in = float(re.search(r'data-width-in="([0-9.]+)"', page).group(1))
        min_pt = float(re.search(r'data-min-pt="([0-9.]+)"', page).group(1))
        assert width_in == pytest.approx(fig.get_size_inches()[0]) and min_pt >= viz.TEXT_PT
        assert f'width="{round(width_in * _style.CSS_DPI)}"' in page  # shown at its own size, 1 in = 96 px
        png = base64.b64decode(re.search(r'src="data:image/png;base64,([^"]+)"', page).group(1))
        from PIL import Image

        assert Image.open(io.BytesIO(png)).size[0] == round(width_in * _style.PNG_DPI)
    alt = _style.figure_alt(CASES["ladder_intro"][2](tmp_path))
    assert alt.startswith("Horizontal bar chart") and "The ladder on Hopper" in alt and "measured on NVIDIA H200" in alt
    assert "the seed's B200 figures quoted for steps 1, 2, 3" in alt


@pytest.mark.fast
def test_a_figure_shown_by_display_or_in_a_widget_is_html(tmp_path):
    """``display(fig)`` and an ipywidgets Output capture the same bundle as a cell's value."""
    import ipywidgets
    from IPython.core.formatters import DisplayFormatter

    fig = CASES["register_split"][2](tmp_path)
    out = ipywidgets.Output()
    out.append_display_data(fig)
    (shown,) = out.outputs
    assert shown["output_type"] == "display_data" and shown["data"]["text/html"] == DisplayFormatter().format(fig)[0]["text/html"]
    assert "<figcaption" in shown["data"]["text/html"]


@pytest.mark.fast
def test_mix_changes_names_the_classes_that_changed():
    text = viz.mix_changes({"sm90/7": {"integer/address math": 800, "TMA copy": 3, "FP32": 1},
                            "sm90/8": {"integer/address math": 900, "TMA copy": 3, "FP32": 1}})
    assert text == "sm90/7 -> sm90/8, static SASS counts: integer/address math 800 -> 900 (+100); 2 other classes unchanged"


@pytest.mark.fast
def test_roofline_labels_points_that_share_an_intensity_apart():
    """The results page's roofline: steps that share a tile intensity are spread sideways and
    labelled on the plot, labels at least a gap apart, and the caption says the points were moved."""
    from gemm_course.viz.ladder import _spread

    assert _spread([1.0, 1.0, 1.0], 0.5) == pytest.approx([0.5, 1.0, 1.5])
    assert _spread([0.0, 5.0], 1.0) == [0.0, 5.0]  # far apart: untouched
    placed = _spread([3.0, 1.0, 1.1, 1.2], 0.4)
    assert placed[0] == 3.0 and all(b - a >= 0.4 - 1e-9 for a, b in zip(placed[1:], placed[2:]))
    points = [{"label": f"step {n}", "intensity": 128.0, "tflops": 700.0 + n} for n in range(5, 12)]
    fig = viz.roofline(GemmProblem.square(4096), 989, 4.8, points, levels={"cuBLAS": 779.0}, annotate=True)
    ax = fig.axes[0]
    xs = sorted(line.get_xdata()[0] for line in ax.get_lines() if line.get_marker() not in ("None", None, "")
                and len(line.get_xdata()) == 1)
    assert len(xs) == 7 and len(set(xs)) == 7 and xs[0] < 128 < xs[-1]
    assert {t.get_text() for t in ax.texts} >= {f"step {n}" for n in range(5, 12)}
    assert "drawn a little apart sideways" in fig.caption
    assert "cuBLAS: 779 TFLOP/s" in [t.get_text() for t in ax.get_legend().get_texts()]


@pytest.mark.fast
def test_roofline_labels_are_not_crossed_by_its_horizontal_lines():
    """Issue 33: on the results page's roofline the labels of points near the roof, a lower compute
    roof and cuBLAS's level sat on those lines. Every label keeps half a label's height clear of each
    horizontal line at its x (the roof and lower roofs right of their ridges, the levels everywhere),
    within the axes; and the placement helper itself."""
    import math

    from gemm_course.viz.ladder import LABEL_HALF_HEIGHT, _clear_of

    placed = _clear_of([1.0, 1.02, 1.05], 0.1, [1.0], 0.04)
    assert all(abs(y - 1.0) >= 0.04 for y in placed) and all(abs(a - b) >= 0.1 - 1e-9 for a in placed for b in placed if a != b)
    assert _clear_of([0.0, 5.0], 1.0, [], 0.1) == [0.0, 5.0]
    peak, bandwidth, sustained, cublas = 989.0, 4.8, 851.6, 729.0
    points = [{"label": f"step {n}", "intensity": 180.0, "tflops": 730.0 + 5 * n} for n in range(6, 12)]
    points += [{"label": "step 5", "intensity": 180.0, "tflops": 320.0}, {"label": "step 4", "intensity": 55.0, "tflops": 560.0}]
    fig = viz.roofline(GemmProblem.square(4096), peak, bandwidth, points, ceilings={"sustained": sustained},
                       levels={"cuBLAS": cublas}, annotate=True)
    ax = fig.axes[0]
    y_lo, y_hi = ax.get_ylim()
    half = LABEL_HALF_HEIGHT * math.log10(y_hi / y_lo)
    labels = [t for t in ax.texts if t.get_text().startswith("step")]
    assert len(labels) == len(points)
    for t in labels:
        x, y = t.get_position()
        lines = [v for v in (peak, sustained) if x > v / bandwidth] + [cublas]
        assert all(abs(math.log10(y / v)) >= half * 0.999 for v in lines), (t.get_text(), y)
        assert y_lo < y < y_hi


@pytest.mark.fast
def test_bandwidth_bars_draw_the_decode_records():
    """The memory roofline's figure draws what the decode records hold (each shape's newest of the
    order, in the class's order), and a message where there is none."""
    import warnings

    from synthetic import decode_record as record

    from gemm_course.measure import records

    shapes = records.decode_shapes()
    recs = [record(shapes[1], 0.02, 0.018, "2026-12-05"), record(shapes[0], 0.015, 0.014, "2026-12-05"),
            record(shapes[0], 0.012, 0.014, "2026-12-06"), record(shapes[2], 0.05, 0.05, "2026-12-06", "x_broad_sweep.json")]
    sweep = records.decode_sweep(recs)
    assert [records.shape_of(r) for r in sweep] == [shapes[0], shapes[1]]
    assert sweep[0]["date"] == "2026-12-06"  # the newest of a shape
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fig = viz.bandwidth_bars(sweep)
    ax = fig.axes[0]
    widths = sorted(round(b.get_width(), 6) for b in ax.patches)
    want = sorted(round(r["bandwidth"][f], 6) for r in sweep for f in ("tb_s", "cublas_tb_s"))
    assert widths == want
    assert {round(line.get_xdata()[0], 6) for line in ax.lines} == {3.35, 3.0}
    assert "H100" in fig.caption
    assert viz.bandwidth_bars([]).caption.startswith("Decode-sized GEMMs")
