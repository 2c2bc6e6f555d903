"""Step 11's tuning history, from the A/B runs under ``results/tuning/``: which comparisons measure
each idea of ``sm90/11``, each idea's effect, and an index of every run.

Chapter 11 shows each idea's measured effect without naming runs (a chapter is a lesson, not a lab
notebook); the appendix page ``book/tuning_history.md`` shows the runs themselves. Both read
:data:`IDEAS`, so the chapter's numbers and the appendix's tables come from the same comparisons.
A comparison's numbers are :func:`gemm_course.measure.records.ab_changes`: per shape and repetition, how
much faster variant ``new`` ran than ``old`` (``old median / new median - 1``), both timed
interleaved with cuBLAS in one process by ``scripts/gpu_tune.py``.
"""

from __future__ import annotations

import dataclasses
import os
import re
import statistics
from typing import Optional, Sequence

from . import records as rec

RUN_PREFIX = "tune_run"


@dataclasses.dataclass(frozen=True)
class Comparison:
    """One A/B comparison: ``new`` against ``old`` (variant names as the run ``run`` wrote them)."""

    run: str
    new: str
    old: str
    label: str  # what the comparison measures, in the chapter's words (no run number)


@dataclasses.dataclass(frozen=True)
class Idea:
    title: str
    found: str  # how its effect was measured, in a few words (the summary table's last column)
    comparisons: tuple
    kept: bool = True


IDEAS = {
    "stream_k": Idea(
        "the stream-K tail",
        "the tail split against kept whole, on shapes of all three classes of the broad sweep",
        (Comparison("tune_run35_tile_per_shape", "sm90/11", "sm90/11:stream_k=False",
                    "step 11 (its 128 x 256 tile on every shape) against itself with the tail kept whole, on shapes "
                    "of the broad sweep's three classes"),)),
    "tile_per_shape": Idea(
        "a tile per shape",
        "the rule's tile against a fixed 128 x 256, on the few-wave long-K shapes, in both orders",
        (Comparison("tune_run40_few_wave_widths", "sm90/11",
                    "sm90/11:tile_n=256,cluster_m=2,cluster_n=1,stages=4,epi_n=32",
                    "the tile the rule picks against the fixed 128 x 256 tile, on the broad sweep's few-wave long-K "
                    "shapes, in both shape orders"),)),
    "tile_ring": Idea(
        "tile coordinates through shared memory",
        "the kernel with the tile ring against without it",
        (Comparison("tune_run4", "sm90_ring@sm90/10", "sm90_old@sm90/10",
                    "the kernel with the tile ring against the same kernel without it"),)),
    "epilogue": Idea(
        "half a tile per TMA store",
        "half-tile staging and three stages against 128 x 32 staging and four, in two runs",
        (Comparison("tune_run6", "sm90/10:stages=3,epi_n=128,epi_stages=2", "sm90/10",
                    "three stages and half-tile staging against four stages and 128 x 32 staging"),
         Comparison("tune_run7", "sm90/10:stages=3,epi_n=128,epi_stages=2", "sm90/10",
                    "the same, repeated with the variants in the other order"))),
    "gpc_places": Idea(
        "GPC-aware places",
        "with against without, on the sweep's shapes, in both listing orders",
        (Comparison("tune_run33_gpc_order_sweep", "sm90/10:gpc_order=1", "sm90/10",
                    "with GPC-aware places against without, on the sweep's shapes, without them listed first"),
         Comparison("tune_run33b_gpc_order_sweep_reversed", "sm90/10:gpc_order=1", "sm90/10",
                    "the same, with them listed first"))),
    "deferred_epilogue": Idea(
        "a finished tile stored under the next tile's first wgmma",
        "with against without",
        (Comparison("tune_run12_deferred_epilogue", "sm90/10", "sm90_base@sm90/10",
                    "a finished tile kept in bf16 registers and stored under the next tile's first wgmma, against "
                    "the kernel without it"),),
        kept=False),
    "warpgroup_epilogue": Idea(
        "an epilogue per consumer warpgroup",
        "with against one shared epilogue",
        (Comparison("tune_run22_warpgroup_epilogue", "sm90/10:warpgroup_epilogue=1", "sm90/10",
                    "each consumer warpgroup with its own epilogue against one shared epilogue"),),
        kept=False),
}

CHAPTER_IDEAS = ("stream_k", "tile_per_shape", "tile_ring", "epilogue", "gpc_places")  # step 11's, in the chapter's order


def run_key(name: str) -> tuple:
    """Sort key of a tuning file's name: the number after ``tune_run``, then its letter and the rest."""
    m = re.match(rf"{RUN_PREFIX}(\d+)([a-z]?)(.*)", name)
    return (int(m.group(1)), m.group(2), m.group(3)) if m else (10 ** 9, "", name)


def run_names(results_dir: Optional[str] = None) -> list:
    """The A/B runs under ``results/tuning/`` (``tune_run*.json.gz``), by run number."""
    folder = os.path.join(results_dir or rec.RESULTS_DIR, "tuning")
    names = [f[: -len(".json.gz")] for f in os.listdir(folder)
             if f.startswith(RUN_PREFIX) and f.endswith(".json.gz")] if os.path.isdir(folder) else []
    return sorted(names, key=run_key)


def run_date(tune: dict) -> Optional[str]:
    """The date a run's description records (``YYYY-MM-DD``), or None: older runs recorded none."""
    m = re.search(r"\b(20\d\d-\d\d-\d\d)\b", tune.get("what", ""))
    return m.group(1) if m else None


def run_provenance(tune: dict) -> str:
    """Where and with what a run was measured, from its file: GPU, driver, CUDA, torch, cutlass-dsl, date."""
    env = tune.get("env", {})
    parts = [env.get("gpu", "an unrecorded GPU")]
    parts += [f"{label} {env[key]}" for key, label in (("driver", "driver"), ("cuda", "CUDA"), ("torch", "torch"),
                                                       ("cutlass_dsl", "cutlass-dsl")) if env.get(key)]
    return ", ".join(parts) + (f", {run_date(tune)}" if run_date(tune) else ", date not recorded in the file")


def changes(c: Comparison, results_dir: Optional[str] = None) -> dict:
    """``{shape: [speed-up, ...]}`` of one comparison (:func:`gemm_course.measure.records.ab_changes`); ``{}``
    when its file is absent."""
    tune = rec.load_tuning(c.run, results_dir)
    return rec.ab_changes(tune, c.new, c.old) if tune else {}


def effect(c: Comparison, results_dir: Optional[str] = None) -> Optional[dict]:
    """A comparison's effect: shape-runs, shapes, the geometric mean of ``1 + speed-up`` less one,
    the lowest and highest (value, shape), and the run's provenance; None when its file is absent."""
    tune = rec.load_tuning(c.run, results_dir)
    if tune is None:
        return None
    ch = rec.ab_changes(tune, c.new, c.old)
    values = [(v, shape) for shape, vs in ch.items() for v in vs]
    if not values:
        return None
    return {"shape_runs": len(values), "shapes": len(ch), "geomean": rec.geomean(1.0 + v for v, _ in values) - 1.0,
            **_middle([v for v, _ in values]), "lowest": min(values), "highest": max(values),
            "provenance": run_provenance(tune), "file": tune["_file"]}


def _middle(values: Sequence[float]) -> dict:
    """The median of ``values`` and, from ten values on, their 10th and 90th percentiles (else None)."""
    ordered = sorted(values)
    tenth = statistics.quantiles(ordered, n=10) if len(ordered) >= 10 else None
    return {"median": statistics.median(ordered), "p10": tenth[0] if tenth else None, "p90": tenth[-1] if tenth else None}


def _spread_text(e: dict, lowest: float, highest: float) -> str:
    """'**median** ... (p10 to p90; lowest to highest)' of an effect, in percent."""
    inner = f"p10-p90 {_percent(e['p10'])} to {_percent(e['p90'])}; " if e["p10"] is not None else ""
    head = f"**{_percent(e['median'])}** median over {e['shape_runs']} shape-runs"
    return f"{head} ({inner}{_percent(lowest)} to {_percent(highest)}"


def _percent(v: float) -> str:
    text = f"{v:+.1%}"
    return "0.0%" if text in ("+0.0%", "-0.0%") else text


def effect_line(key: str, results_dir: Optional[str] = None) -> str:
    """Markdown: an idea's measured effect, one sentence per comparison, with where it was measured."""
    idea, lines = IDEAS[key], []
    for c in idea.comparisons:
        e = effect(c, results_dir)
        if e is None:
            lines.append(f"* {c.label}: not recorded under `results/tuning/`.")
            continue
        lines.append(f"* {c.label}: **{_percent(e['median'])}** median over {e['shape_runs']} shape-runs "
                     f"({e['shapes']} shapes; geometric mean {_percent(e['geomean'])}"
                     + (f", p10-p90 {_percent(e['p10'])} to {_percent(e['p90'])}" if e["p10"] is not None else "")
                     + f"), from {_percent(e['lowest'][0])} ({e['lowest'][1]}) to "
                     f"{_percent(e['highest'][0])} ({e['highest'][1]}); measured on {e['provenance']}.")
    return "\n".join(lines)


def idea_effect(key: str, results_dir: Optional[str] = None) -> Optional[dict]:
    """An idea's effect over all its comparisons' shape-runs pooled: shape-runs, the geometric mean
    of ``1 + speed-up`` less one, lowest and highest; None when none of its runs is recorded."""
    values = [v for c in IDEAS[key].comparisons for vs in changes(c, results_dir).values() for v in vs]
    if not values:
        return None
    return {"shape_runs": len(values), "geomean": rec.geomean(1.0 + v for v in values) - 1.0, **_middle(values),
            "lowest": min(values), "highest": max(values)}


def effects_rows(keys: Sequence[str] = CHAPTER_IDEAS, results_dir: Optional[str] = None,
                 prefix: str = "`sm90/11`: ") -> list:
    """``[(idea, effect text, how it was found)]``: one row per idea (:func:`idea_effect`), its title
    after ``prefix``."""
    rows = []
    for key in keys:
        e = idea_effect(key, results_dir)
        text = "not recorded" if e is None else _spread_text(e, e["lowest"], e["highest"]) + ")"
        rows.append((prefix + IDEAS[key].title, text, IDEAS[key].found))
    return rows


def effects_table(first: Sequence[tuple] = (), keys: Sequence[str] = CHAPTER_IDEAS, last: Sequence[tuple] = (),
                  results_dir: Optional[str] = None) -> str:
    """A Markdown table of the ideas' measured effects (:func:`effects_rows`), with rows ``first``
    before and ``last`` after them (each ``(idea, effect, how it was found)``), and under it where
    the A/B runs were measured."""
    rows = ["| idea | effect | how it was found |", "|---|---|---|"]
    rows += [f"| {a} | {b} | {c} |" for a, b, c in list(first) + effects_rows(keys, results_dir) + list(last)]
    tunes = [rec.load_tuning(c.run, results_dir) for k in keys for c in IDEAS[k].comparisons]
    where = sorted({run_provenance(t).split(", ")[0] for t in tunes if t})
    dates = sorted({run_date(t) for t in tunes if t and run_date(t)})
    note = (f"\n\nEach measured effect: the median over shapes and runs of how much faster the kernel ran "
            f"with the idea than without it (in brackets the 10th to 90th percentile where there are ten or more, and "
            f"the lowest to highest), both timed in turn with cuBLAS in one "
            f"process, on {' and '.join(where) or 'no recorded GPU'}"
            + (f" (the runs that recorded a date: {', '.join(dates)})" if dates else "") + ".")
    return "\n".join(rows) + note


def effect_figure(key: str, results_dir: Optional[str] = None):
    """Dot plot of an idea's measured effect: one row per shape, a marker per shape-run (one marker
    shape per comparison), the geometric mean dashed. Values far beyond the rest are drawn at the
    axis's edge with their value written beside them."""
    import numpy as np
    from matplotlib.lines import Line2D

    from ..viz._style import CTA_COLORS, PAGE_WIDTH, TEXT_PT, message_figure, new_figure, set_caption, wrap_title

    idea = IDEAS[key]
    present = [(c, changes(c, results_dir)) for c in idea.comparisons]
    present = [(c, ch) for c, ch in present if ch]
    if not present:
        return message_figure(f"No A/B run of {idea.title} under results/tuning/",
                              f"No A/B run of {idea.title} recorded.", height=1.4)
    shapes = list(dict.fromkeys(s for _, ch in present for s in ch))
    values = [v for _, ch in present for vs in ch.values() for v in vs]
    mags = sorted(abs(v) for v in values)
    second = mags[-2] if len(mags) > 1 else mags[-1]
    limit = 1.25 * max(second, 0.01) if mags[-1] > 2.5 * max(second, 0.01) else mags[-1]  # beyond it: drawn at the edge
    inside = [v for v in values if abs(v) <= limit]
    lo, hi = min(inside + [0.0]), max(inside + [0.0])
    pad = max(0.12 * (hi - lo), 0.005)
    lo, hi = lo - pad, hi + pad
    fig = new_figure(PAGE_WIDTH, 0.24 * len(shapes) + 1.6)
    ax = fig.add_subplot()
    markers = ("o", "s", "^", "D")
    handles = []
    for i, (c, ch) in enumerate(present):
        color = CTA_COLORS[i % len(CTA_COLORS)]
        for y, shape in enumerate(shapes):
            for v in ch.get(shape, []):
                if abs(v) > limit:
                    edge = hi - pad / 3 if v > 0 else lo + pad / 3
                    ax.scatter([edge], [y], marker=">" if v > 0 else "<", color=color, s=36, zorder=3)
                    ax.text(edge, y - 0.35, f"{_percent(v)} ", ha="right" if v > 0 else "left", va="bottom",
                            fontsize=TEXT_PT, color=color)
                else:
                    ax.scatter([v], [y], marker=markers[i % len(markers)], color=color, s=30, zorder=3)
        handles.append(Line2D([], [], marker=markers[i % len(markers)], linestyle="none", color=color,
                              label=wrap_title(c.label, 60) if len(present) > 1 else "one shape in one run"))
    g = rec.geomean(1.0 + v for v in values) - 1.0
    ax.axvline(0.0, color="black", linewidth=1.0)
    ax.axvline(g, color="black", linestyle="--", linewidth=1.2)
    handles.append(Line2D([], [], color="black", linestyle="--", linewidth=1.2,
                          label=f"geometric mean {_percent(g)} over {len(values)} shape-runs"))
    ax.set_yticks(np.arange(len(shapes)), shapes)
    ax.set_ylim(len(shapes) - 0.5, -0.7)
    ax.set_xlim(lo, hi)
    ax.xaxis.set_major_formatter(lambda x, _: "0%" if abs(x) < 5e-4 else (f"{x:+.0%}" if hi - lo >= 0.2 else f"{x:+.1%}"))
    ax.tick_params(labelsize=TEXT_PT)
    ax.set_xlabel("how much faster with it: time without / time with - 1", fontsize=TEXT_PT)
    ax.set_title(wrap_title(f"Measured effect of {idea.title}", 60), loc="left", fontsize=TEXT_PT + 1)
    ax.grid(axis="x", alpha=0.3)
    fig.legend(handles=handles, loc="outside upper left", ncol=1, frameon=False, fontsize=TEXT_PT)
    tunes = [rec.load_tuning(c.run, results_dir) for c, _ in present]
    where = "; ".join(dict.fromkeys(run_provenance(t) for t in tunes))
    caption = (f"Each marker: how much faster the kernel ran with {idea.title} than without it on one shape in one "
               f"A/B run, from the two variants' median times, both timed in turn with cuBLAS in one process "
               f"(scripts/gpu_tune.py); {'; '.join(c.label for c, _ in present)}. Measured on {where}. The runs are "
               "listed in the appendix, the tuning history of step 11.")
    return set_caption(fig, caption, alt="Dot plot")


# ---------------------------------------------------------------------------------------------
# the appendix: every run
# ---------------------------------------------------------------------------------------------


_REVISION = r"(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}"  # a commit id: hex, digits and letters


def _cell(text: str) -> str:
    """A run's own description as a table cell: one line, no pipes, and in the book's words: a
    commit id becomes "an earlier revision" (the variants' names say which copy was which), the
    lab's "this session" becomes "that day", and a doubled full stop a single one."""
    text = re.sub(rf"\b(?:(?:the \w+ )?commit|HEAD) {_REVISION}\b", "an earlier revision", text)
    text = re.sub(rf"\b{_REVISION}\b", "an earlier revision", text)
    text = re.sub(r"\bthis session's\b", "that day's", re.sub(r"\bthis session\b", "that day", text))
    text = re.sub(r"(?<!\.)\.\.(?=\s|$)", ".", text)
    return " ".join(text.replace("|", "/").split())


def ideas_of(name: str) -> list:
    """The ideas (:data:`IDEAS` keys) one of whose comparisons reads run ``name``."""
    return [k for k, idea in IDEAS.items() if any(c.run == name for c in idea.comparisons)]


def index_table(results_dir: Optional[str] = None) -> str:
    """A Markdown table of every A/B run under ``results/tuning/``, by run number: its file, what it
    compared (its own description), its variants and shapes, its GPU and date, and which of
    :data:`IDEAS` read it."""
    rows = ["| file | what it compared | variants | shapes | measured on | read for |", "|---|---|---:|---:|---|---|"]
    for name in run_names(results_dir):
        tune = rec.load_tuning(name, results_dir)
        variants = {r["variant"] for r in tune["rows"] if r["variant"] != "cublas"}
        shapes = {r["shape"] for r in tune["rows"]}
        env = tune.get("env", {})
        rows.append(f"| `{tune['_file']}` | {_cell(tune.get('what', ''))} | {len(variants)} | {len(shapes)} | "
                    f"{env.get('gpu', '-')}, {run_date(tune) or 'undated'} | "
                    f"{', '.join(IDEAS[k].title for k in ideas_of(name)) or '-'} |")
    return "\n".join(rows) if len(rows) > 2 else "No A/B run recorded under results/tuning/."


def comparisons_of(key: str) -> list:
    """``[(run, new, old)]`` of an idea, as :func:`gemm_course.measure.records.ab_table` takes them."""
    return [(c.run, c.new, c.old) for c in IDEAS[key].comparisons]



def variants_table(results_dir: Optional[str] = None) -> str:
    """A Markdown table of every A/B run's outcome, by run number: each variant against the first
    variant the run lists (its geometric mean and range over the shape-runs both timed)."""
    rows = ["| file | variant | against | shape-runs | geometric mean | range |", "|---|---|---|---:|---:|---|"]
    for name in run_names(results_dir):
        tune = rec.load_tuning(name, results_dir)
        variants = [v for v in dict.fromkeys(r["variant"] for r in tune["rows"]) if v != "cublas"]
        for v in variants[1:]:
            ch = rec.ab_changes(tune, v, variants[0])
            values = [x for xs in ch.values() for x in xs]
            if values:
                rows.append(f"| `{tune['_file']}` | `{v}` | `{variants[0]}` | {len(values)} | "
                            f"{_percent(rec.geomean(1.0 + x for x in values) - 1.0)} | "
                            f"{_percent(min(values))} to {_percent(max(values))} |")
    return "\n".join(rows) if len(rows) > 2 else "No A/B run recorded under results/tuning/."
