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

from ..records import geomean, latest_per_step, latest_sweep, provenance, run_of, shape_of
from ._style import CUBLAS, LIVE, MEASURED, SEED, new_figure, set_caption


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


def ladder_data(records: Sequence[dict], arch: str = "sm90", shape=SEED_SHAPE, gpu: Optional[str] = None) -> dict:
    """What :func:`ladder_bars` draws, as data: ``{number: record or None}``, and the seed's bars."""
    measured = latest_per_step(records, arch, shape, gpu)
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
    from .. import ladder

    m, n, k = shape
    highlight = set(highlight)
    data = ladder_data(records, arch, shape, gpu)
    measured, seed = data["measured"], data["seed"]
    live_by_step = {}
    for rec in live or []:
        if shape_of(rec) == (m, n, k) and rec["step"].startswith(arch + "/"):
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
    series = [("recorded", have, MEASURED)]
    if live_by_step:
        series.append(("live", live_by_step, LIVE))
    groups = [s for s in series if s[1]] + ([("seed", seed, SEED)] if seed else [])
    width = 0.8 / max(1, len(groups))

    fig = new_figure(max(7.0, 0.95 * len(numbers) + 1.6), 5.6) if compact else \
        new_figure(max(9.0, 1.05 * len(numbers) + 4.5), 5.4)
    ax = fig.add_subplot()
    x_of = {num: i for i, num in enumerate(numbers)}
    handles = []
    runs = sorted({run_of(r) for r in have.values()})
    top = 1.0
    for gi, (name, values, color) in enumerate(groups):
        offset = (gi - (len(groups) - 1) / 2) * width
        for num, val in values.items():
            x = x_of[num] + offset
            if name == "seed":
                h = float(val)
                ax.bar(x, h, width * 0.92, facecolor="none", edgecolor=SEED, hatch="///", linewidth=1.5)
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
                    ax.hlines(c, x - width * 0.46, x + width * 0.46, colors=CUBLAS, linewidth=2.0)
                    top = max(top, c)
                h = max(h, t["max"])
            top = max(top, h)
        label = {
            "recorded": "recorded (project's bench, newest record per step)",
            "live": "live (this session)",
            "seed": SEED_LABEL,
        }[name]
        if name == "seed":
            handles.append(Patch(facecolor="none", edgecolor=SEED, hatch="///", label=label))
        else:
            handles.append(Patch(color=color, label=label))

    cublas_note = ""
    if have and len(runs) == 1:
        cublas = [r["cublas_tflops"]["median"] for r in have.values()]
        line = float(np.median(cublas))
        ax.axhline(line, color=CUBLAS, linestyle="--", linewidth=1.5)
        handles.append(Patch(color=CUBLAS, label=f"cuBLAS, same run ({line:.0f} TFLOP/s)"))
        top = max(top, line)
        spread = f" (range {min(cublas):.0f}-{max(cublas):.0f})" if len(cublas) > 1 else ""
        cublas_note = (f"Dashed line: cuBLAS (torch.mm) timed interleaved in the same run, median of the "
                       f"{len(cublas)} per-step cuBLAS medians{spread}.")
    elif have or live_by_step:
        handles.append(Patch(color=CUBLAS, label="cuBLAS timed with each bar"))
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
    ax.set_title(f"The ladder on {ladder.ARCH_NAMES.get(arch, arch)}: {m}x{n}x{k} BF16 GEMM")
    if compact:
        fig.legend(handles=handles, loc="outside upper center", ncol=2, fontsize=8)
    else:
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    ax.grid(axis="y", alpha=0.3, which="both")

    parts = []
    for run in runs:
        rec = next(r for r in have.values() if run_of(r) == run)
        steps_here = ", ".join(str(num) for num, r in have.items() if run_of(r) == run)
        parts.append(f"Steps {steps_here}: {provenance(rec)}.")
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
    return set_caption(fig, " ".join(parts))


def sweep_ratios(records: Sequence[dict], step: Optional[str] = None) -> Figure:
    """Ratio to cuBLAS (same run) per shape of the newest sweep of ``step`` (default: the final
    Hopper step), with the geometric mean."""
    from .. import ladder

    step = step or ladder.final("sm90").key
    sweep = latest_sweep(records, step)
    fig = new_figure(11, 4.8)
    ax = fig.add_subplot()
    if not sweep:
        ax.text(0.5, 0.5, f"No sweep record of {step} under results/ yet", ha="center", va="center",
                transform=ax.transAxes, fontsize=11)
        ax.axis("off")
        return set_caption(fig, f"No sweep of {step} recorded.")
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
    ax.axhline(1.0, color=CUBLAS, linewidth=1.5)
    ax.axhline(g, color="black", linestyle="--", linewidth=1.2)
    handles = [Patch(color="#4c72b0", label="square"), Patch(color="#55a868", label="LLM-like (M=8192)"),
               Patch(color=CUBLAS, label="cuBLAS = 1"),
               Patch(facecolor="none", edgecolor="black", linestyle="--", label=f"geometric mean {g:.3f}")]
    triton = [(r.get("peers") or {}).get("triton", {}).get("ratio_to_cublas") for r in sweep]
    if all(t is not None for t in triton):  # the course's Triton matmul, timed in the same rounds
        ax.scatter(x, triton, marker="x", color="#8172b2", s=36, zorder=3)
        handles.append(Line2D([], [], marker="x", linestyle="none", color="#8172b2",
                              label=f"Triton (course's), geomean {geomean(triton):.3f}"))
        ratios_shown = ratios + triton
    else:
        ratios_shown = ratios
    ax.set_xticks(x)
    ax.set_xticklabels(labels, rotation=60, ha="right", fontsize=7.5)
    low = min(ratios_shown + [g])
    ax.set_ylim(max(0.0, low - 0.04), max(ratios_shown + [1.0]) + 0.03)
    ax.set_ylabel("TFLOP/s / cuBLAS TFLOP/s (same run)")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.set_title(f"{step} against cuBLAS on {len(sweep)} shapes (medians of per-launch times; the axis does not "
                 "start at 0)", fontsize=10)
    return set_caption(fig, f"{provenance(sweep[0])}. Each point: the step's median TFLOP/s over cuBLAS's median "
                            "timed interleaved in the same run.")


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

    fig = new_figure(8, 5)
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
    ax.axvline(ai, color=MEASURED, linestyle="--", linewidth=1)
    ax.annotate(f"{problem.label}:\n{ai:.0f} FLOP/B\n(A, B, C each\nmoved once)", (ai, 0.04),
                xycoords=("data", "axes fraction"), xytext=(4, 0), textcoords="offset points", ha="left",
                fontsize=8, color=MEASURED)
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
    return set_caption(fig, f"Roof: peak {peak_tflops:g} TFLOP/s and {bandwidth_tbs:g} TB/s "
                            f"{('(' + machine_label + ')') if machine_label else ''}; hollow markers sit on the roof at "
                            "the bound their intensity allows, filled ones are measured.")


def smem_traffic_bars(rows: dict, title: str = "Shared-memory traffic of the main loop at the tensor cores' rate") -> Figure:
    """``rows = {label: gemm_course.sim.SmemTraffic}``: bytes per clock read by wgmma and written by
    TMA, stacked, against the SM's shared-memory bandwidth."""
    from .. import sim

    labels = list(rows)
    fig = new_figure(11.0, 3.8)
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
    return set_caption(fig, "gemm_course.sim.smem_traffic: one K tile (64 deep) of one CTA; every wgmma (64 rows x N x 16) "
                            "reads its own A and B slices from shared memory, and TMA writes the tile's A and B once. "
                            f"Clocks: the K tile's FLOPs at {sim.TENSOR_FLOP_PER_CLOCK} FLOP per clock per SM (dense bf16). "
                            "A count, not a measurement.")
