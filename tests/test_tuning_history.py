"""gemm_course.measure.tuning_history: step 11's ideas and the A/B runs that measure them, read from
results/tuning/ (the committed runs, and a made-up one in a temporary results folder)."""

from __future__ import annotations

import gzip
import json
import math
import os
import re

import pytest

from gemm_course.measure import records as rec
from gemm_course.measure import tuning_history as th
from gemm_course.viz._style import TEXT_PT, render

pytestmark = pytest.mark.fast

RUN_NUMBER = re.compile(r"_run\d+|\brun ?\d+[a-z]?\b", re.I)


@pytest.mark.parametrize("key", list(th.IDEAS))
def test_every_comparison_reads_two_variants_of_a_committed_run(key):
    for c in th.IDEAS[key].comparisons:
        tune = rec.load_tuning(c.run)
        assert tune is not None, f"{key}: results/tuning/{c.run}.json.gz is missing"
        variants = {r["variant"] for r in tune["rows"]}
        assert {c.new, c.old} <= variants, f"{key}: {c.run} has no {({c.new, c.old} - variants)}"
        assert th.changes(c), f"{key}: {c.run} timed {c.new} and {c.old} on no common shape"
        assert not RUN_NUMBER.search(c.label), f"{key}: a chapter shows this label, which names a run: {c.label}"


def test_the_chapter_shows_every_kept_idea_and_only_those():
    assert set(th.CHAPTER_IDEAS) == {k for k, idea in th.IDEAS.items() if idea.kept}


def test_an_effect_is_the_geometric_mean_of_the_runs_changes():
    c = th.IDEAS["gpc_places"].comparisons[0]
    tune = rec.load_tuning(c.run)
    values = []
    for shape in {r["shape"] for r in tune["rows"]}:
        new = [r["median_ms"] for r in tune["rows"] if r["shape"] == shape and r["variant"] == c.new]
        old = [r["median_ms"] for r in tune["rows"] if r["shape"] == shape and r["variant"] == c.old]
        values += [o / n - 1.0 for n, o in zip(new, old)]
    e = th.effect(c)
    assert e["shape_runs"] == len(values)
    assert math.isclose(e["geomean"], math.exp(sum(math.log1p(v) for v in values) / len(values)) - 1.0)
    assert (e["lowest"][0], e["highest"][0]) == (min(values), max(values))
    assert e["provenance"].startswith(tune["env"]["gpu"])
    pooled = th.idea_effect("gpc_places")
    assert pooled["shape_runs"] == sum(th.effect(x)["shape_runs"] for x in th.IDEAS["gpc_places"].comparisons)


def test_the_summary_and_the_lines_name_no_run():
    table = th.effects_table(first=[("a", "b", "c")], last=[("x", "y", "z")])
    rows = table.split("\n\n")[0].splitlines()
    assert rows[2] == "| a | b | c |" and rows[-1] == "| x | y | z |" and len(rows) == 2 + 2 + len(th.CHAPTER_IDEAS)
    assert all(f"`sm90/11`: {th.IDEAS[k].title} |" in table for k in th.CHAPTER_IDEAS)
    for key in th.CHAPTER_IDEAS:
        assert th.IDEAS[key].title in table
        line = th.effect_line(key)
        assert "geometric mean" in line and "measured on NVIDIA H200" in line
        assert not RUN_NUMBER.search(line) and not RUN_NUMBER.search(table)


@pytest.mark.parametrize("key", list(th.IDEAS))
def test_effect_figure_is_legible_and_says_where_it_was_measured(key):
    fig = th.effect_figure(key)
    r = render(fig)
    assert r.min_pt() >= TEXT_PT and not r.cut() and not r.overlaps()
    assert "Measured on NVIDIA H200" in fig.caption and "appendix" in fig.caption
    assert not RUN_NUMBER.search(fig.caption)
    ax = fig.axes[0]
    assert len(ax.get_yticklabels()) == len({s for c in th.IDEAS[key].comparisons for s in th.changes(c)})


def test_index_lists_every_run_in_run_order():
    names = th.run_names()
    files = sorted(f[: -len(".json.gz")] for f in os.listdir(os.path.join(rec.RESULTS_DIR, "tuning"))
                   if f.startswith("tune_run"))
    assert sorted(names) == files and names == sorted(files, key=th.run_key)
    assert th.run_key("tune_run4") < th.run_key("tune_run11") < th.run_key("tune_run32_x") < th.run_key("tune_run32b_x")
    index = th.index_table()
    assert [m for m in re.findall(r"`(tune_run[^`]+)\.json\.gz`", index)] == names
    summary = th.variants_table()
    assert all(f"`{n}.json.gz`" in summary for n in names if len({r["variant"] for r in rec.load_tuning(n)["rows"]}) > 2)


def _write_run(folder, name, what, rows):
    os.makedirs(os.path.join(folder, "tuning"), exist_ok=True)
    with gzip.open(os.path.join(folder, "tuning", name + ".json.gz"), "wt") as f:
        json.dump({"what": what, "command": "made up", "env": {"gpu": "Synthetic GPU", "driver": "1"}, "rows": rows}, f)


def test_a_made_up_results_folder(tmp_path):
    folder = str(tmp_path)
    assert th.run_names(folder) == [] and "No A/B run" in th.index_table(folder)
    assert "not recorded" in th.effects_table(results_dir=folder)
    assert "No A/B run" in th.effect_figure("tile_ring", folder).caption
    c = th.IDEAS["tile_ring"].comparisons[0]
    rows = [{"shape": "64x64x64", "variant": v, "median_ms": t, "ratio_to_cublas": 1.0}
            for v, t in ((c.new, 1.0), (c.old, 1.1), ("cublas", 1.0))]
    _write_run(folder, c.run, "a made-up run, 2030-01-02", rows)
    e = th.effect(c, folder)
    assert e["shape_runs"] == 1 and math.isclose(e["geomean"], 0.1)
    assert e["provenance"] == "Synthetic GPU, driver 1, 2030-01-02"
    assert th.run_date({"what": "no date here"}) is None
    assert "Synthetic GPU, 2030-01-02" in th.index_table(folder)
    assert "+10.0%" in th.effect_line("tile_ring", folder)


@pytest.mark.fast
def test_the_pages_tables_speak_the_books_words():
    """No commit id, no "this session", no doubled full stop in what the tuning-history page shows of
    the runs' own descriptions (issue 33); the records themselves keep them."""
    text = th.index_table() + th.variants_table()
    assert not re.findall(r"\b(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b", text)
    assert "this session" not in text.lower()
    assert not re.findall(r"(?<!\.)\.\.(?=\s|\|)", text)
    assert "earlier revision" in text  # the runs that named a commit still say they compared against one
    assert th._cell("HEAD 019830d (sm90_base).. And this session's run") == "an earlier revision (sm90_base). And that day's run"
