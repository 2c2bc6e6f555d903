"""Which tile runs where and when: tile orders and their L2 panels, the persistent steps' static
schedule and split tail, cluster launch control (a model), and the clusters' places in GPCs."""

from __future__ import annotations

import collections
from typing import Optional, Sequence

import numpy as np
from matplotlib import colormaps
from matplotlib.collections import LineCollection
from matplotlib.colors import ListedColormap, to_rgb
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle
from matplotlib.ticker import MaxNLocator

from ._style import PAGE_WIDTH, TEXT_PT, new_figure, set_caption, wrap_title


def _outline(cells) -> list:
    """The boundary of a set of (row, col) cells, as line segments in (x, y) = (col, row) coordinates."""
    cells = set(map(tuple, cells))
    segments = []
    for m, n in cells:
        for dm, dn, seg in ((-1, 0, ((n - 0.5, m - 0.5), (n + 0.5, m - 0.5))), (1, 0, ((n - 0.5, m + 0.5), (n + 0.5, m + 0.5))),
                            (0, -1, ((n - 0.5, m - 0.5), (n - 0.5, m + 0.5))), (0, 1, ((n + 0.5, m - 0.5), (n + 0.5, m + 0.5)))):
            if (m + dm, n + dn) not in cells:
                segments.append(seg)
    return segments


def tile_orders(tiles_m: int, tiles_n: int, kinds: Sequence[str] = ("row", "grouped", "gilbert"), group: int = 4,
                wave: Optional[int] = None) -> Figure:
    """Visit order over a tile grid, one panel per order (from :mod:`gemm_course.rules.tile_order`).

    Each cell shows its visit number; the line follows the path. ``wave``: outline the first
    ``wave`` tiles (those running at once, one per SM).
    """
    from ..rules import tile_order

    # Side by side at page width; each tile numbered when its cell holds a 9-pt number.
    panel = (PAGE_WIDTH - 0.9 - 0.5 * len(kinds)) / len(kinds)
    cell = min(panel / tiles_n, 0.5)
    panel_w, panel_h = cell * tiles_n, cell * tiles_m
    fig = new_figure(min(PAGE_WIDTH, len(kinds) * (panel_w + 0.5) + 0.9), panel_h + 2.0)
    axes = np.atleast_1d(fig.subplots(1, len(kinds), sharey=True))
    digits = len(str(tiles_m * tiles_n - 1))
    show_numbers = cell >= 0.085 * digits + 0.07
    for ax, kind in zip(axes, kinds):
        path = tile_order.order(kind, tiles_m, tiles_n, group=group)
        visit = np.zeros((tiles_m, tiles_n), dtype=int)
        for i, (m, n) in enumerate(path):
            visit[m, n] = i
        img = ax.imshow(visit, cmap="viridis", aspect="equal", interpolation="nearest")
        ys, xs = zip(*path)
        ax.plot(xs, ys, color="white", linewidth=0.8 if show_numbers else 1.2, alpha=0.55 if show_numbers else 0.8)
        ax.plot(xs[0], ys[0], "o", color="white", markersize=5)
        if show_numbers:
            for (m, n), i in np.ndenumerate(visit):
                ax.text(n, m, str(i), ha="center", va="center", fontsize=TEXT_PT, fontweight="bold",
                        color="white" if i < visit.max() * 0.6 else "black")
        if wave:
            ax.add_collection(LineCollection(_outline(path[:wave]), colors="red", linewidths=2.0))
        ax.set_title(f"{kind}" + (f" (group {group})" if kind == "grouped" else ""), fontsize=TEXT_PT + 1)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("tile column n\n(panel of B)")
        ax.tick_params(labelsize=TEXT_PT)
    axes[0].set_ylabel("tile row m (panel of A)")
    if not show_numbers:
        fig.colorbar(img, ax=list(axes), location="bottom", shrink=0.6, aspect=35, label="visit order (0 first)")
    fig.suptitle(wrap_title(f"Tile visit order over a {tiles_m} x {tiles_n} grid of tiles", 72),
                 fontsize=TEXT_PT + 2)
    note = f" Red outline: the first wave of {wave} tiles." if wave else ""
    what = ("Numbers: the order in which the tiles are taken" if show_numbers else
            "Colour: the order in which the tiles are taken (dark first); the white line follows the path from the dot")
    return set_caption(fig, f"{what} (gemm_course.rules.tile_order).{note}", alt="Grids of tiles coloured by visit order")


def l2_panels(traffic: dict, title: str = "") -> Figure:
    """``traffic = {order: gemm_course.teaching.sim.L2Traffic}``: distinct A and B panels per wave (top) and
    the panel bytes the model reads from DRAM in total, against the floor of reading each panel once."""
    kinds = list(traffic)
    fig = new_figure(PAGE_WIDTH, 7.4)
    left, right = fig.subplots(2, 1, height_ratios=[1.2, 1])
    for kind in kinds:
        t = traffic[kind]
        per_wave = [a + b for a, b in zip(t.a_per_wave, t.b_per_wave)]
        left.plot(range(1, len(per_wave) + 1), per_wave, marker="o", markersize=3, label=kind)
    left.xaxis.get_major_locator().set_params(integer=True)
    left.set_xlabel("wave")
    left.set_ylabel("distinct panels in the wave (A + B)")
    left.set_ylim(bottom=0)
    left.grid(alpha=0.3)
    left.legend(fontsize=TEXT_PT, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    left.set_title("Panels each wave touches", fontsize=TEXT_PT + 1, loc="left")
    x = np.arange(len(kinds))
    a = [traffic[k].a_panels * traffic[k].a_panel_bytes / 1e9 for k in kinds]
    b = [traffic[k].b_panels * traffic[k].b_panel_bytes / 1e9 for k in kinds]
    # not the orders' line colours above (blue, orange, green): there they mean row and grouped
    right.bar(x, a, 0.6, label="A panels", color="#8172b3")
    bars = right.bar(x, b, 0.6, bottom=a, label="B panels", color="#ccb974")
    right.bar_label(bars, labels=[f"{ai + bi:.2f} GB" for ai, bi in zip(a, b)], fontsize=TEXT_PT, padding=2)
    floor = traffic[kinds[0]].min_bytes / 1e9
    right.axhline(floor, color="black", linestyle="--", linewidth=1, label=f"every panel once: {floor:.2f} GB")
    right.set_xticks(x)
    right.set_xticklabels(kinds, fontsize=TEXT_PT)
    right.set_ylabel("GB read from DRAM (model)")
    right.margins(y=0.15)
    right.legend(fontsize=TEXT_PT, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    right.set_title("Total, one wave in L2 at a time", fontsize=TEXT_PT + 1, loc="left")
    for ax in (left, right):
        ax.tick_params(labelsize=TEXT_PT)
    t0 = traffic[kinds[0]]
    fig.suptitle(wrap_title(title or "L2 panel model", 72), fontsize=TEXT_PT + 2)
    return set_caption(fig, "gemm_course.teaching.sim.l2_traffic: the order is cut into waves (one tile per cluster); each wave "
                            "reads every distinct A row panel and B column panel it needs once, and nothing survives "
                            f"from one wave to the next. A model, not a measurement. A panel: {t0.a_panel_bytes / 2**20:g} "
                            f"MiB of A, {t0.b_panel_bytes / 2**20:g} MiB of B; {t0.waves} waves.", alt="Line chart and bar chart")


def persistent_grid(schedule: dict, title: str = "", cluster_shape=(2, 1)) -> Figure:
    """A :func:`gemm_course.teaching.sim.persistent_schedule` on its grid of cluster-tiles: each numbered with the
    cluster that computes it, coloured by the wave (the iteration of that cluster's loop) it runs in,
    the last, partial wave outlined."""
    owner, wave = schedule["owner"], schedule["wave"]
    rows, cols = owner.shape
    cell = min(0.45, (PAGE_WIDTH - 2.3) / cols, 6.5 / rows)  # inches; the legend takes the right
    fig = new_figure(PAGE_WIDTH, cell * rows + 1.6)
    ax = fig.subplots()
    waves = schedule["waves"]
    shades = [colormaps["Blues"](0.2 + 0.6 * w / max(1, waves - 1)) for w in range(waves)]
    ax.imshow(wave, cmap=ListedColormap(shades), vmin=-0.5, vmax=waves - 0.5, interpolation="nearest")
    numbers = cell >= 0.08 * len(str(schedule["clusters"] - 1)) + 0.03  # room for a 9-pt number in each cell
    for (m, n), c in np.ndenumerate(owner):
        w = wave[m, n]
        if w == waves - 1 and schedule["idle_in_last_wave"]:
            ax.add_patch(Rectangle((n - 0.5, m - 0.5), 1, 1, fill=False, edgecolor="red", linewidth=1.5))
        if numbers:
            ax.text(n, m, str(c), ha="center", va="center", fontsize=TEXT_PT,
                    color="white" if w > (waves - 1) / 2 else "black")
    ax.set_xlabel(f"cluster-tile column n ({cluster_shape[1]} CTA tile{'s' if cluster_shape[1] > 1 else ''} each)")
    ax.set_ylabel(f"cluster-tile row m ({cluster_shape[0]} CTA tiles each)")
    ax.tick_params(labelsize=TEXT_PT)
    ax.legend(handles=[Patch(color=shades[w], label=f"wave {w + 1}") for w in range(waves)], loc="upper left",
              bbox_to_anchor=(1.02, 1.0), frameon=False, fontsize=TEXT_PT, title="colour: wave", title_fontsize=TEXT_PT)
    fig.suptitle(wrap_title(title or f"{schedule['tiles']} cluster-tiles over {schedule['clusters']} persistent clusters",
                            72), fontsize=TEXT_PT + 2)
    ax.set_title("Number: the cluster computing the cluster-tile; colour: the wave it runs in", fontsize=TEXT_PT + 1)
    counts = collections.Counter(schedule["tiles_per_cluster"])
    spread = ", ".join(f"{n} clusters compute {t}" for t, n in sorted(counts.items(), reverse=True))
    note = (f"The last wave (outlined in red) has {schedule['last_wave_tiles']} cluster-tiles for {schedule['clusters']} "
            f"clusters: {schedule['idle_in_last_wave']} clusters are idle while it runs."
            if schedule["idle_in_last_wave"] else "Every wave is full.")
    return set_caption(fig, f"From the step's own scheduler functions (grid size, cluster_tile); {spread} cluster-tiles. "
                            + note, alt="Grid of cluster-tiles, numbered by cluster, coloured by wave")


def stream_k_tail(tiles: int, clusters: int, k_tiles: int, title: str = "", show: int = 12) -> Figure:
    """Each cluster's work from :func:`gemm_course.rules.schedule.plan`, in K tiles, without and with the split tail.

    Bars are units (colored by cluster-tile); hatched bars are parts that hand a partial sum
    over; the first ``show`` and last clusters are drawn. Time is counted in K tiles of work. The
    tail tiles a row works on are named at its right end (colours repeat; a part may be too narrow
    to hold its number).
    """
    from ..rules import schedule

    picked = list(range(min(show // 2, clusters))) + list(range(max(clusters - show // 2, show // 2), clusters))
    # (row of the first cluster after the gap, first and last cluster left out), if any is left out
    skipped = next(((row, picked[row - 1] + 1, c - 1) for row, c in enumerate(picked) if row and c > picked[row - 1] + 1), None)
    fig = new_figure(PAGE_WIDTH, 2 * (0.24 * len(picked) + 0.75) + 1.0)
    axes = fig.subplots(2, 1)
    base = list(colormaps["tab20"].colors)
    for ax, enabled in zip(axes, (False, True)):
        plans = schedule.plan(tiles, clusters, k_tiles, enabled)
        whole = schedule.split_tail(tiles, clusters, k_tiles, enabled)[0]
        longest = max(sum(e - b for _, b, e in units) for units in plans)
        per_inch = longest / 5.3  # K tiles per inch of the axis, roughly: a number is drawn where it fits
        blended = ax.get_yaxis_transform()
        for row, c in enumerate(picked):
            t = 0
            for index, b, e in plans[c]:
                ax.barh(row, e - b, left=t, color=base[index % len(base)], edgecolor="black", linewidth=0.4,
                        hatch="///" if b > 0 else None)
                if index >= whole and (e - b) / per_inch >= 0.08 * len(str(index)) + 0.06:
                    ax.text(t + (e - b) / 2, row, str(index), ha="center", va="center", fontsize=TEXT_PT)
                t += e - b
            tail = sorted({index for index, _, _ in plans[c] if index >= whole})
            if tail:
                ax.text(1.01, row, "tail " + ", ".join(str(i) for i in tail), transform=blended, ha="left", va="center",
                        fontsize=TEXT_PT, clip_on=False, gid="tail-tiles")
        ax.axvline(longest, color="red", linewidth=1)
        if skipped:  # a dotted line where the clusters not drawn would be
            ax.axhline(skipped[0] - 0.5, color="grey", linestyle=":", linewidth=1.2)
        busy = schedule.busy_fraction(tiles, clusters, k_tiles, enabled)
        ax.set_title(f"{'Split tail' if enabled else 'Whole tiles only'}: longest cluster {longest} K tiles, "
                     f"{busy:.1%} busy", fontsize=TEXT_PT + 1, loc="left")
        ax.set_yticks(range(len(picked)), [f"cluster {c}" for c in picked])
        ax.invert_yaxis()
        ax.tick_params(labelsize=TEXT_PT)
    axes[-1].set_xlabel("K tiles of work, in the order the cluster runs them")
    fig.suptitle(wrap_title(title or f"{tiles} cluster-tiles of {k_tiles} K tiles over {clusters} clusters", 72),
                 fontsize=TEXT_PT + 2)
    return set_caption(fig, "From gemm_course.rules.schedule.plan, the functions the kernel traces. At the right of each "
                            "row: the tail tiles (cluster-tile numbers) the cluster works on; hatched parts start "
                            "mid-tile and hand a partial sum to the cluster that computed the tile's first K tile. "
                            "The red line is when the last cluster finishes, if every K tile took the same time and "
                            "the hand-over were free."
                            + (f" Clusters {skipped[1]}-{skipped[2]} are not drawn (dotted line)." if skipped else ""),
                       alt="Two horizontal bar charts of each cluster's work")


def dynamic_tail(tiles: int, clusters: int, k_tiles: int, title: str = "") -> Figure:
    """The Blackwell step 11's tail against step 10's, on the model :func:`gemm_course.teaching.sim.dynamic_tail`:
    one row per resident cluster, one bar per unit it takes (colored by cluster-tile; hatched: a
    part that hands its partial sum over; gray: the last part adding the others' sums)."""
    from ..teaching import sim

    fig = new_figure(PAGE_WIDTH, 2 * (0.24 * clusters + 0.75) + 1.0)
    axes = fig.subplots(2, 1, sharex=True)
    base = list(colormaps["tab20"].colors)
    for ax, split, name in zip(axes, (False, True), ("Step 10: whole tiles", "Step 11: the tail cut along K")):
        runs = sim.dynamic_tail(tiles, clusters, k_tiles, split)
        span = max(r.end for r in runs)
        for r in runs:
            ax.barh(r.cluster, r.loop_end - r.start, left=r.start, color=base[r.tile % len(base)], edgecolor="black",
                    linewidth=0.4, hatch="///" if r.kind == "part" else None)
            ax.text((r.start + r.loop_end) / 2, r.cluster, str(r.tile), ha="center", va="center", fontsize=TEXT_PT,
                    gid="tile-number", bbox={"boxstyle": "round,pad=0.1", "facecolor": "white", "edgecolor": "none",
                                             "alpha": 0.8})
            if r.kind == "last":
                ax.barh(r.cluster, r.end - r.loop_end, left=r.loop_end, color="0.6", edgecolor="black", linewidth=0.4)
        ax.axvline(span, color="red", linewidth=1)
        busy = tiles * k_tiles / (clusters * span)
        ax.set_title(f"{name}: done after {span:g} K tiles, {busy:.0%} of the clusters' time computing",
                     fontsize=TEXT_PT + 1, loc="left")
        ax.set_yticks(range(clusters), [f"cluster {c}" for c in range(clusters)])
        ax.invert_yaxis()
        ax.tick_params(labelsize=TEXT_PT)
    axes[-1].set_xlabel("time in K tiles of one cluster's work (a model: every K tile equally long)")
    fig.suptitle(wrap_title(title or f"{tiles} cluster-tiles of {k_tiles} K tiles on {clusters} resident clusters", 72),
                 fontsize=TEXT_PT + 2)
    return set_caption(fig, "From gemm_course.teaching.sim.dynamic_tail, which hands out the units of "
                            "gemm_course.rules.schedule.dynamic_plan (the functions the kernel traces) in launch order "
                            "to whichever cluster is free first. Numbers (and colours) name cluster-tiles; hatched parts hand a "
                            "partial sum over; gray is the last part adding the others' sums (FIXUP_K_TILES per "
                            "part, the rule's price). The red line is when the last cluster finishes.",
                       alt="Two timelines, one row per cluster, of step 10's whole tiles and step 11's split tail")


def clc_timeline(schedule, title: str = "") -> Figure:
    """Which resident cluster computed which cluster-tile when, under cluster launch control
    (a :class:`gemm_course.teaching.sim.ClcSchedule`): one row per cluster that launched, one bar per tile,
    labelled with the tile's index; blue: the cluster's own tile, orange: a tile taken over from a
    cancelled launch. Triangles mark launches, bars at the right end exits."""
    clusters = sorted(schedule.launched, key=lambda c: (schedule.launched[c], c))
    row = {c: i for i, c in enumerate(clusters)}
    fig = new_figure(PAGE_WIDTH, 1.9 + 0.3 * len(clusters))
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
    span = schedule.span or 1
    ax.set_xlim(-0.03 * span, span * 1.03)  # a launch at 0: its triangle left of the bar, not under the axis
    ax.set_xlabel("time (model units, not measured)", fontsize=TEXT_PT)
    ax.tick_params(labelsize=TEXT_PT)
    fig.legend(handles=[Patch(color=colors[False], label="own tile (launched)"),
                        Patch(color=colors[True], label="taken over (try_cancel)"),
                        Line2D([], [], marker=">", color="black", linestyle="none", markersize=6, label="launch"),
                        Line2D([], [], marker="|", color="black", linestyle="none", markersize=12, markeredgewidth=2,
                               label="exit")],
               fontsize=TEXT_PT, loc="outside upper center", ncol=4, frameon=False)
    taken = sum(r.taken for r in schedule.runs)
    ax.set_title(title or f"{schedule.num_clusters} cluster-tiles, at most {schedule.resident} clusters resident",
                 fontsize=TEXT_PT + 1)
    return set_caption(fig, f"Event model of step 8's scheduler (gemm_course.teaching.sim.clc_schedule, policy "
                            f"'{schedule.policy}'): {len(clusters)} clusters launched and computed "
                            f"{len(schedule.runs) - taken} tiles of their own; {taken} launches were "
                            "cancelled and their tiles taken over by running clusters. Numbers: the "
                            "cluster-tile index.", alt="Timeline, one row per cluster")


def late_start_timeline(tiles: int, resident: int, launch_gap: float, query_time: float = 0.2,
                        title: str = "") -> Figure:
    """Clusters that start late, under a static schedule and under cluster launch control: two
    panels on one time axis, one row per cluster that started, one bar per tile (its index).

    Both start one cluster every ``launch_gap`` tile times into ``resident`` places, as
    :func:`gemm_course.teaching.sim.clc_schedule` launches them. Top: the static schedule of Hopper's step 8
    (:func:`gemm_course.teaching.sim.persistent_schedule`'s rule, cluster c computes tiles c, c + G, ...),
    so the last cluster to start finishes its whole share late. Bottom:
    :func:`gemm_course.teaching.sim.clc_schedule`, where running clusters take the tiles of clusters not yet
    started. Every tile takes one time unit."""
    from ..teaching import sim

    grid = min(tiles, resident)
    static = [(c, (c + 1) * launch_gap + i, (c + 1) * launch_gap + i + 1, tile, False)
              for c in range(grid) for i, tile in enumerate(range(c, tiles, grid))]
    static_launched = {c: (c + 1) * launch_gap for c in range(grid)}
    clc = sim.clc_schedule(tiles, resident, policy="lowest", seed=0, launch_gap=launch_gap, query_time=query_time)
    dynamic = [(r.cluster, r.start, r.end, r.tile, r.taken) for r in clc.runs]
    panels = ((f"Static schedule (Hopper's step 8): done at {max(e for _, _, e, _, _ in static):.1f}", static,
               static_launched),
              (f"Cluster launch control (Blackwell's step 8): done at {clc.span:.1f}, {len(clc.launched)} clusters "
               "started", dynamic, clc.launched))
    rows = max(len(launched) for _, _, launched in panels)
    fig = new_figure(PAGE_WIDTH, 2.2 + 0.62 * rows)
    axes = fig.subplots(2, 1, sharex=True)
    colors = {False: "#4c72b0", True: "#dd8452"}
    for ax, (name, runs, launched) in zip(axes, panels):
        order = sorted(launched, key=lambda c: (launched[c], c))
        row = {c: i for i, c in enumerate(order)}
        for cluster, start, end, tile, taken in runs:
            ax.add_patch(Rectangle((start, row[cluster] - 0.36), end - start, 0.72, facecolor=colors[taken],
                                   edgecolor="white", linewidth=1.0, gid="run"))
            ax.text((start + end) / 2, row[cluster], str(tile), ha="center", va="center", fontsize=TEXT_PT,
                    color="white", fontweight="bold", gid="tile-number")
        for c in order:
            ax.plot(launched[c], row[c], marker=">", color="black", markersize=6)
        ax.set_yticks(range(len(order)), [f"cluster {c}" for c in order], fontsize=TEXT_PT)
        ax.set_ylim(len(order) - 0.5, -0.5)
        ax.set_title(name, fontsize=TEXT_PT + 1, loc="left")
        ax.tick_params(labelsize=TEXT_PT)
    span = max(max(e for _, _, e, _, _ in static), clc.span)
    axes[-1].set_xlim(0, span * 1.03)
    axes[-1].set_xlabel("time in tile times (a model, not measured)", fontsize=TEXT_PT)
    fig.legend(handles=[Patch(color=colors[False], label="own tile"),
                        Patch(color=colors[True], label="taken over from a cluster not yet started (try_cancel)")],
               fontsize=TEXT_PT, loc="outside lower center", ncol=2, frameon=False)
    every = f"{launch_gap:g} tile time{'' if launch_gap == 1 else 's'}"
    fig.suptitle(wrap_title(title or f"{tiles} tiles, {resident} places, one cluster starting every {every}", 72),
                 fontsize=TEXT_PT + 2)
    return set_caption(fig, f"Triangles: when a cluster starts (one every {every} in both panels). "
                            "Static: each cluster computes a fixed share, so the last to start ends last. Cluster "
                            "launch control (gemm_course.teaching.sim.clc_schedule): the clusters already running take the "
                            "tiles of those not yet started, so a late start costs only the tiles it did not take. "
                            "Numbers: the tile index.", alt="Two timelines, one row per cluster")


def cluster_placement(probe: dict, title: str = "Which GPC each cluster of the grid lands in") -> Figure:
    """Two strips of the grid's clusters coloured by GPC: by cluster index (as the hardware deals
    them out), and by place in a wave with ``gpc_order`` (``placement.from_probe_record``)."""
    from ..rules import placement

    p = placement.from_probe_record(probe)
    groups, cluster_sms, places = p["groups"], p["cluster_sms"], p["places"]
    sizes = collections.Counter(groups.values())
    gpc = [groups[sm] for sm in cluster_sms]
    known = sorted({g for g in gpc if sizes[g] > 1})
    palette = [colormaps["tab10"](i) for i in (0, 1, 2, 3, 4, 5, 6, 8, 9)]  # no grey: grey means unknown
    color = {g: palette[i % len(palette)] for i, g in enumerate(known)}
    by_place = sorted(range(len(cluster_sms)), key=lambda c: places[c])
    per_row = min(len(cluster_sms), 22)  # each strip wrapped into rows of 22 cells, a 9-pt number in each
    lines = -(-len(cluster_sms) // per_row)
    fig = new_figure(PAGE_WIDTH, 2 * (0.3 * lines + 0.35) + 0.55)  # the strips' own height, little white around
    ax = fig.subplots()
    y = 0.0
    for strip, (name, clusters) in enumerate((("By cluster index, as the hardware deals them out", list(range(len(cluster_sms)))),
                                              ("By place in a wave (gpc_order)", by_place))):
        ax.text(0, y - 0.15, name, ha="left", va="bottom", fontsize=TEXT_PT + 1)
        for i, c in enumerate(clusters):
            x, row = i % per_row, i // per_row
            fill = color.get(gpc[c], "#cccccc")
            ax.add_patch(Rectangle((x, y + row), 0.92, 0.85, color=fill, gid=f"{('index', 'place')[strip]} {c}"))
            dark = np.dot(to_rgb(fill), (0.299, 0.587, 0.114)) < 0.5  # white numbers on the dark GPC colours
            ax.text(x + 0.46, y + row + 0.43, str(c), ha="center", va="center", fontsize=TEXT_PT,
                    color="white" if dark else "black", gid=f"{('index', 'place')[strip]} {c}")
        y += lines + 1.1
    ax.set_xlim(-0.05, per_row)
    ax.set_ylim(y - 0.95, -0.9)
    ax.set_aspect("equal")
    ax.axis("off")
    fig.suptitle(wrap_title(title, 72), fontsize=TEXT_PT + 2)
    return set_caption(fig, f"gemm_course.rules.placement probes on {probe.get('gpu')}, {probe.get('date', '')[:10]}: one colour "
                            "per GPC (grey: an SM no probe cluster of 8 or 16 reached, GPC unknown); numbers are cluster "
                            "indices. Top: consecutive clusters land in different GPCs. Bottom: the same clusters "
                            "in the order their tiles take in each wave.", alt="Two strips of cells coloured by GPC")


def tile_choice_map(clusters: int = 66, k: int = 8192, sizes: Sequence[int] = tuple(range(512, 6145, 512))) -> Figure:
    """The tile width step 11's host picks (``tile_rule.choose``) for each M x N of ``sizes`` at one
    K, on a GPU of ``clusters`` clusters of two: one cell per shape, coloured by width (a lighter
    blue where 128 x 256 makes many waves), with the fill of the chosen width's waves in percent."""
    from ..rules import tile_rule

    widths = list(tile_rule.TILE_NS)
    colors = {256: "#4c72b0", 192: "#dd8452", 128: "#55a868", "many": "#a6bddb"}
    keys = widths + ["many"]
    cells = {}
    for m in sizes:
        for n in sizes:
            w = tile_rule.choose(m, n, k, clusters).tile_n
            many = w == widths[0] and tile_rule.waves(m, n, w, clusters) >= tile_rule.MANY_WAVES
            cells[m, n] = ("many" if many else w, tile_rule.wave_fill(tile_rule.waves(m, n, w, clusters)))
    grid = np.array([[keys.index(cells[m, n][0]) for n in sizes] for m in sizes])
    fig = new_figure(PAGE_WIDTH, PAGE_WIDTH * 0.95)
    ax = fig.add_subplot()
    ax.imshow(grid, cmap=ListedColormap([colors[key] for key in keys]), vmin=-0.5, vmax=len(keys) - 0.5,
              origin="lower", aspect="equal")
    for i, m in enumerate(sizes):
        for j, n in enumerate(sizes):
            key, fill = cells[m, n]
            if key != "many":
                ax.text(j, i, f"{fill * 100:.0f}", ha="center", va="center", fontsize=TEXT_PT, color="white")
    ax.set_xticks(range(len(sizes)), [str(s) for s in sizes], rotation=90)
    ax.set_yticks(range(len(sizes)), [str(s) for s in sizes])
    ax.set_xlabel("N")
    ax.set_ylabel("M")
    labels = {256: "128 x 256", 192: "128 x 192", 128: "128 x 128",
              "many": f"128 x 256, {tile_rule.MANY_WAVES}+ waves"}
    ax.legend(handles=[Patch(color=colors[key], label=labels[key]) for key in keys], loc="lower left",
              bbox_to_anchor=(0.0, 1.0), ncol=2, frameon=False, borderaxespad=0.2)
    ax.set_title(f"The tile step 11 picks at K = {k}, {clusters} clusters", fontsize=TEXT_PT + 1, pad=44)
    return set_caption(fig, "Each cell: an M x N output; its colour, the tile width tile_rule.choose picks; its "
                            "number, how full that width's waves are, in percent (waves / ceil(waves)). Light blue: "
                            f"the 128 x 256 tiles make {tile_rule.MANY_WAVES} waves or more and are kept whatever "
                            "the fill.", alt="Heat map")
