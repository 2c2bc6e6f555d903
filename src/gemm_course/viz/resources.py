"""What the compiler built: static SASS instruction counts, registers and shared memory per
configuration, the CTAs per SM they allow, and the register split of ``setmaxnreg``."""

from __future__ import annotations

from typing import Sequence

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from ..inspect import opcode_family_counts
from ..sim import HOPPER_SM
from ._style import new_figure, set_caption


def instruction_mix(reports: dict, title: str = "Static SASS instruction mix") -> Figure:
    """Grouped horizontal bars: ``{label: inspect.Report}`` (or ``{label: mix dict}``)."""
    mixes = {label: (r.mix if hasattr(r, "mix") else r) for label, r in reports.items()}
    classes = []
    for mix in mixes.values():
        for c in mix:
            if c not in classes:
                classes.append(c)
    fig = new_figure(8.5, 0.35 * len(classes) * max(1, len(mixes)) ** 0.5 + 1.6)
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


def opcode_families(reports: dict, families: dict, title: str = "Static SASS counts") -> Figure:
    """Grouped bars: one group per opcode family, one bar per compiled kernel (``{label: report}``)."""
    counts = {label: opcode_family_counts(r, families) for label, r in reports.items()}
    names = list(families)
    fig = new_figure(max(7.0, 1.1 * len(names) + 2.5), 4.2)
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
    return set_caption(fig, "Counted in each kernel's SASS (gemm_course.inspect.report, nvdisasm of the cubin compiled "
                            "on this machine). Static counts: instructions in the binary, not executions.")


def sweep(rows: Sequence[dict], title: str = "") -> Figure:
    """Resources per knob combination (from :func:`gemm_course.widgets.precompute_sweep`)."""
    ok = [r for r in rows if r.get("ok")]
    steps = len({r["step"] for r in ok}) > 1
    targets = len({r["target"] for r in ok}) > 1
    labels = [" ".join(([r["step"]] if steps else []) + ([r["target"]] if targets else []) + [""]).strip()
              + ("\n" if steps or targets else "") + r["label"].replace(", ", "\n") for r in ok]
    fig = new_figure(max(6.0, 0.75 * len(ok) + 2), 6.5)
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


def occupancy_bars(rows: dict, title: str = "CTAs per SM: what the registers and shared memory allow") -> Figure:
    """``rows = {label: occupancy(...)}``: per kernel, the CTAs per SM each resource allows, and the result."""
    labels = list(rows)
    resources = ["registers", "shared memory", "warps"]
    fig = new_figure(9, 1.25 * len(labels) + 1.8)
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
    return set_caption(fig, f"Registers and shared memory per CTA from the compiled kernels (cuobjdump); limits per SM: "
                            f"{HOPPER_SM['registers']} registers (allocated per warp in units of "
                            f"{HOPPER_SM['register_unit']}), {HOPPER_SM['smem_per_sm'] // 1024} KiB of shared memory "
                            f"(at most {HOPPER_SM['smem_per_cta'] // 1024} KiB per CTA, 1 KiB reserved per CTA), "
                            f"{HOPPER_SM['warps']} warps ({HOPPER_SM['source']}; quoted). K tiles in flight = CTAs x "
                            "shared-memory stages per CTA.")


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
    fig = new_figure(10, 3.4)
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
    return set_caption(fig, "Registers per thread at launch from the compiled kernel (cuobjdump); the split from the "
                            f"step's config (producer {producer_registers}, consumers {consumer_registers}, "
                            "setmaxnreg.dec / setmaxnreg.inc in the PTX).")
