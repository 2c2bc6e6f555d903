"""Figures and the tile explorer, on a CPU.

Bench records here are synthetic, written to a temporary directory inside each test (never under
results/): they exercise the drawing code, not the hardware.
"""

import dataclasses

import numpy as np
import pytest
from matplotlib.figure import Figure

from gemm_course import bench, ladder, tile_order, viz, widgets
from gemm_course.problem import GemmProblem


def _record(step, tflops, cublas, date, shape=4096, gpu="Synthetic GPU"):
    return {
        "schema": 1, "kind": "bench", "step": step, "title": ladder.get(step).title,
        "config": dataclasses.asdict(ladder.get(step).default), "shape": {"m": shape, "n": shape, "k": shape},
        "gpu": gpu, "driver": "0", "cuda": "0", "torch": "0", "cutlass_dsl": "0", "date": date,
        "protocol": {"warmup": 1, "repeats": 10, "rounds": 2},
        "tflops": {"median": tflops, "min": 0.9 * tflops, "max": 1.1 * tflops, "p10": tflops, "p90": tflops,
                   "seed_mean": tflops},
        "cublas_tflops": {"median": cublas, "min": cublas, "max": cublas, "p10": cublas, "p90": cublas,
                          "seed_mean": cublas},
        "ratio_to_cublas": tflops / cublas, "rel_error": 1e-3,
    }


def _write(tmp_path, runs):
    """``runs``: {tag: [records]} -> one results file per run; returns what load_records reads back."""
    for tag, recs in runs.items():
        bench.write_records(recs, tag, out_dir=str(tmp_path / "results" / "synthetic-gpu" / tag))
    return bench.load_records(str(tmp_path / "results"))


def _bars(fig):
    """(height, hatched) of every bar in the ladder chart."""
    return [(p.get_height(), bool(p.get_hatch())) for p in fig.axes[0].patches if p.get_width() < 1]


def _seed_heights(fig):
    return sorted(h for h, hatched in _bars(fig) if hatched)


def test_ladder_bars_one_run_draws_one_cublas_line(tmp_path):
    recs = _write(tmp_path, {"a": [_record("sm90/2", 50.0, 400.0, "2030-01-01T00:00:00"),
                                   _record("sm90/3", 90.0, 420.0, "2030-01-01T00:00:01")]})
    fig = viz.ladder_bars(recs, arch="sm90")
    assert isinstance(fig, Figure)
    measured = sorted(h for h, hatched in _bars(fig) if not hatched)
    assert measured == [50.0, 90.0]
    assert _seed_heights(fig) == sorted(viz.SEED_B200_TFLOPS.values())
    lines = [ln for ln in fig.axes[0].get_lines() if ln.get_linestyle() == "--"]
    assert len(lines) == 1 and lines[0].get_ydata()[0] == pytest.approx(np.median([400.0, 420.0]))
    assert "same run" in fig.caption and "Synthetic GPU" in fig.caption and "quoted" in fig.caption
    assert viz.SEED_LABEL in [t.get_text() for t in fig.axes[0].get_legend().get_texts()]


def test_ladder_bars_several_runs_use_each_records_cublas(tmp_path):
    recs = _write(tmp_path, {"a": [_record("sm90/2", 50.0, 400.0, "2030-01-01T00:00:00")],
                             "b": [_record("sm90/3", 90.0, 500.0, "2030-01-02T00:00:00")]})
    fig = viz.ladder_bars(recs, arch="sm90")
    assert not [ln for ln in fig.axes[0].get_lines() if ln.get_linestyle() == "--"]
    ticks = sorted(c.get_segments()[0][0][1] for c in fig.axes[0].collections if len(c.get_segments()) == 1
                   and c.get_segments()[0][0][1] == c.get_segments()[0][1][1])
    assert ticks == [400.0, 500.0]
    assert "each bar" in fig.caption and fig.caption.count("measured on") == 2


def test_ladder_bars_newest_record_wins(tmp_path):
    recs = _write(tmp_path, {"a": [_record("sm90/3", 10.0, 400.0, "2030-01-01T00:00:00"),
                                   _record("sm90/3", 20.0, 400.0, "2030-02-01T00:00:00")]})
    assert [h for h, hatched in _bars(viz.ladder_bars(recs)) if not hatched] == [20.0]


def test_ladder_bars_without_records_shows_only_the_quoted_seed(tmp_path):
    fig = viz.ladder_bars(_write(tmp_path, {}), arch="sm90")
    assert all(hatched for _, hatched in _bars(fig))
    assert _seed_heights(fig) == sorted(viz.SEED_B200_TFLOPS.values())
    texts = " ".join(t.get_text() for t in fig.axes[0].texts)
    assert "No measured record" in texts and "No record" in fig.caption


def test_ladder_bars_other_shape_has_no_seed_bars(tmp_path):
    recs = _write(tmp_path, {"a": [_record("sm90/2", 60.0, 600.0, "2030-01-01T00:00:00", shape=8192)]})
    fig = viz.ladder_bars(recs, shape=(8192, 8192, 8192))
    assert _bars(fig) == [(60.0, False)]
    assert "quoted" not in fig.caption


def test_ladder_bars_live_records_are_drawn_beside(tmp_path):
    recs = _write(tmp_path, {"a": [_record("sm90/2", 50.0, 400.0, "2030-01-01T00:00:00")]})
    live = _record("sm90/2", 55.0, 410.0, "2030-03-01T00:00:00")
    fig = viz.ladder_bars(recs, live=[live])
    assert sorted(h for h, hatched in _bars(fig) if not hatched) == [50.0, 55.0]
    assert "this session" in fig.caption


def test_roofline():
    p = GemmProblem.square(4096)
    fig = viz.roofline(p, 1000.0, 5.0, [{"label": "a", "intensity": 0.5}, {"label": "b", "intensity": 10, "tflops": 20}],
                       ceilings={"fp32": 60.0})
    roof = fig.axes[0].get_lines()[0]
    assert max(roof.get_ydata()) == pytest.approx(1000.0)
    assert min(roof.get_ydata()) == pytest.approx(min(roof.get_xdata()) * 5.0)


def test_layout_grid_and_ownership_figures():
    table = {"text": "(2,3):(3,1)", "offsets": [[0, 1, 2], [3, 4, 5]]}
    assert isinstance(viz.layout_grid(table, highlight=[(1, 2)]), Figure)
    owners = viz.owners_from_lists({0: [(0, 0), (0, 1)], 1: [(1, 0), (1, 1)]}, (2, 2), source="synthetic")
    assert owners["thread"] == [[0, 0], [1, 1]] and owners["value"] == [[0, 1], [0, 1]]
    assert "2 threads" in viz.ownership(owners, zoom=(2, 2), group_size=1).caption
    with pytest.raises(ValueError, match="owned by threads"):
        viz.owners_from_lists({0: [(0, 0)], 1: [(0, 0)]}, (1, 1))
    with pytest.raises(ValueError, match="no owner"):
        viz.owners_from_lists({0: [(0, 0)]}, (1, 2))


def test_tmem_map():
    addresses = {(r, c): (32 * (r // 16) + r % 16, c) for r in range(64) for c in range(8)}
    fig = viz.tmem_map(addresses)
    assert isinstance(fig, Figure)


def test_tile_orders_number_every_tile():
    fig = viz.tile_orders(4, 6, kinds=("row", "gilbert"), group=2, wave=5)
    for ax, kind in zip(fig.axes, ("row", "gilbert")):
        numbers = sorted(int(t.get_text()) for t in ax.texts)
        assert numbers == list(range(24))
        path = tile_order.order(kind, 4, 6)
        first = [t for t in ax.texts if t.get_text() == "0"][0]
        assert first.get_position() == (path[0][1], path[0][0])


def test_bank_maps_and_xor_pattern_come_from_the_bank_model():
    fig = viz.bank_maps(("sm90/2", "sm90/3"), rows=8)
    assert "sm90/3: column read 1, row 1" in fig.caption
    assert "row 8" in fig.caption  # step 2's 128-byte row: 8 wavefronts
    fig = viz.xor_pattern("sm90/3")
    cells = [t.get_text().split("\n")[0] for t in fig.axes[0].texts]
    assert cells == [str(r ^ c) for r in range(8) for c in range(8)]
    assert "row XOR chunk" in fig.caption


def test_instruction_mix_and_sweep_figures():
    fig = viz.instruction_mix({"x": {"tensor-core MMA": 4, "TMA copy": 2}, "y": {"TMA copy": 16}})
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == ["tensor-core MMA", "TMA copy"]
    rows = [{"ok": True, "step": "s", "target": "t", "label": "a", "registers": 100, "smem_bytes": 2048, "spills": False},
            {"ok": False, "step": "s", "target": "t", "label": "b", "reason": "no"}]
    fig = viz.sweep(rows)
    assert [t.get_text() for t in fig.axes[1].get_xticklabels()] == ["a"]


SASS = """
        /*0000*/                   MOV R1, RZ ;
.L_x_0:
        /*0010*/                   LDG.E.U16 R2, desc[UR4][R4.64] ;
        /*0020*/                   LDG.E.U16 R3, desc[UR4][R6.64] ;
        /*0030*/                   FFMA R0, R2, R3, R0 ;
        /*0040*/               @P0 BRA `(.L_x_0) ;
.L_x_1:
        /*0050*/                   BRA.U UP0, `(.L_x_1) ;
        /*0060*/                   EXIT ;
"""


def test_sass_loops_finds_backward_branches():
    loops = viz.sass_loops(SASS)
    assert [lp["label"] for lp in loops] == [".L_x_0"]  # the one-instruction self-branch is dropped
    assert loops[0]["opcodes"] == {"LDG.E.U16": 2, "FFMA": 1, "BRA": 1}
    assert len(loops[0]["lines"]) == 4


def test_phase_source_and_k_loop_schedule():
    text = viz.phase_source("sm90/2", 3)
    assert text.startswith("# 3.") and "mbarrier_wait" in text and "# 4." not in text
    with pytest.raises(ValueError):
        viz.phase_source("sm90/2", 42)
    for arch in ("sm90", "sm100"):
        fig = viz.k_loop_schedule(arch, 4, 2, 40960, k_tiles=2)
        texts = " ".join(t.get_text() for t in fig.axes[0].texts)
        assert "40960 B" in texts and "phase 1" in texts


# ---------------------------------------------------------------------------------------------
# widgets
# ---------------------------------------------------------------------------------------------


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


def test_sweep_of_a_tensor_core_step():
    rows = widgets.precompute_sweep("sm90/2")
    by_label = {r["label"]: r for r in rows}
    small, big = by_label["tile_n=64, tile_k=32"], by_label["tile_n=256, tile_k=64"]
    assert small["smem_bytes"] < big["smem_bytes"] and small["registers"] < big["registers"]
    assert all(r["mix"]["tensor-core MMA"] > 0 for r in rows if r["ok"])


def test_tile_explorer_drives_without_a_browser():
    pytest.importorskip("ipywidgets")
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


def test_timing_html_reports_the_ratio_to_cublas():
    text = widgets.timing_html(_record("sm90/3", 100.0, 400.0, "2030-01-01T00:00:00"))
    assert "100.0 TFLOP/s" in text and "400.0 TFLOP/s" in text and "25.0%" in text
