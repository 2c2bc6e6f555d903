"""Figures of the course. Pure functions: data in, a :class:`matplotlib.figure.Figure` out.

Every number drawn comes from a result record (:mod:`gemm_course.bench`), from a problem's own
arithmetic, or from the kernels' own CuTe objects (layouts, atoms) traced on the CPU. The one
exception is labelled as such wherever it appears: the seed series' B200 figures, quoted (not
measured here) in :data:`SEED_B200_TFLOPS`. Datasheet peaks for the roofline are in
:data:`DATASHEET`, also quoted, never measured.

Figures are built with :class:`matplotlib.figure.Figure` (not ``pyplot``), so a notebook shows
each one exactly once, when it is the value of a cell, and tests leak no windows. A figure's
caption (what was drawn, where it was measured) is in its ``caption`` attribute and also printed
under the axes.
"""

from __future__ import annotations

import collections
import math
import textwrap
from typing import Iterable, Optional, Sequence

import numpy as np
from matplotlib import colormaps
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle

# The seed series (the course's starting point) on a B200 at 4096^3 BF16, in TFLOP/s. Quoted from
# the seed's write-up, NOT measured by this project; drawn hatched and labelled "seed, B200 (quoted)".
SEED_B200_TFLOPS = {1: 4, 2: 155, 3: 285}
SEED_SHAPE = (4096, 4096, 4096)
SEED_LABEL = "seed, B200 (quoted)"

# Vendor datasheet figures (dense BF16 tensor-core peak, HBM bandwidth), quoted for rooflines.
DATASHEET = {
    "H200": {"bf16_dense_tflops": 989.0, "fp32_tflops": 67.0, "hbm_tbs": 4.8, "source": "NVIDIA H200 datasheet (SXM)"},
    "H100": {"bf16_dense_tflops": 989.0, "fp32_tflops": 67.0, "hbm_tbs": 3.35, "source": "NVIDIA H100 datasheet (SXM)"},
    "B200": {"bf16_dense_tflops": 2250.0, "hbm_tbs": 8.0, "source": "NVIDIA B200 datasheet (HGX, per GPU)"},
}

_MEASURED = "#1f77b4"
_LIVE = "#2ca02c"
_CUBLAS = "#d62728"
_SEED = "#7f7f7f"


def _new_figure(width: float, height: float) -> Figure:
    return Figure(figsize=(width, height), layout="constrained")


def _set_caption(fig: Figure, caption: str, width: int = 110) -> Figure:
    """Attach ``caption`` to ``fig`` (``fig.caption``) and print it under the axes."""
    fig.caption = caption
    wrapped = "\n".join(textwrap.fill(p, width) for p in caption.split("\n") if p)
    fig.get_layout_engine().set(h_pad=0.1)
    fig.supxlabel(wrapped, fontsize=7.5, ha="left", x=0.01, color="#333333")
    return fig


# ---------------------------------------------------------------------------------------------
# the ladder: measured bars, the same-run cuBLAS, the seed's quoted figures
# ---------------------------------------------------------------------------------------------


def _run_of(record: dict) -> str:
    return record.get("_file") or record.get("date", "?")


def ladder_data(records: Sequence[dict], arch: str = "sm90", shape=SEED_SHAPE, gpu: Optional[str] = None) -> dict:
    """What :func:`ladder_bars` draws, as data: ``{number: record or None}``, and the seed's bars."""
    from . import bench, ladder

    m, n, k = shape
    measured = {s.number: bench.latest(records, s.key, m, n, k, gpu=gpu) for s in ladder.steps(arch)}
    seed = dict(SEED_B200_TFLOPS) if tuple(shape) == SEED_SHAPE else {}
    return {"measured": measured, "seed": seed}


def ladder_bars(records: Sequence[dict], arch: str = "sm90", shape=SEED_SHAPE, gpu: Optional[str] = None,
                live: Optional[Sequence[dict]] = None, log: bool = True, highlight: Sequence[int] = (),
                numbers: Optional[Sequence[int]] = None) -> Figure:
    """One bar per ladder step: the newest bench record of each (median, whiskers min..max).

    * cuBLAS: if every drawn record comes from one run (one results file), one dashed line at
      the median of that run's cuBLAS medians; otherwise a short cuBLAS tick over each bar, the
      cuBLAS timed with that bar. The caption says which.
    * the seed's B200 figures (4096^3 only): hatched, outlined bars, "seed, B200 (quoted)".
    * ``live``: records measured in this session (e.g. by the notebook on a GPU), drawn beside
      the recorded ones with their own cuBLAS ticks.
    * no records: only the seed's bars, and a note that no measurement exists yet.
    * ``highlight``: step numbers whose measured bars get a thick black outline and a bold label
      (a chapter's own step and its parent).
    * ``numbers``: draw only these steps, in a narrower figure with the legend on top (a chapter's
      view of the ladder, readable at page width).
    """
    from . import bench, ladder

    m, n, k = shape
    highlight = set(highlight)
    data = ladder_data(records, arch, shape, gpu)
    measured, seed = data["measured"], data["seed"]
    live_by_step = {}
    for rec in live or []:
        if (rec["shape"]["m"], rec["shape"]["n"], rec["shape"]["k"]) == (m, n, k) and rec["step"].startswith(arch + "/"):
            live_by_step[int(rec["step"].split("/")[1])] = rec
    compact = numbers is not None
    if compact:
        keep = set(numbers)
        measured = {num: r for num, r in measured.items() if num in keep}
        seed = {num: v for num, v in seed.items() if num in keep}
        live_by_step = {num: r for num, r in live_by_step.items() if num in keep}
    numbers = sorted(set(measured) | set(seed) | set(live_by_step))
    titles = {s.number: s.title for s in ladder.steps(arch)}
    have = {num: r for num, r in measured.items() if r is not None}
    series = [("recorded", have, _MEASURED)]
    if live_by_step:
        series.append(("live", live_by_step, _LIVE))
    groups = [s for s in series if s[1]] + ([("seed", seed, _SEED)] if seed else [])
    width = 0.8 / max(1, len(groups))

    fig = _new_figure(max(7.0, 0.95 * len(numbers) + 1.6), 5.6) if compact else \
        _new_figure(max(9.0, 1.05 * len(numbers) + 4.5), 5.4)
    ax = fig.add_subplot()
    x_of = {num: i for i, num in enumerate(numbers)}
    handles = []
    runs = sorted({_run_of(r) for r in have.values()})
    top = 1.0
    for gi, (name, values, color) in enumerate(groups):
        offset = (gi - (len(groups) - 1) / 2) * width
        for num, val in values.items():
            x = x_of[num] + offset
            if name == "seed":
                h = float(val)
                ax.bar(x, h, width * 0.92, facecolor="none", edgecolor=_SEED, hatch="///", linewidth=1.5)
                ax.annotate(f"{h:g}\nquoted", (x, h), ha="center", va="bottom", fontsize=7.5, color="#555555",
                            xytext=(0, 2), textcoords="offset points")
            else:
                t = val["tflops"]
                h = t["median"]
                lo, hi = h - t["min"], t["max"] - h
                ax.bar(x, h, width * 0.92, color=color, alpha=0.9 if name == "recorded" else 0.75,
                       yerr=[[max(lo, 0)], [max(hi, 0)]], capsize=3, ecolor="black", error_kw={"linewidth": 0.8},
                       edgecolor="black" if num in highlight else "none", linewidth=2.5 if num in highlight else 0)
                ratio = h / val["cublas_tflops"]["median"]
                text = f"{h:.3g}\n{ratio:.1%} of cuBLAS" if ratio < 0.1 else f"{h:.0f}\n{ratio:.0%} of cuBLAS"
                ax.annotate(text, (x, h), ha="center", va="bottom", fontsize=7.5, xytext=(0, 4), textcoords="offset points")
                if name == "live" or len(runs) > 1:
                    c = val["cublas_tflops"]["median"]
                    ax.hlines(c, x - width * 0.46, x + width * 0.46, colors=_CUBLAS, linewidth=2.0)
                    top = max(top, c)
                h = max(h, t["max"])
            top = max(top, h)
        label = {
            "recorded": "recorded (project's bench, newest record per step)",
            "live": "live (this session)",
            "seed": SEED_LABEL,
        }[name]
        if name == "seed":
            handles.append(Patch(facecolor="none", edgecolor=_SEED, hatch="///", label=label))
        else:
            handles.append(Patch(color=color, label=label))

    cublas_note = ""
    if have and len(runs) == 1:
        cublas = [r["cublas_tflops"]["median"] for r in have.values()]
        line = float(np.median(cublas))
        ax.axhline(line, color=_CUBLAS, linestyle="--", linewidth=1.5)
        handles.append(Patch(color=_CUBLAS, label=f"cuBLAS, same run ({line:.0f} TFLOP/s)"))
        top = max(top, line)
        spread = f" (range {min(cublas):.0f}-{max(cublas):.0f})" if len(cublas) > 1 else ""
        cublas_note = (f"Dashed line: cuBLAS (torch.mm) timed interleaved in the same run, median of the "
                       f"{len(cublas)} per-step cuBLAS medians{spread}.")
    elif have or live_by_step:
        handles.append(Patch(color=_CUBLAS, label="cuBLAS timed with each bar"))
        cublas_note = ("Red ticks: cuBLAS (torch.mm) timed interleaved with each bar in that bar's own run "
                       "(the records come from different runs, so there is no single cuBLAS line).")

    for num in numbers:
        if not any(num in values for _, values, _ in groups):
            ax.text(x_of[num], 1.5, "no record yet", ha="center", va="bottom", rotation=90, fontsize=8, color="#555555")
    message = not have and not live_by_step
    if message:
        where = f" on {gpu}" if gpu else ""
        how = ("compiled, not run: the B200 kit (scripts/b200_validate.sh) writes these records"
               if arch == "sm100" else "scripts/gpu_ladder.sh on an H100/H200 writes these records")
        ax.text(0.5, 0.96, f"No measured record for {arch} at {m}x{n}x{k}{where} exists yet\n({how})",
                transform=ax.transAxes, ha="center", va="top", fontsize=10,
                bbox={"boxstyle": "round", "facecolor": "#fff3cd", "edgecolor": "#c9a227"})

    ax.set_xticks(range(len(numbers)))
    ax.set_xticklabels([f"step {num}\n" + textwrap.fill(textwrap.shorten(titles.get(num, "(seed only)"), 40,
                                                                          placeholder="..."), 14)
                        for num in numbers], fontsize=7)
    for num, label in zip(numbers, ax.get_xticklabels()):
        if num in highlight:
            label.set_fontweight("bold")
    if log:
        ax.set_yscale("log")
        plotted = [r["tflops"]["min"] for r in list(have.values()) + list(live_by_step.values())]
        plotted += [v for v in seed.values() if v]
        bottom = min([1.0] + [v / 3 for v in plotted])  # the naive step sits near 1 TFLOP/s: keep it visible
        ax.set_ylim(bottom, top * (30 if message else 4))
    else:
        ax.set_ylim(0, top * 1.25)
    ax.set_ylabel("TFLOP/s (BF16, higher is better)")
    from .ladder import ARCH_NAMES

    ax.set_title(f"The ladder on {ARCH_NAMES.get(arch, arch)}: {m}x{n}x{k} BF16 GEMM")
    if compact:
        fig.legend(handles=handles, loc="outside upper center", ncol=2, fontsize=8)
    else:
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    ax.grid(axis="y", alpha=0.3, which="both")

    parts = []
    for run in runs:
        rec = next(r for r in have.values() if _run_of(r) == run)
        steps_here = ", ".join(str(num) for num, r in have.items() if _run_of(r) == run)
        parts.append(f"Steps {steps_here}: {bench.provenance(rec)}.")
    if live_by_step:
        rec = next(iter(live_by_step.values()))
        parts.append(f"Live bars: measured in this session on {rec.get('gpu')} by gemm_course.bench.bench_step.")
    if cublas_note:
        parts.append(cublas_note)
    if not have:
        parts.append(f"No record of {arch} at {m}x{n}x{k} under results/ yet.")
    if seed:
        parts.append("Hatched bars: the seed series' B200 figures at 4096^3, quoted from the seed, "
                     "not measured by this project.")
    if have or live_by_step:
        parts.append("Whiskers: min..max over all timed launches.")
    if highlight & set(numbers):
        parts.append("Outlined: step " + " and ".join(str(h) for h in sorted(highlight & set(numbers))) + ".")
    return _set_caption(fig, " ".join(parts))


# ---------------------------------------------------------------------------------------------
# roofline
# ---------------------------------------------------------------------------------------------


def roofline(problem, peak_tflops: float, bandwidth_tbs: float, points: Iterable = (),
             machine_label: str = "", title: Optional[str] = None, ceilings: Optional[dict] = None) -> Figure:
    """Attainable TFLOP/s = min(peak, intensity x bandwidth), with the problem and kernels on it.

    ``points``: dicts ``{'label', 'intensity' (FLOP/byte), 'tflops' (optional, measured)}``.
    A point without ``tflops`` is drawn hollow on the roof: the bound its intensity allows.
    ``ceilings``: ``{label: TFLOP/s}`` lower compute roofs drawn dashed (e.g. fp32 without tensor cores).
    """
    ridge = peak_tflops / bandwidth_tbs
    points = list(points)
    ais = [p["intensity"] for p in points] + [problem.arithmetic_intensity, ridge]
    lo = 10 ** math.floor(math.log10(min(ais) / 3))
    hi = 10 ** math.ceil(math.log10(max(ais) * 3))
    x = np.logspace(math.log10(lo), math.log10(hi), 400)
    roof = np.minimum(peak_tflops, x * bandwidth_tbs)

    fig = _new_figure(8, 5)
    ax = fig.add_subplot()
    ax.loglog(x, roof, color="black", linewidth=2, label=f"roof {machine_label}".strip())
    for i, (label, value) in enumerate((ceilings or {}).items()):
        ax.plot(x, np.minimum(value, x * bandwidth_tbs), color="grey", linestyle="--", linewidth=1.2)
        ax.annotate(f"{label}: {value:g} TFLOP/s", (value / bandwidth_tbs, value), xytext=(6, 3 + 10 * i),
                    textcoords="offset points", ha="left", fontsize=8, color="grey")
    ax.axvline(ridge, color="grey", linestyle=":", linewidth=1)
    ax.annotate(f"ridge {ridge:.0f} FLOP/B", (ridge, peak_tflops), xytext=(4, -14), textcoords="offset points",
                fontsize=8, color="grey")
    ai = problem.arithmetic_intensity
    ax.axvline(ai, color=_MEASURED, linestyle="--", linewidth=1)
    ax.annotate(f"{problem.label}:\n{ai:.0f} FLOP/B\n(A, B, C each\nmoved once)", (ai, 0.04),
                xycoords=("data", "axes fraction"), xytext=(4, 0), textcoords="offset points", ha="left",
                fontsize=8, color=_MEASURED)
    markers = "osD^v<>p*h"
    for i, p in enumerate(points):
        bound = min(peak_tflops, p["intensity"] * bandwidth_tbs)
        mk = markers[i % len(markers)]
        if p.get("tflops") is not None:
            ax.plot(p["intensity"], p["tflops"], mk, markersize=8, label=f"{p['label']} (measured)")
        else:
            ax.plot(p["intensity"], bound, mk, markersize=9, markerfacecolor="none", markeredgewidth=1.8,
                    label=f"{p['label']}: at most {bound:.3g} TFLOP/s")
    ax.set_xlabel("arithmetic intensity (FLOP per byte of DRAM traffic)")
    ax.set_ylabel("TFLOP/s")
    ax.set_ylim(min(roof.min(), min([p.get("tflops") or roof.min() for p in points] or [roof.min()])) / 3,
                peak_tflops * 2.5)
    ax.set_title(title or f"Roofline: {problem.label} BF16 GEMM")
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=8, loc="upper left")
    return _set_caption(fig, f"Roof: peak {peak_tflops:g} TFLOP/s and {bandwidth_tbs:g} TB/s "
                             f"{('(' + machine_label + ')') if machine_label else ''}; hollow markers sit on the roof at "
                             "the bound their intensity allows, filled ones are measured.")


# ---------------------------------------------------------------------------------------------
# layouts and thread ownership
# ---------------------------------------------------------------------------------------------


def layout_grid(table: dict, title: Optional[str] = None, highlight: Optional[Sequence] = None) -> Figure:
    """Draw a layout as CuTe evaluates it: cell (row, col) shows its offset (from
    :func:`gemm_course.cute_basics.layout_table`). ``highlight``: (row, col) cells to outline."""
    offsets = np.array(table["offsets"])
    rows, cols = offsets.shape
    fig = _new_figure(max(3.5, 0.55 * cols + 1.5), max(2.2, 0.5 * rows + 1.2))
    ax = fig.add_subplot()
    ax.imshow(offsets, cmap="viridis", aspect="equal")
    for i in range(rows):
        for j in range(cols):
            v = offsets[i, j]
            ax.text(j, i, str(v), ha="center", va="center", fontsize=9,
                    color="white" if v < offsets.max() * 0.6 else "black")
    for r, c in highlight or ():
        ax.add_patch(Rectangle((c - 0.5, r - 0.5), 1, 1, fill=False, edgecolor="red", linewidth=2.5))
    ax.set_xticks(range(cols))
    ax.set_yticks(range(rows))
    ax.set_xlabel("column coordinate")
    ax.set_ylabel("row coordinate")
    ax.set_title(title or f"layout {table['text']}: (row, col) -> offset", fontsize=10)
    return fig


def _thread_colors(count: int) -> ListedColormap:
    base = list(colormaps["tab20"].colors) + list(colormaps["tab20b"].colors)
    return ListedColormap([base[i % len(base)] for i in range(count)])


def ownership(owners: dict, zoom=(8, 16), title: str = "", group_size: int = 32, group_name: str = "warp") -> Figure:
    """Who holds which accumulator element: ``owners = {'thread': [[t, ...], ...], 'value': [[v, ...]]
    (optional), 'source': 'where the table came from'}``, indexed by (row, col) of the tile.

    Left: the whole tile, colored by ``group`` (warp). Right: the top-left ``zoom`` corner, colored
    by thread, each cell labelled ``T<thread>`` and ``V<value index>``.
    """
    thread = np.array(owners["thread"])
    value = np.array(owners["value"]) if owners.get("value") is not None else None
    rows, cols = thread.shape
    zr, zc = min(zoom[0], rows), min(zoom[1], cols)
    groups = thread // group_size
    ngroups = int(groups.max()) + 1

    fig = _new_figure(13, 5.2)
    left, right = fig.subplots(1, 2, width_ratios=[1.1, 1])
    left.imshow(groups, cmap=ListedColormap(colormaps["Set2"].colors[:ngroups]), aspect="auto",
                interpolation="nearest", vmin=-0.5, vmax=ngroups - 0.5)
    left.add_patch(Rectangle((-0.5, -0.5), zc, zr, fill=False, edgecolor="black", linewidth=2))
    left.set_xlabel(f"column of the {rows}x{cols} accumulator tile (N)")
    left.set_ylabel("row (M)")
    left.set_title(f"whole tile: colored by {group_name} ({group_size} threads each)", fontsize=10)
    left.legend(handles=[Patch(color=colormaps["Set2"].colors[g], label=f"{group_name} {g}") for g in range(ngroups)],
                fontsize=8, loc="upper right", framealpha=0.9)

    corner = thread[:zr, :zc]
    uniq = sorted(set(corner.ravel().tolist()))
    index = {t: i for i, t in enumerate(uniq)}
    right.imshow(np.vectorize(index.get)(corner), cmap=_thread_colors(len(uniq)), aspect="auto",
                 interpolation="nearest", vmin=-0.5, vmax=len(uniq) - 0.5)
    for i in range(zr):
        for j in range(zc):
            label = f"T{thread[i, j]}" + (f"\nV{value[i, j]}" if value is not None else "")
            right.text(j, i, label, ha="center", va="center", fontsize=6.5)
    right.set_xticks(range(zc))
    right.set_yticks(range(zr))
    right.set_xlabel("column (N)")
    right.set_ylabel("row (M)")
    right.set_title(f"top-left {zr}x{zc}: thread T, its value index V", fontsize=10)
    fig.suptitle(title, fontsize=11)
    per_thread = collections.Counter(thread.ravel().tolist())
    counts = sorted(set(per_thread.values()))
    return _set_caption(fig, f"{owners.get('source', '')} {len(per_thread)} threads, "
                             f"{'/'.join(map(str, counts))} elements each.".strip())


# ---------------------------------------------------------------------------------------------
# tile orders
# ---------------------------------------------------------------------------------------------


def tile_orders(tiles_m: int, tiles_n: int, kinds: Sequence[str] = ("row", "grouped", "gilbert"), group: int = 4,
                wave: Optional[int] = None) -> Figure:
    """Visit order over a tile grid, one panel per order (from :mod:`gemm_course.tile_order`).

    Each cell shows its visit number; the line follows the path. ``wave``: outline the first
    ``wave`` tiles (those running at once, one per SM).
    """
    from . import tile_order

    panel = 4.6
    fig = _new_figure(panel * len(kinds) + 0.6, panel * tiles_m / tiles_n + 2.0)
    axes = np.atleast_1d(fig.subplots(1, len(kinds)))
    show_numbers = tiles_m * tiles_n <= 256
    for ax, kind in zip(axes, kinds):
        path = tile_order.order(kind, tiles_m, tiles_n, group=group)
        visit = np.zeros((tiles_m, tiles_n), dtype=int)
        for i, (m, n) in enumerate(path):
            visit[m, n] = i
        ax.imshow(visit, cmap="viridis", aspect="equal", interpolation="nearest")
        ys, xs = zip(*path)
        ax.plot(xs, ys, color="white", linewidth=0.8, alpha=0.55)
        ax.plot(xs[0], ys[0], "o", color="white", markersize=5)
        if show_numbers:
            for (m, n), i in np.ndenumerate(visit):
                ax.text(n, m, str(i), ha="center", va="center", fontsize=7, fontweight="bold",
                        color="white" if i < visit.max() * 0.6 else "black")
        if wave:
            for m, n in path[:wave]:
                ax.add_patch(Rectangle((n - 0.5, m - 0.5), 1, 1, fill=False, edgecolor="red", linewidth=1.2))
        ax.set_title(f"{kind}" + (f" (group {group})" if kind == "grouped" else ""), fontsize=10)
        ax.set_xlabel("tile column n (panel of B)")
        ax.set_ylabel("tile row m (panel of A)")
    fig.suptitle(f"Tile visit order over a {tiles_m} x {tiles_n} grid of output tiles", fontsize=11)
    note = f" Red outlines: the first wave of {wave} tiles." if wave else ""
    return _set_caption(fig, "Numbers: the order in which CTAs take tiles (gemm_course.tile_order)." + note)


# ---------------------------------------------------------------------------------------------
# compiled resources and instruction mix
# ---------------------------------------------------------------------------------------------


def sass_loops(sass_text: str) -> list:
    """The loops of a SASS listing: every backward branch ``BRA label`` to a label above it.

    Returns ``[{'label', 'start', 'end', 'opcodes': Counter, 'lines': [SASS lines]}]``, innermost (shortest) first; the
    opcodes are those between the label and the branch, i.e. one trip around the loop.
    """
    import re

    from .inspect import _SASS_LINE

    labels, instructions, lines, loops = {}, [], [], []
    for line in sass_text.splitlines():
        label = re.match(r"^\s*(\.L_x_\d+):", line)
        if label:
            labels[label.group(1)] = len(instructions)
            continue
        m = _SASS_LINE.search(line)
        if not m:
            continue
        instructions.append(m.group(1))
        lines.append(line.strip())
        target = re.search(r"BRA(?:\.\w+)*\s+(?:!?U?P\w+,\s*)?`?\(?(\.L_x_\d+)\)?", line)
        if target and target.group(1) in labels:
            start = labels[target.group(1)]
            loops.append({"label": target.group(1), "start": start, "end": len(instructions),
                          "opcodes": collections.Counter(instructions[start:]), "lines": lines[start:]})
    loops = [lp for lp in loops if lp["end"] - lp["start"] > 1]  # drop `BRA self` traps
    return sorted(loops, key=lambda lp: lp["end"] - lp["start"])


def instruction_mix(reports: dict, title: str = "Static SASS instruction mix") -> Figure:
    """Grouped horizontal bars: ``{label: inspect.Report}`` (or ``{label: mix dict}``)."""
    mixes = {label: (r.mix if hasattr(r, "mix") else r) for label, r in reports.items()}
    classes = []
    for mix in mixes.values():
        for c in mix:
            if c not in classes:
                classes.append(c)
    fig = _new_figure(8.5, 0.35 * len(classes) * max(1, len(mixes)) ** 0.5 + 1.6)
    ax = fig.add_subplot()
    h = 0.8 / len(mixes)
    y = np.arange(len(classes))
    for i, (label, mix) in enumerate(mixes.items()):
        vals = [mix.get(c, 0) for c in classes]
        bars = ax.barh(y + (i - (len(mixes) - 1) / 2) * h, vals, h * 0.95, label=label)
        ax.bar_label(bars, fontsize=7, padding=2)
    ax.set_yticks(y)
    ax.set_yticklabels(classes, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("instructions in the kernel's SASS (static count, not executions)")
    ax.set_title(title, fontsize=11)
    ax.legend(fontsize=8, loc="lower right")
    return fig


def sweep(rows: Sequence[dict], title: str = "") -> Figure:
    """Resources per knob combination (from :func:`gemm_course.widgets.precompute_sweep`)."""
    ok = [r for r in rows if r.get("ok")]
    steps = len({r["step"] for r in ok}) > 1
    targets = len({r["target"] for r in ok}) > 1
    labels = [" ".join(([r["step"]] if steps else []) + ([r["target"]] if targets else []) + [""]).strip()
              + ("\n" if steps or targets else "") + r["label"].replace(", ", "\n") for r in ok]
    fig = _new_figure(max(6.0, 0.75 * len(ok) + 2), 6.5)
    ax1, ax2 = fig.subplots(2, 1, sharex=True)
    x = np.arange(len(ok))
    b1 = ax1.bar(x, [r["registers"] for r in ok], color="#4c72b0")
    ax1.bar_label(b1, fontsize=7)
    ax1.axhline(255, color="red", linestyle=":", linewidth=1)
    ax1.set_ylabel("registers per thread (max 255)")
    b2 = ax2.bar(x, [r["smem_bytes"] / 1024 for r in ok], color="#dd8452")
    ax2.bar_label(b2, fmt="%.0f", fontsize=7)
    ax2.set_ylabel("shared memory per CTA (KiB)")
    ax1.margins(y=0.15)
    ax2.margins(y=0.15)
    ax2.set_xticks(x)
    ax2.set_xticklabels(labels, fontsize=7.5)
    for i, r in enumerate(ok):
        if r.get("spills"):
            ax1.annotate("spills", (i, r["registers"]), ha="center", va="bottom", color="red", fontsize=7)
    fig.suptitle(title or "Compiled resources per configuration", fontsize=11)
    return fig


def owners_from_lists(per_thread: dict, shape, source: str = "") -> dict:
    """``{thread: [(row, col), ...]}`` (e.g. :func:`gemm_course.kernels.sm100.layouts.accumulator_ownership`)
    -> the ``{'thread', 'value'}`` grids :func:`ownership` draws. Every element must have one owner."""
    rows, cols = shape
    thread = np.full((rows, cols), -1, dtype=int)
    value = np.full((rows, cols), -1, dtype=int)
    for t, cells in per_thread.items():
        for v, (r, c) in enumerate(cells):
            if thread[r, c] != -1:
                raise ValueError(f"element ({r}, {c}) is owned by threads {thread[r, c]} and {t}")
            thread[r, c], value[r, c] = t, v
    if (thread < 0).any():
        r, c = np.argwhere(thread < 0)[0]
        raise ValueError(f"element ({r}, {c}) has no owner")
    return {"thread": thread.tolist(), "value": value.tolist(), "source": source}


def tmem_map(addresses: dict, lanes: int = 128, title: str = "") -> Figure:
    """Where the accumulator sits in tensor memory: ``{(row, col): (lane, column)}`` (from
    :func:`gemm_course.kernels.sm100.layouts.accumulator_tmem_addresses`), drawn as lanes x columns,
    each used cell colored by the accumulator row it holds; lanes are grouped in the 4 x 32 that
    warps 0-3 of a warpgroup may access."""
    cols = max(c for _, c in addresses.values()) + 1
    grid = np.full((lanes, cols), np.nan)
    for (row, _), (lane, col) in addresses.items():
        grid[lane, col] = row
    fig = _new_figure(9, 5.5)
    ax = fig.add_subplot()
    img = ax.imshow(grid, cmap="viridis", aspect="auto", interpolation="nearest")
    for w in range(1, lanes // 32):
        ax.axhline(32 * w - 0.5, color="black", linewidth=1.2)
    for w in range(lanes // 32):
        used = np.unique(np.argwhere(~np.isnan(grid[32 * w: 32 * w + 32]))[:, 0] + 32 * w)
        text = f"warp {w} may read lanes {32 * w}-{32 * w + 31}"
        if used.size:
            text += f"\nrows {int(np.nanmin(grid[used]))}-{int(np.nanmax(grid[used]))} in lanes {used.min()}-{used.max()}"
        ax.text(cols + 2, 32 * w + 16, text, va="center", fontsize=8)
    fig.colorbar(img, ax=ax, label="accumulator row (M) held", location="left", shrink=0.8)
    ax.set_xlabel("TMEM column (32 bits each)")
    ax.set_ylabel("TMEM lane")
    ax.set_xlim(-0.5, cols + 75)
    ax.set_title(title or f"Accumulator in tensor memory ({len(addresses)} fp32 elements; white: unused lanes)", fontsize=10)
    return _set_caption(fig, "From the step's own accumulator layout (TMEM address = lane << 16 | column), "
                             "traced for sm_100a.")


# ---------------------------------------------------------------------------------------------
# shared-memory banks and the swizzle (data from gemm_course.sim)
# ---------------------------------------------------------------------------------------------

_LAYOUT_NAMES = {
    "row-major": "plain row-major (a first attempt)",
    "sm90/2": "step 2: interleaved (no swizzle)",
    "sm90/3": "step 3: 128-byte swizzle",
}


def bank_maps(step_keys: Sequence[str] = ("row-major", "sm90/2", "sm90/3"), rows: int = 16, operand: str = "A") -> Figure:
    """The shared-memory bank of every element of the first ``rows`` rows of operand A, per layout.

    Each row of a 64-wide bf16 tile is 128 bytes = 8 chunks of 16 bytes = all 32 banks once.
    Cells are chunks (8 bf16), labelled with their 4 banks. The red box marks a core-matrix column
    read (8 rows x 16 bytes: what ldmatrix/wgmma fetch), the blue one a 128-byte row (a TMA box
    row); the title gives each one's wavefronts from :func:`gemm_course.sim.conflicts`.
    """
    from . import sim

    fig = _new_figure(5 * len(step_keys), 0.33 * rows + 2.6)
    axes = np.atleast_1d(fig.subplots(1, len(step_keys)))
    cmap = ListedColormap([colormaps["tab10"].colors[i % 10] for i in range(8)])
    summary = []
    for ax, key in zip(axes, step_keys):
        off = sim.offsets(key, operand)
        banks = sim.bank_map(off)
        per_chunk = sim.CHUNK_BYTES // int(off[0, 1] - off[0, 0])
        chunk_banks = banks[:rows, ::per_chunk][:, :8]
        if not all((banks[:rows, c * per_chunk: (c + 1) * per_chunk] // 4 == chunk_banks[:, c:c + 1] // 4).all()
                   for c in range(8)):
            raise ValueError(f"{key}: a 16-byte chunk spans two bank groups")
        group = chunk_banks // 4
        ax.imshow(group, cmap=cmap, vmin=-0.5, vmax=7.5, aspect="auto", interpolation="nearest")
        for (r, c), g in np.ndenumerate(group):
            ax.text(c, r, f"{4 * g}-{4 * g + 3}", ha="center", va="center", fontsize=7)
        col = sim.conflicts(off, "core-matrix column", 0, 0)
        row = sim.conflicts(off, "row", 0, 0)
        ax.add_patch(Rectangle((-0.5, -0.5), 1, 8, fill=False, edgecolor="red", linewidth=2.5))
        ax.add_patch(Rectangle((-0.45, -0.45), 7.9, 0.9, fill=False, edgecolor="blue", linewidth=2, linestyle="--"))
        ax.set_title(f"{_LAYOUT_NAMES.get(key, key)}\n{sim.layout_text(key, operand)}\n"
                     f"red (column read): {col.wavefronts} wavefront{'s' if col.wavefronts > 1 else ''}, "
                     f"{col.conflicts} extra\nblue (128 B row): {row.wavefronts} wavefront{'s' if row.wavefronts > 1 else ''}, "
                     f"{row.conflicts} extra", fontsize=8.5)
        ax.set_xticks(range(8))
        ax.set_xticklabels([f"k {8 * c}-{8 * c + 7}" for c in range(8)], rotation=45, fontsize=7)
        ax.set_yticks(range(rows))
        ax.set_ylabel("row of the tile")
        ax.set_xlabel("16-byte chunk of the row (8 bf16)")
        summary.append(f"{key}: column read {col.wavefronts}, row {row.wavefronts}")
    fig.suptitle(f"Shared-memory banks of operand {operand} (cells: the 4 banks a 16-byte chunk occupies)", fontsize=11)
    return _set_caption(fig, "Byte offsets from the kernels' own shared-memory layouts (gemm_course.sim.offsets); "
                             "wavefronts from the bank model (gemm_course.sim.conflicts): " + "; ".join(summary) + ".")


def xor_pattern(step_key: str = "sm90/3", operand: str = "A") -> Figure:
    """The 128-byte swizzle as a table: where logical 16-byte chunk c of row r lands
    (:func:`gemm_course.sim.xor_pattern`, read from the kernel's layout), with the bits spelled out."""
    from . import sim

    table = np.asarray(sim.xor_pattern(step_key, operand))
    fig = _new_figure(7.5, 6.2)
    ax = fig.add_subplot()
    ax.imshow(table, cmap=ListedColormap(colormaps["tab10"].colors[:8]), vmin=-0.5, vmax=7.5, interpolation="nearest")
    for (r, c), p in np.ndenumerate(table):
        ax.text(c, r, f"{p}\n{p:03b}", ha="center", va="center", fontsize=8)
    ax.set_xticks(range(8))
    ax.set_xticklabels([f"{c}\n{c:03b}" for c in range(8)], fontsize=8)
    ax.set_yticks(range(8))
    ax.set_yticklabels([f"{r} = {r:03b}" for r in range(8)], fontsize=8)
    ax.set_xlabel("logical 16-byte chunk of the row (k // 8), binary below")
    ax.set_ylabel("row mod 8, binary")
    ax.set_title(f"{sim.layout_text(step_key, operand)}\nphysical chunk of (row, chunk)", fontsize=10)
    is_xor = all(table[r, c] == (r ^ c) for r in range(8) for c in range(8))
    return _set_caption(fig, "Read from the step's own swizzled layout (gemm_course.sim.xor_pattern). "
                             + ("Every cell equals row XOR chunk: address bits 4-6 (the chunk) are XORed with "
                                "bits 7-9 (the row within 8 rows of 128 bytes)." if is_xor else
                                "This layout is not a plain row XOR chunk."))


# ---------------------------------------------------------------------------------------------
# chapter 2: the K loop as a protocol, and the kernels' own phase banners
# ---------------------------------------------------------------------------------------------


def phase_source(step, number: int) -> str:
    """The source of phase ``number`` of a step's kernel, cut at its numbered banners
    (``# 3. main loop ...`` up to ``# 4. ...``), searched in ``Gemm.kernel`` and then in the
    class's other methods (a kernel may delegate its main loop to ``Gemm.mainloop``)."""
    import inspect as _inspect
    import re

    from . import ladder

    gemm = ladder.get(step).load().Gemm
    names = ["kernel"] + sorted(n for n, v in vars(gemm).items() if callable(v) and n != "kernel")
    for base in gemm.__mro__[1:]:
        names += sorted(n for n, v in vars(base).items() if callable(v) and n not in names)
    for name in names:
        try:
            lines = _inspect.getsource(getattr(gemm, name)).splitlines()
        except (TypeError, OSError):
            continue
        start = next((i for i, l in enumerate(lines) if re.match(rf"\s*# {number}\. ", l)), None)
        if start is not None:
            break
    else:
        raise ValueError(f"{ladder.get(step).key}'s kernel has no phase banner '# {number}. '")
    end = next((i for i, l in enumerate(lines[start + 1:], start + 1) if re.match(r"\s*# \d+\. ", l)), len(lines))
    body = lines[start:end]
    indent = min(len(l) - len(l.lstrip()) for l in body if l.strip())
    return "\n".join(l[indent:] for l in body).rstrip() + "\n"


def k_loop_schedule(arch: str, mma_per_tile: int, tma_per_tile: int, tma_bytes: int, k_tiles: int = 2,
                    mma_name: str = "") -> Figure:
    """The order of events in one-stage K loops (steps 2-3), per actor, as a schematic (not to scale).

    The counts come from the caller, read from the compiled kernel (PTX/SASS) and its config:
    ``mma_per_tile`` MMA instructions and ``tma_per_tile`` TMA copies per K tile, ``tma_bytes``
    expected by the barrier per K tile.
    """
    if arch == "sm90":
        lanes = ["warp 0: TMA issue", "mbarrier (full)", "warpgroup: wgmma", "all 128 threads"]
        mma = mma_name or "wgmma"
    elif arch == "sm100":
        lanes = ["warp 0, one thread: TMA + MMA issue", "load mbarrier", "tensor core (async)", "mma mbarrier"]
        mma = mma_name or "tcgen05.mma"
    else:
        raise ValueError(f"arch must be 'sm90' or 'sm100', got {arch!r}")
    colors = {"tma": "#8da0cb", "bar": "#fc8d62", "mma": "#66c2a5", "sync": "#e5c494"}
    events = []  # (lane, start, width, text, kind)
    t = 0.0
    for k in range(k_tiles):
        phase = k % 2
        events.append((0, t, 2.2, f"expect_tx({tma_bytes} B)\n+ {tma_per_tile} TMA copies\n(K tile {k})", "tma"))
        events.append((1, t + 2.2, 1.6, f"bytes land:\nphase {phase} completes", "bar"))
        if arch == "sm90":
            events.append((3, t + 2.2, 1.6, f"wait(phase {phase})", "sync"))
            x = t + 3.8
            for j in range(mma_per_tile):
                events.append((2, x, 0.9, f"{mma}\nk-block {j}", "mma"))
                x += 0.9
            events.append((3, x, 1.4, "commit +\nwait_group(0)", "sync"))
            events.append((3, x + 1.4, 1.2, "sync_threads", "sync"))
            t = x + 2.8
        else:
            events.append((0, t + 2.2, 1.6, f"wait(load, {phase})", "sync"))
            x = t + 3.8
            events.append((0, x, 0.5 * mma_per_tile, f"issue {mma_per_tile} x\n{mma}", "mma"))
            for j in range(mma_per_tile):
                events.append((2, x + 0.3 + 0.9 * j, 0.9, f"k{j}", "mma"))
            done = x + 0.3 + 0.9 * mma_per_tile
            events.append((0, x + 0.5 * mma_per_tile, 1.2, "commit\n(mma bar)", "sync"))
            events.append((0, x + 0.5 * mma_per_tile + 1.2, done - (x + 0.5 * mma_per_tile + 1.2) + 1.2,
                           f"wait(mma, {phase})", "sync"))
            events.append((3, done, 1.2, f"phase {phase}\ncompletes", "bar"))
            t = done + 1.6
    fig = _new_figure(max(10, t * 0.55), 3.8)
    ax = fig.add_subplot()
    for lane, start, width, text, kind in events:
        ax.add_patch(Rectangle((start, len(lanes) - 1 - lane - 0.38), width * 0.97, 0.76, facecolor=colors[kind],
                               edgecolor="black", linewidth=0.6))
        ax.text(start + width / 2, len(lanes) - 1 - lane, text, ha="center", va="center", fontsize=6.5)
    ax.set_xlim(-0.2, t + 0.2)
    ax.set_ylim(-0.6, len(lanes) - 0.4)
    ax.set_yticks(range(len(lanes)))
    ax.set_yticklabels(list(reversed(lanes)), fontsize=8)
    ax.set_xticks([])
    ax.set_xlabel("order of events (schematic, not to scale) ->")
    ax.set_title(f"One-stage K loop, {k_tiles} K tiles: nothing overlaps", fontsize=10)
    return _set_caption(fig, "Counts per K tile read from the compiled kernel: "
                             f"{tma_per_tile} TMA copies, {mma_per_tile} MMA instructions, {tma_bytes} bytes expected "
                             "by the barrier. Widths are not durations.")


# ---------------------------------------------------------------------------------------------
# chapters 4-10: measured steps side by side (generated text, never typed numbers)
# ---------------------------------------------------------------------------------------------


def step_table(records: Sequence[dict], keys: Sequence[str], sizes: Sequence[int] = (4096, 8192),
               gpu: Optional[str] = None) -> str:
    """A Markdown table of the newest record of each step in ``keys`` at each size^3: median TFLOP/s
    (p10-p90), its ratio to cuBLAS in the same run, and its ratio to the previous row's step."""
    from . import bench

    head = "| step | " + " | ".join(f"{s}^3" for s in sizes) + " |"
    rows = [head, "|---|" + "---|" * len(sizes)]
    previous = None
    for key in keys:
        cells = []
        for size in sizes:
            rec = bench.latest(records, key, size, size, size, gpu=gpu)
            if rec is None:
                cells.append("no record")
                continue
            t = rec["tflops"]
            cell = (f"{t['median']:.0f} TFLOP/s ({t['p10']:.0f}-{t['p90']:.0f}), "
                    f"{rec['ratio_to_cublas']:.2f} of cuBLAS")
            before = bench.latest(records, previous, size, size, size, gpu=gpu) if previous else None
            if before is not None:
                cell += f"; x{t['median'] / before['tflops']['median']:.2f} vs {previous}"
            cells.append(cell)
        rows.append(f"| {key} | " + " | ".join(cells) + " |")
        previous = key
    return "\n".join(rows)


def spread_verdict(records: Sequence[dict], new: str, old: str, sizes: Sequence[int] = (4096, 8192),
                   gpu: Optional[str] = None) -> str:
    """Markdown bullets, one per size: is ``new``'s median inside ``old``'s p10-p90 range of per-launch
    throughput (newest records of each), and their ratio. For judging small changes against the spread."""
    from . import bench

    lines = []
    for size in sizes:
        before, after = (bench.latest(records, key, size, size, size, gpu=gpu) for key in (old, new))
        if before is None or after is None:
            lines.append(f"* {size}^3: no record of {old if before is None else new} yet")
            continue
        inside = before["tflops"]["p10"] <= after["tflops"]["median"] <= before["tflops"]["p90"]
        lines.append(f"* {size}^3: {new}'s median is {'inside' if inside else 'outside'} {old}'s p10-p90 range "
                     f"(ratio of medians {after['tflops']['median'] / before['tflops']['median']:.3f})")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# chapter 4: the epilogue through shared memory
# ---------------------------------------------------------------------------------------------


def opcode_family_counts(report, families: dict) -> dict:
    """Static SASS counts per opcode family: ``families = {name: (base opcodes...)}``; an opcode
    belongs to a family when its first dotted part is one of the family's (``STG.E`` -> ``STG``).
    ``report``: an :class:`gemm_course.inspect.Report` or ``{opcode: count}``."""
    ops = dict(report.top_opcodes) if hasattr(report, "top_opcodes") else dict(report)
    return {name: sum(n for op, n in ops.items() if op.split(".")[0] in bases) for name, bases in families.items()}


def opcode_families(reports: dict, families: dict, title: str = "Static SASS counts") -> Figure:
    """Grouped bars: one group per opcode family, one bar per compiled kernel (``{label: report}``)."""
    counts = {label: opcode_family_counts(r, families) for label, r in reports.items()}
    names = list(families)
    fig = _new_figure(max(7.0, 1.1 * len(names) + 2.5), 4.2)
    ax = fig.add_subplot()
    width = 0.8 / max(1, len(counts))
    x = np.arange(len(names))
    for i, (label, c) in enumerate(counts.items()):
        bars = ax.bar(x + (i - (len(counts) - 1) / 2) * width, [c[nm] for nm in names], width * 0.95, label=label)
        ax.bar_label(bars, fontsize=8, padding=2)
    ax.set_xticks(x)
    ax.set_xticklabels([f"{nm}\n({', '.join(families[nm])})" for nm in names], fontsize=8)
    ax.set_ylabel("instructions in the SASS (static count)")
    ax.margins(y=0.15)
    ax.set_title(title, fontsize=11)
    ax.legend(fontsize=8)
    return _set_caption(fig, "Counted in each kernel's SASS (gemm_course.inspect.report, nvdisasm of the cubin compiled "
                             "on this machine). Static counts: instructions in the binary, not executions.")


def epilogue_path(tile_m: int, tile_n: int, epi_m: int, epi_n: int, epi_stages: int, threads: int,
                  stmatrix: int, tma_stores: int, title: str = "") -> Figure:
    """The step-4 epilogue: the CTA's accumulator tile cut into ``epi_m x epi_n`` sub-tiles (top),
    and the path each sub-tile takes (bottom): registers -> stmatrix -> staging buffer -> TMA store.

    All inputs come from the caller, read from the kernel: the tile and sub-tile shapes and the
    number of staging buffers from the traced shared-memory layout, ``stmatrix`` (per thread) and
    ``tma_stores`` (per tile) from the PTX.
    """
    if tile_n % epi_n or tile_m != epi_m:
        raise ValueError(f"sub-tiles of {epi_m}x{epi_n} do not cover the {tile_m}x{tile_n} tile in one row")
    subtiles = tile_n // epi_n
    fig = _new_figure(10.5, 6.8)
    top, bottom = fig.subplots(2, 1, height_ratios=[1, 1.4])
    colors = colormaps["Pastel1"].colors
    for i in range(subtiles):
        buf = i % epi_stages
        top.add_patch(Rectangle((i * epi_n, 0), epi_n, tile_m, facecolor=colors[buf % len(colors)], edgecolor="black"))
        top.text(i * epi_n + epi_n / 2, tile_m / 2, f"sub-tile {i}\n{epi_m}x{epi_n}\nbuffer {buf}\nTMA store {i}",
                 ha="center", va="center", fontsize=8)
    top.set_xlim(-2, tile_n + 2)
    top.set_ylim(tile_m + 2, -2)
    top.set_aspect("equal")
    top.set_xticks([i * epi_n for i in range(subtiles + 1)])
    top.set_yticks([0, tile_m])
    top.set_xlabel("column of the CTA's output tile (N)")
    top.set_ylabel("row (M)")
    top.set_title(f"The {tile_m}x{tile_n} output tile in {subtiles} sub-tiles of {epi_m}x{epi_n}, "
                  f"round-robin over {epi_stages} staging buffer{'s' if epi_stages > 1 else ''}", fontsize=10)
    top.legend(handles=[Patch(facecolor=colors[b % len(colors)], edgecolor="black", label=f"staging buffer {b}")
                        for b in range(epi_stages)], fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))

    per_thread = tile_m * tile_n // threads
    per_sub = stmatrix / subtiles
    buffer_kib = epi_m * epi_n * 2 / 1024
    boxes = [
        ("registers", f"fp32 accumulator\n{per_thread} values\nper thread\n({threads} threads)", "#cde4f7"),
        ("registers", f"convert to bf16\n{epi_m * epi_n // threads} values\nper thread\nper sub-tile", "#cde4f7"),
        ("stmatrix", f"four 8x8 matrices\nper warp\ninstruction;\n{per_sub:g} per thread\nper sub-tile", "#fde0c5"),
        ("shared mem.", f"staging buffer\n{epi_m}x{epi_n} bf16\n= {buffer_kib:g} KiB\n({epi_stages} buffers)", "#fde0c5"),
        ("fence, barrier", "fence.proxy.async\n+ named barrier:\nwrites visible\nto the copy\nengine", "#eeeeee"),
        ("TMA store", f"one thread\nissues a bulk\ntensor copy,\nshared -> global\n({tma_stores} per tile)", "#d5f0d5"),
        ("global memory", f"C in L2 / HBM:\n{epi_n * 2} contiguous\nbytes per row\n({epi_n * 2 // 32} full 32-byte\nsectors), clipped\nat the edges",
         "#d5f0d5"),
    ]
    n = len(boxes)
    for i, (head, body, color) in enumerate(boxes):
        x0 = i * 1.0
        bottom.add_patch(Rectangle((x0 + 0.05, 0.1), 0.8, 0.8, facecolor=color, edgecolor="black"))
        bottom.text(x0 + 0.45, 0.86, head, ha="center", va="top", fontsize=8.5, fontweight="bold")
        bottom.text(x0 + 0.45, 0.43, body, ha="center", va="center", fontsize=8)
        if i < n - 1:
            bottom.annotate("", xy=(x0 + 1.05, 0.5), xytext=(x0 + 0.85, 0.5),
                            arrowprops={"arrowstyle": "->", "linewidth": 1.5})
    bottom.annotate("", xy=(1.5, 0.02), xytext=(n - 1.5, 0.02),
                    arrowprops={"arrowstyle": "<-", "linestyle": "--", "color": "#555555"})
    bottom.text(n / 2 - 0.1, -0.08, f"repeated for each of the {subtiles} sub-tiles; a buffer is refilled only once "
                                    "its previous store has read it", ha="center", va="top", fontsize=8, color="#555555")
    bottom.set_xlim(0, n)
    bottom.set_ylim(-0.2, 1.0)
    bottom.axis("off")
    bottom.set_title("The path of one sub-tile", fontsize=10)
    fig.suptitle(title or "Step 4's epilogue: registers -> stmatrix -> staging buffer -> TMA store", fontsize=11)
    return _set_caption(fig, f"Sub-tile shape and buffer count from the kernel's traced staging layout; {stmatrix} "
                             f"stmatrix per thread and {tma_stores} TMA stores per tile counted in its PTX "
                             f"({per_sub:g} stmatrix per thread per sub-tile).")


# ---------------------------------------------------------------------------------------------
# chapter 5: clusters, multicast, and occupancy
# ---------------------------------------------------------------------------------------------

# Hopper (compute capability 9.0) per-SM limits, from the CUDA C++ Programming Guide's table of
# technical specifications; quoted, not measured. Nsight Compute reports the same 1 KiB of
# "driver shared memory" per block (results/logs/*ncu*).
HOPPER_SM = {
    "registers": 65536,  # 32-bit registers per SM
    "register_unit": 256,  # a warp's registers are allocated in units of 256 (8 per thread)
    "smem_per_sm": 228 * 1024,  # shared memory per SM
    "smem_per_cta": 227 * 1024,  # most a CTA may ask for
    "smem_reserved_per_cta": 1024,  # set aside by the system for each resident CTA
    "warps": 64,  # resident warps per SM
    "ctas": 32,  # resident CTAs per SM
    "source": "CUDA C++ Programming Guide, compute capability 9.0",
}


def occupancy(registers: int, threads: int, smem_bytes: int, stages: int = 1, limits: Optional[dict] = None) -> dict:
    """How many CTAs of a kernel fit on one Hopper SM, and what limits it.

    ``registers`` per thread and ``smem_bytes`` per CTA as the compiled kernel reports them
    (:func:`gemm_course.inspect.report`), ``threads`` per CTA. ``stages``: shared-memory stages
    per CTA, to count the K tiles an SM can have in flight (``ctas * stages``).
    """
    lim = dict(HOPPER_SM, **(limits or {}))
    warps = -(-threads // 32)
    unit = lim["register_unit"]
    regs_per_warp = -(-registers * 32 // unit) * unit
    by_registers = (lim["registers"] // regs_per_warp) // warps if regs_per_warp else lim["ctas"]
    by_smem = lim["smem_per_sm"] // (smem_bytes + lim["smem_reserved_per_cta"]) if smem_bytes <= lim["smem_per_cta"] else 0
    by_warps = lim["warps"] // warps
    limits_ = {"registers": by_registers, "shared memory": by_smem, "warps": by_warps, "CTA slots": lim["ctas"]}
    ctas = min(limits_.values())
    return {
        "registers": registers, "threads": threads, "warps": warps, "smem_bytes": smem_bytes, "stages": stages,
        "registers_per_warp": regs_per_warp, "limits": limits_, "ctas": ctas,
        "limiter": [name for name, v in limits_.items() if v == ctas],
        "warps_per_sm": ctas * warps, "k_tiles_in_flight": ctas * stages,
    }


def occupancy_bars(rows: dict, title: str = "CTAs per SM: what the registers and shared memory allow") -> Figure:
    """``rows = {label: occupancy(...)}``: per kernel, the CTAs per SM each resource allows, and the result."""
    labels = list(rows)
    resources = ["registers", "shared memory", "warps"]
    fig = _new_figure(9, 1.25 * len(labels) + 1.8)
    ax = fig.add_subplot()
    h = 0.8 / len(resources)
    palette = {"registers": "#4c72b0", "shared memory": "#dd8452", "warps": "#8c8c8c"}
    top = 0
    for i, label in enumerate(labels):
        occ = rows[label]
        for j, res in enumerate(resources):
            v = occ["limits"][res]
            top = max(top, v)
            y = i + (j - 1) * h
            ax.barh(y, v, h * 0.9, color=palette[res], alpha=1.0 if res in occ["limiter"] else 0.45,
                    edgecolor="black" if res in occ["limiter"] else "none", linewidth=1.5)
            detail = {
                "registers": f"{occ['registers']} regs x {occ['threads']} threads",
                "shared memory": f"{occ['smem_bytes'] / 1024:.1f} KiB + 1 KiB reserved",
                "warps": f"{occ['warps']} warps of {HOPPER_SM['warps']}",
            }[res]
            ax.text(v + 0.1, y, f"{v}  ({detail})", va="center", fontsize=8.5)
        ax.text(-0.15, i, f"{label}\n-> {occ['ctas']} CTA{'s' if occ['ctas'] != 1 else ''}/SM,\n"
                          f"{occ['k_tiles_in_flight']} K tile{'s' if occ['k_tiles_in_flight'] != 1 else ''} in flight",
                ha="right", va="center", fontsize=9.5, fontweight="bold")
    ax.set_yticks([])
    ax.invert_yaxis()
    ax.set_xlim(0, min(top, 32) + 8)
    ax.set_xlabel("CTAs per SM allowed by each resource (outlined: the binding one)")
    ax.legend(handles=[Patch(color=palette[r], label=r) for r in resources], fontsize=8, loc="lower right")
    ax.set_title(title, fontsize=11)
    return _set_caption(fig, f"Registers and shared memory per CTA from the compiled kernels (cuobjdump); limits per SM: "
                             f"{HOPPER_SM['registers']} registers (allocated per warp in units of "
                             f"{HOPPER_SM['register_unit']}), {HOPPER_SM['smem_per_sm'] // 1024} KiB of shared memory "
                             f"(at most {HOPPER_SM['smem_per_cta'] // 1024} KiB per CTA, 1 KiB reserved per CTA), "
                             f"{HOPPER_SM['warps']} warps ({HOPPER_SM['source']}; quoted). K tiles in flight = CTAs x "
                             "shared-memory stages per CTA.")


def cluster_multicast(cluster_m: int, cluster_n: int, tile_m: int, tile_n: int, tile_k: int) -> Figure:
    """Who loads what in a ``cluster_m x cluster_n`` cluster: each CTA's output tile, its A tile (left)
    and B tile (above), and the slice of each shared tile that each CTA loads and multicasts.

    CTAs along M share B: B's tile splits into ``cluster_m`` slices, CTA (i, j) loads slice i and
    multicasts it to the CTAs of its column. Likewise A across ``cluster_n``.
    """
    if tile_n % cluster_m or tile_m % cluster_n:
        raise ValueError(f"a {tile_m}x{tile_n} tile does not split evenly over a {cluster_m}x{cluster_n} cluster")
    b_rows, a_rows = tile_n // cluster_m, tile_m // cluster_n
    palette = [colormaps["Set2"].colors[i] for i in range(8)]
    fig = _new_figure(3.2 + 3.0 * cluster_n + 1.2, 2.2 + 2.1 * cluster_m + 0.8)
    ax = fig.add_subplot()
    scale = 1.0 / 128  # 128 elements per drawing unit
    gap = 0.35
    k_w = max(tile_k * scale * 2.0, 0.6)  # K drawn wider than to scale, to leave room for text
    c_w, c_h = tile_n * scale, tile_m * scale
    x0, y0 = k_w + gap, k_w + gap  # C block origin (y grows downwards)

    def rank(i, j):
        return i + cluster_m * j  # CuTe's column-major rank of (m, n) in the cluster layout

    for j in range(cluster_n):
        for i in range(cluster_m):
            r = rank(i, j)
            cx, cy = x0 + j * (c_w + gap), y0 + i * (c_h + gap)
            ax.add_patch(Rectangle((cx, cy), c_w, c_h, facecolor=palette[r], alpha=0.35, edgecolor="black", linewidth=1.5))
            ax.text(cx + c_w / 2, cy + c_h / 2, f"CTA {r} (cluster coord {i},{j})\ncomputes C tile\n{tile_m}x{tile_n}",
                    ha="center", va="center", fontsize=8.5)
            for s in range(cluster_n):  # A tile of row i, sliced across the cluster's columns
                owner = rank(i, s)
                ay = cy + s * a_rows * scale
                ax.add_patch(Rectangle((0, ay), k_w, a_rows * scale, facecolor=palette[owner], edgecolor="black"))
                if j == 0:
                    who = f"loaded by CTA {owner}\nmulticast to the row" if cluster_n > 1 else f"loaded by\nCTA {owner} alone"
                    ax.text(k_w / 2, ay + a_rows * scale / 2, f"A {a_rows}x{tile_k}\n{who}", ha="center", va="center",
                            fontsize=7.5 if cluster_n == 1 else 6.5)
        for s in range(cluster_m):  # B tile of column j, sliced across the cluster's rows
            owner = rank(s, j)
            bx = x0 + j * (c_w + gap) + s * b_rows * scale
            ax.add_patch(Rectangle((bx, 0), b_rows * scale, k_w, facecolor=palette[owner], edgecolor="black"))
            ax.text(bx + b_rows * scale / 2, k_w / 2,
                    f"B rows {s * b_rows}-{(s + 1) * b_rows - 1}\nloaded by CTA {owner}" +
                    ("\nmulticast to the column" if cluster_m > 1 else ""), ha="center", va="center", fontsize=7.5)
            arrow = {"arrowstyle": "-|>", "color": palette[owner], "linewidth": 2.0, "shrinkA": 0, "shrinkB": 0}
            cx = x0 + j * (c_w + gap)
            mid = bx + b_rows * scale / 2
            ax.annotate("", xy=(mid, y0), xytext=(mid, k_w), arrowprops=arrow)  # into the CTA right below
            for i in range(1, cluster_m):  # farther CTAs: routed around the column, entering from the side
                left_side = s < cluster_m / 2
                route = cx - gap * (0.3 + 0.2 * i) if left_side else cx + c_w + gap * (0.3 + 0.2 * i)
                ty = y0 + i * (c_h + gap) + c_h * (0.3 + 0.1 * i)
                ax.plot([mid, mid, route, route], [k_w, k_w + gap * 0.45, k_w + gap * 0.45, ty],
                        color=palette[owner], linewidth=2.0, solid_capstyle="butt")
                ax.annotate("", xy=(cx if left_side else cx + c_w, ty), xytext=(route, ty), arrowprops=arrow)
    width = x0 + cluster_n * (c_w + gap) + gap * 0.5
    height = y0 + cluster_m * (c_h + gap)
    ax.set_xlim(-0.1, width)
    ax.set_ylim(height, -0.1)
    ax.set_aspect("equal")
    ax.axis("off")
    a_bytes, b_bytes = tile_m * tile_k * 2, tile_n * tile_k * 2
    ax.set_title(f"A {cluster_m} x {cluster_n} cluster: per K tile each CTA issues {a_bytes // cluster_n // 1024} KiB "
                 f"of A and {b_bytes // cluster_m // 1024} KiB of B, receives {a_bytes // 1024} + {b_bytes // 1024} KiB",
                 fontsize=10)
    return _set_caption(fig, "Tile sizes and cluster shape from the step's traced host objects; each CTA of a column "
                             f"loads {b_rows} of the B tile's {tile_n} rows (and of a row, {a_rows} of A's {tile_m}). "
                             "Colour = the CTA that issues the copy; arrows: a multicast copy lands in the shared memory "
                             "of every CTA it points to. Not to scale along K.")


# ---------------------------------------------------------------------------------------------
# chapters 6-7: the pipeline (a schematic model) and the register split
# ---------------------------------------------------------------------------------------------


def pipeline_model(stages: int, k_tiles: int, tiles_per_cta: int = 1, ctas: int = 1, load: float = 3.0,
                   mma: float = 1.0, epilogue: float = 2.5, issue: float = 0.2) -> dict:
    """A small event model of one SM running ``ctas`` CTAs one after the other (one fits at a time),
    each computing ``tiles_per_cta`` tiles of ``k_tiles`` K tiles through ``stages`` shared-memory stages.

    Rules (the kernels' protocol, with made-up durations): the producer issues K tile j into
    stage ``j % stages`` once the tile that used the stage before has been released, ``issue``
    after its previous copy; the data lands ``load`` later; the consumers run the K tile's wgmma
    (``mma``) once it has landed and the previous K tile's wgmma is done, and release the stage
    when it completes; after a tile's last K tile they run its ``epilogue``, during which the
    producer keeps loading. A CTA ends after its last epilogue; the next one starts then. One
    stage reproduces steps 2-5 (load, compute, release, load). Durations are illustrative, not measured.
    """
    if stages < 1 or k_tiles < 1 or tiles_per_cta < 1 or ctas < 1:
        raise ValueError("stages, k_tiles, tiles_per_cta and ctas must be >= 1")
    events = []  # dicts: lane ('producer'/'consumer'), start, end, kind ('load'/'mma'/'epilogue'), label, stage
    start = 0.0
    boundaries = []
    for c in range(ctas):
        free = [start] * stages  # when each stage was last released
        producer, consumer = start, start
        for t in range(tiles_per_cta):
            for k in range(k_tiles):
                j = t * k_tiles + k
                s = j % stages
                issued = max(producer, free[s])
                landed = issued + load
                events.append({"lane": "producer", "start": issued, "end": landed, "kind": "load",
                               "label": f"k{k}", "stage": s, "cta": c, "tile": t})
                producer = issued + issue
                begin = max(landed, consumer)
                consumer = begin + mma
                events.append({"lane": "consumer", "start": begin, "end": consumer, "kind": "mma",
                               "label": f"k{k}", "stage": s, "cta": c, "tile": t})
                free[s] = consumer
            events.append({"lane": "consumer", "start": consumer, "end": consumer + epilogue, "kind": "epilogue",
                           "label": f"epilogue\ntile {c * tiles_per_cta + t}", "stage": None, "cta": c, "tile": t})
            consumer += epilogue
        start = consumer
        boundaries.append(start)
    span = start
    busy = sum(e["end"] - e["start"] for e in events if e["kind"] == "mma")
    return {"events": events, "span": span, "mma_busy": busy / span, "cta_ends": boundaries[:-1],
            "params": {"stages": stages, "k_tiles": k_tiles, "tiles_per_cta": tiles_per_cta, "ctas": ctas,
                       "load": load, "mma": mma, "epilogue": epilogue, "issue": issue}}


def pipeline_timeline(models: dict, title: str = "Shared-memory stages and tensor cores over time (schematic model)") -> Figure:
    """``models = {label: pipeline_model(...)}``, one panel each, on a common time axis.

    One row per shared-memory stage: light while a TMA load is in flight into it, dark while it
    holds a landed K tile until the consumers release it. Below, the consumers: the wgmma of each
    K tile (colored by the stage it reads) and the epilogues.
    """
    span = max(m["span"] for m in models.values())
    stage_colors = [colormaps["tab10"].colors[i] for i in range(10)]
    heights = [m["params"]["stages"] + 1.6 for m in models.values()]
    fig = _new_figure(10, 0.45 * sum(heights) + 0.9 * len(models) + 1.6)
    axes = np.atleast_1d(fig.subplots(len(models), 1, sharex=True, height_ratios=heights))
    for ax, (label, model) in zip(axes, models.items()):
        p = model["params"]
        stages = p["stages"]
        several = p["tiles_per_cta"] * p["ctas"] > 1
        loads = [e for e in model["events"] if e["kind"] == "load"]
        mmas = [e for e in model["events"] if e["kind"] == "mma"]
        for ld, mm in zip(loads, mmas):  # the j-th load feeds the j-th wgmma
            y = stages - ld["stage"]
            color = stage_colors[ld["stage"] % 10]
            name = (f"t{ld['cta'] * p['tiles_per_cta'] + ld['tile']} " if several else "") + ld["label"]
            ax.add_patch(Rectangle((ld["start"], y - 0.32), ld["end"] - ld["start"], 0.64, facecolor=color, alpha=0.3,
                                   edgecolor="black", linewidth=0.4))
            ax.add_patch(Rectangle((ld["end"], y - 0.32), mm["end"] - ld["end"], 0.64, facecolor=color, alpha=0.85,
                                   edgecolor="black", linewidth=0.4))
            if ld["end"] - ld["start"] >= 0.8:
                ax.text((ld["start"] + ld["end"]) / 2, y, f"load {name}", ha="center", va="center", fontsize=7.5)
        for e in model["events"]:
            if e["lane"] != "consumer":
                continue
            epi = e["kind"] == "epilogue"
            ax.add_patch(Rectangle((e["start"], -0.35), e["end"] - e["start"], 0.7,
                                   facecolor="#bbbbbb" if epi else stage_colors[e["stage"] % 10],
                                   hatch="//" if epi else None, edgecolor="black", linewidth=0.5))
            if e["end"] - e["start"] >= 0.6:
                ax.text((e["start"] + e["end"]) / 2, 0, e["label"], ha="center", va="center",
                        fontsize=7.5, color="black" if epi else "white")
        for end in model["cta_ends"]:
            ax.axvline(end, color="black", linestyle="--", linewidth=1)
            ax.text(end, stages + 0.55, " next CTA starts", fontsize=7, va="center")
        ax.set_yticks(list(range(stages, 0, -1)) + [0])
        ax.set_yticklabels([f"stage {s}" for s in range(stages)] + ["consumers:\nwgmma, epilogue"], fontsize=8.5)
        ax.set_ylim(-0.6, stages + 0.9)
        ax.set_title(f"{label}: {stages} stage{'s' if stages > 1 else ''}, {p['k_tiles']} K tiles per tile, "
                     f"{p['tiles_per_cta']} tile{'s' if p['tiles_per_cta'] > 1 else ''} per CTA x {p['ctas']} "
                     f"CTA{'s' if p['ctas'] > 1 else ''}; in this model the tensor cores are busy "
                     f"{model['mma_busy']:.0%} of the time", fontsize=9.5, loc="left")
    axes[-1].set_xlim(0, span * 1.01)
    axes[-1].set_xlabel("time (model units: not measured)")
    handles = [Patch(facecolor="#999999", alpha=0.3, edgecolor="black", label="TMA load in flight into the stage"),
               Patch(facecolor="#999999", alpha=0.85, edgecolor="black", label="stage full until released"),
               Patch(facecolor="#bbbbbb", hatch="//", edgecolor="black", label="epilogue")]
    fig.legend(handles=handles, fontsize=8.5, loc="outside upper center", ncol=3, title=title, title_fontsize=11,
               frameon=False)
    p = next(iter(models.values()))["params"]
    return _set_caption(fig, "A schematic from gemm_course.viz.pipeline_model, not a measurement: the stage counts, K tiles "
                             f"and tiles per CTA follow the configs; the durations are made up (a load takes {p['load']:g} "
                             f"units from issue to landing, a K tile's wgmma {p['mma']:g}, an epilogue {p['epilogue']:g}). "
                             "Colour = stage; t<i> k<j>: K tile j of the CTA's i-th tile.")


def register_split(launch_registers: int, producer_threads: int, producer_registers: int, consumer_threads: int,
                   consumer_registers: int, registers_per_sm: int = HOPPER_SM["registers"]) -> Figure:
    """The register file of one SM before and after ``setmaxnreg``: stacked bars of threads x registers."""
    threads = producer_threads + consumer_threads
    rows = [
        ("at launch\n(every thread alike)", [("producer warpgroup", producer_threads * launch_registers),
                                            ("consumer warpgroups", consumer_threads * launch_registers)],
         [f"{producer_threads} x {launch_registers}", f"{consumer_threads} x {launch_registers}"]),
        ("after setmaxnreg", [("producer warpgroup", producer_threads * producer_registers),
                              ("consumer warpgroups", consumer_threads * consumer_registers)],
         [f"{producer_threads} x {producer_registers}", f"{consumer_threads} x {consumer_registers}"]),
    ]
    colors = {"producer warpgroup": "#8da0cb", "consumer warpgroups": "#66c2a5"}
    fig = _new_figure(10, 3.4)
    ax = fig.add_subplot()
    for y, (label, parts, texts) in enumerate(rows):
        left = 0
        for (name, value), text in zip(parts, texts):
            ax.barh(y, value, 0.6, left=left, color=colors[name], edgecolor="black")
            ax.text(left + value / 2, y, f"{text}\n= {value}", ha="center", va="center", fontsize=8)
            left += value
        ax.text(max(left, registers_per_sm) + registers_per_sm * 0.015, y, f"total {left}\n= {left / registers_per_sm:.1%}",
                va="center", fontsize=8.5, fontweight="bold")
    ax.axvline(registers_per_sm, color="red", linestyle="--")
    ax.text(registers_per_sm * 1.015, 0.5, f"{registers_per_sm} registers per SM", color="red", fontsize=8, va="center")
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([r[0] for r in rows], fontsize=9)
    ax.invert_yaxis()
    ax.set_xlim(0, registers_per_sm * 1.25)
    ax.set_xlabel("registers of the SM (threads x registers per thread)")
    fig.legend(handles=[Patch(color=c, label=n) for n, c in colors.items()], fontsize=8, loc="outside right upper")
    ax.set_title(f"setmaxnreg moves registers from the producer to the consumers ({threads} threads, one CTA per SM)",
                 fontsize=10)
    return _set_caption(fig, "Registers per thread at launch from the compiled kernel (cuobjdump); the split from the "
                             f"step's config (producer {producer_registers}, consumers {consumer_registers}, "
                             "setmaxnreg.dec / setmaxnreg.inc in the PTX).")


# ---------------------------------------------------------------------------------------------
# chapter 8: the persistent kernel's static schedule
# ---------------------------------------------------------------------------------------------


def persistent_schedule(clusters_m: int, clusters_n: int, num_clusters: int, cluster_tile) -> dict:
    """Which cluster computes which cluster-tile, and in which of its iterations (its *wave*).

    The static scheduler of step 8 (and 9, 10): a grid of ``min(tiles, num_clusters)`` clusters;
    cluster c computes the cluster-tiles with index c, c + G, c + 2G, ... (G clusters), and
    ``cluster_tile(index, clusters_m, clusters_n)`` maps an index to its (m, n): pass the step's own.
    """
    total = clusters_m * clusters_n
    grid = min(total, num_clusters)
    owner = np.full((clusters_m, clusters_n), -1, dtype=int)
    wave = np.full((clusters_m, clusters_n), -1, dtype=int)
    per_cluster = []
    for c in range(grid):
        count = -(-(total - c) // grid)  # the kernel's num_tiles: ceil_div(tiles - cluster_id, clusters)
        per_cluster.append(count)
        for i in range(count):
            m, n = (int(v) for v in cluster_tile(c + i * grid, clusters_m, clusters_n))
            if owner[m, n] != -1:
                raise ValueError(f"cluster-tile ({m}, {n}) is scheduled twice")
            owner[m, n], wave[m, n] = c, i
    if (owner < 0).any():
        raise ValueError("the schedule leaves a cluster-tile uncomputed")
    waves = int(wave.max()) + 1
    last = int((wave == waves - 1).sum())
    return {"owner": owner, "wave": wave, "tiles_per_cluster": per_cluster, "clusters": grid, "waves": waves,
            "last_wave_tiles": last, "idle_in_last_wave": grid - last, "tiles": total}


def persistent_grid(schedule: dict, title: str = "", cluster_shape=(2, 1)) -> Figure:
    """Two views of a :func:`persistent_schedule`: cluster-tiles colored by the cluster that computes
    them (numbered), and by wave, with the last, partial wave outlined."""
    owner, wave = schedule["owner"], schedule["wave"]
    rows, cols = owner.shape
    fig = _new_figure(11.5, 5.6 * rows / max(cols, 1) + 1.8)
    left, right = fig.subplots(1, 2)
    base = list(colormaps["tab20"].colors) + list(colormaps["tab20b"].colors) + list(colormaps["tab20c"].colors)
    left.imshow(owner, cmap=ListedColormap([base[i % len(base)] for i in range(schedule["clusters"])]),
                vmin=-0.5, vmax=schedule["clusters"] - 0.5, interpolation="nearest")
    small = rows * cols <= 400
    for (m, n), c in np.ndenumerate(owner):
        if small:
            left.text(n, m, str(c), ha="center", va="center", fontsize=6.5)
    left.set_title(f"cluster computing each cluster-tile ({schedule['clusters']} clusters)", fontsize=10)
    wcmap = ListedColormap([colormaps["Blues"](0.25 + 0.6 * w / max(1, schedule["waves"] - 1))
                            for w in range(schedule["waves"])])
    right.imshow(wave, cmap=wcmap, vmin=-0.5, vmax=schedule["waves"] - 0.5, interpolation="nearest")
    for (m, n), w in np.ndenumerate(wave):
        if w == schedule["waves"] - 1 and schedule["idle_in_last_wave"]:
            right.add_patch(Rectangle((n - 0.5, m - 0.5), 1, 1, fill=False, edgecolor="red", linewidth=1.2))
        if small:
            right.text(n, m, str(w + 1), ha="center", va="center", fontsize=6.5,
                       color="white" if w > schedule["waves"] / 2 else "black")
    right.set_title(f"wave: the iteration of each cluster's loop, 1 to {schedule['waves']}", fontsize=10)
    for ax in (left, right):
        ax.set_xlabel(f"cluster-tile column n ({cluster_shape[1]} CTA tile{'s' if cluster_shape[1] > 1 else ''})")
        ax.set_ylabel(f"cluster-tile row m ({cluster_shape[0]} CTA tiles)")
    fig.suptitle(title or f"{schedule['tiles']} cluster-tiles over {schedule['clusters']} persistent clusters", fontsize=11)
    counts = collections.Counter(schedule["tiles_per_cluster"])
    spread = ", ".join(f"{n} clusters compute {t}" for t, n in sorted(counts.items(), reverse=True))
    note = (f"The last wave has {schedule['last_wave_tiles']} cluster-tiles for {schedule['clusters']} clusters: "
            f"{schedule['idle_in_last_wave']} clusters are idle while it runs (red outlines)."
            if schedule["idle_in_last_wave"] else "Every wave is full.")
    return _set_caption(fig, f"From the step's own scheduler functions (grid size, cluster_tile); {spread} cluster-tiles. "
                             + note)


def stream_k_tail(tiles: int, clusters: int, k_tiles: int, title: str = "", show: int = 12) -> Figure:
    """Each cluster's work from :func:`gemm_course.schedule.plan`, in K tiles, without and with the split tail.

    Bars are units (colored by cluster-tile); hatched bars are parts that hand a partial sum
    over; the first ``show`` and last clusters are drawn. Time is counted in K tiles of work.
    """
    from . import schedule

    picked = list(range(min(show // 2, clusters))) + list(range(max(clusters - show // 2, show // 2), clusters))
    fig = _new_figure(11.5, 0.28 * len(picked) * 2 + 2.2)
    axes = fig.subplots(1, 2, sharey=True)
    base = list(colormaps["tab20"].colors)
    for ax, enabled in zip(axes, (False, True)):
        plans = schedule.plan(tiles, clusters, k_tiles, enabled)
        whole = schedule.split_tail(tiles, clusters, k_tiles, enabled)[0]
        longest = max(sum(e - b for _, b, e in units) for units in plans)
        for row, c in enumerate(picked):
            t = 0
            for index, b, e in plans[c]:
                ax.barh(row, e - b, left=t, color=base[index % len(base)], edgecolor="black", linewidth=0.4,
                        hatch="///" if b > 0 else None)
                if index >= whole and e - b > 0.08 * longest:
                    ax.text(t + (e - b) / 2, row, str(index), ha="center", va="center", fontsize=6)
                t += e - b
        ax.axvline(longest, color="red", linewidth=1)
        busy = schedule.busy_fraction(tiles, clusters, k_tiles, enabled)
        ax.set_title(f"{'split tail' if enabled else 'whole tiles only'}: longest cluster {longest} K tiles, "
                     f"{busy:.1%} busy", fontsize=9.5)
        ax.set_xlabel("K tiles of work, in the order the cluster runs them")
    axes[0].set_yticks(range(len(picked)), [f"cluster {c}" for c in picked], fontsize=7)
    axes[0].invert_yaxis()
    fig.suptitle(title or f"{tiles} cluster-tiles of {k_tiles} K tiles over {clusters} clusters", fontsize=11)
    return _set_caption(fig, "From gemm_course.schedule.plan, the functions the kernel traces. Numbers name tail "
                             "tiles; hatched parts start mid-tile and hand a partial sum to the cluster that "
                             "computed the tile's first K tile. The red line is when the last cluster finishes, "
                             "if every K tile took the same time and the hand-over were free.")


# ---------------------------------------------------------------------------------------------
# chapters 9-10: tile orders and the L2 panel model
# ---------------------------------------------------------------------------------------------


def l2_panels(traffic: dict, title: str = "") -> Figure:
    """``traffic = {order: gemm_course.sim.L2Traffic}``: distinct A and B panels per wave (left) and
    the panel bytes the model reads from DRAM in total, against the floor of reading each panel once."""
    kinds = list(traffic)
    fig = _new_figure(10.5, 4.4)
    left, right = fig.subplots(1, 2, width_ratios=[1.4, 1])
    for kind in kinds:
        t = traffic[kind]
        per_wave = [a + b for a, b in zip(t.a_per_wave, t.b_per_wave)]
        left.plot(range(1, len(per_wave) + 1), per_wave, marker="o", markersize=3, label=kind)
    left.xaxis.get_major_locator().set_params(integer=True)
    left.set_xlabel("wave")
    left.set_ylabel("distinct panels in the wave (A + B)")
    left.set_ylim(bottom=0)
    left.grid(alpha=0.3)
    left.legend(fontsize=8)
    left.set_title("panels each wave touches", fontsize=10)
    x = np.arange(len(kinds))
    a = [traffic[k].a_panels * traffic[k].a_panel_bytes / 1e9 for k in kinds]
    b = [traffic[k].b_panels * traffic[k].b_panel_bytes / 1e9 for k in kinds]
    right.bar(x, a, 0.6, label="A panels", color="#4c72b0")
    bars = right.bar(x, b, 0.6, bottom=a, label="B panels", color="#dd8452")
    right.bar_label(bars, labels=[f"{ai + bi:.2f} GB" for ai, bi in zip(a, b)], fontsize=8, padding=2)
    floor = traffic[kinds[0]].min_bytes / 1e9
    right.axhline(floor, color="black", linestyle="--", linewidth=1, label=f"every panel once: {floor:.2f} GB")
    right.set_xticks(x)
    right.set_xticklabels(kinds, fontsize=9)
    right.set_ylabel("GB read from DRAM (model)")
    right.margins(y=0.15)
    right.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    right.set_title("total, one wave in L2 at a time", fontsize=10)
    t0 = traffic[kinds[0]]
    fig.suptitle(title or "L2 panel model", fontsize=11)
    return _set_caption(fig, "gemm_course.sim.l2_traffic: the order is cut into waves (one tile per cluster); each wave "
                             "reads every distinct A row panel and B column panel it needs once, and nothing survives "
                             f"from one wave to the next. A model, not a measurement. A panel: {t0.a_panel_bytes / 2**20:g} "
                             f"MiB of A, {t0.b_panel_bytes / 2**20:g} MiB of B; {t0.waves} waves.")


def smem_traffic_bars(rows: dict, title: str = "Shared-memory traffic of the main loop at the tensor cores' rate") -> Figure:
    """``rows = {label: gemm_course.sim.SmemTraffic}``: bytes per clock read by wgmma and written by
    TMA, stacked, against the SM's shared-memory bandwidth."""
    from . import sim

    labels = list(rows)
    fig = _new_figure(11.0, 3.8)
    ax = fig.subplots()
    y = np.arange(len(labels))
    read = [rows[k].wgmma_read / rows[k].clocks for k in labels]
    write = [rows[k].tma_write / rows[k].clocks for k in labels]
    ax.barh(y, read, 0.6, label="wgmma reads A and B", color="#4c72b0")
    bars = ax.barh(y, write, 0.6, left=read, label="TMA writes A and B", color="#dd8452")
    ax.bar_label(bars, labels=[f"{r + w:.0f} B/clock" for r, w in zip(read, write)], fontsize=8, padding=3)
    ax.axvline(sim.SMEM_BYTES_PER_CLOCK, color="black", linestyle="--", linewidth=1,
               label=f"shared memory: {sim.SMEM_BYTES_PER_CLOCK} B/clock per SM")
    ax.set_yticks(y)
    ax.set_yticklabels(labels, fontsize=9)
    ax.invert_yaxis()
    ax.set_xlabel("bytes per clock per SM, with the tensor cores at full rate")
    ax.margins(x=0.18)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.set_title(title, fontsize=11)
    return _set_caption(fig, "gemm_course.sim.smem_traffic: one K tile (64 deep) of one CTA; every wgmma (64 rows x N x 16) "
                             "reads its own A and B slices from shared memory, and TMA writes the tile's A and B once. "
                             f"Clocks: the K tile's FLOPs at {sim.TENSOR_FLOP_PER_CLOCK} FLOP per clock per SM (dense bf16). "
                             "A count, not a measurement.")


TIMELINE_PHASES = (  # (label, from point, to point) of a `scripts/gpu_timeline.py` record; None: the first entry
    ("start-up", None, "cluster wait"),
    ("first loads", "cluster wait", "C first stage full"),
    ("main loops + epilogues", "C first stage full", "C last epilogue issued"),
    ("final stores", "C last epilogue issued", "C stores drained"),
    ("exit", "C stores drained", "exit"),
)
_PHASE_COLORS = ("#8c8c8c", "#dd8452", "#4c72b0", "#55a868", "#c44e52")


def launch_timeline(records: Sequence[dict], title: str = "Where a persistent launch's microseconds go") -> Figure:
    """Records of kind ``timeline`` (``scripts/gpu_timeline.py``): one bar per step and shape, cut at
    the median CTA's points, plus the slowest CTA's extra time to exit; one panel per shape."""
    shapes = sorted({(r["shape"]["m"], r["shape"]["n"], r["shape"]["k"]) for r in records}, key=lambda s: s[0] * s[1] * s[2])
    fig = _new_figure(10.5, 1.2 + 0.55 * len(records) + 0.5 * len(shapes))
    axes = fig.subplots(len(shapes), 1, squeeze=False)[:, 0]
    for ax, shape in zip(axes, shapes):
        rows = [r for r in records if (r["shape"]["m"], r["shape"]["n"], r["shape"]["k"]) == shape]
        for y, r in enumerate(rows):
            points = r["points_us"]
            for (label, start, end), color in zip(TIMELINE_PHASES, _PHASE_COLORS):
                t0, t1 = (points[start] if start else 0.0), points[end]
                ax.barh(y, t1 - t0, left=t0, height=0.6, color=color, label=label if y == 0 else None)
                if label.startswith("main"):
                    ax.text((t0 + t1) / 2, y, f"{(t1 - t0) / r['last_exit_us']:.0%}", ha="center", va="center",
                            fontsize=8, color="white")
            ax.barh(y, r["last_exit_us"] - points["exit"], left=points["exit"], height=0.6, color="white",
                    edgecolor="#333333", hatch="///", label="slowest CTA's extra" if y == 0 else None)
            ax.text(r["last_exit_us"], y, f"  {r['last_exit_us']:.1f} us", va="center", fontsize=8)
        ax.set_yticks(range(len(rows)))
        ax.set_yticklabels([r["step"] for r in rows], fontsize=9)
        ax.invert_yaxis()
        ax.set_xlim(0, max(r["last_exit_us"] for r in rows) * 1.12)
        ax.set_title(f"{shape[0]}x{shape[1]}x{shape[2]}", fontsize=10, loc="left")
        ax.set_xlabel("us from the first CTA's entry", fontsize=8)
    axes[0].legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.suptitle(title, fontsize=11)
    first = records[0]
    return _set_caption(fig, f"scripts/gpu_timeline.py on {first.get('gpu')}, {first.get('date', '')[:10]}: one thread "
                             "per CTA writes %globaltimer at fixed points of an instrumented copy of step 8's kernel; "
                             "bars cut at the median CTA's points (medians over CTAs and launches), the percentage is "
                             "the main loops' share of the launch. The workspace is zeroed before each launch, so the "
                             "first loads find L2 cold.")


def power_limit_split(records: Sequence[dict]) -> list:
    """Records of kind ``clocks`` (``scripts/gpu_clocks.py``) as rows, one per shape and step: mean
    TFLOP/s, SM clock, board power and FLOP per clock per SM over the step's runs, with cuBLAS's
    from the same run, and the ratio split into a clock part and a per-clock part."""
    rows = []
    for file in dict.fromkeys(r.get("_file") for r in records):
        run = [r for r in records if r.get("_file") == file]
        for shape in dict.fromkeys((r["shape"]["m"], r["shape"]["n"], r["shape"]["k"]) for r in run):
            here = [r for r in run if (r["shape"]["m"], r["shape"]["n"], r["shape"]["k"]) == shape]
            cublas = [r for r in here if r["step"] == "cublas"]
            if not cublas:
                continue
            for step in dict.fromkeys(r["step"] for r in here if r["step"] != "cublas"):
                mine = [r for r in here if r["step"] == step]
                mean = {key: float(np.mean([r[key] for r in mine])) for key in ("tflops", "sm_mhz", "power_w", "flop_per_sm_clock")}
                base = {key: float(np.mean([r[key] for r in cublas])) for key in mean}
                rows.append({"shape": "x".join(map(str, shape)), "step": step, "file": file, "gpu": mine[0].get("gpu"),
                             "date": mine[0].get("date", "")[:10], "step_values": mean, "cublas_values": base,
                             "ratio": mean["tflops"] / base["tflops"], "clock_ratio": mean["sm_mhz"] / base["sm_mhz"],
                             "per_clock_ratio": mean["flop_per_sm_clock"] / base["flop_per_sm_clock"]})
    return rows


def power_limit_bars(records: Sequence[dict], title: str = "At the power limit: throughput = clock x work per clock") -> Figure:
    """Records of kind ``clocks``: per shape, the step's TFLOP/s, SM clock and work per clock as
    ratios to cuBLAS's in the same run, with both kernels' board power in the labels."""
    rows = power_limit_split(records)
    fig = _new_figure(11.0, 1.6 + 0.5 * len(rows))
    ax = fig.subplots()
    y = np.arange(len(rows))
    h = 0.26
    for i, (key, label, color) in enumerate((("ratio", "TFLOP/s", _MEASURED), ("clock_ratio", "SM clock", "#dd8452"),
                                             ("per_clock_ratio", "work per clock", "#55a868"))):
        ax.barh(y + (i - 1) * h, [r[key] - 1.0 for r in rows], h, left=1.0, color=color, label=label)
    span = max([abs(r[k] - 1.0) for r in rows for k in ("ratio", "clock_ratio", "per_clock_ratio")] + [0.02])
    for yi, r in zip(y, rows):
        s, c = r["step_values"], r["cublas_values"]
        ax.text(1.0 - 1.35 * span, yi + 0.45, f"{s['tflops']:.0f} vs {c['tflops']:.0f} TFLOP/s, {s['sm_mhz']:.0f} vs "
                f"{c['sm_mhz']:.0f} MHz, {s['power_w']:.0f} vs {c['power_w']:.0f} W", fontsize=7, va="bottom", color="#333333")
    ax.axvline(1.0, color="black", linewidth=1)
    ax.set_yticks(y)
    ax.set_yticklabels([f"{r['shape']}\n{r['step']}" for r in rows], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(1.0 - 1.4 * span, 1.0 + 1.4 * span)
    ax.set_xlabel("step / cuBLAS (1.0 = level)")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.set_title(title, fontsize=11)
    first = rows[0] if rows else {}
    return _set_caption(fig, f"scripts/gpu_clocks.py on {first.get('gpu')}, {first.get('date', '')}: each kernel runs back to "
                             "back for a few seconds after a warm-up while nvidia-smi samples the SM clock and the board power "
                             "every 50 ms (medians); the step runs before and after cuBLAS and its two runs are averaged. "
                             "Work per clock = FLOP per SM clock. Labels: step vs cuBLAS.")


STEP_ORDERS = {"sm90/8": "row", "sm90/9": "grouped", "sm90/10": "gilbert"}  # each persistent step's tile order


def order_energy_points(records: Sequence[dict]) -> list:
    """Records of kind ``clocks`` of the persistent steps 8-10, as points: the panel model's DRAM
    bytes for the step's own order (cluster-tiles in waves of the grid's clusters,
    ``sim.l2_traffic``) against the measured joules per TFLOP, averaged over the step's runs."""
    from . import sim, tile_order

    points = []
    for file in dict.fromkeys(r.get("_file") for r in records):
        run = [r for r in records if r.get("_file") == file and r["step"] in STEP_ORDERS]
        for key in dict.fromkeys((r["step"], r["shape"]["m"], r["shape"]["n"], r["shape"]["k"]) for r in run):
            step, m, n, k = key
            mine = [r for r in run if (r["step"], r["shape"]["m"], r["shape"]["n"], r["shape"]["k"]) == key]
            cfg = mine[0].get("config") or {}
            bm, bn = cfg.get("tile_m", 128) * cfg.get("cluster_m", 2), cfg.get("tile_n", 256) * cfg.get("cluster_n", 1)
            clusters = mine[0].get("sm_count", sim.H100_SMS) // (cfg.get("cluster_m", 2) * cfg.get("cluster_n", 1))
            order = tile_order.order(STEP_ORDERS[step], -(-m // bm), -(-n // bn), cfg.get("group", 8))
            traffic = sim.l2_traffic(order, sms=clusters, tile_m=bm, tile_n=bn, k=k)
            # as power_limit_split averages: mean power over mean throughput
            joules = float(np.mean([r["power_w"] for r in mine]) / np.mean([r["tflops"] for r in mine]))
            points.append({"file": file, "shape": f"{m}x{n}x{k}", "step": step, "model_gb": traffic.bytes / 1e9,
                           "joule_per_tflop": joules, "gpu": mine[0].get("gpu"), "date": mine[0].get("date", "")[:10]})
    return points


def order_energy(records: Sequence[dict], title: str = "The tile order's DRAM traffic, paid in energy") -> Figure:
    """Per shape, steps 8-10 (row, grouped, Gilbert order) as points: modelled DRAM bytes against
    measured joules per TFLOP at the power limit (records of kind ``clocks``)."""
    points = order_energy_points(records)
    fig = _new_figure(8.5, 4.2)
    ax = fig.subplots()
    markers = {"sm90/8": "s", "sm90/9": "^", "sm90/10": "o"}
    for (file, shape), color in zip(dict.fromkeys((p["file"], p["shape"]) for p in points), ("#4c72b0", "#dd8452", "#55a868", "#c44e52")):
        pts = sorted((p for p in points if (p["file"], p["shape"]) == (file, shape)), key=lambda p: p["model_gb"])
        ax.plot([p["model_gb"] for p in pts], [p["joule_per_tflop"] for p in pts], color=color, linewidth=1, label=shape)
        for p in pts:
            ax.plot(p["model_gb"], p["joule_per_tflop"], markers[p["step"]], color=color, markersize=7)
            ax.annotate(f"{p['step']} ({STEP_ORDERS[p['step']]})", (p["model_gb"], p["joule_per_tflop"]),
                        textcoords="offset points", xytext=(6, -3), fontsize=7)
    ax.set_xscale("log")
    from matplotlib.ticker import FormatStrFormatter

    ax.xaxis.set_major_formatter(FormatStrFormatter("%g"))
    ax.xaxis.set_minor_formatter(FormatStrFormatter("%g"))
    ax.tick_params(axis="x", which="minor", labelsize=7)
    ax.set_xlabel("DRAM bytes of the order, panel model (GB per launch, log scale)")
    ax.set_ylabel("measured joules per TFLOP")
    ax.legend(fontsize=8, loc="upper left")
    ax.set_title(title, fontsize=11)
    first = points[0] if points else {}
    return _set_caption(fig, f"scripts/gpu_clocks.py on {first.get('gpu')}, {first.get('date', '')}: board power over "
                             "throughput, each step run back to back at the power limit. x: gemm_course.sim.l2_traffic "
                             "for the step's own order of cluster-tiles, in waves of the grid's clusters (a model: "
                             "each wave reads its panels from DRAM once).")


def cluster_placement(probe: dict, title: str = "Which GPC each cluster of the grid lands in") -> Figure:
    """Two strips of the grid's clusters coloured by GPC: by cluster index (as the hardware deals
    them out), and by place in a wave with ``gpc_order`` (``placement.from_probe_record``)."""
    from . import placement

    p = placement.from_probe_record(probe)
    groups, cluster_sms, places = p["groups"], p["cluster_sms"], p["places"]
    sizes = collections.Counter(groups.values())
    gpc = [groups[sm] for sm in cluster_sms]
    known = sorted({g for g in gpc if sizes[g] > 1})
    palette = [colormaps["tab10"](i) for i in (0, 1, 2, 3, 4, 5, 6, 8, 9)]  # no grey: grey means unknown
    color = {g: palette[i % len(palette)] for i, g in enumerate(known)}
    by_place = sorted(range(len(cluster_sms)), key=lambda c: places[c])
    fig = _new_figure(11, 2.6)
    ax = fig.subplots()
    for row, clusters in enumerate((list(range(len(cluster_sms))), by_place)):
        for x, c in enumerate(clusters):
            ax.add_patch(Rectangle((x, 1 - row), 0.92, 0.8, color=color.get(gpc[c], "#cccccc")))
            ax.text(x + 0.46, 1.4 - row, str(c), ha="center", va="center", fontsize=5)
    ax.set_xlim(0, len(cluster_sms))
    ax.set_ylim(-0.1, 1.9)
    ax.set_yticks([1.4, 0.4], ["cluster index", "place in a wave\n(gpc_order)"], fontsize=8)
    ax.set_xticks([])
    ax.set_title(title, fontsize=11)
    return _set_caption(fig, f"gemm_course.placement probes on {probe.get('gpu')}, {probe.get('date', '')[:10]}: one colour "
                             "per GPC (grey: an SM no probe cluster of 8 or 16 reached, GPC unknown); numbers are cluster "
                             "indices. Top: consecutive clusters land in different GPCs. Bottom: the same clusters "
                             "in the order their tiles take in each wave.")


def latest_sweep(records: Sequence[dict], step: Optional[str] = None) -> list:
    """The records of ``step`` (default config; default: the final Hopper step) in the newest results
    file whose name says ``sweep`` (newest: the file holding the latest record date)."""
    from . import bench, ladder

    step = step or ladder.final("sm90").key
    sweep = [r for r in records if r["step"] == step and bench.has_default_config(r, ladder.get(step)) and "sweep" in r.get("_file", "")]
    if not sweep:
        return []
    newest = max(sweep, key=lambda r: (r.get("date", ""), r["_file"]))["_file"]
    return [r for r in sweep if r["_file"] == newest]


def geomean(values: Iterable[float]) -> float:
    values = list(values)
    return math.exp(sum(math.log(v) for v in values) / len(values))


def sweep_ratios(records: Sequence[dict], step: Optional[str] = None) -> Figure:
    """Ratio to cuBLAS (same run) per shape of the newest sweep of ``step`` (default: the final
    Hopper step), with the geometric mean."""
    from . import bench, ladder

    step = step or ladder.final("sm90").key
    sweep = latest_sweep(records, step)
    fig = _new_figure(11, 4.8)
    ax = fig.add_subplot()
    if not sweep:
        ax.text(0.5, 0.5, f"No sweep record of {step} under results/ yet", ha="center", va="center",
                transform=ax.transAxes, fontsize=11)
        ax.axis("off")
        return _set_caption(fig, f"No sweep of {step} recorded.")
    labels = [f"{r['shape']['m']}x{r['shape']['n']}x{r['shape']['k']}" for r in sweep]
    ratios = [r["ratio_to_cublas"] for r in sweep]
    squares = [r["shape"]["m"] == r["shape"]["n"] == r["shape"]["k"] for r in sweep]
    x = np.arange(len(sweep))
    colors = ["#4c72b0" if s else "#55a868" for s in squares]
    ax.vlines(x, 1.0, ratios, colors=colors, linewidth=3)
    ax.scatter(x, ratios, color=colors, s=30, zorder=3)
    for xi, v in zip(x, ratios):
        ax.annotate(f"{v:.3f}", (xi, v), xytext=(0, -10 if v < 1 else 4), textcoords="offset points", ha="center",
                    va="top" if v < 1 else "bottom", fontsize=6.5)
    g = geomean(ratios)
    ax.axhline(1.0, color=_CUBLAS, linewidth=1.5)
    ax.axhline(g, color="black", linestyle="--", linewidth=1.2)
    ax.set_xticks(x)
    ax.set_xticklabels(labels, rotation=60, ha="right", fontsize=7.5)
    low = min(ratios + [g])
    ax.set_ylim(max(0.0, low - 0.04), max(ratios + [1.0]) + 0.03)
    ax.set_ylabel("TFLOP/s / cuBLAS TFLOP/s (same run)")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(handles=[Patch(color="#4c72b0", label="square"), Patch(color="#55a868", label="LLM-like (M=8192)"),
                       Patch(color=_CUBLAS, label="cuBLAS = 1"),
                       Patch(facecolor="none", edgecolor="black", linestyle="--", label=f"geometric mean {g:.3f}")],
              fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.set_title(f"{step} against cuBLAS on {len(sweep)} shapes (medians of per-launch times; the axis does not "
                 "start at 0)", fontsize=10)
    return _set_caption(fig, f"{bench.provenance(sweep[0])}. Each point: the step's median TFLOP/s over cuBLAS's median "
                             "timed interleaved in the same run.")


# ---------------------------------------------------------------------------------------------
# Blackwell steps 5-8: figures from the CPU twins (gemm_course.sim, gemm_course.kernels.sm100.layouts)
# ---------------------------------------------------------------------------------------------

_PAGE_WIDTH = 7.0  # inches: these figures are drawn at page width, text at 9 pt or more
_TEXT_PT = 9
_CTA_COLORS = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3", "#8c8c8c")


def _readable_caption(fig: Figure, caption: str, width: int = 100) -> Figure:
    """Attach ``caption`` (``fig.caption``) and print it under the axes at 9 pt."""
    fig.caption = caption
    fig.get_layout_engine().set(h_pad=0.05)
    fig.supxlabel("\n".join(textwrap.fill(p, width) for p in caption.split("\n") if p),
                  fontsize=_TEXT_PT, ha="left", x=0.01, color="#333333")
    return fig


def _runs(values: Iterable[int]) -> list:
    """Sorted integers as contiguous runs [(first, last), ...]."""
    out: list = []
    for v in sorted(values):
        if out and v == out[-1][1] + 1:
            out[-1][1] = v
        else:
            out.append([v, v])
    return [tuple(r) for r in out]


def clc_timeline(schedule, title: str = "") -> Figure:
    """Which resident cluster computed which cluster-tile when, under cluster launch control
    (a :class:`gemm_course.sim.ClcSchedule`): one row per cluster that launched, one bar per tile,
    labelled with the tile's index; blue: the cluster's own tile, orange: a tile taken over from a
    cancelled launch. Triangles mark launches, bars at the right end exits."""
    clusters = sorted(schedule.launched, key=lambda c: (schedule.launched[c], c))
    row = {c: i for i, c in enumerate(clusters)}
    fig = _new_figure(_PAGE_WIDTH, 1.9 + 0.36 * len(clusters))
    ax = fig.add_subplot()
    colors = {False: "#4c72b0", True: "#dd8452"}
    for r in schedule.runs:
        y = row[r.cluster]
        ax.add_patch(Rectangle((r.start, y - 0.36), r.end - r.start, 0.72, facecolor=colors[r.taken],
                               edgecolor="white", linewidth=1.0, gid="run"))
        ax.text((r.start + r.end) / 2, y, str(r.tile), ha="center", va="center", fontsize=_TEXT_PT,
                color="white", fontweight="bold")
    for c in clusters:
        ax.plot(schedule.launched[c], row[c], marker=">", color="black", markersize=6)
        if c in schedule.exited:
            ax.plot(schedule.exited[c], row[c], marker="|", color="black", markersize=12, markeredgewidth=2)
    ax.set_yticks(range(len(clusters)))
    ax.set_yticklabels([f"cluster {c}" for c in clusters], fontsize=_TEXT_PT)
    ax.set_ylim(len(clusters) - 0.5, -0.5)
    ax.set_xlim(0, schedule.span * 1.03 if schedule.span else 1)
    ax.set_xlabel("time (model units, not measured)", fontsize=_TEXT_PT)
    ax.tick_params(labelsize=_TEXT_PT)
    fig.legend(handles=[Patch(color=colors[False], label="own tile (launched)"),
                        Patch(color=colors[True], label="taken over (try_cancel)")],
               fontsize=_TEXT_PT, loc="outside upper center", ncol=2, frameon=False)
    taken = sum(r.taken for r in schedule.runs)
    ax.set_title(title or f"{schedule.num_clusters} cluster-tiles, at most {schedule.resident} clusters resident",
                 fontsize=_TEXT_PT + 1)
    return _readable_caption(fig, f"Event model of step 8's scheduler (gemm_course.sim.clc_schedule, policy "
                                  f"'{schedule.policy}'): {len(clusters)} clusters launched and computed "
                                  f"{len(schedule.runs) - taken} tiles of their own; {taken} launches were "
                                  "cancelled and their tiles taken over by running clusters. Numbers: the "
                                  "cluster-tile index.")


def tmem_timeline(plans: dict, title: str = "Accumulators in tensor memory over time (model)") -> Figure:
    """``plans = {label: gemm_course.sim.TmemPlan}``, one panel each: TMEM columns (up) against time.

    Each accumulator stage is a band of ``tile_n`` columns; a solid bar while the MMA warp writes
    tile t into it, a hatched bar while the epilogue reads it. Bars of one stage never overlap."""
    span = max(p.span for p in plans.values())
    fig = _new_figure(_PAGE_WIDTH, 1.4 + 1.5 * len(plans))
    axes = np.atleast_1d(fig.subplots(len(plans), 1, sharex=True))
    tile_colors = [colormaps["tab10"].colors[i] for i in range(10)]
    for ax, (label, plan) in zip(axes, plans.items()):
        for iv in plan.intervals:
            low, high = plan.columns(iv.stage)
            mma = iv.who == "mma"
            ax.add_patch(Rectangle((iv.start, low), iv.end - iv.start, high - low, gid=iv.who,
                                   facecolor=tile_colors[iv.tile % 10], alpha=0.9 if mma else 0.35,
                                   hatch=None if mma else "//", edgecolor="black", linewidth=0.6))
            ax.text((iv.start + iv.end) / 2, (low + high) / 2, f"{'MMA' if mma else 'epi'}\nt{iv.tile}",
                    ha="center", va="center", fontsize=_TEXT_PT)
        ax.set_ylim(0, max(plan.allocated, plan.acc_stages * plan.tile_n))
        ax.set_yticks([plan.columns(s)[0] for s in range(plan.acc_stages)] + [plan.allocated])
        ax.tick_params(labelsize=_TEXT_PT)
        ax.set_ylabel("TMEM column", fontsize=_TEXT_PT)
        ax.set_title(f"{label}: {plan.acc_stages} x {plan.tile_n} columns ({plan.allocated} allocated); "
                     f"{len(plan.of('mma'))} tiles take {plan.span:g}", fontsize=_TEXT_PT + 1, loc="left")
    axes[-1].set_xlim(0, span * 1.01)
    axes[-1].set_xlabel("time (model units, not measured)", fontsize=_TEXT_PT)
    fig.suptitle(title, fontsize=_TEXT_PT + 1)
    return _readable_caption(fig, "From gemm_course.sim.tmem_plan: tile t uses stage t mod acc_stages; solid: "
                                  "the MMA warp writes the stage, hatched: the epilogue reads it. With one stage "
                                  "the next tile's MMAs wait for the epilogue; with two they overlap it.")


def cta_pair_split(split: dict, title: str = "") -> Figure:
    """What each CTA of a ``cta_group::2`` pair holds (``{v: PairShare}`` from
    :func:`gemm_course.kernels.sm100.layouts.pair_split`): A rows and B rows in its shared memory,
    and the rows of C in its tensor memory, colored by CTA."""
    shares = [split[v] for v in sorted(split)]
    rows_a = 1 + max(r for s in shares for r in s.a_rows)
    rows_b = 1 + max(r for s in shares for r in s.b_rows)
    depth = 1 + max(k for s in shares for _, k in s.a)
    fig = _new_figure(_PAGE_WIDTH, 5.6)
    ax = fig.add_subplot()
    k_w = 0.32 * rows_a  # K drawn wider than to scale, room for labels
    gap = 0.06 * rows_a
    x0, y0 = k_w + gap, k_w + gap  # C's corner; y grows downwards
    for s in shares:
        color = _CTA_COLORS[s.cta % len(_CTA_COLORS)]
        for first, last in _runs(s.a_rows):
            ax.add_patch(Rectangle((0, y0 + first), k_w, last - first + 1, facecolor=color, edgecolor="black",
                                   gid=f"A{s.cta}"))
            ax.text(k_w / 2, y0 + (first + last) / 2, f"A rows\n{first}-{last}\nCTA {s.cta}", ha="center",
                    va="center", fontsize=_TEXT_PT, color="white")
        for first, last in _runs(s.b_rows):
            ax.add_patch(Rectangle((x0 + first, 0), last - first + 1, k_w, facecolor=color, edgecolor="black",
                                   gid=f"B{s.cta}"))
            ax.text(x0 + (first + last) / 2, k_w / 2, f"B rows {first}-{last}\n(C columns)\nCTA {s.cta}",
                    ha="center", va="center", fontsize=_TEXT_PT, color="white")
        cols = _runs(s.c_cols)
        for first, last in _runs(s.c_rows):
            for c_first, c_last in cols:
                ax.add_patch(Rectangle((x0 + c_first, y0 + first), c_last - c_first + 1, last - first + 1,
                                       facecolor=color, alpha=0.35, edgecolor="black", gid=f"C{s.cta}"))
            lanes = sorted({lane for lane, _ in s.tmem})
            ax.text(x0 + (cols[0][0] + cols[-1][1]) / 2, y0 + (first + last) / 2,
                    f"CTA {s.cta}'s accumulator (TMEM lanes {lanes[0]}-{lanes[-1]}):\nC rows {first}-{last}, "
                    f"columns {cols[0][0]}-{cols[-1][1]}", ha="center", va="center", fontsize=_TEXT_PT)
    ax.set_xlim(-1, x0 + rows_b + 1)
    ax.set_ylim(y0 + rows_a + 1, -1)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.set_title(title or f"One tcgen05.mma.cta_group::2 of {rows_a} x {rows_b} x {depth}: what each CTA holds",
                 fontsize=_TEXT_PT + 1)
    return _readable_caption(fig, "From the step's own tiled MMA: get_slice(v).partition_A / partition_B / "
                                  "partition_C of identity tensors of the pair's tiles (traced for sm_100a), and "
                                  "the accumulator's TMEM layout. Each CTA holds half of A and half of B, but "
                                  "all columns of C for its rows.")


def multicast_mask_grid(masks: dict, cluster_m: int, cluster_n: int, title: str = "") -> Figure:
    """TMA multicast masks of a cluster (``{rank: (A mask, B mask)}``, e.g. from
    :func:`gemm_course.kernels.sm100.layouts.tma_multicast_masks`): for each operand a grid whose
    row r marks the CTAs that CTA r's load lands in (bit c of its mask)."""
    size = cluster_m * cluster_n
    fig = _new_figure(_PAGE_WIDTH, 2.6 + 0.3 * size)
    axes = fig.subplots(1, 2)
    names = [f"{r} ({r % cluster_m},{r // cluster_m})" for r in range(size)]
    for ax, operand, which in zip(axes, ("A", "B"), (0, 1)):
        for r in range(size):
            for c in range(size):
                on = masks[r][which] >> c & 1
                ax.add_patch(Rectangle((c - 0.5, r - 0.5), 1, 1, facecolor=_CTA_COLORS[r % len(_CTA_COLORS)] if on
                                       else "white", edgecolor="#999999", linewidth=0.6, gid="bit" if on else None))
        ax.set_xlim(-0.5, size - 0.5)
        ax.set_ylim(size - 0.5, -0.5)
        ax.set_aspect("equal")
        ax.set_xticks(range(size))
        ax.set_xticklabels([str(r) for r in range(size)], fontsize=_TEXT_PT)
        ax.set_yticks(range(size))
        ax.set_yticklabels(names, fontsize=_TEXT_PT)
        ax.set_xlabel("receiving CTA rank", fontsize=_TEXT_PT)
        shared = "along N (same rows of A)" if operand == "A" else "along M (same half of B)"
        ax.set_title(f"{operand}: shared {shared}", fontsize=_TEXT_PT)
    axes[0].set_ylabel("issuing CTA: rank (x, y)", fontsize=_TEXT_PT)
    fig.suptitle(title or f"TMA multicast masks of a {cluster_m} x {cluster_n} cluster of CTA pairs",
                 fontsize=_TEXT_PT + 1)
    return _readable_caption(fig, "Rank = x + cluster_m * y; x = place in the pair + 2 * pair along M. A filled "
                                  "cell: the issuing CTA's TMA load also writes that CTA's shared memory "
                                  "(create_tma_multicast_mask with the step's own cluster layout).", width=95)
