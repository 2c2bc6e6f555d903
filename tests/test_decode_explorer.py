"""Chapter 12's decode explorer (``gemm_course.teaching.decode_explorer``): the launch each step's own
host code plans for a decode shape, its bytes and its time floor (a model), the static HTML the book
shows, and a decode run's recorded time of exactly that shape (from a synthetic results file)."""

from __future__ import annotations

import json

import pytest
from synthetic import decode_record

from gemm_course import hardware
from gemm_course.kernels.sm90 import step12_swap_ab as step12
from gemm_course.measure import records as rec
from gemm_course.rules import schedule
from gemm_course.runtime import ladder
from gemm_course.runtime.problem import GemmProblem
from gemm_course.teaching import decode_explorer as de
from gemm_course.viz import memory_roofline as mr

pytestmark = pytest.mark.fast


def test_step_12_keeps_more_sms_streaming_a_narrow_layer_than_step_11():
    est = de.model(16, 1024, 4096, hardware.H100_SXM)
    eleven, twelve = est["sm90/11"], est["sm90/12"]
    assert twelve.layout.ctas >= eleven.layout.ctas and twelve.sm_share > eleven.sm_share
    assert twelve.layout.swapped and not eleven.layout.swapped
    assert twelve.bytes < eleven.bytes  # partial tiles of 16 tokens, not of step 11's rows x W rows


@pytest.mark.parametrize("m", [1, 8, 15, 16, 17, 40, 100, 128])
def test_the_token_tile_is_m_or_half_of_it_rounded_up_to_16(m):
    lay = de.layout("sm90/12", m, 4096, 4096)
    pairs = m > step12.PAIR_FROM_M  # two token tiles of half the tokens, rounded up to 16 (``pairs_tokens``)
    assert lay.swapped and lay.tile_n == max(16, -(-m // (32 if pairs else 16)) * 16)
    assert lay.cluster == (1, 2 if pairs else 1)
    assert lay.tile_n == ladder.get("sm90/12").config_for(GemmProblem(m, 4096, 4096)).tile_n


def test_above_swap_max_m_step_12_is_step_11():
    eleven, twelve = de.layout("sm90/11", 512, 4096, 4096), de.layout("sm90/12", 512, 4096, 4096)
    assert not twelve.swapped and twelve._replace(step="") == eleven._replace(step="")


@pytest.mark.parametrize("n,k", de.LAYERS)
@pytest.mark.parametrize("m", [1, 64, 256])
def test_the_launch_is_the_schedules(m, n, k):
    for key in de.STEPS:
        lay = de.layout(key, m, n, k)
        config = ladder.get(key).config_for(GemmProblem(m, n, k))
        k_tiles = -(-k // config.tile_k)
        clusters = hardware.H200.sms // (config.cluster_m * config.cluster_n)  # no GPU here: a full H200
        assert lay.clusters == schedule.grid_clusters(lay.tiles, clusters, k_tiles, config.stream_k,
                                                      max_parts=getattr(config, "max_parts", schedule.MAX_PARTS))
        assert lay.ctas == lay.clusters * config.cluster_m * config.cluster_n
        units = [u for run in schedule.plan(lay.tiles, lay.clusters, k_tiles, config.stream_k) for u in run]
        assert len(units) == lay.tiles + lay.handovers  # every part beyond a tile's first hands one over
        assert sum(e - b for _, b, e in units) == lay.tiles * k_tiles  # every K tile of every tile once
        assert (lay.partial > 0) == (lay.handovers > 0) == (lay.parts > 1)


def test_bytes_and_floor():
    card = hardware.H200
    p = GemmProblem(16, 14336, 4096)
    for e in de.model(16, 14336, 4096, card).values():
        assert e.min_bytes == p.min_bytes and e.bytes == p.min_bytes + e.layout.partial_bytes
        assert e.floor_us == pytest.approx(e.bytes / (card.measured_copy_tb_s * 1e12) * 1e6)
        assert 0 < e.sm_share <= 1 and e.measured_us is None
    h100, h200 = de.model(16, 14336, 4096, hardware.H100_SXM), de.model(16, 14336, 4096, hardware.H200)
    assert h200["sm90/12"].floor_us < h100["sm90/12"].floor_us  # the H200 copies faster


def test_the_mma_floor_is_the_busiest_ctas_k_tiles_at_the_rate_per_sm():
    """The busiest cluster's K tiles from the schedule's plan, each a tile_m x tile_n x tile_k product
    per CTA at the card's measured product rate shared by its SMs; far below the bytes' floor at a few
    tokens, above it at 256 tokens over a layer whose pairs of 128-row tiles leave SMs idle (exercise 3),
    and under it again with step 11's kernel, which the rule runs there."""
    card = hardware.H100_SXM
    for m, n, k in [(1, 4096, 4096), (256, 6144, 4096), (256, 14336, 4096), (16, 1024, 4096)]:
        lay = de.layout("sm90/12", m, n, k)
        config = ladder.get("sm90/12").config_for(GemmProblem(m, n, k))
        plan = schedule.plan(lay.tiles, lay.clusters, -(-k // config.tile_k), config.stream_k)
        assert lay.busiest_k_tiles == max(sum(e - b for _, b, e in units) for units in plan)
        flops = lay.busiest_k_tiles * 2 * config.tile_m * config.tile_n * config.tile_k
        assert de.mma_floor_us(lay, card) == pytest.approx(flops / (card.measured_bf16_tflops * 1e12 / card.sms) * 1e6)
    few, near = de.model(1, 4096, 4096, card)["sm90/12"], de.model(256, 6144, 4096, card)["sm90/12"]
    assert few.mma_us < few.floor_us / 5 and not near.layout.swapped and near.mma_us < near.floor_us
    pairs = step12.Config(tile_m=128, tile_n=128, epi_n=64, epi_stages=1, cluster_n=2, stream_k=False,
                          stages=step12.stages_for(128, 128, 64, 1))
    assert de.mma_floor_us(de.layout("sm90/12", 256, 6144, 4096, config=pairs), card) > near.floor_us
    assert de.layout("sm90/12", 256, 14336, 4096).busiest_k_tiles == 2 * 64  # 112 pair-tiles on 66 pairs: two each


@pytest.mark.parametrize("m", [0, -1, 513, 1.5, True])
def test_a_bad_m_is_refused(m):
    with pytest.raises(ValueError, match="from 1 to 512"):
        de.model(m, 4096, 4096)
    assert "from 1 to 512" in de.model_html(m, 4096, 4096) and "<table" not in de.model_html(m, 4096, 4096)


def test_the_html_says_it_is_a_model_and_shows_no_time_without_a_record():
    page = de.model_html(16, 4096, 4096, hardware.H100_SXM)
    assert "A model, not a measurement" in page and "no record" in page and "3 TB/s" in page
    assert "sm90/11" in page and "sm90/12" in page and "64 x 16 (W rows x tokens)" in page


def test_the_static_html_has_every_m_row_the_book_promises_for_every_layer():
    page = de.static_html()
    assert "A model, not a measurement" in page
    assert page.count("<summary>") == len(de.LAYERS) and page.count("<details open>") == 1
    for n, k in de.LAYERS:
        section = page.split(f"layer {n} x {k} (N x K)")[1].split("</details>")[0]
        assert [int(r.split("</td>")[0]) for r in section.split("<tr><td>")[1:]] == list(de.BOOK_MS)
        assert "measured" not in section
    assert de.BOOK_MS[0] == 1 and de.BOOK_MS[-1] == de.MAX_M


def _results(tmp_path, us=9.5, shape=(16, 4096, 4096)):
    """A decode12 results file in tmp_path with sm90/12 at ``shape`` in ``us`` microseconds."""
    r = decode_record(shape, us / 1e3, 10 / 1e3, "2026-12-07T01:00:00", copy=3.0)
    r = dict(r, step="sm90/12", kind="bench", time_ms={"median": us / 1e3})
    r.pop("_file")
    folder = tmp_path / "results" / "nvidia-h100-80gb-hbm3"
    folder.mkdir(parents=True)
    (folder / "20261207T010000Z_decode12.json").write_text(json.dumps({"records": [r]}))
    return mr.decode_runs(rec.load_records(str(tmp_path / "results")))


def test_a_recorded_time_of_exactly_that_shape_is_shown(tmp_path):
    runs = _results(tmp_path)
    assert len(runs) == 1
    est = de.model(16, 4096, 4096, hardware.H100_SXM, runs)
    assert est["sm90/12"].measured_us == pytest.approx(9.5) and est["sm90/11"].measured_us is None
    assert "9.5 us (NVIDIA H100 80GB HBM3)" in de.model_html(16, 4096, 4096, hardware.H100_SXM, runs)
    assert de.model(17, 4096, 4096, hardware.H100_SXM, runs)["sm90/12"].measured_us is None  # exactly that shape
    assert de.model(16, 4096, 14336, hardware.H100_SXM, runs)["sm90/12"].measured_us is None
    assert "(measured 9.5)" in de.static_html(runs=runs)


def test_the_runs_line_predicts_a_layer_it_did_not_time(tmp_path):
    """Where the run has a step's times at up to LINE_MAX_M tokens on this card, the explorer gives the line
    through them at the chosen shape's bytes: a fixed cost per launch plus the bytes at a rate."""
    made = []
    for m in (1, 16):
        for n, k in ((4096, 4096), (14336, 4096)):
            us = 7.0 + GemmProblem(m, n, k).min_bytes / 3.2e6  # 7 us + the bytes at 3.2 TB/s
            r = decode_record((m, n, k), us / 1e3, us / 1e3, "2026-12-07T01:00:00", copy=3.0)
            made.append(dict(r, step="sm90/12", kind="bench", time_ms={"median": us / 1e3},
                             _file="20261207T010000Z_decode12.json"))
    est = de.model(8, 1024, 4096, hardware.H100_SXM, made)["sm90/12"]
    assert est.line[:2] == pytest.approx((7.0, 3.2)) and est.measured_us is None
    assert est.line_us == pytest.approx(7.0 + GemmProblem(8, 1024, 4096).min_bytes / 3.2e6)
    page = de.model_html(8, 1024, 4096, hardware.H100_SXM, made)
    assert f"{est.line_us:.1f} us (7.0 us + the bytes at 3.20 TB/s" in page
    assert de.model(64, 4096, 4096, hardware.H100_SXM, made)["sm90/12"].line_us is None  # beyond the line's tokens
    assert "only up to 16 tokens" in de.model_html(64, 4096, 4096, hardware.H100_SXM, made)
    assert de.model(8, 1024, 4096, hardware.H200, made)["sm90/12"].line is None  # an H100's run says nothing of an H200
    assert "no run on this card" in de.model_html(8, 1024, 4096, hardware.H100_SXM)


def test_the_widget_follows_its_controls_and_carries_the_static_html(tmp_path):
    pytest.importorskip("ipywidgets")
    x = de.DecodeExplorer(runs=_results(tmp_path))
    assert "9.5 us" in x.html and "M = 16 tokens" in x.html
    page = x.select(m=64, layer=(1024, 4096), card=hardware.H200)
    assert "M = 64 tokens through a 1024 x 4096 layer on an H200" in page and "9.5 us" not in page
    assert x.estimates()["sm90/12"].layout.tile_n == 64 and x.out.value == page
    bundle = x._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle and bundle["text/html"] == de.static_html(runs=x.runs)
