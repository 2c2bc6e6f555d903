"""The figures of chapter 12, the memory roofline: decode-sized GEMMs, bound by the bytes of W.

* :func:`ridge_points`, :func:`littles_law_bytes`: a card's two ridge points (datasheet and
  measured) and the bytes an SM must keep in flight, from :mod:`gemm_course.hardware`;
* :func:`rooflines`: the rooflines of several cards on one log-log plot, both ceilings each (the
  datasheet's, and the workplace's measured copy bandwidth and product rate where taken), with
  decode shapes placed on them at their arithmetic intensity;
* :func:`decode_runs`, :func:`graph_runs`, :func:`decode_gpus`: the records of the step-12 decode run
  (``scripts/gpu_decode12.sh``: bench records tagged ``decode12``, ``--rotate``) and of the CUDA-graph
  timings (``scripts/gpu_decode_graph.py``, kind ``decode_graph``), newest run;
* :func:`decode_bandwidth`, :func:`graph_times`, :func:`decode_table`: those records drawn and
  tabulated, each saying "no record yet" until the run exists;
* :func:`cublas_wins`: where cuBLAS was faster, step 12's launch beside the kernel cuBLAS ran
  (records of kind ``cublas_kernels``); :func:`two_floors`: the model's two floors per layer and M
  beside the measured times;
* :func:`pairs_ab`, :func:`partial_tiles_ab`, :func:`split_ab`, :func:`pdl_ab`: the A/B runs behind step 12's rule, from
  ``results/tuning`` (:mod:`gemm_course.viz.memory_roofline_ab`, re-exported here);
* :func:`launch_lines`, :func:`launch_table`, :func:`launch_figure`: each kernel's times over the
  layers as a line, a fixed cost per launch plus the bytes at a rate (:mod:`gemm_course.viz.launch_lines`,
  re-exported here).

Named ``memory_roofline``, not ``roofline``: :func:`gemm_course.viz.roofline` is the compute
roofline's figure, and a submodule of that name would replace it on the package once imported.
"""

from __future__ import annotations

import math
import os
import statistics
from typing import Iterable, Optional, Sequence

import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from .. import hardware
from ..measure.records import geomean, provenance, shape_of
from ..runtime.problem import GemmProblem
from ._style import CTA_COLORS, CUBLAS, MEASURED, PAGE_WIDTH, TEXT_PT, message_figure, new_figure, set_caption, wrap_title
from .launch_lines import bytes_for_share, launch_figure, launch_lines, launch_table  # noqa: F401  (re-exported)
from .memory_roofline_ab import (  # noqa: F401  (re-exported)
    GRAPH_AB_KIND,
    HANDOVER_AB_RUNS,
    HANDOVER_VARIANT,
    PAIRS_AB_RUN,
    PDL_AB_RUN,
    SPLIT_AB_RUN,
    graph_ab,
    handover_ab,
    pairs_ab,
    partial_tiles_ab,
    pdl_ab,
    split_ab,
)

# A model's assumption, not a measurement: the time from a load's issue to its data in shared
# memory when HBM streams at full rate, of the order of a microsecond on Hopper and Blackwell
# (the figure step 12's docstrings and decode_rule use for Little's law).
DRAM_LATENCY_US = 1.0

DECODE12_TAG = "_decode12.json"  # scripts/gpu_decode12.sh: bench --tag decode12
DECODE12_ORDERS = {"forward": DECODE12_TAG, "reversed": "_decode12_reversed.json"}  # its phases bench and reversed
DECODE12_STEPS = ("sm90/12", "sm90/11")
DECODE_STEPS = {"sm90": DECODE12_STEPS, "sm100": ("sm100/12", "sm100/11")}  # each card's run: the step, its parent
DECODE_RUN = {"sm90": "`scripts/gpu_decode12.sh OUT check bench` on a Hopper GPU",
              "sm100": "the B200 kit, `make b200 OUT=...`, once `sm100/12` passes its checks"}
GRAPH_KIND = "decode_graph"  # scripts/gpu_decode_graph.py
PDL_FIELDS = ("pdl", "prefetch_w", "launch_after_loads", "w_before_wait")  # the config's fields that exist only with pdl
BEHIND = 0.97  # cublas_wins lists the shapes below this ratio: the two orders of one run differ by up to ~3%
STEP_COLORS = {"sm90/12": MEASURED, "sm90/11": CTA_COLORS[1], "cuBLAS": CUBLAS}


# ---------------------------------------------------------------------------------------------
# the model: ridges and bytes in flight
# ---------------------------------------------------------------------------------------------


def ridge_points(card: hardware.Card) -> dict:
    """FLOP per byte where ``card``'s two roofs meet: ``"datasheet"`` (dense BF16 peak over HBM
    bandwidth, quoted) and ``"measured"`` (this workplace's 8192^3 product rate over its copy
    bandwidth; ``None`` where the card was not measured)."""
    measured = None
    if card.measured_bf16_tflops and card.measured_copy_tb_s:
        measured = card.measured_bf16_tflops / card.measured_copy_tb_s
    return {"datasheet": card.bf16_dense_tflops / card.hbm_tb_s, "measured": measured}


def littles_law_bytes(card: hardware.Card, latency_us: float = DRAM_LATENCY_US, measured: bool = True) -> float:
    """Bytes each SM must have requested and not yet received to stream at the card's bandwidth:
    bandwidth per SM x latency (Little's law). ``measured``: the copy bandwidth where taken, else
    the datasheet's."""
    tb_s = (card.measured_copy_tb_s if measured else None) or card.hbm_tb_s
    return tb_s * 1e12 / card.sms * latency_us * 1e-6


def attainable_tflops(intensity: float, peak_tflops: float, tb_s: float) -> float:
    """The roofline: min(peak, intensity x bandwidth)."""
    return min(peak_tflops, intensity * tb_s)


# ---------------------------------------------------------------------------------------------
# the rooflines
# ---------------------------------------------------------------------------------------------

_CARD_COLORS = (CTA_COLORS[0], CTA_COLORS[1], CTA_COLORS[2], CTA_COLORS[3])
_MARKERS = "osD^v<>ph*"


def rooflines(shapes: Sequence[tuple], cards: Sequence[hardware.Card] = (hardware.B200, hardware.H100_SXM, hardware.H200),
              title: str = "The memory roofline: decode-sized GEMMs on three cards") -> Figure:
    """Attainable TFLOP/s against FLOP per byte, log-log, for each card: the datasheet roof (solid)
    and, where the workplace measured the card, the measured roof (dashed), each ridge point marked.
    ``shapes``: ``[(label, GemmProblem), ...]`` placed at their arithmetic intensity
    (``problem.arithmetic_intensity``: A, B and C each moved once) on every card's datasheet roof."""
    shapes = list(shapes)
    ridges = {c.name: ridge_points(c) for c in cards}
    intensities = [p.arithmetic_intensity for _, p in shapes]
    all_x = intensities + [r for v in ridges.values() for r in v.values() if r]
    lo = 10 ** math.floor(math.log10(min(all_x) / 2))
    hi = 10 ** math.ceil(math.log10(max(all_x) * 3))
    x = np.logspace(math.log10(lo), math.log10(hi), 400)
    legend_rows = 2 * len(cards) + len(shapes)
    fig = new_figure(PAGE_WIDTH, 4.6 + 0.21 * legend_rows)
    ax = fig.add_subplot()
    for i, card in enumerate(cards):
        color = _CARD_COLORS[i % len(_CARD_COLORS)]
        r = ridges[card.name]
        ax.loglog(x, np.minimum(card.bf16_dense_tflops, x * card.hbm_tb_s), color=color, linewidth=2,
                  label=f"{card.name}, datasheet: {card.hbm_tb_s:g} TB/s, {card.bf16_dense_tflops:g} TFLOP/s; "
                        f"ridge {r['datasheet']:.0f} FLOP/B")
        ax.plot([r["datasheet"]], [card.bf16_dense_tflops], "o", color=color, markersize=7)
        if r["measured"]:
            ax.plot(x, np.minimum(card.measured_bf16_tflops, x * card.measured_copy_tb_s), color=color,
                    linestyle="--", linewidth=1.4,
                    label=f"{card.name}, measured: copy {card.measured_copy_tb_s:g} TB/s, product "
                          f"{card.measured_bf16_tflops:g} TFLOP/s; ridge {r['measured']:.0f} FLOP/B")
            ax.plot([r["measured"]], [card.measured_bf16_tflops], "o", color=color, markersize=7, fillstyle="none")
        else:
            ax.plot([], [], color=color, linestyle="--", linewidth=1.4, label=f"{card.name}, measured: not yet")
    for j, (label, problem) in enumerate(shapes):
        ai = problem.arithmetic_intensity
        marker = _MARKERS[j % len(_MARKERS)]
        ys = [attainable_tflops(ai, c.bf16_dense_tflops, c.hbm_tb_s) for c in cards]
        ax.plot([ai] * len(cards), ys, marker, color="black", markersize=7, fillstyle="none", linestyle="none",
                label=f"{label}: {ai:.1f} FLOP/B")
    ax.set_xlim(lo, hi)
    ax.set_xlabel("arithmetic intensity: FLOP per byte moved (A, B, C once)")
    ax.set_ylabel("attainable TFLOP/s")
    ax.grid(True, which="major", alpha=0.25)
    ax.set_title(wrap_title(title, 72), fontsize=TEXT_PT + 2)
    ax.legend(fontsize=TEXT_PT, loc="upper left", bbox_to_anchor=(0.0, -0.14), ncol=1, frameon=False)
    cards_text = "; ".join(f"{c.name}: {c.datasheet}" + (f", measured: {c.measured}" if c.measured else ", not measured here")
                           for c in cards)
    return set_caption(fig, "Each roof is min(peak, intensity x bandwidth); a filled dot marks a datasheet ridge, a "
                            "hollow one a measured ridge. The shapes sit on each card's datasheet roof: the most "
                            f"their bytes allow. A model from quoted and measured ceilings, not a timing. {cards_text}.",
                       alt="Log-log roofline plot")


# ---------------------------------------------------------------------------------------------
# the records
# ---------------------------------------------------------------------------------------------


def _newest_file(records: Sequence[dict]) -> list:
    if not records:
        return []
    newest = max(records, key=lambda r: (r.get("date", ""), r.get("_file", "")))["_file"]
    return [r for r in records if r.get("_file") == newest]


def decode_runs(records: Sequence[dict], steps: Sequence[str] = DECODE12_STEPS, order: str = "forward") -> list:
    """The newest step-12 decode run (``scripts/gpu_decode12.sh``): bench records of ``steps``
    from results files tagged ``decode12`` (``order="reversed"``: ``decode12_reversed``, the same
    shapes and steps in the other order), operands rotated out of L2, each with its ``bandwidth``;
    empty when no such run is recorded."""
    found = [r for r in records if r.get("step") in steps and r.get("_file", "").endswith(DECODE12_ORDERS[order])
             and r.get("rotation") and r.get("bandwidth")]
    return sorted(_newest_file(found), key=lambda r: (shape_of(r), steps.index(r["step"])))


def decode_gpus(records: Sequence[dict], steps: Sequence[str] = DECODE12_STEPS) -> list:
    """The GPUs with a decode run of ``steps`` (:func:`decode_runs`), the newest run's first: one table each."""
    found = [r for r in records if r.get("step") in steps and r.get("_file", "").endswith(DECODE12_TAG)
             and r.get("rotation") and r.get("bandwidth")]
    newest = {}
    for r in found:
        newest[r.get("gpu")] = max(newest.get(r.get("gpu"), ""), r.get("date", ""))
    return sorted(newest, key=lambda gpu: newest[gpu], reverse=True)


def graph_runs(records: Sequence[dict]) -> list:
    """The newest run of ``scripts/gpu_decode_graph.py`` (kind ``decode_graph``: a step and cuBLAS,
    each as launches captured in one CUDA graph); empty when none is recorded."""
    found = [r for r in records if r.get("kind") == GRAPH_KIND]
    return sorted(_newest_file(found), key=lambda r: (shape_of(r), r["step"]))


def _copy(runs: Sequence[dict]) -> Optional[float]:
    copies = [r["bandwidth"].get("copy_tb_s") for r in runs if r["bandwidth"].get("copy_tb_s")]
    return statistics.median(copies) if copies else None


def decode_bandwidth(records: Sequence[dict], title: str = "Decode-sized GEMMs: bytes over time, per M") -> Figure:
    """Bytes over time (the fewest bytes, A, B and C once, over the median time) of every shape of
    the newest decode run (:func:`decode_runs`), per M: ``sm90/12``, ``sm90/11`` and cuBLAS timed in
    the same rounds, each shape a dot and each provider's median over the shapes a line, against the
    copy bandwidth the run measured and the datasheet's HBM bandwidth."""
    runs = decode_runs(records)
    if not runs:
        return message_figure("No record yet: scripts/gpu_decode12.sh on a Hopper GPU writes them (tag decode12).",
                              "Step 12 against step 11 and cuBLAS, bytes over time: not measured yet.")
    ms = sorted({shape_of(r)[0] for r in runs})
    series = {"sm90/12": {}, "sm90/11": {}, "cuBLAS": {}}
    for r in runs:
        m = shape_of(r)[0]
        series[r["step"]].setdefault(m, []).append(r["bandwidth"]["tb_s"])
        if r["step"] == "sm90/12" or not any(o["step"] == "sm90/12" and shape_of(o) == shape_of(r) for o in runs):
            series["cuBLAS"].setdefault(m, []).append(r["bandwidth"]["cublas_tb_s"])
    fig = new_figure(PAGE_WIDTH, 4.6)
    ax = fig.add_subplot()
    pos = {m: i for i, m in enumerate(ms)}
    for k, (name, values) in enumerate(series.items()):
        if not values:
            continue
        offset = (k - 1) * 0.18
        xs = [pos[m] + offset for m in ms if m in values for _ in values[m]]
        ys = [v for m in ms if m in values for v in values[m]]
        ax.plot(xs, ys, ".", color=STEP_COLORS[name], alpha=0.55, markersize=6)
        ax.plot([pos[m] + offset for m in ms if m in values], [statistics.median(values[m]) for m in ms if m in values],
                "-o", color=STEP_COLORS[name], markersize=5, linewidth=1.6,
                label=f"{name} (median over shapes)" if name != "cuBLAS" else "cuBLAS, same rounds (median)")
    sheet = runs[0]["bandwidth"].get("datasheet_tb_s")
    copy = _copy(runs)
    if copy:
        ax.axhline(copy, color="grey", linestyle="--", linewidth=1.3, label=f"copy, measured in the run: {copy:.2f} TB/s")
    if sheet:
        ax.axhline(sheet, color="black", linewidth=1.2, label=f"datasheet HBM: {sheet:g} TB/s")
    ax.set_xticks(range(len(ms)), [str(m) for m in ms], fontsize=TEXT_PT)
    ax.set_xlabel("M (tokens)")
    ax.set_ylabel("TB/s: 2(MK + NK + MN) B / median time")
    ax.set_ylim(0, max([sheet or 0, copy or 0] + [v for s in series.values() for vs in s.values() for v in vs]) * 1.08)
    ax.grid(True, axis="y", alpha=0.25)
    ax.set_title(wrap_title(title, 72), fontsize=TEXT_PT + 2)
    ax.legend(fontsize=TEXT_PT, loc="upper left", bbox_to_anchor=(0.0, -0.16), ncol=2, frameon=False)
    nks = sorted({shape_of(r)[1:] for r in runs})
    return set_caption(fig, "Achieved bandwidth, the fewest bytes (A, B, C once) over the median time: a dot per weight "
                            "shape, a line per provider through its median over the shapes, against the copy bandwidth "
                            "measured in the same run (dashed) and the datasheet's HBM bandwidth (solid). "
                            f"{len(nks)} weight shapes (N x K: {', '.join(f'{n}x{k}' for n, k in nks)}) at each M; "
                            f"{provenance(runs[0])}; operands in turn over {runs[0]['rotation'].get('sets', '?')} sets, "
                            "so every launch reads DRAM.", alt="Dot and line plot of achieved bandwidth per M")


def graph_times(records: Sequence[dict], title: str = "Inside a CUDA graph: microseconds per GEMM") -> Figure:
    """The newest CUDA-graph run (:func:`graph_runs`): per shape, each step's time per GEMM and
    cuBLAS's, timed in the same rounds, each bar labelled with its share of the run's copy bandwidth."""
    runs = graph_runs(records)
    if not runs:
        return message_figure("No record yet: scripts/gpu_decode_graph.py on a Hopper GPU writes them (kind decode_graph).",
                              "Decode-sized GEMMs inside CUDA graphs: not measured yet.")
    shapes = sorted({shape_of(r) for r in runs})
    steps = sorted({r["step"] for r in runs}, key=lambda s: (s not in DECODE12_STEPS, DECODE12_STEPS.index(s)
                                                              if s in DECODE12_STEPS else 0, s))
    rows = []  # (label of the shape or "", provider, us, fraction of copy)
    for shape in shapes:
        here = {r["step"]: r for r in runs if shape_of(r) == shape}
        for step in steps:
            if step in here:
                b = here[step]["bandwidth"]
                rows.append((shape, step, here[step]["step_ms"] * 1e3, b.get("fraction_of_copy")))
        first = here[next(s for s in steps if s in here)]
        rows.append((shape, "cuBLAS", first["cublas_ms"] * 1e3, first["bandwidth"].get("cublas_fraction_of_copy")))
    height = 1.4 + 0.26 * len(rows)
    fig = new_figure(PAGE_WIDTH, height)
    ax = fig.add_subplot()
    y = np.arange(len(rows))
    colors = [STEP_COLORS.get(p, CTA_COLORS[4]) for _, p, _, _ in rows]
    bars = ax.barh(y, [us for _, _, us, _ in rows], 0.8, color=colors)
    ax.bar_label(bars, labels=[f"{f:.0%} of copy" if f else "" for _, _, _, f in rows], fontsize=TEXT_PT, padding=3)
    ax.set_yticks(y, [f"{'x'.join(map(str, s))} {p}" for s, p, _, _ in rows], fontsize=TEXT_PT)
    ax.invert_yaxis()
    ax.margins(x=0.25)
    ax.set_xlabel("microseconds per GEMM (median over rounds)")
    ax.set_title(wrap_title(title, 72), fontsize=TEXT_PT + 2)
    fig.legend(handles=[Line2D([], [], color=STEP_COLORS.get(p, CTA_COLORS[4]), linewidth=6, label=p)
                        for p in [*steps, "cuBLAS"]],
               fontsize=TEXT_PT, loc="outside lower center", ncol=3, frameon=False)  # under the x label, no gap
    r = runs[0]
    p = r.get("protocol", {})
    return set_caption(fig, "Time per GEMM, a graph's replay time over the launches it holds, for each step and cuBLAS "
                            "per shape, each bar labelled with the bandwidth it achieves (the fewest bytes over that time) "
                            f"as a share of the copy bandwidth; measured on {r.get('gpu')}, {r.get('date', '')[:10]}, "
                            f"torch {r.get('torch')} (cuBLAS), "
                            f"cutlass-dsl {r.get('cutlass_dsl')} ({r.get('_file', '')}); {p.get('launches_per_graph')} "
                            f"launches per graph over {p.get('sets')} operand sets, {p.get('replays')} replays, "
                            f"median of {p.get('rounds')} rounds; copy bandwidth measured in the same run.",
                       alt="Horizontal bar chart of microseconds per GEMM inside a CUDA graph")


def graph_pdl(records: Sequence[dict], title: str = "Inside a CUDA graph, the smallest layer: launched early or not") -> Figure:
    """Every CUDA-graph run (kind ``decode_graph``) on the newest run's GPU, at its smallest weight (the
    fewest bytes of W, where a launch's ramp-up and drain weigh most): per M, the share of the run's
    copy bandwidth that ``sm90/12`` reached in each run, with programmatic dependent launch (the
    config's ``pdl``) and without (runs before the option), and cuBLAS's in the same runs."""
    found = [r for r in records if r.get("kind") == GRAPH_KIND and r.get("bandwidth", {}).get("fraction_of_copy")
             and r.get("step", "").startswith("sm90/")]  # a Blackwell run (the B200 kit's) has no sm90/12 to draw
    newest = _newest_file(found)
    if not newest:
        return message_figure("No record yet: scripts/gpu_decode_graph.py on a Hopper GPU writes them (kind decode_graph).",
                              "Launched early or not, inside CUDA graphs: not measured yet.")
    gpu = newest[0].get("gpu")
    runs = [r for r in found if r.get("gpu") == gpu]
    n, k = min({shape_of(r)[1:] for r in runs}, key=lambda nk: (nk[0] * nk[1], nk))
    runs = [r for r in runs if shape_of(r)[1:] == (n, k)]
    ms = sorted({shape_of(r)[0] for r in runs})
    series = {"sm90/12 with pdl": {}, "sm90/12 without pdl": {}, "cuBLAS": {}}
    for r in runs:
        m = shape_of(r)[0]
        if r["step"] == "sm90/12":
            with_pdl = (r.get("config") or {}).get("pdl", False)
            series["sm90/12 with pdl" if with_pdl else "sm90/12 without pdl"].setdefault(m, []).append(
                r["bandwidth"]["fraction_of_copy"])
            series["cuBLAS"].setdefault(m, []).append(r["bandwidth"]["cublas_fraction_of_copy"])
    colors = {"sm90/12 with pdl": STEP_COLORS["sm90/12"], "sm90/12 without pdl": CTA_COLORS[4],
              "cuBLAS": STEP_COLORS["cuBLAS"]}
    fig = new_figure(PAGE_WIDTH, 4.2)
    ax = fig.add_subplot()
    pos = {m: i for i, m in enumerate(ms)}
    for j, (name, values) in enumerate(series.items()):
        if not values:
            continue
        offset = (j - 1) * 0.22
        xs = [pos[m] + offset for m in ms if m in values for _ in values[m]]
        ys = [100 * v for m in ms if m in values for v in values[m]]
        ax.plot(xs, ys, "o", color=colors[name], alpha=0.8, markersize=6, label=name)
    ax.axhline(100, color="grey", linestyle="--", linewidth=1.3, label="copy bandwidth measured in each run")
    ax.set_xticks(range(len(ms)), [str(m) for m in ms], fontsize=TEXT_PT)
    ax.set_xlabel(f"M (tokens), W {n} x {k}")
    ax.set_ylabel("% of the copy bandwidth")
    ax.set_ylim(0, 108)
    ax.grid(True, axis="y", alpha=0.25)
    ax.set_title(wrap_title(title, 72), fontsize=TEXT_PT + 2)
    ax.legend(fontsize=TEXT_PT, loc="upper left", bbox_to_anchor=(0.0, -0.16), ncol=2, frameon=False)
    files = sorted({os.path.basename(r.get("_file", "")) for r in runs})
    # where a run without pdl had the very tile of a run with it (configs equal but for PDL_FIELDS)
    def tiles(m, with_pdl):
        return {tuple(sorted((f, v) for f, v in (r.get("config") or {}).items() if f not in PDL_FIELDS)) for r in runs
                if r["step"] == "sm90/12" and shape_of(r)[0] == m and (r.get("config") or {}).get("pdl", False) == with_pdl}
    same = [str(m) for m in ms if tiles(m, True) & tiles(m, False)]
    other = [str(m) for m in ms if tiles(m, True) and tiles(m, False) and not tiles(m, True) & tiles(m, False)]
    differ = (f" At M = {', '.join(same)} a run without pdl had the same tile as the runs with it" if same else "") + (
        f"{'; at' if same else ' At'} M = {', '.join(other)} the tile differs too (the rule changed between runs)" if other
        else "") + ("." if same or other else "")
    return set_caption(fig, f"A dot per graph run and M at the {n} x {k} weight: the bandwidth sm90/12 achieved (the fewest "
                            "bytes over its time per GEMM inside a replayed CUDA graph) as a share of the copy bandwidth "
                            "measured in that run, with programmatic dependent launch (pdl in the record's config) and "
                            f"without it, and cuBLAS's in the same runs; on {gpu}, runs {', '.join(files)}.{differ}",
                       alt="Dot plot of the share of copy bandwidth per M, with and without pdl")


def decode_table(records: Sequence[dict], arch: str = "sm90") -> str:
    """A Markdown table of ``arch``'s newest decode run per M: for its step 12 and step 11
    (``DECODE_STEPS``), the geometric mean of the ratio to cuBLAS (its own rounds), the lowest, the
    median share of the run's copy bandwidth, and the same geometric mean in the run of the other
    order on the same GPU (the same shapes, ``decode_runs(order="reversed")``; "-" without one); a sentence naming
    what writes the run (``DECODE_RUN``) when there is none."""
    steps = DECODE_STEPS[arch]
    runs = decode_runs(records, steps)
    if not runs:
        return f"No record yet of {steps[0]}'s decode run ({DECODE_RUN[arch]}; tag decode12)."
    same_gpu = [r for r in records if r.get("gpu") == runs[0].get("gpu")]  # another card's run is no other order
    other = {(r["step"], shape_of(r)): r["ratio_to_cublas"] for r in decode_runs(same_gpu, steps, order="reversed")}
    rows = ["| M | shapes | step | geomean of cuBLAS / step time | lowest | median share of copy bandwidth | cuBLAS's "
            "| the other order's geomean |", "|---:|---:|---|---:|---:|---:|---:|---:|"]
    for m in sorted({shape_of(r)[0] for r in runs}):
        for step in steps:
            these = [r for r in runs if r["step"] == step and shape_of(r)[0] == m]
            if not these:
                continue
            ratios = [r["ratio_to_cublas"] for r in these]
            share = [r["bandwidth"]["fraction_of_copy"] for r in these if r["bandwidth"].get("fraction_of_copy")]
            theirs = [r["bandwidth"]["cublas_fraction_of_copy"] for r in these if r["bandwidth"].get("cublas_fraction_of_copy")]
            shares = (f"{statistics.median(share):.0%} | {statistics.median(theirs):.0%}" if share and theirs else "- | -")
            reversed_ = [other[step, shape_of(r)] for r in these if (step, shape_of(r)) in other]
            again = f"{geomean(reversed_):.3f} ({len(reversed_)} shapes)" if reversed_ else "-"
            rows.append(f"| {m} | {len(these)} | {step} | {geomean(ratios):.3f} | {min(ratios):.3f} | {shares} | {again} |")
    return "\n".join(rows) + f"\n\n{provenance(runs[0])}."


def two_floors(records: Sequence[dict], card: Optional[hardware.Card] = None,
               title: str = "Two floors per layer: W's bytes and the busiest CTA's MMAs") -> Figure:
    """Per layer of the decode run (``sweep_shapes.DECODE12_LAYERS``), a panel over M: the model's two
    floors for step 12's launch, its bytes at the copy bandwidth and its busiest CTA's MMAs at the
    card's product rate per SM (``teaching.decode_explorer``), beside the newest decode run's median
    times of ``sm90/12`` and cuBLAS where recorded. The launch is the recorded run's config where there
    is one, else today's ``config_for``; the card and copy bandwidth are the run's (an H100 SXM and its
    measured copy without a run)."""
    from ..measure.sweep_shapes import DECODE12_LAYERS, DECODE12_MS
    from ..runtime import ladder
    from ..teaching.decode_explorer import layout, mma_floor_us

    runs = {shape_of(r): r for r in decode_runs(records, steps=("sm90/12",))}
    first = next(iter(runs.values()), None)
    card = card or (hardware.card(first.get("gpu")) if first else None) or hardware.H100_SXM
    copy = (_copy(list(runs.values())) if runs else None) or card.measured_copy_tb_s
    step = ladder.get("sm90/12")
    fig = new_figure(PAGE_WIDTH, 5.6)
    axes = fig.subplots(2, 3).ravel()
    xs = list(range(len(DECODE12_MS)))
    for ax, (n, k) in zip(axes, DECODE12_LAYERS):
        bytes_us, mma_us, ours, theirs = [], [], {}, {}
        for i, m in enumerate(DECODE12_MS):
            r = runs.get((m, n, k))
            config = _record_config(r) if r else step.config_for(GemmProblem(m, n, k))
            lay = layout("sm90/12", m, n, k, config=config)
            bytes_us.append((GemmProblem(m, n, k).min_bytes + lay.partial_bytes) / (copy * 1e12) * 1e6)
            mma_us.append(mma_floor_us(lay, card))
            if r:
                ours[i], theirs[i] = r["time_ms"]["median"] * 1e3, r["cublas_time_ms"]["median"] * 1e3
        ax.plot(xs, bytes_us, "--", color="grey", linewidth=1.5, label=f"bytes at {copy:.2f} TB/s (model)")
        ax.plot(xs, mma_us, ":", color=CTA_COLORS[1], linewidth=2.0, label="busiest CTA's MMAs (model)")
        if ours:
            ax.plot(list(ours), list(ours.values()), "o", color=STEP_COLORS["sm90/12"], markersize=5, label="sm90/12, measured")
            ax.plot(list(theirs), list(theirs.values()), "x", color=STEP_COLORS["cuBLAS"], markersize=6,
                    label="cuBLAS, same rounds")
        ax.set_title(f"{n} x {k}", fontsize=TEXT_PT + 1)
        ax.set_xticks(xs, [str(m) for m in DECODE12_MS], fontsize=TEXT_PT)
        ax.tick_params(axis="y", labelsize=TEXT_PT)
        ax.set_ylim(0, max(bytes_us + mma_us + list(ours.values()) + list(theirs.values())) * 1.1)
        ax.grid(True, axis="y", alpha=0.25)
    for ax in axes[3:5]:
        ax.set_xlabel("M (tokens)", fontsize=TEXT_PT)
    for ax in axes[::3]:
        ax.set_ylabel("us", fontsize=TEXT_PT)
    handles, labels = axes[0].get_legend_handles_labels()
    axes[-1].axis("off")
    axes[-1].legend(handles, labels, fontsize=TEXT_PT, loc="center", frameon=False)
    fig.suptitle(wrap_title(title, 72), fontsize=TEXT_PT + 2)
    where = provenance(first) if first else "no decode run recorded yet: the model alone, for today's config_for"
    return set_caption(fig, f"A model and, where recorded, a measurement. Per layer (N x K) and M, the launch step 12 "
                            f"ran (else picks today): its bytes, W, x and y once plus any partial sums, at the copy "
                            f"bandwidth, and its busiest CTA's MMAs at the {card.name}'s measured product rate "
                            f"({card.measured_bf16_tflops:g} TFLOP/s) shared by its {card.sms} SMs. Where the dotted line "
                            f"passes the dashed one, the launch is bound by its MMAs, not by W. Times {where}.",
                       alt="Small multiples of model floors and measured times per M")


def _record_config(record: dict):
    """The step's frozen Config that ``record`` ran, keeping only the fields the step's Config has."""
    from ..runtime import ladder

    step = ladder.get(record["step"])
    fields = set(step.config_fields())
    return step.config(**{f: v for f, v in (record.get("config") or {}).items() if f in fields})


def cublas_wins(records: Sequence[dict], kernel_records: Sequence[dict]) -> str:
    """A Markdown table of the shapes of the newest decode run where cuBLAS was faster than
    ``sm90/12`` by more than ``1 - BEHIND`` (slowest first): the ratio and both medians; step 12's
    launch as the run's config plans it (``teaching.decode_explorer.layout``, W's rows first as
    cuBLAS names them); two floors of a model for that launch, its bytes at the run's measured copy
    bandwidth and its busiest CTA's MMAs at the card's measured product rate per SM
    (``decode_explorer.mma_floor_us``); and the kernel cuBLAS ran, from the newest ``cublas_kernels``
    record of that shape on the run's GPU (``scripts/cublas_kernels.py --out``; "not listed" without
    one). A sentence when there is no run or no such shape."""
    from ..kernels.sm90.step08_persistent import max_clusters
    from ..measure import cublas_kernels
    from ..teaching.decode_explorer import layout, mma_floor_us

    runs = decode_runs(records, steps=("sm90/12",))
    if not runs:
        return "No record yet of step 12's decode run (`scripts/gpu_decode12.sh OUT check bench` on a Hopper GPU, tag decode12)."
    behind = sorted((r for r in runs if r["ratio_to_cublas"] < BEHIND), key=lambda r: r["ratio_to_cublas"])
    close = sum(BEHIND <= r["ratio_to_cublas"] < 1.0 for r in runs)
    if not behind:
        return (f"cuBLAS was faster by more than {1 - BEHIND:.0%} on no shape of the newest decode run "
                f"({close} shapes at {BEHIND} to 1; {provenance(runs[0])}).")
    kernels = cublas_kernels.newest_per_shape(kernel_records, gpu=runs[0].get("gpu"))
    card = hardware.card(runs[0].get("gpu")) or hardware.DEFAULT_CARD["sm_90a"]
    rows = ["| M x N x K | cuBLAS time / step 12's | us: step 12, cuBLAS | step 12: tile (W rows x tokens), cluster, "
            f"cluster-tiles on clusters, CTAs (of {max_clusters(1)} SMs), stages, parts per tile | model, us: bytes at the "
            "copy bandwidth, busiest CTA's MMAs | cuBLAS: tile (W rows x tokens), stages x K, cluster, K |",
            "|---|---:|---:|---|---:|---|"]
    files = set()
    for r in behind:
        shape = shape_of(r)
        config = _record_config(r)
        lay = layout("sm90/12", *shape, config=config)
        w = (lay.tile_m, lay.tile_n, *lay.cluster) if lay.swapped else (lay.tile_n, lay.tile_m, *lay.cluster[::-1])
        ours = f"{w[0]} x {w[1]}, {w[2]} x {w[3]}, {lay.tiles} on {lay.clusters}, {lay.ctas}, {config.stages}, {lay.parts}"
        copy = r["bandwidth"].get("copy_tb_s") or card.measured_copy_tb_s
        bytes_us = (GemmProblem(*shape).min_bytes + lay.partial_bytes) / (copy * 1e12) * 1e6
        times = f"{r['time_ms']['median'] * 1e3:.1f}, {r['cublas_time_ms']['median'] * 1e3:.1f}"
        found = kernels.get(shape)
        if found:
            files.add(found.get("_file", ""))
        theirs = cublas_kernels.summary(cublas_kernels.main_kernel(found["kernels"])) if found else "not listed"
        rows.append(f"| {'x'.join(map(str, shape))} | {r['ratio_to_cublas']:.3f} | {times} | {ours} | "
                    f"{bytes_us:.1f}, {mma_floor_us(lay, card):.1f} | {theirs} |")
    kernels_from = (f" cuBLAS's kernels: {', '.join(sorted(files))}." if files else
                    " No record yet of cuBLAS's kernels on this GPU at these shapes (`scripts/cublas_kernels.py --out`, "
                    "which `scripts/gpu_decode12.sh`'s graphs phase runs).")
    return "\n".join(rows) + (f"\n\n{close} more shapes at {BEHIND} to 1. The timings: {provenance(runs[0])}. The MMA "
                              f"floor takes {card.name}'s measured product rate, {card.measured_bf16_tflops:g} TFLOP/s, "
                              f"shared by its {card.sms} SMs.{kernels_from}")


def headline(records: Sequence[dict]) -> Optional[dict]:
    """The chapter's headline from the newest decode run: for ``sm90/12``, the geometric mean of its
    ratio to cuBLAS and of its speed-up over ``sm90/11`` (same shapes, same run), and the median
    share of the copy bandwidth at M <= 64; None without a run."""
    runs = decode_runs(records)
    twelve = {shape_of(r): r for r in runs if r["step"] == "sm90/12"}
    eleven = {shape_of(r): r for r in runs if r["step"] == "sm90/11"}
    if not twelve:
        return None
    both = [s for s in twelve if s in eleven]
    small = [r["bandwidth"]["fraction_of_copy"] for s, r in twelve.items()
             if s[0] <= 64 and r["bandwidth"].get("fraction_of_copy")]
    speedup = geomean(eleven[s]["time_ms"]["median"] / twelve[s]["time_ms"]["median"] for s in both) if both else None
    return {"shapes": len(twelve), "gpu": runs[0].get("gpu"), "file": runs[0].get("_file"),
            "to_cublas": geomean(r["ratio_to_cublas"] for r in twelve.values()),
            "over_step11": speedup,
            "copy_share_small_m": statistics.median(small) if small else None}


def problems(ms: Iterable[int], n: int, k: int) -> list:
    """``[(label, GemmProblem(m, n, k))]`` for each M: the decode shapes a figure places."""
    return [(f"M = {m}, {n} x {k}", GemmProblem(m, n, k)) for m in ms]
