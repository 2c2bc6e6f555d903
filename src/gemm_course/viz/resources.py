"""What the compiler built: static SASS instruction counts, registers and shared memory per
configuration, the CTAs per SM they allow, and the register split of ``setmaxnreg``."""

from __future__ import annotations

from typing import Sequence

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from ..teaching.inspect import opcode_family_counts
from ..teaching.sim import HOPPER_SM
from ._style import PAGE_WIDTH, TEXT_PT, new_figure, set_caption, wrap_title


def instruction_mix(reports: dict, title: str = "Static SASS instruction mix") -> Figure:
    """Grouped horizontal bars: ``{label: inspect.Report}`` (or ``{label: mix dict}``)."""
    mixes = {label: (r.mix if hasattr(r, "mix") else r) for label, r in reports.items()}
    classes = []
    for mix in mixes.values():
        for c in mix:
            if c not in classes:
                classes.append(c)
    fig = new_figure(PAGE_WIDTH, 0.3 * len(classes) * max(1, len(mixes)) ** 0.5 + 1.9)
    ax = fig.add_subplot()
    h = 0.8 / len(mixes)
    y = np.arange(len(classes))
    for i, (label, mix) in enumerate(mixes.items()):
        vals = [mix.get(c, 0) for c in classes]
        bars = ax.barh(y + (i - (len(mixes) - 1) / 2) * h, vals, h * 0.95, label=label)
        ax.bar_label(bars, fontsize=TEXT_PT, padding=2)
    ax.set_yticks(y, classes, fontsize=TEXT_PT)
    ax.invert_yaxis()
    ax.margins(x=0.12)
    ax.tick_params(labelsize=TEXT_PT)
    ax.set_xlabel("instructions in the kernel's SASS (static count, not executions)")
    ax.legend(fontsize=TEXT_PT, loc="lower left", bbox_to_anchor=(0.0, 1.0), ncol=2, frameon=False, borderaxespad=0.2)
    fig.suptitle(wrap_title(title, 72), fontsize=TEXT_PT + 2)
    return set_caption(fig, "Instructions of each class in each kernel's SASS (gemm_course.teaching.inspect.report, "
                            "nvdisasm of the cubin compiled on this machine): static counts, instructions in the binary, not "
                            "executions.", alt="Grouped horizontal bar chart")


def mix_changes(reports: dict) -> str:
    """The instruction mix in one line, for a chapter whose idea does not change it much: the classes
    whose static SASS count differs between the first and the last of ``{label: inspect.Report}``
    (or ``{label: mix dict}``), e.g. ``sm90/7 -> sm90/8, static SASS counts: integer/address math
    812 -> 901 (+89); 9 other classes unchanged``."""
    mixes = {label: (r.mix if hasattr(r, "mix") else r) for label, r in reports.items()}
    (first, a), (last, b) = next(iter(mixes.items())), list(mixes.items())[-1]
    classes = list(dict.fromkeys(list(a) + list(b)))
    changed = [f"{c} {a.get(c, 0)} -> {b.get(c, 0)} ({b.get(c, 0) - a.get(c, 0):+d})" for c in classes
               if a.get(c, 0) != b.get(c, 0)]
    same = len(classes) - len(changed)
    return (f"{first} -> {last}, static SASS counts: " + ("; ".join(changed) if changed else "no class changed")
            + (f"; {same} other class{'es' if same != 1 else ''} unchanged" if changed and same else ""))


def opcode_families(reports: dict, families: dict, title: str = "Static SASS counts") -> Figure:
    """Grouped bars: one group per opcode family, one bar per compiled kernel (``{label: report}``)."""
    counts = {label: opcode_family_counts(r, families) for label, r in reports.items()}
    names = list(families)
    fig = new_figure(PAGE_WIDTH, 0.3 * len(names) * max(1, len(counts)) + 2.0)
    ax = fig.add_subplot()
    height = 0.8 / max(1, len(counts))
    y = np.arange(len(names))
    for i, (label, c) in enumerate(counts.items()):
        bars = ax.barh(y + (i - (len(counts) - 1) / 2) * height, [c[nm] for nm in names], height * 0.95, label=label)
        ax.bar_label(bars, fontsize=TEXT_PT, padding=2)
    ax.set_yticks(y, [f"{nm}\n({', '.join(families[nm])})" for nm in names], fontsize=TEXT_PT)
    ax.invert_yaxis()
    ax.tick_params(labelsize=TEXT_PT)
    ax.set_xlabel("instructions in the SASS (static count)")
    ax.margins(x=0.12)
    ax.legend(fontsize=TEXT_PT, loc="lower left", bbox_to_anchor=(0.0, 1.0), ncol=1, frameon=False, borderaxespad=0.2)
    fig.suptitle(wrap_title(title, 72), fontsize=TEXT_PT + 2)
    return set_caption(fig, "Counted in each kernel's SASS (gemm_course.teaching.inspect.report, nvdisasm of the cubin compiled "
                            "on this machine). Static counts: instructions in the binary, not executions.",
                       alt="Grouped horizontal bar chart")


def sweep(rows: Sequence[dict], title: str = "") -> Figure:
    """Resources per knob combination (from :func:`gemm_course.teaching.widgets.precompute_sweep`)."""
    ok = [r for r in rows if r.get("ok")]
    steps = len({r["step"] for r in ok}) > 1
    targets = len({r["target"] for r in ok}) > 1
    labels = [" ".join(([r["step"]] if steps else []) + ([r["target"]] if targets else []))
              + ("\n" if steps or targets else "") + r["label"] for r in ok]
    lines = 2 if steps or targets else 1
    fig = new_figure(PAGE_WIDTH, (0.17 * lines + 0.12) * len(ok) + 1.6)
    ax1, ax2 = fig.subplots(1, 2, sharey=True)
    y = np.arange(len(ok))
    b1 = ax1.barh(y, [r["registers"] for r in ok], 0.7, color="#4c72b0")
    ax1.bar_label(b1, fontsize=TEXT_PT, padding=2)
    ax1.axvline(255, color="red", linestyle=":", linewidth=1)
    ax1.set_xlabel("registers per thread (max 255)")
    b2 = ax2.barh(y, [r["smem_bytes"] / 1024 for r in ok], 0.7, color="#dd8452")
    ax2.bar_label(b2, fmt="%.0f", fontsize=TEXT_PT, padding=2)
    ax2.set_xlabel("shared memory per CTA (KiB)")
    ax1.margins(x=0.2)
    ax2.margins(x=0.2)
    ax1.set_yticks(y, labels, fontsize=TEXT_PT)
    ax1.invert_yaxis()
    for ax in (ax1, ax2):
        ax.tick_params(labelsize=TEXT_PT)
    for i, r in enumerate(ok):
        if r.get("spills"):
            ax1.annotate("spills", (r["registers"], i), xytext=(26, 0), textcoords="offset points", ha="left",
                         va="center", color="red", fontsize=TEXT_PT)
    fig.suptitle(wrap_title(title or "Compiled resources per configuration", 72), fontsize=TEXT_PT + 2)
    skipped = len(rows) - len(ok)
    return set_caption(fig, "Registers per thread and shared memory per CTA of each valid configuration, read from the "
                            "compiled kernel (cuobjdump)" + (f"; {skipped} invalid configuration"
                                                            f"{'s' if skipped != 1 else ''} left out." if skipped else "."),
                       alt="Two horizontal bar charts side by side")


def occupancy_bars(rows: dict, title: str = "CTAs per SM: what the registers and shared memory allow") -> Figure:
    """``rows = {label: occupancy(...)}``: per kernel, the CTAs per SM each resource allows, and the result."""
    labels = list(rows)
    resources = ["registers", "shared memory", "warps"]
    fig = new_figure(PAGE_WIDTH, 1.1 * len(labels) + 1.9)
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
            ax.text(v + 0.1, y, f"{v}  ({detail})", va="center", fontsize=TEXT_PT)
        ax.text(-0.15, i, f"{label}\n-> {occ['ctas']} CTA{'s' if occ['ctas'] != 1 else ''}/SM,\n"
                          f"{occ['k_tiles_in_flight']} K tile{'s' if occ['k_tiles_in_flight'] != 1 else ''} in flight",
                ha="right", va="center", fontsize=TEXT_PT, fontweight="bold")
    ax.set_yticks([])
    ax.invert_yaxis()
    ax.set_xlim(0, min(top, 32) + 8)
    ax.set_xlabel("CTAs per SM allowed by each resource (outlined: binding; pale: not)")
    handles = [Patch(color=palette[r], label=r) for r in resources]
    handles.append(Patch(facecolor="white", edgecolor="black", linewidth=1.5, label="binding"))
    ax.legend(handles=handles, fontsize=TEXT_PT, loc="lower left", bbox_to_anchor=(0.0, 1.0), ncol=4, frameon=False,
              borderaxespad=0.2)
    ax.tick_params(labelsize=TEXT_PT)
    fig.suptitle(wrap_title(title, 72), fontsize=TEXT_PT + 2)
    return set_caption(fig, f"Registers and shared memory per CTA from the compiled kernels (cuobjdump); limits per SM: "
                            f"{HOPPER_SM['registers']} registers (allocated per warp in units of "
                            f"{HOPPER_SM['register_unit']}), {HOPPER_SM['smem_per_sm'] // 1024} KiB of shared memory "
                            f"(at most {HOPPER_SM['smem_per_cta'] // 1024} KiB per CTA, 1 KiB reserved per CTA), "
                            f"{HOPPER_SM['warps']} warps ({HOPPER_SM['source']}; quoted). K tiles in flight = CTAs x "
                            "shared-memory stages per CTA.", alt="Grouped horizontal bar chart")


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
    fig = new_figure(PAGE_WIDTH, 3.9)
    ax = fig.add_subplot()
    for y, (label, parts, texts) in enumerate(rows):
        left = 0
        for (name, value), text in zip(parts, texts):
            ax.barh(y, value, 0.6, left=left, color=colors[name], edgecolor="black")
            if value >= 0.12 * registers_per_sm * 1.25:
                ax.text(left + value / 2, y, f"{text}\n= {value}", ha="center", va="center", fontsize=TEXT_PT)
            else:  # too narrow to hold its label: the label goes above the bar
                ax.text(left, y - 0.33, f"{text} = {value}", ha="left", va="bottom", fontsize=TEXT_PT)
            left += value
        ax.text(max(left, registers_per_sm) + registers_per_sm * 0.015, y, f"total {left}\n= {left / registers_per_sm:.1%}",
                va="center", fontsize=TEXT_PT, fontweight="bold")
    ax.axvline(registers_per_sm, color="red", linestyle="--")
    ax.text(registers_per_sm * 0.99, 0.5, f"{registers_per_sm} registers per SM", color="red", fontsize=TEXT_PT,
            va="center", ha="right")
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([r[0] for r in rows], fontsize=TEXT_PT)
    ax.tick_params(labelsize=TEXT_PT)
    ax.invert_yaxis()
    ax.set_xlim(0, registers_per_sm * 1.25)
    ax.set_xlabel("registers of the SM (threads x registers per thread)")
    ax.legend(handles=[Patch(color=c, label=n) for n, c in colors.items()], fontsize=TEXT_PT, loc="lower left",
              bbox_to_anchor=(0.0, 1.0), ncol=2, frameon=False, borderaxespad=0.2)
    fig.suptitle(wrap_title(f"setmaxnreg moves registers from the producer to the consumers ({threads} threads, one CTA "
                            "per SM)", 72), fontsize=TEXT_PT + 2)
    return set_caption(fig, "Registers per thread at launch from the compiled kernel (cuobjdump); the split from the "
                            f"step's config (producer {producer_registers}, consumers {consumer_registers}, "
                            "setmaxnreg.dec / setmaxnreg.inc in the PTX).", alt="Stacked horizontal bar chart")
