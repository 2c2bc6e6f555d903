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
                live: Optional[Sequence[dict]] = None, log: bool = True) -> Figure:
    """One bar per ladder step: the newest bench record of each (median, whiskers min..max).

    * cuBLAS: if every drawn record comes from one run (one results file), one dashed line at
      the median of that run's cuBLAS medians; otherwise a short cuBLAS tick over each bar, the
      cuBLAS timed with that bar. The caption says which.
    * the seed's B200 figures (4096^3 only): hatched, outlined bars, "seed, B200 (quoted)".
    * ``live``: records measured in this session (e.g. by the notebook on a GPU), drawn beside
      the recorded ones with their own cuBLAS ticks.
    * no records: only the seed's bars, and a note that no measurement exists yet.
    """
    from . import bench, ladder

    m, n, k = shape
    data = ladder_data(records, arch, shape, gpu)
    measured, seed = data["measured"], data["seed"]
    live_by_step = {}
    for rec in live or []:
        if (rec["shape"]["m"], rec["shape"]["n"], rec["shape"]["k"]) == (m, n, k) and rec["step"].startswith(arch + "/"):
            live_by_step[int(rec["step"].split("/")[1])] = rec
    numbers = sorted(set(measured) | set(seed) | set(live_by_step))
    titles = {s.number: s.title for s in ladder.steps(arch)}
    have = {num: r for num, r in measured.items() if r is not None}
    series = [("recorded", have, _MEASURED)]
    if live_by_step:
        series.append(("live", live_by_step, _LIVE))
    groups = [s for s in series if s[1]] + ([("seed", seed, _SEED)] if seed else [])
    width = 0.8 / max(1, len(groups))

    fig = _new_figure(max(9.0, 1.05 * len(numbers) + 4.5), 5.4)
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
                       yerr=[[max(lo, 0)], [max(hi, 0)]], capsize=3, ecolor="black", error_kw={"linewidth": 0.8})
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
        ax.text(0.5, 0.96, f"No measured record for {arch} at {m}x{n}x{k}{where} exists yet\n"
                "(the project's H200 runs will add them under results/)",
                transform=ax.transAxes, ha="center", va="top", fontsize=10,
                bbox={"boxstyle": "round", "facecolor": "#fff3cd", "edgecolor": "#c9a227"})

    ax.set_xticks(range(len(numbers)))
    ax.set_xticklabels([f"step {num}\n" + textwrap.fill(textwrap.shorten(titles.get(num, "(seed only)"), 40,
                                                                          placeholder="..."), 14)
                        for num in numbers], fontsize=7)
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
