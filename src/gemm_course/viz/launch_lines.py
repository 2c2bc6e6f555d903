"""Time against bytes, a straight line per kernel (chapter 12): time = fixed + bytes / rate.

At a few tokens every decode layer is W's bytes, so a kernel's median times over layers of different
sizes fall on a line. Its slope is the rate the kernel streams at once it runs; where it meets zero
bytes is what a launch costs whatever its size: the launch itself, filling the pipeline with the
first loads (a DRAM latency), and the drain and the epilogue. Two kernels at the same ratio to the
copy bandwidth can differ in either. Fitted by least squares over the newest decode run's records:

* :func:`fit` (``measure.bandwidth.line_fit``): the line through (bytes, microseconds) points;
* :func:`launch_lines`: per launch (:func:`~gemm_course.viz.memory_roofline.decode_runs`, weights rotated
  out of L2) and inside CUDA graphs (:func:`~gemm_course.viz.memory_roofline.graph_runs`), a line per
  provider over the shapes with at most ``max_m`` tokens;
* :func:`launch_table`, :func:`launch_figure`: those lines as a table and drawn over their points;
* :func:`bytes_for_share`: the layer size at which a line reaches a share of its run's copy bandwidth.
"""

from __future__ import annotations

from typing import NamedTuple, Optional, Sequence

import numpy as np
from matplotlib.figure import Figure

from ..measure.bandwidth import LINE_MAX_M
from ..measure.bandwidth import line_fit as fit  # noqa: F401  (re-exported: the line through the points)
from ..measure.records import shape_of
from ._style import CTA_COLORS, CUBLAS, MEASURED, PAGE_WIDTH, TEXT_PT, message_figure, new_figure, set_caption, wrap_title

MAX_M = LINE_MAX_M  # the tokens up to which the lines are fitted (measure.bandwidth)
SOURCES = ("per launch", "CUDA graph")


class Line(NamedTuple):
    """A kernel's times over one run's layers, and the line through them."""

    source: str  # "per launch" or "CUDA graph"
    provider: str  # a step's key, or "cuBLAS"
    points: tuple  # ((bytes, microseconds), ...), the fewest bytes of each shape and its median time
    fixed_us: float  # the line at zero bytes
    tb_s: float  # 1 / slope: the rate once the kernel streams
    worst_us: float  # the largest distance of a point from the line
    copy_tb_s: Optional[float] = None  # the copy bandwidth measured in the same run


def bytes_for_share(line: Line, share: float) -> Optional[float]:
    """The bytes a layer must move for ``line``'s kernel to reach ``share`` of its run's copy bandwidth:
    bytes / (copy x (fixed + bytes / rate)) = share, solved for the bytes; None where it never does."""
    if not line.copy_tb_s:
        return None
    copy, rate = line.copy_tb_s * 1e6, line.tb_s * 1e6  # bytes per microsecond
    left = 1 - share * copy / rate
    return share * copy * line.fixed_us / left if left > 0 else None


def _points(runs: Sequence[dict], source: str, max_m: int) -> dict:
    """{provider: [(bytes, us), ...]}: each step's median per shape, and cuBLAS's once per shape (from the
    record of the run's first step that timed it)."""
    step_ms, cublas_ms = ("time_ms", "cublas_time_ms") if source == SOURCES[0] else ("step_ms", "cublas_ms")
    found: dict = {}
    cublas_seen = set()
    for r in runs:
        shape = shape_of(r)
        if shape[0] > max_m:
            continue
        median = r[step_ms]["median"] if isinstance(r[step_ms], dict) else r[step_ms]
        byts = r["bandwidth"]["min_bytes"]
        found.setdefault(r["step"], []).append((byts, median * 1e3))
        if shape not in cublas_seen:
            cublas_seen.add(shape)
            other = r[cublas_ms]["median"] if isinstance(r[cublas_ms], dict) else r[cublas_ms]
            found.setdefault("cuBLAS", []).append((byts, other * 1e3))
    return found


def _runs(records: Sequence[dict], arch: str) -> dict:
    """{source: ``arch``'s newest run}: the decode run (per launch) and the CUDA-graph run of its steps, on
    the decode run's GPU where there is one."""
    from .memory_roofline import DECODE_STEPS, decode_runs, graph_runs  # that module re-exports this one's functions

    steps = DECODE_STEPS[arch]
    per_launch = decode_runs(records, steps)
    gpu = per_launch[0].get("gpu") if per_launch else None
    graphs = graph_runs([r for r in records if r.get("step") in steps and (gpu is None or r.get("gpu") == gpu)])
    return dict(zip(SOURCES, (per_launch, graphs)))


def launch_lines(records: Sequence[dict], max_m: int = MAX_M, arch: str = "sm90") -> list:
    """A :class:`Line` per source and provider of ``arch``'s newest decode and CUDA-graph runs, over
    their shapes with at most ``max_m`` tokens; a provider whose points do not define a line is left out."""
    from .memory_roofline import _copy

    lines = []
    for source, runs in _runs(records, arch).items():
        for provider, points in _points(runs, source, max_m).items():
            found = fit(points)
            if found:
                lines.append(Line(source, provider, tuple(sorted(points)), *found, _copy(runs)))
    return sorted(lines, key=lambda line: (SOURCES.index(line.source), line.provider == "cuBLAS",
                                           not line.provider.endswith("/12"), line.provider))


def launch_table(records: Sequence[dict], max_m: int = MAX_M, arch: str = "sm90") -> str:
    """The lines of :func:`launch_lines` as a Markdown table, each rate also as a share of the copy
    bandwidth measured in the same run; "No record yet" without a run."""
    from .memory_roofline import DECODE_RUN

    lines = launch_lines(records, max_m, arch)
    if not lines:
        return f"No record yet of the runs these lines fit ({DECODE_RUN[arch]}, with its CUDA-graph run)."
    rows = ["| timed | kernel | fixed per launch | rate once streaming | shapes | farthest point from the line |",
            "|---|---|---|---|---|---|"]
    for line in lines:
        share = f" ({line.tb_s / line.copy_tb_s:.0%} of copy)" if line.copy_tb_s else ""
        rows.append(f"| {line.source} | {line.provider} | {line.fixed_us:.1f} us | {line.tb_s:.2f} TB/s{share} | "
                    f"{len(line.points)} | {line.worst_us:.1f} us |")
    return "\n".join(rows)


def _made(record: dict) -> str:
    return (f"measured on {record.get('gpu')}, {record.get('date', '')[:10]}, torch {record.get('torch')} (cuBLAS), "
            f"cutlass-dsl {record.get('cutlass_dsl')} ({record.get('_file', '')})")


COLORS = {"sm90/12": MEASURED, "sm90/11": CTA_COLORS[1], "sm100/12": MEASURED, "sm100/11": CTA_COLORS[1], "cuBLAS": CUBLAS}


def launch_figure(records: Sequence[dict], max_m: int = MAX_M, arch: str = "sm90",
                  title: str = "A line per kernel: time = fixed + bytes / rate") -> Figure:
    """Per source (per launch; inside CUDA graphs), each provider's median times against the shapes'
    bytes and the line :func:`fit` draws through them, labelled with its fixed cost and rate, beside the
    bytes at the run's copy bandwidth with nothing fixed."""
    lines = launch_lines(records, max_m, arch)
    if not lines:
        return message_figure("No record yet: scripts/gpu_decode12.sh OUT bench graphs on a Hopper GPU writes the runs."
                              if arch == "sm90" else "No record yet: the B200 kit (make b200) writes the runs.",
                              "Time against bytes per kernel: not measured yet.")
    runs = _runs(records, arch)
    sources = [s for s in SOURCES if any(line.source == s for line in lines)]
    fig = new_figure(PAGE_WIDTH, 4.9)
    axes = fig.subplots(1, len(sources), sharey=True, squeeze=False)[0]
    top = max(us for line in lines for _, us in line.points) * 1.1
    right = max(b for line in lines for b, _ in line.points) * 1.08 / 1e6
    for ax, source in zip(axes, sources):
        for line in (line for line in lines if line.source == source):
            color = COLORS.get(line.provider, CTA_COLORS[4])
            xs = np.array([b for b, _ in line.points]) / 1e6
            ax.plot(xs, [us for _, us in line.points], "o", color=color, markersize=5, alpha=0.7)
            ends = np.array([0.0, right])
            under = line.provider == "cuBLAS"  # wide and pale beneath: a step's line close to it stays visible
            ax.plot(ends, line.fixed_us + ends / line.tb_s, "-", color=color, linewidth=3.6 if under else 1.4,
                    alpha=0.45 if under else 1.0, zorder=1.5 if under else 2.5,
                    label=f"{line.provider}: {line.fixed_us:.1f} us + bytes at {line.tb_s:.2f} TB/s")
        copy = next(line.copy_tb_s for line in lines if line.source == source)
        if copy:
            ax.plot([0, right], [0, right / copy], "--", color="black", linewidth=1.0,
                    label=f"bytes at the copy bandwidth, {copy:.2f} TB/s")
        ax.set_xlim(0, right)
        ax.set_ylim(0, top)
        ax.set_xlabel("MB moved (A, B, C once)")
        ax.set_title(source, fontsize=TEXT_PT + 1)
        ax.grid(True, alpha=0.25)
        ax.legend(fontsize=TEXT_PT, loc="upper left", bbox_to_anchor=(-0.02, -0.17), frameon=False)
    axes[0].set_ylabel("microseconds per GEMM (median)")
    fig.suptitle(wrap_title(title, 72), fontsize=TEXT_PT + 2)
    made = "; ".join(f"{source}: {_made(runs[source][0])}" for source in sources)
    return set_caption(fig, f"Each dot a layer at up to {max_m} tokens, its median time against its fewest bytes; each "
                            "line the least-squares fit through one kernel's dots, labelled with where it meets zero bytes "
                            "(the cost of a launch whatever its size) and the rate its slope gives; dashed, the bytes at "
                            f"the copy bandwidth measured in the same run. {made}; weights rotated out of L2.",
                       alt="Scatter of time against bytes with a fitted line per kernel, per launch and inside CUDA graphs")
