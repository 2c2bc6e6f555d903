"""Which tile runs where and when: tile orders and their L2 panels, the persistent steps' static
schedule and split tail, cluster launch control (a model), and the clusters' places in GPCs."""

from __future__ import annotations

import collections
from typing import Optional, Sequence

import numpy as np
from matplotlib import colormaps
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle

from ._style import PAGE_WIDTH, TEXT_PT, new_figure, readable_caption, set_caption


def tile_orders(tiles_m: int, tiles_n: int, kinds: Sequence[str] = ("row", "grouped", "gilbert"), group: int = 4,
                wave: Optional[int] = None) -> Figure:
    """Visit order over a tile grid, one panel per order (from :mod:`gemm_course.tile_order`).

    Each cell shows its visit number; the line follows the path. ``wave``: outline the first
    ``wave`` tiles (those running at once, one per SM).
    """
    from .. import tile_order

    panel = 4.6
    fig = new_figure(panel * len(kinds) + 0.6, panel * tiles_m / tiles_n + 2.0)
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
    return set_caption(fig, "Numbers: the order in which CTAs take tiles (gemm_course.tile_order)." + note)


def l2_panels(traffic: dict, title: str = "") -> Figure:
    """``traffic = {order: gemm_course.sim.L2Traffic}``: distinct A and B panels per wave (left) and
    the panel bytes the model reads from DRAM in total, against the floor of reading each panel once."""
    kinds = list(traffic)
    fig = new_figure(10.5, 4.4)
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
    return set_caption(fig, "gemm_course.sim.l2_traffic: the order is cut into waves (one tile per cluster); each wave "
                            "reads every distinct A row panel and B column panel it needs once, and nothing survives "
                            f"from one wave to the next. A model, not a measurement. A panel: {t0.a_panel_bytes / 2**20:g} "
                            f"MiB of A, {t0.b_panel_bytes / 2**20:g} MiB of B; {t0.waves} waves.")


def persistent_grid(schedule: dict, title: str = "", cluster_shape=(2, 1)) -> Figure:
    """Two views of a :func:`gemm_course.sim.persistent_schedule`: cluster-tiles colored by the cluster that computes
    them (numbered), and by wave, with the last, partial wave outlined."""
    owner, wave = schedule["owner"], schedule["wave"]
    rows, cols = owner.shape
    fig = new_figure(11.5, 5.6 * rows / max(cols, 1) + 1.8)
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
    return set_caption(fig, f"From the step's own scheduler functions (grid size, cluster_tile); {spread} cluster-tiles. "
                            + note)


def stream_k_tail(tiles: int, clusters: int, k_tiles: int, title: str = "", show: int = 12) -> Figure:
    """Each cluster's work from :func:`gemm_course.schedule.plan`, in K tiles, without and with the split tail.

    Bars are units (colored by cluster-tile); hatched bars are parts that hand a partial sum
    over; the first ``show`` and last clusters are drawn. Time is counted in K tiles of work.
    """
    from .. import schedule

    picked = list(range(min(show // 2, clusters))) + list(range(max(clusters - show // 2, show // 2), clusters))
    fig = new_figure(11.5, 0.28 * len(picked) * 2 + 2.2)
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
    return set_caption(fig, "From gemm_course.schedule.plan, the functions the kernel traces. Numbers name tail "
                            "tiles; hatched parts start mid-tile and hand a partial sum to the cluster that "
                            "computed the tile's first K tile. The red line is when the last cluster finishes, "
                            "if every K tile took the same time and the hand-over were free.")


def clc_timeline(schedule, title: str = "") -> Figure:
    """Which resident cluster computed which cluster-tile when, under cluster launch control
    (a :class:`gemm_course.sim.ClcSchedule`): one row per cluster that launched, one bar per tile,
    labelled with the tile's index; blue: the cluster's own tile, orange: a tile taken over from a
    cancelled launch. Triangles mark launches, bars at the right end exits."""
    clusters = sorted(schedule.launched, key=lambda c: (schedule.launched[c], c))
    row = {c: i for i, c in enumerate(clusters)}
    fig = new_figure(PAGE_WIDTH, 1.9 + 0.36 * len(clusters))
    ax = fig.add_subplot()
    colors = {False: "#4c72b0", True: "#dd8452"}
    for r in schedule.runs:
        y = row[r.cluster]
        ax.add_patch(Rectangle((r.start, y - 0.36), r.end - r.start, 0.72, facecolor=colors[r.taken],
                               edgecolor="white", linewidth=1.0, gid="run"))
        ax.text((r.start + r.end) / 2, y, str(r.tile), ha="center", va="center", fontsize=TEXT_PT,
                color="white", fontweight="bold")
    for c in clusters:
        ax.plot(schedule.launched[c], row[c], marker=">", color="black", markersize=6)
        if c in schedule.exited:
            ax.plot(schedule.exited[c], row[c], marker="|", color="black", markersize=12, markeredgewidth=2)
    ax.set_yticks(range(len(clusters)))
    ax.set_yticklabels([f"cluster {c}" for c in clusters], fontsize=TEXT_PT)
    ax.set_ylim(len(clusters) - 0.5, -0.5)
    ax.set_xlim(0, schedule.span * 1.03 if schedule.span else 1)
    ax.set_xlabel("time (model units, not measured)", fontsize=TEXT_PT)
    ax.tick_params(labelsize=TEXT_PT)
    fig.legend(handles=[Patch(color=colors[False], label="own tile (launched)"),
                        Patch(color=colors[True], label="taken over (try_cancel)")],
               fontsize=TEXT_PT, loc="outside upper center", ncol=2, frameon=False)
    taken = sum(r.taken for r in schedule.runs)
    ax.set_title(title or f"{schedule.num_clusters} cluster-tiles, at most {schedule.resident} clusters resident",
                 fontsize=TEXT_PT + 1)
    return readable_caption(fig, f"Event model of step 8's scheduler (gemm_course.sim.clc_schedule, policy "
                                 f"'{schedule.policy}'): {len(clusters)} clusters launched and computed "
                                 f"{len(schedule.runs) - taken} tiles of their own; {taken} launches were "
                                 "cancelled and their tiles taken over by running clusters. Numbers: the "
                                 "cluster-tile index.")


def cluster_placement(probe: dict, title: str = "Which GPC each cluster of the grid lands in") -> Figure:
    """Two strips of the grid's clusters coloured by GPC: by cluster index (as the hardware deals
    them out), and by place in a wave with ``gpc_order`` (``placement.from_probe_record``)."""
    from .. import placement

    p = placement.from_probe_record(probe)
    groups, cluster_sms, places = p["groups"], p["cluster_sms"], p["places"]
    sizes = collections.Counter(groups.values())
    gpc = [groups[sm] for sm in cluster_sms]
    known = sorted({g for g in gpc if sizes[g] > 1})
    palette = [colormaps["tab10"](i) for i in (0, 1, 2, 3, 4, 5, 6, 8, 9)]  # no grey: grey means unknown
    color = {g: palette[i % len(palette)] for i, g in enumerate(known)}
    by_place = sorted(range(len(cluster_sms)), key=lambda c: places[c])
    fig = new_figure(11, 2.6)
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
    return set_caption(fig, f"gemm_course.placement probes on {probe.get('gpu')}, {probe.get('date', '')[:10]}: one colour "
                            "per GPC (grey: an SM no probe cluster of 8 or 16 reached, GPC unknown); numbers are cluster "
                            "indices. Top: consecutive clusters land in different GPCs. Bottom: the same clusters "
                            "in the order their tiles take in each wave.")
