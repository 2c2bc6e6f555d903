"""At the power limit (records of kind ``clocks``, ``scripts/gpu_clocks.py``): throughput split into
clock and work per clock, and the tile order's DRAM traffic against the energy per TFLOP."""

from __future__ import annotations

from typing import Sequence

import numpy as np
from matplotlib.figure import Figure

from ..measure.records import STEP_ORDERS, order_energy_points, power_limit_split
from ._style import MEASURED, PAGE_WIDTH, TEXT_PT, new_figure, set_caption, wrap_title


def _clocks_caption(fig: Figure, rows: Sequence[dict], text: str, alt: str = "") -> Figure:
    """Caption a figure of ``clocks`` rows: the tool, the GPU and date of the first row, then ``text``."""
    first = rows[0] if rows else {}
    return set_caption(fig, f"scripts/gpu_clocks.py on {first.get('gpu')}, {first.get('date', '')[:10]}: {text}", alt=alt)


def power_limit_bars(records: Sequence[dict], title: str = "At the power limit: throughput = clock x work per clock") -> Figure:
    """Records of kind ``clocks``: per shape, the step's TFLOP/s, SM clock and work per clock as
    ratios to cuBLAS's in the same run, with both kernels' board power in the labels."""
    rows = power_limit_split(records)
    fig = new_figure(PAGE_WIDTH, 1.9 + 0.62 * len(rows))
    ax = fig.subplots()
    y = np.arange(len(rows))
    h = 0.21
    for i, (key, label, color) in enumerate((("ratio", "TFLOP/s", MEASURED), ("clock_ratio", "SM clock", "#dd8452"),
                                             ("per_clock_ratio", "work per clock", "#55a868"))):
        ax.barh(y + (i - 0.5) * h, [r[key] - 1.0 for r in rows], h, left=1.0, color=color, label=label)
    span = max([abs(r[k] - 1.0) for r in rows for k in ("ratio", "clock_ratio", "per_clock_ratio")] + [0.02])
    for yi, r in zip(y, rows):
        s, c = r["step_values"], r["cublas_values"]
        ax.text(0.005, yi - 0.23, f"{s['tflops']:.0f} vs {c['tflops']:.0f} TFLOP/s, {s['sm_mhz']:.0f} vs "
                f"{c['sm_mhz']:.0f} MHz, {s['power_w']:.0f} vs {c['power_w']:.0f} W", transform=ax.get_yaxis_transform(),
                fontsize=TEXT_PT, va="bottom", ha="left", color="#333333",
                bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.8, "pad": 0.5})
    ax.axvline(1.0, color="black", linewidth=1)
    files = list(dict.fromkeys(r["file"] for r in rows))  # several runs: each row names its run (the caption lists them)
    run = {f: f", run {i + 1}" if len(files) > 1 else "" for i, f in enumerate(files)}
    ax.set_yticks(y, [f"{r['shape']}\n{r['step']}{run[r['file']]}" for r in rows])
    ax.tick_params(labelsize=TEXT_PT)
    ax.set_ylim(len(rows) - 0.55, -0.6)
    ax.set_xlim(1.0 - 1.4 * span, 1.0 + 1.4 * span)
    ax.set_xlabel("step / cuBLAS (1.0 = level)")
    ax.legend(fontsize=TEXT_PT, loc="lower left", bbox_to_anchor=(0.0, 1.0), ncol=3, frameon=False, borderaxespad=0.2)
    fig.suptitle(wrap_title(title, 72), fontsize=TEXT_PT + 2)
    return _clocks_caption(fig, rows, "each kernel runs back to back for a few seconds after a warm-up while "
                                      "nvidia-smi samples the SM clock and the board power every 50 ms (medians); the "
                                      "step runs before and after cuBLAS and its two runs are averaged. Work per clock = "
                                      "FLOP per SM clock. Labels: step vs cuBLAS."
                                      + (" Runs: " + "; ".join(f"{i + 1} = {f} ({next(r['date'] for r in rows if r['file'] == f)})"
                                                               for i, f in enumerate(files)) + "." if len(files) > 1 else ""),
                             alt="Grouped horizontal bar chart")


def order_energy(records: Sequence[dict], title: str = "The tile order's DRAM traffic, paid in energy") -> Figure:
    """Per shape, the persistent steps (row, grouped and Gilbert orders, ``records.STEP_ORDERS``) as
    points: modelled DRAM bytes against measured joules per TFLOP at the power limit (records of
    kind ``clocks``)."""
    points = order_energy_points(records)
    fig = new_figure(PAGE_WIDTH, 4.6)
    ax = fig.subplots()
    markers = {"sm90/8": "s", "sm90/9": "^", "sm90/10": "o", "sm90/11": "D"}
    for (file, shape), color in zip(dict.fromkeys((p["file"], p["shape"]) for p in points), ("#4c72b0", "#dd8452", "#55a868", "#c44e52")):
        pts = sorted((p for p in points if (p["file"], p["shape"]) == (file, shape)), key=lambda p: p["model_gb"])
        ax.plot([p["model_gb"] for p in pts], [p["joule_per_tflop"] for p in pts], color=color, linewidth=1, label=shape)
        for p in pts:
            ax.plot(p["model_gb"], p["joule_per_tflop"], markers[p["step"]], color=color, markersize=7)
            ax.annotate(f"{p['step']} ({STEP_ORDERS[p['step']]})", (p["model_gb"], p["joule_per_tflop"]),
                        textcoords="offset points", xytext=(6, -3), fontsize=TEXT_PT)
    ax.set_xscale("log")
    from matplotlib.ticker import FormatStrFormatter, LogLocator

    ax.xaxis.set_major_formatter(FormatStrFormatter("%g"))
    ax.xaxis.set_minor_formatter(FormatStrFormatter("%g"))
    ax.xaxis.set_minor_locator(LogLocator(subs=(2, 5)))
    ax.tick_params(labelsize=TEXT_PT)
    ax.tick_params(axis="x", which="minor", labelsize=TEXT_PT)
    ax.margins(x=0.25)
    ax.set_xlabel("DRAM bytes of the order, panel model (GB per launch, log scale)")
    ax.set_ylabel("measured joules per TFLOP")
    ax.legend(fontsize=TEXT_PT, loc="lower left", bbox_to_anchor=(0.0, 1.0), ncol=3, frameon=False, borderaxespad=0.2)
    fig.suptitle(wrap_title(title, 72), fontsize=TEXT_PT + 2)
    return _clocks_caption(fig, points, "board power over throughput, each step run back to back at the power "
                                        "limit. x: gemm_course.teaching.sim.l2_traffic for the step's own order of "
                                        "cluster-tiles, in waves of the grid's clusters (a model: each wave reads its "
                                        "panels from DRAM once).", alt="Scatter plot")
