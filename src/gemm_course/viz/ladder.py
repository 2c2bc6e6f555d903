"""The ladder's throughput: measured bars against cuBLAS and the seed's quoted figures, a step's
sweep over shapes, and the ceilings (the roofline, shared-memory bandwidth at the tensor cores' rate)."""

from __future__ import annotations

import math
import textwrap
from typing import Iterable, Optional, Sequence

import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from ..hardware import B200, H100_SXM, H200
from ..measure.records import geomean, latest_per_step, latest_sweep, provenance, run_of, shape_of
from ._style import CUBLAS, LIVE, MEASURED, PAGE_WIDTH, SEED, TEXT_PT, message_figure, new_figure, set_caption, wrap_title


# The seed series (the course's starting point) on a B200 at 4096^3 BF16, in TFLOP/s. Quoted from
# the seed's write-up, NOT measured by this project; drawn hatched, apart from the measured bars, labelled SEED_LABEL.
SEED_B200_TFLOPS = {1: 4, 2: 155, 3: 285}
SEED_SHAPE = (4096, 4096, 4096)
SEED_LABEL = "quoted from the seed, B200 (not measured here)"


# Vendor datasheet figures (dense BF16 tensor-core peak, HBM bandwidth), quoted for rooflines
# (gemm_course.hardware's table).
DATASHEET = {name: card.datasheet_figures() for name, card in (("H200", H200), ("H100", H100_SXM), ("B200", B200))}


def ladder_data(records: Sequence[dict], arch: str = "sm90", shape=SEED_SHAPE, gpu: Optional[str] = None) -> dict:
    """What :func:`ladder_bars` draws, as data: ``{number: record or None}``, and the seed's bars
    (its B200 figures, quoted, at the seed's shape)."""
    measured = latest_per_step(records, arch, shape, gpu)
    seed = dict(SEED_B200_TFLOPS) if tuple(shape) == SEED_SHAPE else {}
    return {"measured": measured, "seed": seed}


def _dates(recs) -> str:
    """The days the records were measured: one date, or first to last."""
    days = sorted({r.get("date", "")[:10] for r in recs if r.get("date")})
    if not days:
        return "date unknown"
    return days[0] if len(days) == 1 else f"{days[0]} to {days[-1]}"


def _gpus(recs) -> str:
    return ", ".join(sorted({str(r.get("gpu")) for r in recs})) or "?"


def _tflops(value: float) -> str:
    """TFLOP/s as the bars print it: three digits below 10, whole numbers above (never 2.25e+03)."""
    return f"{value:.3g} TFLOP/s" if value < 10 else f"{value:.0f} TFLOP/s"


def ratio_text(rec: dict) -> str:
    """A record's ratio to the cuBLAS timed in its own run (``ratio_to_cublas``), rounded as the
    chapters' tables print it (``records.step_table``: two decimals), three below 0.1."""
    ratio = rec["ratio_to_cublas"]
    return f"{ratio:.2f} of cuBLAS" if ratio >= 0.1 else f"{ratio:.3f} of cuBLAS"


def _value_text(rec: dict, reference: Optional[float]) -> str:
    """A bar's value and its share of cuBLAS: of the figure's one reference (TFLOP/s), or with
    ``reference`` None its ratio to its own run's cuBLAS (:func:`ratio_text`)."""
    h = rec["tflops"]["median"]
    if reference is None:
        return f"{h:.3g} TFLOP/s\n{ratio_text(rec)}" if h < 10 else f"{h:.0f} TFLOP/s\n{ratio_text(rec)}"
    ratio = h / reference
    return f"{h:.3g} TFLOP/s\n{ratio:.1%} of cuBLAS" if ratio < 0.1 else f"{h:.0f} TFLOP/s\n{ratio:.0%} of cuBLAS"


def cublas_reference(recorded: dict, live: Optional[dict] = None) -> Optional[tuple]:
    """The one cuBLAS a ladder figure compares every bar with: ``(TFLOP/s, step number, record)``,
    the cuBLAS median timed in the same run as the highest-numbered step drawn (the live one, if a
    live record of it exists: then every bar is compared with this notebook's cuBLAS)."""
    for pool in (live or {}, recorded):
        if pool:
            number = max(pool)
            return pool[number]["cublas_tflops"]["median"], number, pool[number]
    return None


def ladder_bars(records: Sequence[dict], arch: str = "sm90", shape=SEED_SHAPE, gpu: Optional[str] = None,
                live: Optional[Sequence[dict]] = None, log: bool = False, highlight: Sequence[int] = (),
                numbers: Optional[Sequence[int]] = None, seed: bool = True, own_ratios: bool = False) -> Figure:
    """One horizontal bar per ladder step: the newest bench record of each (median, whiskers
    min..max), its value and ratio to cuBLAS in a column at the right; a linear axis from 0 to just
    past the largest value drawn (``log``: a log axis instead).

    Two groups, drawn apart: the measured bars (top panel; the legend names the GPU and the dates)
    and, at 4096^3, the seed series' B200 figures, quoted from the seed, not measured here (bottom
    panel, hatched grey; ``seed=False`` leaves them out, as a Hopper chart or a chapter's view of
    later steps should).

    * cuBLAS: one reference per figure (:func:`cublas_reference`): the cuBLAS median timed in the
      same run as the highest-numbered step drawn, a dashed line; every bar's percentage is of it.
      The caption names it, and the range of cuBLAS over the other runs drawn. With ``own_ratios``,
      each bar shows instead its ratio to the cuBLAS of its own run, rounded as the chapters' tables
      round it (:func:`ratio_text`), so a bar and a table row of the same record agree.
    * ``live``: records the running notebook measured on its GPU (not from ``results/``), drawn below the
      recorded bar of their step, with their own cuBLAS ticks.
    * no records: only the seed's bars, and a note that no measurement exists yet.
    * ``highlight``: step numbers whose measured bars get a thick black outline and a bold label
      (a chapter's own step and its parent).
    * ``numbers``: draw only these steps (a chapter's view of the ladder).
    """
    from ..runtime import ladder

    m, n, k = shape
    highlight = set(highlight)
    data = ladder_data(records, arch, shape, gpu)
    measured, seed = data["measured"], (data["seed"] if seed else {})
    live_by_step = {}
    for rec in live or []:
        if shape_of(rec) == (m, n, k) and rec["step"].startswith(arch + "/"):
            live_by_step[int(rec["step"].split("/")[1])] = rec
    if numbers is not None:
        keep = set(numbers)
        measured = {num: r for num, r in measured.items() if num in keep}
        seed = {num: v for num, v in seed.items() if num in keep}
        live_by_step = {num: r for num, r in live_by_step.items() if num in keep}
    titles = {s.number: s.title for s in ladder.steps(arch)}
    have = {num: r for num, r in measured.items() if r is not None}
    message = not have and not live_by_step
    rows = [] if message else sorted(set(measured) | set(live_by_step))
    seed_rows = sorted(seed)
    runs = sorted({run_of(r) for r in have.values()})
    reference = cublas_reference(have, live_by_step)
    series = [("recorded", have, MEASURED)] + ([("live", live_by_step, LIVE)] if live_by_step else [])

    # Rows are laid out in inches (y data unit = 1 inch): each step's title above its bar(s).
    thick = 0.32 if live_by_step else 0.24  # a bar; with live bars, room for two two-line values per row
    bar = thick * len(series)

    def layout(nums, with_titles):
        y, centers, wrapped = 0.06, {}, {}
        for num in nums:
            wrapped[num] = textwrap.fill(titles.get(num, ""), 62) if with_titles else ""
            lines = wrapped[num].count("\n") + 1 if wrapped[num] else 0
            y += 0.16 * lines + 0.03
            centers[num] = y + bar / 2
            y += bar + 0.12
        return centers, wrapped, y

    centers, wrapped, top_h = layout(rows, True)
    seed_centers, seed_wrapped, seed_h = layout(seed_rows, not rows)
    if message:
        top_h = 0.9
    legend_lines = bool(have) + bool(live_by_step) + bool(seed) + bool(have or live_by_step)
    fig = new_figure(PAGE_WIDTH, top_h + (seed_h + 0.55 if seed_rows else 0.0) + 0.23 * legend_lines + 1.0)
    if seed_rows:
        ax, sax = fig.subplots(2, 1, sharex=True, height_ratios=[top_h, seed_h])
    else:
        ax, sax = fig.add_subplot(), None

    def draw_titles(a, where, texts):
        for num, text in texts.items():
            if text:
                a.annotate(text, (0, where[num] - bar / 2), xycoords=a.get_yaxis_transform(), xytext=(3, 2),
                           textcoords="offset points", ha="left", va="bottom", fontsize=TEXT_PT, color="#333333")

    handles = []
    blended = ax.get_yaxis_transform()  # x in axes fraction, y in data
    top, lows = 1.0, []
    for si, (name, values, color) in enumerate(series):
        for num, val in values.items():
            y = centers[num] + (si - (len(series) - 1) / 2) * thick
            t = val["tflops"]
            h = t["median"]
            ax.barh(y, h, thick * 0.85, color=color, alpha=0.9 if name == "recorded" else 0.8,
                    xerr=[[max(h - t["min"], 0)], [max(t["max"] - h, 0)]], capsize=2.5, ecolor="black",
                    error_kw={"linewidth": 0.8}, edgecolor="black" if num in highlight else "none",
                    linewidth=2.0 if num in highlight else 0)
            label = _value_text(val, None if own_ratios else reference[0])
            ax.text(1.02, y, label, transform=blended, ha="left", va="center", fontsize=TEXT_PT,
                    color="black" if name == "recorded" else "#1a6e1a", clip_on=False, linespacing=1.0)
            top = max(top, t["max"])
            lows.append(t["min"])
    for num in rows:
        if num not in have and num not in live_by_step:
            ax.text(1.02, centers[num], "no record yet", transform=blended, ha="left", va="center",
                    fontsize=TEXT_PT, color="#555555", clip_on=False)
    draw_titles(ax, centers, wrapped)
    if have:
        handles.append(Patch(color=MEASURED, label=f"measured: {_gpus(have.values())}, {_dates(have.values())}"))
    if live_by_step:
        handles.append(Patch(color=LIVE, label=f"live: this notebook, {_gpus(live_by_step.values())}"))

    cublas_note = ""
    if reference is not None:
        line, ref_step, ref_rec = reference
        ax.axvline(line, color=CUBLAS, linestyle="--", linewidth=1.5)  # not across the seed's B200 panel
        which = "this notebook's run" if ref_step in live_by_step and ref_rec is live_by_step[ref_step] else "its run"
        handles.append(Line2D([], [], color=CUBLAS, linestyle="--", linewidth=1.5,
                              label=f"cuBLAS: {line:.0f} TFLOP/s, timed with step {ref_step} in {which}"))
        top = max(top, line)
        others = sorted({round(r["cublas_tflops"]["median"]) for r in list(have.values()) + list(live_by_step.values())
                         if r is not ref_rec})
        spread = (f" The other bars' own runs timed cuBLAS at {others[0]}-{others[-1]} TFLOP/s"
                  if len(others) > 1 else f" The other bars' own runs timed cuBLAS at {others[0]} TFLOP/s" if others else "")
        cublas_note = (f"{'Dashed line' if own_ratios else 'Dashed line and every percentage'}: one cuBLAS reference, "
                       f"cuBLAS (torch.mm) at {m}x{n}x{k} timed "
                       f"interleaved in the same run as step {ref_step}, {line:.0f} TFLOP/s ({ref_rec.get('gpu')}, "
                       f"{ref_rec.get('date', '')[:10]}, {ref_rec.get('_file') or 'this notebook'})."
                       + (" Each bar's ratio is to the cuBLAS timed in its own run, rounded as in the tables."
                          + (spread + "." if spread else "") if own_ratios else
                          (spread + ", so a percentage can differ from the ratio in its own record." if spread else "")))

    if message:
        where = f" on {gpu}" if gpu else ""
        how = ("compiled, not run: the B200 kit\n(scripts/b200_validate.sh) writes these records"
               if arch == "sm100" else "scripts/gpu_ladder.sh on an H100/H200\nwrites these records")
        ax.text(0.5, 0.5, f"No measured record for {arch} at {m}x{n}x{k}{where} exists yet\n({how})",
                transform=ax.transAxes, ha="center", va="center", fontsize=TEXT_PT,
                bbox={"boxstyle": "round", "facecolor": "#fff3cd", "edgecolor": "#c9a227"})
        ax.set_yticks([])
        ax.set_ylim(top_h, 0)
    else:
        ax.set_yticks([centers[num] for num in rows], [f"step {num}" for num in rows])
        for num, tick in zip(rows, ax.get_yticklabels()):
            if num in highlight:
                tick.set_fontweight("bold")
        ax.set_ylim(top_h, 0)
    ax.grid(axis="x", alpha=0.3, which="both")

    if sax is not None:
        sblend = sax.get_yaxis_transform()
        for num in seed_rows:
            v = float(seed[num])
            sax.barh(seed_centers[num], v, thick * 0.85, facecolor="none", edgecolor=SEED, hatch="///", linewidth=1.5)
            sax.text(1.02, seed_centers[num], f"{v:g} TFLOP/s\nquoted", transform=sblend, ha="left", va="center",
                     fontsize=TEXT_PT, color="#555555", clip_on=False, linespacing=1.0)
            lows.append(v)
            top = max(top, v)
        draw_titles(sax, seed_centers, seed_wrapped)
        sax.set_yticks([seed_centers[num] for num in seed_rows], [f"step {num}" for num in seed_rows])
        sax.set_ylim(seed_h, 0)
        sax.set_title("Quoted from the seed, on a B200: not measured by this project", loc="left",
                      fontsize=TEXT_PT + 1, color="#444444")
        sax.grid(axis="x", alpha=0.3, which="both")
        handles.append(Patch(facecolor="none", edgecolor=SEED, hatch="///", label=SEED_LABEL))

    bottom_ax = sax if sax is not None else ax
    if log:
        ax.set_xscale("log")
        ax.set_xlim(min([1.0] + [v / 3 for v in lows]), top * 2.5)  # the naive step sits near 1 TFLOP/s
    else:
        ax.set_xlim(0, top * 1.04)
    if message and sax is None:
        ax.set_xticks([])  # nothing drawn: no TFLOP/s axis (a bare 0..1 would read as a scale)
    else:
        bottom_ax.set_xlabel("TFLOP/s (BF16, higher is better)" + (", log scale" if log else ""))
    for a in (ax, sax):
        if a is not None:
            a.tick_params(labelsize=TEXT_PT)
    fig.suptitle(f"The ladder on {ladder.ARCH_NAMES.get(arch, arch)}: {m}x{n}x{k} BF16 GEMM", fontsize=TEXT_PT + 2)
    if handles:
        ax.legend(handles=handles, loc="lower left", bbox_to_anchor=(0.0, 1.0), ncol=1, fontsize=TEXT_PT,
                  frameon=False, borderaxespad=0.2)

    parts = []
    for run in runs:
        rec = next(r for r in have.values() if run_of(r) == run)
        steps_here = ", ".join(str(num) for num, r in have.items() if run_of(r) == run)
        parts.append(f"Step{'s' if ',' in steps_here else ''} {steps_here}: {provenance(rec)}.")
    if live_by_step:
        rec = next(iter(live_by_step.values()))
        parts.append(f"Live bars: measured in this notebook on {rec.get('gpu')} by gemm_course.measure.bench.bench_step.")
    if cublas_note:
        parts.append(cublas_note)
    if not have:
        parts.append(f"No record of {arch} at {m}x{n}x{k} under results/ yet.")
    if seed:
        parts.append("Hatched bars, in a panel of their own: the seed series' B200 figures at 4096^3, quoted "
                     "from the seed, not measured by this project.")
    if have or live_by_step:
        parts.append("Whiskers: min..max over all timed launches.")
    if highlight & set(rows):
        parts.append("Outlined: step " + " and ".join(str(h) for h in sorted(highlight & set(rows))) + ".")
    alt = [f"Horizontal bar chart, one bar per step, TFLOP/s on a {'log' if log else 'linear'} scale"]
    if have:
        alt.append(f"measured on {_gpus(have.values())} ({_dates(have.values())}) for step{'s' if len(have) > 1 else ''} "
                   f"{', '.join(str(num) for num in have)}, with cuBLAS timed in the same runs")
    elif rows or message:
        alt.append(f"no measured record for {arch} yet")
    if seed:
        alt.append(f"apart, below: the seed's B200 figures quoted for step{'s' if len(seed_rows) > 1 else ''} "
                   f"{', '.join(str(num) for num in seed_rows)}")
    return set_caption(fig, " ".join(parts), alt="; ".join(alt))


SWEEP_CLASS_COLORS = {"square": "#4c72b0", "llm": "#55a868", "few-wave long-K": "#dd8452"}


def sweep_ratios(records: Sequence[dict], step: Optional[str] = None) -> Figure:
    """Ratio to cuBLAS (same run) per shape of the sweep the book shows of ``step`` (``latest_sweep``;
    default: the final Hopper step), coloured by shape class, with the geometric mean."""
    from ..runtime import ladder

    step = step or ladder.final("sm90").key
    sweep = latest_sweep(records, step)
    if not sweep:
        return message_figure(f"No sweep record of {step} under results/ yet", f"No sweep of {step} recorded.",
                              height=1.6, fontsize=TEXT_PT + 2)
    from ..measure.bench import shape_class

    labels = [f"{r['shape']['m']}x{r['shape']['n']}x{r['shape']['k']}" for r in sweep]
    ratios = [r["ratio_to_cublas"] for r in sweep]
    classes = [shape_class(r["shape"]["m"], r["shape"]["n"], r["shape"]["k"]) for r in sweep]
    triton = [(r.get("peers") or {}).get("triton", {}).get("ratio_to_cublas") for r in sweep]
    peer = all(t is not None for t in triton)  # the course's Triton matmul, timed in the same rounds
    fig = new_figure(PAGE_WIDTH, 0.24 * len(sweep) + 2.3)
    ax = fig.add_subplot()
    y = np.arange(len(sweep))
    colors = [SWEEP_CLASS_COLORS.get(c, SEED) for c in classes]
    ax.hlines(y, 1.0, ratios, colors=colors, linewidth=3)
    ax.scatter(ratios, y, color=colors, s=30, zorder=3)
    blended = ax.get_yaxis_transform()
    for yi, v, t in zip(y, ratios, triton):
        ax.text(1.02, yi, f"{v:.3f}" + (f"   {t:.3f}" if peer else ""), transform=blended, ha="left", va="center",
                fontsize=TEXT_PT, clip_on=False)
    ax.text(1.02, -0.9, "step" + ("   Triton" if peer else ""), transform=blended, ha="left", va="center",
            fontsize=TEXT_PT, fontweight="bold", clip_on=False)
    g = geomean(ratios)
    ax.axvline(1.0, color=CUBLAS, linewidth=1.5)
    ax.axvline(g, color="black", linestyle="--", linewidth=1.2)
    handles = [Patch(color=SWEEP_CLASS_COLORS.get(c, SEED), label=c) for c in dict.fromkeys(classes)]
    handles += [Line2D([], [], color=CUBLAS, linewidth=1.5, label="cuBLAS = 1"),
                Line2D([], [], color="black", linestyle="--", linewidth=1.2, label=f"geometric mean {g:.3f}")]
    if peer:
        ax.scatter(triton, y, marker="x", color="#8172b2", s=36, zorder=3)
        handles.append(Line2D([], [], marker="x", linestyle="none", color="#8172b2",
                              label=f"Triton (course's), geomean {geomean(triton):.3f}"))
        shown = ratios + triton
    else:
        shown = ratios
    ax.set_yticks(y, labels)
    ax.set_ylim(len(sweep) - 0.4, -1.4)
    low = min(shown + [g])
    ax.set_xlim(max(0.0, low - 0.03), max(shown + [1.0]) + 0.02)
    ax.set_xlabel("TFLOP/s / cuBLAS TFLOP/s, same run (the axis does not start at 0)")
    ax.grid(axis="x", alpha=0.3)
    ax.legend(handles=handles, loc="lower left", bbox_to_anchor=(0.0, 1.0), ncol=2, frameon=False, borderaxespad=0.2)
    fig.suptitle(f"{step} against cuBLAS on {len(sweep)} shapes (medians of per-launch times)", fontsize=TEXT_PT + 2)
    files = sorted({r.get("_file", "") for r in sweep})
    more = f" Records from {len(files)} runs: {', '.join(files)}." if len(files) > 1 else ""
    return set_caption(fig, f"Each point: the step's median TFLOP/s over cuBLAS's median, timed interleaved in the same "
                            f"run; {provenance(sweep[0])}.{more}", alt="Dot plot")


def _spread(values: Sequence[float], gap: float) -> list:
    """``values`` moved apart as little as possible (least squares) so that neighbours are at least
    ``gap`` apart, order kept: label positions that do not overlap. Blocks of labels that would
    collide are merged and each block is centred on the values it holds."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    blocks = []  # [first slot, count, start position]
    for slot, i in enumerate(order):
        blocks.append([slot, 1, values[i]])
        while len(blocks) > 1 and blocks[-2][2] + blocks[-2][1] * gap > blocks[-1][2]:
            last = blocks.pop()
            first, count, _ = blocks[-1]
            count += last[1]
            desired = [values[order[k]] - (k - first) * gap for k in range(first, first + count)]
            blocks[-1] = [first, count, sum(desired) / count]
    out = [0.0] * len(values)
    for first, count, start in blocks:
        for k in range(first, first + count):
            out[order[k]] = start + (k - first) * gap
    return out


LABEL_HALF_HEIGHT = 0.03  # half a 9-pt label's height, as a share of a roofline's log-scale y span


def _clear_of(values: Sequence[float], gap: float, lines: Sequence[float], half: float,
              limits: tuple = (-math.inf, math.inf)) -> list:
    """Label positions :func:`_spread` apart that also keep ``half`` clear of every y in ``lines`` (a
    label on a line would be crossed by it) and stay within ``limits``. Two sweeps: from the lowest
    label up (each moved up past any line it would sit on, ``gap`` above the one below) and from the
    highest down (the mirror image); the one that moves the labels less wins."""
    spread = _spread(values, gap)

    def sweep(ys: list, sign: int) -> list:
        out, prev = [0.0] * len(ys), -math.inf
        for i in sorted(range(len(ys)), key=lambda j: sign * ys[j]):
            y = max(sign * ys[i], prev + gap)
            while any(abs(y - sign * line) < half for line in lines):
                y = max(sign * line for line in lines if abs(y - sign * line) < half) + 1.001 * half
            out[i], prev = sign * y, y
        return out

    def cost(ys: list) -> float:
        outside = sum(1 for y in ys if not limits[0] + half <= y <= limits[1] - half)
        return outside * 1e6 + sum((y - v) ** 2 for y, v in zip(ys, spread))

    return min((sweep(spread, 1), sweep(spread, -1)), key=cost)


def roofline(problem, peak_tflops: float, bandwidth_tbs: float, points: Iterable = (),
             machine_label: str = "", title: Optional[str] = None, ceilings: Optional[dict] = None,
             levels: Optional[dict] = None, annotate: bool = False, x_label: Optional[str] = None) -> Figure:
    """Attainable TFLOP/s = min(peak, intensity x bandwidth), with the problem and kernels on it.

    ``points``: dicts ``{'label', 'intensity' (FLOP/byte), 'tflops' (optional, measured)}``.
    A point without ``tflops`` is drawn hollow on the roof: the bound its intensity allows.
    ``ceilings``: ``{label: TFLOP/s}`` lower compute roofs drawn dashed (e.g. fp32 without tensor cores).
    ``levels``: ``{label: TFLOP/s}`` horizontal reference lines (e.g. cuBLAS, measured).
    ``annotate``: label the measured points on the plot (each beside its marker, labels moved apart
    so none overlaps, a thin line to its point) instead of in the legend; measured points that share
    an intensity are spread a little sideways so that every marker shows (the caption says so).
    The legend sits under the axes in one column; the figure grows with it.
    """
    ridge = peak_tflops / bandwidth_tbs
    points = list(points)
    ais = [p["intensity"] for p in points] + [problem.arithmetic_intensity, ridge]
    lo = 10 ** math.floor(math.log10(min(ais) / 3))
    hi = 10 ** math.ceil(math.log10(max(ais) * 3))
    x = np.logspace(math.log10(lo), math.log10(hi), 400)
    roof = np.minimum(peak_tflops, x * bandwidth_tbs)

    legend_entries = 1 + len(ceilings or {}) + len(levels or {}) + sum(
        1 for p in points if not (annotate and p.get("tflops") is not None))
    wrap = 84  # characters of a legend line at 9 pt across the page
    legend_lines = legend_entries + sum(len(str(p["label"])) // wrap for p in points)
    fig = new_figure(PAGE_WIDTH, 5.0 + 0.24 * legend_lines)
    ax = fig.add_subplot()
    ax.loglog(x, roof, color="black", linewidth=2, label=f"roof {machine_label}".strip())
    for i, (label, value) in enumerate((ceilings or {}).items()):
        ax.plot(x, np.minimum(value, x * bandwidth_tbs), color="grey", linestyle=("--", ":", "-.")[i % 3], linewidth=1.2,
                label=textwrap.fill(f"{label}: {value:.4g} TFLOP/s", wrap))
    for label, value in (levels or {}).items():
        ax.axhline(value, color=CUBLAS, linestyle=(0, (4, 2)), linewidth=1.3,
                   label=textwrap.fill(f"{label}: {value:.0f} TFLOP/s", wrap))
    ax.axvline(ridge, color="grey", linestyle=":", linewidth=1)
    ax.annotate(f"ridge\n{ridge:.0f} FLOP/B", (ridge, 0.04), xycoords=("data", "axes fraction"), xytext=(-4, 0),
                textcoords="offset points", ha="right", va="bottom", fontsize=TEXT_PT, color="grey")
    ai = problem.arithmetic_intensity
    ax.axvline(ai, color=MEASURED, linestyle="--", linewidth=1)
    ax.annotate(f"{problem.label}:\n{ai:.0f} FLOP/B\n(A, B, C each\nmoved once)", (ai, 0.04),
                xycoords=("data", "axes fraction"), xytext=(4, 0), textcoords="offset points", ha="left",
                fontsize=TEXT_PT, color=MEASURED)
    markers = "osD^v<>p*h"
    measured = [p for p in points if p.get("tflops") is not None]
    same_x = {}
    for p in measured:
        same_x.setdefault(round(math.log10(p["intensity"]), 6), []).append(p)
    shown_x = {}
    for group in same_x.values():
        for j, p in enumerate(group):
            shown_x[id(p)] = p["intensity"] * 10 ** (0.045 * (j - (len(group) - 1) / 2)) if annotate else p["intensity"]
    spread = annotate and any(len(g) > 1 for g in same_x.values())
    drawn = []
    for i, p in enumerate(points):
        bound = min(peak_tflops, p["intensity"] * bandwidth_tbs)
        mk = markers[i % len(markers)]
        style = {"color": "black", "markersize": 12} if p["label"] == "cuBLAS" else {"markersize": 8}
        if p["label"] == "cuBLAS":
            mk = "*"  # never the marker and colour of a step (the cycles repeat after ten points)
        if p.get("tflops") is not None:
            label = f"{p['label']}: {_tflops(p['tflops'])}" + ("" if "measured" in str(p["label"]) else " (measured)")
            (line,) = ax.plot(shown_x[id(p)], p["tflops"], mk, label=None if annotate else label, **style)
            drawn.append((p, line))
        else:
            ax.plot(p["intensity"], bound, mk, markersize=9, markerfacecolor="none", markeredgewidth=1.8,
                    label=textwrap.fill(f"{p['label']}: at most {_tflops(bound)}", wrap))
    y_lo = min(roof.min(), min([p.get("tflops") or roof.min() for p in points] or [roof.min()])) / 3
    y_hi = peak_tflops * 2.5
    ax.set_ylim(y_lo, y_hi)
    ax.set_xlim(lo, hi)
    if annotate and drawn:
        # labels beside their group of points: the rightmost group's to the right, the next to the left, ...
        span = math.log10(y_hi) - math.log10(y_lo)
        groups = sorted(same_x.values(), key=lambda g: -g[0]["intensity"])
        colors = {id(p): line.get_color() for p, line in drawn}
        for rank, group in enumerate(groups):
            right = rank % 2 == 0
            edge = (max if right else min)(shown_x[id(p)] for p in group)
            tx = edge * (1.55 if right else 1 / 1.55)
            # the horizontal lines a label there could sit on: the roof and the lower compute roofs right
            # of their ridges, the reference levels everywhere
            lines = [value for value in [peak_tflops, *(ceilings or {}).values()] if tx > value / bandwidth_tbs]
            ys = _clear_of([math.log10(p["tflops"]) for p in group], 0.052 * span,
                           [math.log10(v) for v in lines + list((levels or {}).values())], LABEL_HALF_HEIGHT * span,
                           (math.log10(y_lo), math.log10(y_hi)))
            for p, ty in zip(group, ys):  # a text and a thin leader line (not an arrow: its box would cover others)
                ax.plot([shown_x[id(p)], tx], [p["tflops"], 10 ** ty], color="#999999", linewidth=0.7, zorder=1)
                ax.text(tx * (1.03 if right else 1 / 1.03), 10 ** ty, p["label"], ha="left" if right else "right",
                        va="center", fontsize=TEXT_PT, color=colors[id(p)])
    ax.set_xlabel(x_label or "arithmetic intensity (FLOP per byte of DRAM traffic)")
    ax.set_ylabel("TFLOP/s")
    ax.set_title(wrap_title(title or f"Roofline: {problem.label} BF16 GEMM", 72), fontsize=TEXT_PT + 2)
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=TEXT_PT, loc="upper left", bbox_to_anchor=(0.0, -0.12), ncol=1, frameon=False)
    caption = (f"Roof: peak {peak_tflops:g} TFLOP/s and {bandwidth_tbs:g} TB/s "
               f"{('(' + machine_label + ')') if machine_label else ''}; hollow markers sit on the roof at the bound "
               "their intensity allows, filled ones are measured.")
    if spread:
        caption += (" Measured points that share an intensity are drawn a little apart sideways (a few percent of "
                    "their intensity) so that each shows; each is labelled.")
    return set_caption(fig, caption, alt="Roofline chart, log-log")


def bandwidth_bars(sweep: Sequence[dict], title: str = "Decode-sized GEMMs: bytes over time") -> Figure:
    """The memory roofline of a decode sweep (``records.decode_sweep``): per shape, the fewest bytes
    (A, B, C once) over the median time, for the step and for cuBLAS timed beside it, against the
    datasheet's HBM bandwidth and the copy bandwidth measured in the same run (``bench.copy_tb_s``)."""
    if not sweep:
        return message_figure("No decode-class sweep of this step yet (records.decode_sweep): scripts/gpu_decode.sh "
                              "on a GPU writes them.", "Decode-sized GEMMs of this step against HBM bandwidth: not measured yet.")
    labels = ["x".join(map(str, shape_of(r))) for r in sweep]
    ours = [r["bandwidth"]["tb_s"] for r in sweep]
    theirs = [r["bandwidth"]["cublas_tb_s"] for r in sweep]
    fig = new_figure(PAGE_WIDTH, 1.6 + 0.28 * len(sweep))
    ax = fig.add_subplot()
    y = np.arange(len(sweep))
    ax.barh(y - 0.2, ours, 0.4, color=MEASURED, label=sweep[0]["step"])
    ax.barh(y + 0.2, theirs, 0.4, color=CUBLAS, label="cuBLAS (same run)")
    sheet = sweep[0]["bandwidth"].get("datasheet_tb_s")
    copies = [r["bandwidth"].get("copy_tb_s") for r in sweep if r["bandwidth"].get("copy_tb_s")]
    if sheet:
        ax.axvline(sheet, color="black", linewidth=1.5, label=f"datasheet {sheet:g} TB/s")
    if copies:
        copy = float(np.median(copies))
        ax.axvline(copy, color="grey", linestyle="--", linewidth=1.3, label=f"copy, measured {copy:.2f} TB/s")
    ax.set_yticks(y, labels, fontsize=TEXT_PT)
    ax.invert_yaxis()
    ax.set_xlabel("TB/s: (MK + NK + MN) x 2 bytes over the median time")
    ax.set_title(wrap_title(title, 72), fontsize=TEXT_PT + 2)
    ax.legend(fontsize=TEXT_PT, loc="upper left", bbox_to_anchor=(0.0, -0.08 - 1.2 / (1.6 + 0.28 * len(sweep))),
              ncol=2, frameon=False)
    ax.grid(True, axis="x", alpha=0.25)
    return set_caption(fig, f"{provenance(sweep[0])}; operands in turn over three L2s, so every launch reads DRAM.",
                       alt="Horizontal bars of achieved bandwidth per decode shape")


def smem_traffic_bars(rows: dict, title: str = "Shared-memory traffic of the main loop at the tensor cores' rate") -> Figure:
    """``rows = {label: gemm_course.teaching.sim.SmemTraffic}``: bytes per clock read by wgmma and written by
    TMA, stacked, against the SM's shared-memory bandwidth."""
    from ..teaching import sim

    labels = list(rows)
    fig = new_figure(PAGE_WIDTH, 0.5 * len(labels) + 2.0)
    ax = fig.subplots()
    y = np.arange(len(labels))
    read = [rows[k].wgmma_read / rows[k].clocks for k in labels]
    write = [rows[k].tma_write / rows[k].clocks for k in labels]
    ax.barh(y, read, 0.6, label="wgmma reads A and B", color="#4c72b0")
    bars = ax.barh(y, write, 0.6, left=read, label="TMA writes A and B", color="#dd8452")
    ax.bar_label(bars, labels=[f"{r + w:.0f} B/clock" for r, w in zip(read, write)], fontsize=TEXT_PT, padding=3,
                 bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.85, "pad": 1})
    ax.axvline(sim.SMEM_BYTES_PER_CLOCK, color="black", linestyle="--", linewidth=1,
               label=f"shared memory: {sim.SMEM_BYTES_PER_CLOCK} B/clock per SM")
    ax.set_yticks(y, [textwrap.fill(label, 30) for label in labels], fontsize=TEXT_PT)
    ax.invert_yaxis()
    ax.set_xlabel("bytes per clock per SM, with the tensor cores at full rate")
    ax.margins(x=0.22)
    ax.legend(fontsize=TEXT_PT, loc="lower left", bbox_to_anchor=(0.0, 1.0), ncol=2, frameon=False, borderaxespad=0.2)
    fig.suptitle(wrap_title(title, 72), fontsize=TEXT_PT + 2)
    return set_caption(fig, "gemm_course.teaching.sim.smem_traffic: one K tile (64 deep) of one CTA; every wgmma "
                            "(64 rows x N x 16) reads its own A and B slices from shared memory, and TMA writes the tile's "
                            f"A and B once. Clocks: the K tile's FLOPs at {sim.TENSOR_FLOP_PER_CLOCK} FLOP per clock per SM "
                            "(dense bf16). A count, not a measurement.", alt="Stacked horizontal bar chart")
