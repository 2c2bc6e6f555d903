"""Where data sits and who holds it: CuTe layouts, shared-memory banks and the swizzle, the
accumulator's owners in registers and in tensor memory, the CTA pair's split, and which CTA of a
cluster loads (and multicasts) what."""

from __future__ import annotations

import collections
from typing import Iterable, Optional, Sequence

import numpy as np
from matplotlib import colormaps
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle

from ._style import CTA_COLORS, PAGE_WIDTH, TEXT_PT, new_figure, set_caption, thread_colors, wrap_title


def layout_grid(table: dict, title: Optional[str] = None, highlight: Optional[Sequence] = None) -> Figure:
    """Draw a layout as CuTe evaluates it: cell (row, col) shows its offset (from
    :func:`gemm_course.teaching.cute_basics.layout_table`). ``highlight``: (row, col) cells to outline."""
    offsets = np.array(table["offsets"])
    rows, cols = offsets.shape
    cell = min(0.55, (PAGE_WIDTH - 1.2) / cols)
    fig = new_figure(max(3.5, cell * cols + 1.2), max(2.2, cell * rows + 1.3))
    ax = fig.add_subplot()
    ax.imshow(offsets, cmap="viridis", aspect="equal")
    for i in range(rows):
        for j in range(cols):
            v = offsets[i, j]
            ax.text(j, i, str(v), ha="center", va="center", fontsize=TEXT_PT,
                    color="white" if v < offsets.max() * 0.6 else "black")
    for r, c in highlight or ():
        ax.add_patch(Rectangle((c - 0.5, r - 0.5), 1, 1, fill=False, edgecolor="red", linewidth=2.5))
    ax.set_xticks(range(cols))
    ax.set_yticks(range(rows))
    ax.tick_params(labelsize=TEXT_PT)
    ax.set_xlabel("column coordinate")
    ax.set_ylabel("row coordinate")
    ax.set_title(wrap_title(title or f"layout {table['text']}: (row, col) -> offset", int(12 * (cell * cols + 1.0))),
                 fontsize=TEXT_PT + 1)
    outlined = " Outlined in red: the cells the text above points at." if highlight else ""
    return set_caption(fig, f"Each cell shows the offset that the CuTe layout {table['text']} gives its (row, column) "
                            f"coordinate, as CuTe evaluates it (gemm_course.teaching.cute_basics.layout_table).{outlined}",
                       alt="Grid of numbered cells")


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


def ownership(owners: dict, zoom=(8, 16), title: str = "", group_size: int = 32, group_name: str = "warp") -> Figure:
    """Who holds which accumulator element: ``owners = {'thread': [[t, ...], ...], 'value': [[v, ...]]
    (optional), 'source': 'where the table came from'}``, indexed by (row, col) of the tile.

    Top: the whole tile, colored by ``group`` (warp). Below: the top-left ``zoom`` corner, colored
    by thread, each cell labelled ``T<thread>`` and ``V<value index>``.
    """
    thread = np.array(owners["thread"])
    value = np.array(owners["value"]) if owners.get("value") is not None else None
    rows, cols = thread.shape
    zr, zc = min(zoom[0], rows), min(zoom[1], cols)
    groups = thread // group_size
    ngroups = int(groups.max()) + 1

    fig = new_figure(PAGE_WIDTH, 2.6 + 0.42 * zr + 2.1)
    left, right = fig.subplots(2, 1, height_ratios=[2.6, 0.42 * zr])
    left.imshow(groups, cmap=ListedColormap(colormaps["Set2"].colors[:ngroups]), aspect="auto",
                interpolation="nearest", vmin=-0.5, vmax=ngroups - 0.5)
    left.add_patch(Rectangle((-0.5, -0.5), zc, zr, fill=False, edgecolor="black", linewidth=2))
    left.set_xlabel(f"column of the {rows}x{cols} accumulator tile (N)")
    left.set_ylabel("row (M)")
    left.set_title(f"Whole tile, coloured by {group_name} ({group_size} threads each); black box: the corner below",
                   fontsize=TEXT_PT + 1, loc="left")
    left.legend(handles=[Patch(color=colormaps["Set2"].colors[g], label=f"{group_name} {g}") for g in range(ngroups)],
                fontsize=TEXT_PT, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, borderaxespad=0)

    corner = thread[:zr, :zc]
    uniq = sorted(set(corner.ravel().tolist()))
    index = {t: i for i, t in enumerate(uniq)}
    cmap = thread_colors(len(uniq))
    right.imshow(np.vectorize(index.get)(corner), cmap=cmap, aspect="auto",
                 interpolation="nearest", vmin=-0.5, vmax=len(uniq) - 0.5)
    for i in range(zr):
        for j in range(zc):
            label = f"T{thread[i, j]}" + (f"\nV{value[i, j]}" if value is not None else "")
            r, g, b, _ = cmap(index[thread[i, j]])
            dark = 0.299 * r + 0.587 * g + 0.114 * b < 0.5
            right.text(j, i, label, ha="center", va="center", fontsize=TEXT_PT, linespacing=1.0,
                       color="white" if dark else "black")
    right.set_xticks(range(zc))
    right.set_yticks(range(zr))
    right.set_xlabel("column (N)")
    right.set_ylabel("row (M)")
    right.set_title(f"Top-left {zr}x{zc}: thread T, its value index V", fontsize=TEXT_PT + 1, loc="left")
    for ax in (left, right):
        ax.tick_params(labelsize=TEXT_PT)
    if title:
        fig.suptitle(wrap_title(title, 72), fontsize=TEXT_PT + 2)
    per_thread = collections.Counter(thread.ravel().tolist())
    counts = sorted(set(per_thread.values()))
    return set_caption(fig, f"{owners.get('source', '')} {len(per_thread)} threads, "
                            f"{'/'.join(map(str, counts))} elements each.".strip(), alt="Two colour maps of a tile")


def tmem_map(addresses: dict, lanes: int = 128, title: str = "") -> Figure:
    """Where the accumulator sits in tensor memory: ``{(row, col): (lane, column)}`` (from
    :func:`gemm_course.kernels.sm100.layouts.accumulator_tmem_addresses`), drawn as lanes x columns,
    each used cell colored by the accumulator row it holds; lanes are grouped in the 4 x 32 that
    warps 0-3 of a warpgroup may access."""
    cols = max(c for _, c in addresses.values()) + 1
    grid = np.full((lanes, cols), np.nan)
    for (row, _), (lane, col) in addresses.items():
        grid[lane, col] = row
    fig = new_figure(PAGE_WIDTH, 5.4)
    ax = fig.add_subplot()
    img = ax.imshow(grid, cmap="viridis", aspect="auto", interpolation="nearest")
    for w in range(1, lanes // 32):
        ax.axhline(32 * w - 0.5, color="black", linewidth=1.2)
    side = ax.get_yaxis_transform()
    for w in range(lanes // 32):
        used = np.unique(np.argwhere(~np.isnan(grid[32 * w: 32 * w + 32]))[:, 0] + 32 * w)
        text = f"warp {w} may read lanes {32 * w}-{32 * w + 31}"
        if used.size:
            text += f"\nrows {int(np.nanmin(grid[used]))}-{int(np.nanmax(grid[used]))} in lanes {used.min()}-{used.max()}"
        ax.text(1.03, 32 * w + 16, text, transform=side, va="center", fontsize=TEXT_PT, clip_on=False)
    fig.colorbar(img, ax=ax, label="accumulator row (M) held", location="bottom", shrink=0.8, aspect=40)
    ax.set_xlabel("TMEM column (32 bits each)")
    ax.set_ylabel("TMEM lane")
    ax.tick_params(labelsize=TEXT_PT)
    ax.set_title(wrap_title(title or "Accumulator in tensor memory", 72), fontsize=TEXT_PT + 1)
    return set_caption(fig, f"{len(addresses)} fp32 elements; white: unused lanes. From the step's own accumulator layout "
                            "(TMEM address = lane << 16 | column), traced for sm_100a.", alt="Colour map of tensor memory")


_LAYOUT_NAMES = {
    "row-major": "plain row-major (a first attempt)",
    "sm90/2": "step 2: interleaved (no swizzle)",
    "sm90/3": "step 3: 128-byte swizzle",
}


def bank_maps(step_keys: Sequence[str] = ("row-major", "sm90/2", "sm90/3"), rows: int = 8, operand: str = "A") -> Figure:
    """The shared-memory bank of every element of the first ``rows`` rows of operand A, per layout.

    Each row of a 64-wide bf16 tile is 128 bytes = 8 chunks of 16 bytes = all 32 banks once.
    Cells are chunks (8 bf16), labelled with their 4 banks. The layouts are stacked, one panel
    each, at page width. The solid box marks a core-matrix column
    read (8 rows x 16 bytes: what ldmatrix/wgmma fetch), the dashed one a 128-byte row (a TMA box
    row), both black (a red or blue box would vanish on the cells of those colours); the title
    gives each one's wavefronts from :func:`gemm_course.teaching.sim.conflicts`.
    """
    from ..teaching import sim

    row_h = 0.26  # inches per row of the tile: a 9-pt label per cell
    fig = new_figure(PAGE_WIDTH, len(step_keys) * (row_h * rows + 0.75) + 1.2)
    axes = np.atleast_1d(fig.subplots(len(step_keys), 1, sharex=True))
    cmap = ListedColormap([colormaps["tab10"].colors[i % 10] for i in range(8)])
    summary = []
    repeats = True
    for ax, key in zip(axes, step_keys):
        off = sim.offsets(key, operand)
        banks = sim.bank_map(off)
        per_chunk = sim.CHUNK_BYTES // int(off[0, 1] - off[0, 0])
        chunk_banks = banks[:, ::per_chunk][:, :8]
        if not all((banks[:, c * per_chunk: (c + 1) * per_chunk] // 4 == chunk_banks[:, c:c + 1] // 4).all()
                   for c in range(8)):
            raise ValueError(f"{key}: a 16-byte chunk spans two bank groups")
        everything = chunk_banks // 4
        repeats = repeats and bool((everything[rows:2 * rows] == everything[:rows]).all())
        group = everything[:rows]
        ax.imshow(group, cmap=cmap, vmin=-0.5, vmax=7.5, aspect="auto", interpolation="nearest")
        for (r, c), g in np.ndenumerate(group):
            red, green, blue = cmap(int(g))[:3]
            ax.text(c, r, f"{4 * g}-{4 * g + 3}", ha="center", va="center", fontsize=TEXT_PT,
                    color="white" if 0.299 * red + 0.587 * green + 0.114 * blue < 0.5 else "black")
        col = sim.conflicts(off, "core-matrix column", 0, 0)
        row = sim.conflicts(off, "row", 0, 0)
        ax.add_patch(Rectangle((-0.5, -0.5), 1, min(8, rows), fill=False, edgecolor="black", linewidth=3))
        ax.add_patch(Rectangle((-0.42, -0.42), 7.84, 0.84, fill=False, edgecolor="black", linewidth=2.5, linestyle="--"))
        plural = lambda n: "s" if n > 1 else ""  # noqa: E731
        ax.set_title(f"{_LAYOUT_NAMES.get(key, key)}: {sim.layout_text(key, operand)}\n"
                     f"solid box (column read): {col.wavefronts} wavefront{plural(col.wavefronts)}, {col.conflicts} extra;  "
                     f"dashed box (128-byte row): {row.wavefronts} wavefront{plural(row.wavefronts)}, {row.conflicts} extra",
                     fontsize=TEXT_PT, loc="left")
        ax.set_yticks(range(rows))
        ax.set_ylabel("row of the tile")
        ax.tick_params(labelsize=TEXT_PT)
        summary.append(f"{key}: column read {col.wavefronts}, row {row.wavefronts}")
    axes[-1].set_xticks(range(8), [f"k {8 * c}-{8 * c + 7}" for c in range(8)])
    axes[-1].set_xlabel("16-byte chunk of the row (8 bf16)")
    fig.suptitle(f"Shared-memory banks of operand {operand}\n(cells: the 4 banks each 16-byte chunk occupies)",
                 fontsize=TEXT_PT + 2)
    more = f" Rows {rows}-{2 * rows - 1} repeat rows 0-{rows - 1} in every layout." if repeats else ""
    return set_caption(fig, "Byte offsets from the kernels' own shared-memory layouts (gemm_course.teaching.sim.offsets); "
                            "wavefronts from the bank model (gemm_course.teaching.sim.conflicts): " + "; ".join(summary) + "."
                            + more, alt="Three grids of shared-memory banks, one per layout")


def _swizzle_table(step_key: str, operand: str):
    """(8 x 8 physical chunks, the layout's text, where they came from) of a step's swizzled layout:
    a Hopper step's (rows, k) layout read by :func:`gemm_course.teaching.sim.xor_pattern`; a Blackwell step's
    ``Swizzle<B,M,S>`` (:func:`gemm_course.kernels.sm100.layouts.smem_layouts`) applied to the byte
    address ``row * 128 + chunk * 16`` of a 128-byte row."""
    from ..runtime import ladder
    from ..teaching import sim

    if ladder.get(step_key).arch == "sm100":
        from ..kernels.sm100 import layouts

        sw = layouts.smem_layouts(step_key)[operand]

        def chunk(row, c):
            address = row * 128 + c * 16
            address ^= ((address >> (sw.swizzle_base + sw.swizzle_shift)) & ((1 << sw.swizzle_bits) - 1)) << sw.swizzle_base
            return (address >> 4) & 7

        table = np.array([[chunk(r, c) for c in range(8)] for r in range(8)])
        return table, f"{sw.swizzle} o {sw.layout}", ("the step's own Swizzle<B,M,S> applied to byte addresses "
                                                       "(gemm_course.kernels.sm100.layouts.smem_layouts)")
    return (np.asarray(sim.xor_pattern(step_key, operand)), sim.layout_text(step_key, operand),
            "the step's own swizzled layout (gemm_course.teaching.sim.xor_pattern)")


def xor_pattern(step_key: str = "sm90/3", operand: str = "A") -> Figure:
    """The 128-byte swizzle as a table: where logical 16-byte chunk c of row r lands, read from the
    step's layout (a Hopper or a Blackwell step: :func:`_swizzle_table`), with the bits spelled out."""
    table, text, source = _swizzle_table(step_key, operand)
    fig = new_figure(6.4, 6.4)
    ax = fig.add_subplot()
    cmap = ListedColormap(colormaps["tab10"].colors[:8])
    ax.imshow(table, cmap=cmap, vmin=-0.5, vmax=7.5, interpolation="nearest")
    for (r, c), p in np.ndenumerate(table):
        red, green, blue = cmap(int(p))[:3]
        ax.text(c, r, f"{p}\n{p:03b}", ha="center", va="center", fontsize=TEXT_PT + 1,
                color="white" if 0.299 * red + 0.587 * green + 0.114 * blue < 0.5 else "black")
    ax.set_xticks(range(8), [f"{c}\n{c:03b}" for c in range(8)])
    ax.set_yticks(range(8), [f"{r} = {r:03b}" for r in range(8)])
    ax.tick_params(labelsize=TEXT_PT)
    ax.set_xlabel("logical 16-byte chunk of the row (k // 8), binary below")
    ax.set_ylabel("row mod 8, binary")
    ax.set_title(f"{step_key}: {wrap_title(text, 60)}\nphysical chunk of (row, chunk), binary below", fontsize=TEXT_PT + 1)
    is_xor = all(table[r, c] == (r ^ c) for r in range(8) for c in range(8))
    return set_caption(fig, f"Read from {source}. "
                            + ("Every cell equals row XOR chunk: address bits 4-6 (the chunk) are XORed with "
                               "bits 7-9 (the row within 8 rows of 128 bytes)." if is_xor else
                               "This layout is not a plain row XOR chunk."), alt="Grid of 8 by 8 cells")


def cluster_multicast(cluster_m: int, cluster_n: int, tile_m: int, tile_n: int, tile_k: int) -> Figure:
    """Who loads what in a ``cluster_m x cluster_n`` cluster: each CTA's output tile, its A tile (left)
    and B tile (above), and the slice of each shared tile that each CTA loads and multicasts.

    CTAs along M share B: B's tile splits into ``cluster_m`` slices, CTA (i, j) loads slice i and
    multicasts it to the CTAs of its column. Likewise A across ``cluster_n``.
    """
    if tile_n % cluster_m or tile_m % cluster_n:
        raise ValueError(f"a {tile_m}x{tile_n} tile does not split evenly over a {cluster_m}x{cluster_n} cluster")
    b_rows, a_rows = tile_n // cluster_m, tile_m // cluster_n
    palette = [colormaps["Set2"].colors[i] for i in range(8)]
    # Drawn in inches (one data unit = one inch), at page width: A's strip (left) and B's (top) wide
    # enough for their labels, not to scale along K; the C tiles to scale.
    k_a, k_b, gap = 1.5, 0.85, 0.32
    c_w = min((PAGE_WIDTH - 0.3 - k_a - gap - cluster_n * gap) / cluster_n, 4.2)
    c_h = max(c_w * tile_m / tile_n, 0.55 * cluster_n)
    x0, y0 = k_a + gap, k_b + gap  # C block origin (y grows downwards)
    width = x0 + cluster_n * (c_w + gap)
    height = y0 + cluster_m * (c_h + gap) - gap * 0.5
    fig = new_figure(min(PAGE_WIDTH, width + 0.3), height + 0.95)
    ax = fig.add_subplot()

    def rank(i, j):
        return i + cluster_m * j  # CuTe's column-major rank of (m, n) in the cluster layout

    for j in range(cluster_n):
        for i in range(cluster_m):
            r = rank(i, j)
            cx, cy = x0 + j * (c_w + gap), y0 + i * (c_h + gap)
            ax.add_patch(Rectangle((cx, cy), c_w, c_h, facecolor=palette[r], alpha=0.35, edgecolor="black", linewidth=1.5))
            ax.text(cx + c_w / 2, cy + c_h / 2, f"CTA {r} (cluster coord {i},{j})\ncomputes C tile\n{tile_m}x{tile_n}",
                    ha="center", va="center", fontsize=TEXT_PT)
            for s in range(cluster_n):  # A tile of row i, sliced across the cluster's columns
                owner = rank(i, s)
                ay = cy + s * c_h / cluster_n
                ax.add_patch(Rectangle((0, ay), k_a, c_h / cluster_n, facecolor=palette[owner], edgecolor="black"))
                if j == 0:
                    who = f"loaded by CTA {owner}\nmulticast to the row" if cluster_n > 1 else f"loaded by\nCTA {owner} alone"
                    ax.text(k_a / 2, ay + c_h / cluster_n / 2, f"A {a_rows}x{tile_k}\n{who}", ha="center", va="center",
                            fontsize=TEXT_PT, linespacing=1.1)
        for s in range(cluster_m):  # B tile of column j, sliced across the cluster's rows
            owner = rank(s, j)
            slice_w = c_w / cluster_m
            bx = x0 + j * (c_w + gap) + s * slice_w
            ax.add_patch(Rectangle((bx, 0), slice_w, k_b, facecolor=palette[owner], edgecolor="black"))
            ax.text(bx + slice_w / 2, k_b / 2,
                    f"B rows {s * b_rows}-{(s + 1) * b_rows - 1}\nloaded by CTA {owner}" +
                    ("\nmulticast to\nthe column" if cluster_m > 1 else ""), ha="center", va="center", fontsize=TEXT_PT,
                    linespacing=1.1)
            arrow = {"arrowstyle": "-|>", "color": palette[owner], "linewidth": 2.0, "shrinkA": 0, "shrinkB": 0}
            cx = x0 + j * (c_w + gap)
            mid = bx + slice_w / 2
            ax.annotate("", xy=(mid, y0), xytext=(mid, k_b), arrowprops=arrow)  # into the CTA right below
            for i in range(1, cluster_m):  # farther CTAs: routed around the column, entering from the side
                left_side = s < cluster_m / 2
                route = cx - gap * (0.3 + 0.2 * i) if left_side else cx + c_w + gap * (0.3 + 0.2 * i)
                ty = y0 + i * (c_h + gap) + c_h * (0.3 + 0.1 * i)
                ax.plot([mid, mid, route, route], [k_b, k_b + gap * 0.45, k_b + gap * 0.45, ty],
                        color=palette[owner], linewidth=2.0, solid_capstyle="butt")
                ax.annotate("", xy=(cx if left_side else cx + c_w, ty), xytext=(route, ty), arrowprops=arrow)
    ax.set_xlim(-0.05, width)
    ax.set_ylim(height, -0.05)
    ax.set_aspect("equal")
    ax.axis("off")
    a_bytes, b_bytes = tile_m * tile_k * 2, tile_n * tile_k * 2
    ax.set_title(f"A {cluster_m} x {cluster_n} cluster: per K tile each CTA issues {a_bytes // cluster_n // 1024} KiB "
                 f"of A and {b_bytes // cluster_m // 1024} KiB of B,\nand receives {a_bytes // 1024} + {b_bytes // 1024} KiB",
                 fontsize=TEXT_PT + 1)
    return set_caption(fig, "Tile sizes and cluster shape from the step's traced host objects; each CTA of a column "
                            f"loads {b_rows} of the B tile's {tile_n} rows (and of a row, {a_rows} of A's {tile_m}). "
                            "Colour = the CTA that issues the copy; arrows: a multicast copy lands in the shared memory "
                            "of every CTA it points to. Not to scale along K.", alt="Diagram of a cluster's tiles and copies")


def _runs(values: Iterable[int]) -> list:
    """Sorted integers as contiguous runs [(first, last), ...]."""
    out: list = []
    for v in sorted(values):
        if out and v == out[-1][1] + 1:
            out[-1][1] = v
        else:
            out.append([v, v])
    return [tuple(r) for r in out]


def cta_pair_split(split: dict, title: str = "") -> Figure:
    """What each CTA of a ``cta_group::2`` pair holds (``{v: PairShare}`` from
    :func:`gemm_course.kernels.sm100.layouts.pair_split`): A rows and B rows in its shared memory,
    and the rows of C in its tensor memory, colored by CTA."""
    shares = [split[v] for v in sorted(split)]
    rows_a = 1 + max(r for s in shares for r in s.a_rows)
    rows_b = 1 + max(r for s in shares for r in s.b_rows)
    depth = 1 + max(k for s in shares for _, k in s.a)
    fig = new_figure(PAGE_WIDTH, 5.6)
    ax = fig.add_subplot()
    k_w = 0.32 * rows_a  # K drawn wider than to scale, room for labels
    gap = 0.06 * rows_a
    x0, y0 = k_w + gap, k_w + gap  # C's corner; y grows downwards
    for s in shares:
        color = CTA_COLORS[s.cta % len(CTA_COLORS)]
        for first, last in _runs(s.a_rows):
            ax.add_patch(Rectangle((0, y0 + first), k_w, last - first + 1, facecolor=color, edgecolor="black",
                                   gid=f"A{s.cta}"))
            ax.text(k_w / 2, y0 + (first + last) / 2, f"A rows\n{first}-{last}\nCTA {s.cta}", ha="center",
                    va="center", fontsize=TEXT_PT, color="white")
        for first, last in _runs(s.b_rows):
            ax.add_patch(Rectangle((x0 + first, 0), last - first + 1, k_w, facecolor=color, edgecolor="black",
                                   gid=f"B{s.cta}"))
            ax.text(x0 + (first + last) / 2, k_w / 2, f"B rows {first}-{last}\n(C columns)\nCTA {s.cta}",
                    ha="center", va="center", fontsize=TEXT_PT, color="white")
        cols = _runs(s.c_cols)
        for first, last in _runs(s.c_rows):
            for c_first, c_last in cols:
                ax.add_patch(Rectangle((x0 + c_first, y0 + first), c_last - c_first + 1, last - first + 1,
                                       facecolor=color, alpha=0.35, edgecolor="black", gid=f"C{s.cta}"))
            lanes = sorted({lane for lane, _ in s.tmem})
            ax.text(x0 + (cols[0][0] + cols[-1][1]) / 2, y0 + (first + last) / 2,
                    f"CTA {s.cta}'s accumulator (TMEM lanes {lanes[0]}-{lanes[-1]}):\nC rows {first}-{last}, "
                    f"columns {cols[0][0]}-{cols[-1][1]}", ha="center", va="center", fontsize=TEXT_PT)
    ax.set_xlim(-1, x0 + rows_b + 1)
    ax.set_ylim(y0 + rows_a + 1, -1)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.set_title(title or f"One K tile of {depth} (tcgen05.mma.cta_group::2 on {rows_a} x {rows_b}): what each CTA holds",
                 fontsize=TEXT_PT + 1)
    return set_caption(fig, "From the step's own tiled MMA: get_slice(v).partition_A / partition_B / "
                            "partition_C of identity tensors of the pair's tiles (traced for sm_100a), and "
                            "the accumulator's TMEM layout. Each CTA holds half of A and half of B, but "
                            "all columns of C for its rows.", alt="Diagram of the A, B and C tiles of a CTA pair")


def multicast_mask_grid(masks: dict, cluster_m: int, cluster_n: int, title: str = "") -> Figure:
    """TMA multicast masks of a cluster (``{rank: (A mask, B mask)}``, e.g. from
    :func:`gemm_course.kernels.sm100.layouts.tma_multicast_masks`): for each operand a grid whose
    row r marks the CTAs that CTA r's load lands in (bit c of its mask)."""
    size = cluster_m * cluster_n
    fig = new_figure(PAGE_WIDTH, 2.6 + 0.3 * size)
    axes = fig.subplots(1, 2)
    names = [f"{r} ({r % cluster_m},{r // cluster_m})" for r in range(size)]
    for ax, operand, which in zip(axes, ("A", "B"), (0, 1)):
        for r in range(size):
            for c in range(size):
                on = masks[r][which] >> c & 1
                ax.add_patch(Rectangle((c - 0.5, r - 0.5), 1, 1, facecolor=CTA_COLORS[r % len(CTA_COLORS)] if on
                                       else "white", edgecolor="#999999", linewidth=0.6, gid="bit" if on else None))
        ax.set_xlim(-0.5, size - 0.5)
        ax.set_ylim(size - 0.5, -0.5)
        ax.set_aspect("equal")
        ax.set_xticks(range(size))
        ax.set_xticklabels([str(r) for r in range(size)], fontsize=TEXT_PT)
        ax.set_yticks(range(size))
        ax.set_yticklabels(names, fontsize=TEXT_PT)
        ax.set_xlabel("receiving CTA rank", fontsize=TEXT_PT)
        shared = "along N (same rows of A)" if operand == "A" else "along M (same half of B)"
        ax.set_title(f"{operand}: shared {shared}", fontsize=TEXT_PT)
    axes[0].set_ylabel("issuing CTA: rank (x, y)", fontsize=TEXT_PT)
    fig.suptitle(title or f"TMA multicast masks of a {cluster_m} x {cluster_n} cluster of CTA pairs",
                 fontsize=TEXT_PT + 1)
    return set_caption(fig, "Rank = x + cluster_m * y; x = place in the pair + 2 * pair along M. A filled "
                                 "cell: the issuing CTA's TMA load also writes that CTA's shared memory "
                                 "(create_tma_multicast_mask with the step's own cluster layout).", alt="Two grids of cells")
