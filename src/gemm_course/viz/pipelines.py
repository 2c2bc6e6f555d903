"""Events over time inside one SM or one launch: the K loop's protocol, the epilogue's path, the
shared-memory stages (a model), accumulators in tensor memory (a model), and a measured launch."""

from __future__ import annotations

import textwrap
from typing import Sequence

import numpy as np
from matplotlib import colormaps
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle

from ..measure.records import shape_of
from ._style import PAGE_WIDTH, TEXT_PT, new_figure, set_caption, wrap_title


def k_loop_schedule(arch: str, mma_per_tile: int, tma_per_tile: int, tma_bytes: int, k_tiles: int = 2,
                    mma_name: str = "") -> Figure:
    """The order of events in one-stage K loops (steps 2-3), per actor, as a schematic (not to scale).

    The counts come from the caller, read from the compiled kernel (PTX/SASS) and its config:
    ``mma_per_tile`` MMA instructions and ``tma_per_tile`` TMA copies per K tile, ``tma_bytes``
    expected by the barrier per K tile.
    """
    if arch == "sm90":
        mma = mma_name or "wgmma"
        lanes = ["warp 0: TMA issue", "mbarrier (full)", f"warpgroup: {mma}", "all 128 threads"]
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
                events.append((2, x, 0.9, f"k-block {j}", "mma"))
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
    # Time runs down the page (0.3 inch per unit of the schematic), one column per actor.
    unit, col_w = 0.3, 1.0
    fig = new_figure(PAGE_WIDTH, t * unit + 1.9)
    ax = fig.add_subplot()
    for lane, start, width, text, kind in events:
        ax.add_patch(Rectangle((lane + 0.03, start), col_w * 0.94, width * 0.97, facecolor=colors[kind],
                               edgecolor="black", linewidth=0.6))
        ax.text(lane + 0.5, start + width / 2, text.replace("\n", " ") if width < 1.2 else text, ha="center",
                va="center", fontsize=TEXT_PT, linespacing=1.05)
    ax.set_ylim(t + 0.2, -0.2)
    ax.set_xlim(0, len(lanes))
    ax.xaxis.tick_top()
    ax.set_xticks([i + 0.5 for i in range(len(lanes))], [textwrap.fill(name, 18) for name in lanes])
    ax.tick_params(labelsize=TEXT_PT, length=0)
    ax.set_yticks([])
    ax.set_ylabel("order of events, top to bottom (schematic, not to scale)")
    for x in range(1, len(lanes)):
        ax.axvline(x, color="#dddddd", linewidth=0.8, zorder=0)
    ax.set_title(f"One-stage K loop, {k_tiles} K tiles: nothing overlaps", fontsize=TEXT_PT + 2)
    return set_caption(fig, "Counts per K tile read from the compiled kernel: "
                            f"{tma_per_tile} TMA copies, {mma_per_tile} MMA instructions, {tma_bytes} bytes expected "
                            "by the barrier. Heights are not durations.", alt="Schematic timeline, one column per actor")


def epilogue_path(tile_m: int, tile_n: int, epi_m: int, epi_n: int, epi_stages: int, threads: int,
                  stmatrix: int, tma_stores: int, title: str = "", tmem_load: str = "") -> Figure:
    """The step-4 epilogue: the CTA's accumulator tile cut into ``epi_m x epi_n`` sub-tiles (top),
    and the path each sub-tile takes (bottom): registers -> stmatrix -> staging buffer -> TMA store.

    All inputs come from the caller, read from the kernel: the tile and sub-tile shapes and the
    number of staging buffers from the traced shared-memory layout, ``stmatrix`` (per thread) and
    ``tma_stores`` (per tile) from the PTX. ``tmem_load``: on Blackwell, the ``tcgen05.ld`` shape
    that brings each sub-tile from tensor memory into registers (e.g. ``"16x256b"``); the path
    then starts in tensor memory.
    """
    if tile_n % epi_n or tile_m != epi_m:
        raise ValueError(f"sub-tiles of {epi_m}x{epi_n} do not cover the {tile_m}x{tile_n} tile in one row")
    subtiles = tile_n // epi_n
    per_thread = tile_m * tile_n // threads
    per_sub = stmatrix / subtiles
    buffer_kib = epi_m * epi_n * 2 / 1024
    first = (("tensor memory", f"fp32 accumulator: {tile_m} lanes x {tile_n} columns; tcgen05.ld.{tmem_load} brings\n"
                               f"{epi_m * epi_n // threads} values per thread per sub-tile into registers", "#e6dcf5")
             if tmem_load else
             ("registers", f"fp32 accumulator: {per_thread} values per thread ({threads} threads)", "#cde4f7"))
    boxes = [
        first,
        ("registers", f"convert to bf16: {epi_m * epi_n // threads} values per thread per sub-tile", "#cde4f7"),
        ("stmatrix", f"four 8x8 matrices per warp instruction; {per_sub:g} per thread per sub-tile", "#fde0c5"),
        ("shared memory", f"staging buffer of {epi_m}x{epi_n} bf16 = {buffer_kib:g} KiB ({epi_stages} buffers)", "#fde0c5"),
        ("fence, barrier", "fence.proxy.async + named barrier: the writes become visible\nto the copy engine", "#eeeeee"),
        ("TMA store", f"one thread issues a bulk tensor copy, shared -> global ({tma_stores} per tile)", "#d5f0d5"),
        ("global memory", f"C in L2 / HBM: {epi_n * 2} contiguous bytes per row ({epi_n * 2 // 32} full 32-byte "
                          "sectors),\nclipped at the edges", "#d5f0d5"),
    ]
    box_h, pitch = 0.5, 0.68  # inches
    path_h = pitch * len(boxes) + 0.5
    fig = new_figure(PAGE_WIDTH, 1.9 + path_h + 1.0)
    top, bottom = fig.subplots(2, 1, height_ratios=[1.9, path_h])
    colors = colormaps["Pastel1"].colors
    for i in range(subtiles):
        buf = i % epi_stages
        top.add_patch(Rectangle((i * epi_n, 0), epi_n, tile_m, facecolor=colors[buf % len(colors)], edgecolor="black"))
        top.text(i * epi_n + epi_n / 2, tile_m / 2, f"sub-tile {i}\n{epi_m}x{epi_n}\nbuffer {buf}\nstore {i}",
                 ha="center", va="center", fontsize=TEXT_PT, linespacing=1.1)
    top.set_xlim(-2, tile_n + 2)
    top.set_ylim(tile_m + 2, -2)
    top.set_xticks([i * epi_n for i in range(subtiles + 1)])
    top.set_yticks([0, tile_m])
    top.tick_params(labelsize=TEXT_PT)
    top.set_xlabel("column of the CTA's output tile (N); not to scale")
    top.set_ylabel("row (M)")
    top.set_title(f"The {tile_m}x{tile_n} output tile in {subtiles} sub-tiles of {epi_m}x{epi_n}, round-robin over "
                  f"{epi_stages} staging buffer{'s' if epi_stages > 1 else ''}", fontsize=TEXT_PT + 1, loc="left")

    n = len(boxes)
    across = bottom.get_yaxis_transform()  # x: fraction of the axes' width, y: inches down the path
    for i, (head, body, color) in enumerate(boxes):
        y = i * pitch
        bottom.add_patch(Rectangle((0.0, y), 0.95, box_h, transform=across, facecolor=color, edgecolor="black"))
        bottom.text(0.015, y + box_h / 2, head, transform=across, ha="left", va="center", fontsize=TEXT_PT,
                    fontweight="bold")
        bottom.text(0.22, y + box_h / 2, body, transform=across, ha="left", va="center", fontsize=TEXT_PT,
                    linespacing=1.1)
        if i < n - 1:
            bottom.annotate("", xy=(0.1, y + pitch), xytext=(0.1, y + box_h), xycoords=across, textcoords=across,
                            arrowprops={"arrowstyle": "->", "linewidth": 1.5})
    first, last = pitch + box_h / 2, (n - 1) * pitch + box_h / 2  # from the last box back to the conversion
    bottom.plot([0.95, 0.98, 0.98], [last, last, first], transform=across, color="#555555", linestyle="--",
                linewidth=1.2, clip_on=False)
    bottom.annotate("", xy=(0.95, first), xytext=(0.98, first), xycoords=across, textcoords=across,
                    arrowprops={"arrowstyle": "->", "linestyle": "--", "color": "#555555"})
    bottom.text(0.0, n * pitch - pitch + box_h + 0.1, textwrap.fill(
        f"Repeated for each of the {subtiles} sub-tiles (dashed arrow); a buffer is refilled only once its previous "
        "store has read it.", 88), transform=across, ha="left", va="top", fontsize=TEXT_PT, color="#555555")
    bottom.set_ylim(n * pitch + 0.45, -0.05)
    bottom.axis("off")
    bottom.set_title("The path of one sub-tile", fontsize=TEXT_PT + 1, loc="left")
    start = "tensor memory -> registers" if tmem_load else "registers"
    fig.suptitle(wrap_title(title or f"Step 4's epilogue: {start} -> stmatrix -> staging buffer -> TMA store", 72),
                 fontsize=TEXT_PT + 2)
    return set_caption(fig, f"Sub-tile shape and buffer count from the kernel's traced staging layout; {stmatrix} "
                            f"stmatrix per thread and {tma_stores} TMA stores per tile counted in its PTX "
                            f"({per_sub:g} stmatrix per thread per sub-tile).", alt="Diagram of a tile and a data path")


MMA_ROLES = {  # (the MMA instruction, the bottom row's label) per architecture
    "sm90": ("wgmma", "consumers:\nwgmma,\nepilogue"),
    "sm100": ("tcgen05.mma", "one MMA warp:\ntcgen05.mma;\nepilogue\nwarps"),
}


def pipeline_timeline(models: dict, title: str = "Shared-memory stages and tensor cores over time (schematic model)",
                      arch: str = "sm90") -> Figure:
    """``models = {label: pipeline_model(...)}``, one panel each, on a common time axis.

    One row per shared-memory stage: light while a TMA load is in flight into it, dark while it
    holds a landed K tile until the consumers release it. Below, the consumers: the MMAs of each
    K tile (colored by the stage it reads) and the epilogues, named for ``arch`` (:data:`MMA_ROLES`:
    Hopper's consumer warpgroups issue wgmma; on Blackwell one MMA warp issues tcgen05.mma and
    epilogue warps of their own read tensor memory).
    """
    mma_name, consumer_label = MMA_ROLES[arch]
    span = max(m["span"] for m in models.values())
    stage_colors = [colormaps["tab10"].colors[i] for i in range(10)]
    heights = [m["params"]["stages"] + 1.6 for m in models.values()]
    fig = new_figure(PAGE_WIDTH, 0.36 * sum(heights) + 0.75 * len(models) + 1.4)
    axes = np.atleast_1d(fig.subplots(len(models), 1, sharex=True, height_ratios=heights))
    per_unit = 5.5 / span  # inches per model unit, roughly: a label is drawn only in a box that holds it

    def fits(text, width):
        return width * per_unit >= 0.075 * max(len(line) for line in text.split("\n")) + 0.06

    for ax, (label, model) in zip(axes, models.items()):
        p = model["params"]
        stages = p["stages"]
        several = p["tiles_per_cta"] * p["ctas"] > 1
        loads = [e for e in model["events"] if e["kind"] == "load"]
        mmas = [e for e in model["events"] if e["kind"] == "mma"]
        for ld, mm in zip(loads, mmas):  # the j-th load feeds the j-th K tile's MMAs
            y = stages - ld["stage"]
            color = stage_colors[ld["stage"] % 10]
            name = (f"t{ld['cta'] * p['tiles_per_cta'] + ld['tile']} " if several else "") + ld["label"]
            ax.add_patch(Rectangle((ld["start"], y - 0.32), ld["end"] - ld["start"], 0.64, facecolor=color, alpha=0.3,
                                   edgecolor="black", linewidth=0.4))
            ax.add_patch(Rectangle((ld["end"], y - 0.32), mm["end"] - ld["end"], 0.64, facecolor=color, alpha=0.85,
                                   edgecolor="black", linewidth=0.4))
            if fits(name, ld["end"] - ld["start"]):
                ax.text((ld["start"] + ld["end"]) / 2, y, name, ha="center", va="center", fontsize=TEXT_PT)
        for e in model["events"]:
            if e["lane"] != "consumer":
                continue
            epi = e["kind"] == "epilogue"
            ax.add_patch(Rectangle((e["start"], -0.35), e["end"] - e["start"], 0.7,
                                   facecolor="#bbbbbb" if epi else stage_colors[e["stage"] % 10],
                                   hatch="//" if epi else None, edgecolor="black", linewidth=0.5))
            if fits(e["label"], e["end"] - e["start"]):
                ax.text((e["start"] + e["end"]) / 2, 0, e["label"], ha="center", va="center",
                        fontsize=TEXT_PT, color="black" if epi else "white")
        for end in model["cta_ends"]:
            ax.axvline(end, color="black", linestyle="--", linewidth=1)
            ax.text(end, stages + 0.55, " next CTA starts", fontsize=TEXT_PT, va="center")
        ax.set_yticks(list(range(stages, 0, -1)) + [0])
        ax.set_yticklabels([f"stage {s}" for s in range(stages)] + [consumer_label], fontsize=TEXT_PT)
        ax.tick_params(labelsize=TEXT_PT)
        ax.set_ylim(-0.6, stages + 0.9)
        ax.set_title(f"{label}: {stages} stage{'s' if stages > 1 else ''}, {p['k_tiles']} K tiles per tile, "
                     f"{p['tiles_per_cta']} tile{'s' if p['tiles_per_cta'] > 1 else ''} per CTA x {p['ctas']} "
                     f"CTA{'s' if p['ctas'] > 1 else ''};\nin this model the tensor cores are busy "
                     f"{model['mma_busy']:.0%} of the time", fontsize=TEXT_PT, loc="left")
    axes[-1].set_xlim(0, span * 1.01)
    axes[-1].set_xlabel("time (model units: not measured)")
    handles = [Patch(facecolor="#999999", alpha=0.3, edgecolor="black", label="TMA load in flight into the stage"),
               Patch(facecolor="#999999", alpha=0.85, edgecolor="black", label="stage full until released"),
               Patch(facecolor="#bbbbbb", hatch="//", edgecolor="black", label="epilogue")]
    # a figure legend under the time axis: constrained layout keeps it clear of every panel's title and label
    fig.legend(handles=handles, fontsize=TEXT_PT, loc="outside lower center", ncol=3, frameon=False)
    fig.suptitle(wrap_title(title, 72), fontsize=TEXT_PT + 2)
    p = next(iter(models.values()))["params"]
    return set_caption(fig, "A schematic from gemm_course.teaching.sim.pipeline_model, not a measurement: the stage counts, K tiles "
                            f"and tiles per CTA follow the configs; the durations are made up (a load takes {p['load']:g} "
                            f"units from issue to landing, a K tile's {mma_name} {p['mma']:g}, an epilogue {p['epilogue']:g}). "
                            "Colour = stage; " + ("t<i> k<j>: K tile j of output tile i (numbered over the CTAs)."
                                                  if any(m["params"]["tiles_per_cta"] * m["params"]["ctas"] > 1
                                                         for m in models.values()) else "k<j>: K tile j of the tile."),
                       alt="Schematic timeline")


def format_duration(value: float) -> str:
    """A modelled duration as figures and prose print it: one decimal below 100, none above
    (``39.3142`` -> ``'39.3'``, ``412.7`` -> ``'413'``)."""
    return f"{value:.1f}" if abs(value) < 100 else f"{value:.0f}"


def tmem_timeline(plans: dict, title: str = "Accumulators in tensor memory over time (model)",
                  unit: str = "model units") -> Figure:
    """``plans = {label: gemm_course.teaching.sim.TmemPlan}``, one panel each: TMEM columns (up) against time.

    Each accumulator stage is a band of ``tile_n`` columns; a solid bar while the MMA warp writes
    tile t into it, a hatched bar while the epilogue reads it. Bars of one stage never overlap.
    ``unit``: what the plans' durations are in (``"us"`` where they come from a rate); each
    panel's span is printed with :func:`format_duration`."""
    span = max(p.span for p in plans.values())
    fig = new_figure(PAGE_WIDTH, 1.4 + 1.5 * len(plans))
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
                    ha="center", va="center", fontsize=TEXT_PT)
        ax.set_ylim(0, max(plan.allocated, plan.acc_stages * plan.tile_n))
        ax.set_yticks([plan.columns(s)[0] for s in range(plan.acc_stages)] + [plan.allocated])
        ax.tick_params(labelsize=TEXT_PT)
        ax.set_ylabel("TMEM column", fontsize=TEXT_PT)
        ax.set_title(f"{label}: {plan.acc_stages} x {plan.tile_n} columns ({plan.allocated} allocated); "
                     f"{len(plan.of('mma'))} tiles take {format_duration(plan.span)} {unit}", fontsize=TEXT_PT + 1, loc="left")
    axes[-1].set_xlim(0, span * 1.01)
    axes[-1].set_xlabel(f"time ({unit}, modelled, not measured)", fontsize=TEXT_PT)
    fig.suptitle(title, fontsize=TEXT_PT + 1)
    return set_caption(fig, "From gemm_course.teaching.sim.tmem_plan: tile t uses stage t mod acc_stages; solid: "
                            "the MMA warp writes the stage, hatched: the epilogue reads it. With one stage "
                            "the next tile's MMAs wait for the epilogue; with two they overlap it.", alt="Timeline of tensor-memory columns")


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
    shapes = sorted({shape_of(r) for r in records}, key=lambda s: s[0] * s[1] * s[2])
    fig = new_figure(PAGE_WIDTH, 1.9 + 0.5 * len(records) + 0.6 * len(shapes))
    axes = fig.subplots(len(shapes), 1, squeeze=False)[:, 0]
    for ax, shape in zip(axes, shapes):
        rows = [r for r in records if shape_of(r) == shape]
        for y, r in enumerate(rows):
            points = r["points_us"]
            for (label, start, end), color in zip(TIMELINE_PHASES, _PHASE_COLORS):
                t0, t1 = (points[start] if start else 0.0), points[end]
                ax.barh(y, t1 - t0, left=t0, height=0.6, color=color, label=label if y == 0 else None)
                if label.startswith("main"):
                    ax.text((t0 + t1) / 2, y, f"{(t1 - t0) / r['last_exit_us']:.0%}", ha="center", va="center",
                            fontsize=TEXT_PT, color="white")
            ax.barh(y, r["last_exit_us"] - points["exit"], left=points["exit"], height=0.6, color="white",
                    edgecolor="#333333", hatch="///", label="slowest CTA's extra" if y == 0 else None)
            ax.text(r["last_exit_us"], y, f"  {r['last_exit_us']:.1f} us", va="center", fontsize=TEXT_PT)
        ax.set_yticks(range(len(rows)))
        ax.set_yticklabels([r["step"] for r in rows], fontsize=TEXT_PT)
        ax.tick_params(labelsize=TEXT_PT)
        ax.invert_yaxis()
        ax.set_xlim(0, max(r["last_exit_us"] for r in rows) * 1.16)
        ax.set_title(f"{shape[0]}x{shape[1]}x{shape[2]}", fontsize=TEXT_PT + 1, loc="left")
        ax.set_xlabel("us from the first CTA's entry", fontsize=TEXT_PT)
    axes[0].legend(fontsize=TEXT_PT, loc="lower left", bbox_to_anchor=(0.0, 1.12), ncol=3, frameon=False,
                   borderaxespad=0.2)
    fig.suptitle(wrap_title(title, 72), fontsize=TEXT_PT + 2)
    first = records[0]
    return set_caption(fig, f"scripts/gpu_timeline.py on {first.get('gpu')}, {first.get('date', '')[:10]}: one thread "
                            "per CTA writes %globaltimer at fixed points of an instrumented copy of the step's kernel; "
                            "bars cut at the median CTA's points (medians over CTAs and launches), the percentage is "
                            "the main loops' share of the launch. The workspace is zeroed before each launch, so the "
                            "first loads find L2 cold.", alt="Stacked horizontal bar chart of a launch's phases")
