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

from ._style import CTA_COLORS, PAGE_WIDTH, TEXT_PT, new_figure, readable_caption, set_caption, thread_colors


def layout_grid(table: dict, title: Optional[str] = None, highlight: Optional[Sequence] = None) -> Figure:
    """Draw a layout as CuTe evaluates it: cell (row, col) shows its offset (from
    :func:`gemm_course.cute_basics.layout_table`). ``highlight``: (row, col) cells to outline."""
    offsets = np.array(table["offsets"])
    rows, cols = offsets.shape
    fig = new_figure(max(3.5, 0.55 * cols + 1.5), max(2.2, 0.5 * rows + 1.2))
    ax = fig.add_subplot()
    ax.imshow(offsets, cmap="viridis", aspect="equal")
    for i in range(rows):
        for j in range(cols):
            v = offsets[i, j]
            ax.text(j, i, str(v), ha="center", va="center", fontsize=9,
                    color="white" if v < offsets.max() * 0.6 else "black")
    for r, c in highlight or ():
        ax.add_patch(Rectangle((c - 0.5, r - 0.5), 1, 1, fill=False, edgecolor="red", linewidth=2.5))
    ax.set_xticks(range(cols))
    ax.set_yticks(range(rows))
    ax.set_xlabel("column coordinate")
    ax.set_ylabel("row coordinate")
    ax.set_title(title or f"layout {table['text']}: (row, col) -> offset", fontsize=10)
    return fig


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

    Left: the whole tile, colored by ``group`` (warp). Right: the top-left ``zoom`` corner, colored
    by thread, each cell labelled ``T<thread>`` and ``V<value index>``.
    """
    thread = np.array(owners["thread"])
    value = np.array(owners["value"]) if owners.get("value") is not None else None
    rows, cols = thread.shape
    zr, zc = min(zoom[0], rows), min(zoom[1], cols)
    groups = thread // group_size
    ngroups = int(groups.max()) + 1

    fig = new_figure(13, 5.2)
    left, right = fig.subplots(1, 2, width_ratios=[1.1, 1])
    left.imshow(groups, cmap=ListedColormap(colormaps["Set2"].colors[:ngroups]), aspect="auto",
                interpolation="nearest", vmin=-0.5, vmax=ngroups - 0.5)
    left.add_patch(Rectangle((-0.5, -0.5), zc, zr, fill=False, edgecolor="black", linewidth=2))
    left.set_xlabel(f"column of the {rows}x{cols} accumulator tile (N)")
    left.set_ylabel("row (M)")
    left.set_title(f"whole tile: colored by {group_name} ({group_size} threads each)", fontsize=10)
    left.legend(handles=[Patch(color=colormaps["Set2"].colors[g], label=f"{group_name} {g}") for g in range(ngroups)],
                fontsize=8, loc="upper right", framealpha=0.9)

    corner = thread[:zr, :zc]
    uniq = sorted(set(corner.ravel().tolist()))
    index = {t: i for i, t in enumerate(uniq)}
    right.imshow(np.vectorize(index.get)(corner), cmap=thread_colors(len(uniq)), aspect="auto",
                 interpolation="nearest", vmin=-0.5, vmax=len(uniq) - 0.5)
    for i in range(zr):
        for j in range(zc):
            label = f"T{thread[i, j]}" + (f"\nV{value[i, j]}" if value is not None else "")
            right.text(j, i, label, ha="center", va="center", fontsize=6.5)
    right.set_xticks(range(zc))
    right.set_yticks(range(zr))
    right.set_xlabel("column (N)")
    right.set_ylabel("row (M)")
    right.set_title(f"top-left {zr}x{zc}: thread T, its value index V", fontsize=10)
    fig.suptitle(title, fontsize=11)
    per_thread = collections.Counter(thread.ravel().tolist())
    counts = sorted(set(per_thread.values()))
    return set_caption(fig, f"{owners.get('source', '')} {len(per_thread)} threads, "
                            f"{'/'.join(map(str, counts))} elements each.".strip())


def tmem_map(addresses: dict, lanes: int = 128, title: str = "") -> Figure:
    """Where the accumulator sits in tensor memory: ``{(row, col): (lane, column)}`` (from
    :func:`gemm_course.kernels.sm100.layouts.accumulator_tmem_addresses`), drawn as lanes x columns,
    each used cell colored by the accumulator row it holds; lanes are grouped in the 4 x 32 that
    warps 0-3 of a warpgroup may access."""
    cols = max(c for _, c in addresses.values()) + 1
    grid = np.full((lanes, cols), np.nan)
    for (row, _), (lane, col) in addresses.items():
        grid[lane, col] = row
    fig = new_figure(9, 5.5)
    ax = fig.add_subplot()
    img = ax.imshow(grid, cmap="viridis", aspect="auto", interpolation="nearest")
    for w in range(1, lanes // 32):
        ax.axhline(32 * w - 0.5, color="black", linewidth=1.2)
    for w in range(lanes // 32):
        used = np.unique(np.argwhere(~np.isnan(grid[32 * w: 32 * w + 32]))[:, 0] + 32 * w)
        text = f"warp {w} may read lanes {32 * w}-{32 * w + 31}"
        if used.size:
            text += f"\nrows {int(np.nanmin(grid[used]))}-{int(np.nanmax(grid[used]))} in lanes {used.min()}-{used.max()}"
        ax.text(cols + 2, 32 * w + 16, text, va="center", fontsize=8)
    fig.colorbar(img, ax=ax, label="accumulator row (M) held", location="left", shrink=0.8)
    ax.set_xlabel("TMEM column (32 bits each)")
    ax.set_ylabel("TMEM lane")
    ax.set_xlim(-0.5, cols + 75)
    ax.set_title(title or f"Accumulator in tensor memory ({len(addresses)} fp32 elements; white: unused lanes)", fontsize=10)
    return set_caption(fig, "From the step's own accumulator layout (TMEM address = lane << 16 | column), "
                            "traced for sm_100a.")


_LAYOUT_NAMES = {
    "row-major": "plain row-major (a first attempt)",
    "sm90/2": "step 2: interleaved (no swizzle)",
    "sm90/3": "step 3: 128-byte swizzle",
}


def bank_maps(step_keys: Sequence[str] = ("row-major", "sm90/2", "sm90/3"), rows: int = 16, operand: str = "A") -> Figure:
    """The shared-memory bank of every element of the first ``rows`` rows of operand A, per layout.

    Each row of a 64-wide bf16 tile is 128 bytes = 8 chunks of 16 bytes = all 32 banks once.
    Cells are chunks (8 bf16), labelled with their 4 banks. The red box marks a core-matrix column
    read (8 rows x 16 bytes: what ldmatrix/wgmma fetch), the blue one a 128-byte row (a TMA box
    row); the title gives each one's wavefronts from :func:`gemm_course.sim.conflicts`.
    """
    from .. import sim

    fig = new_figure(5 * len(step_keys), 0.33 * rows + 2.6)
    axes = np.atleast_1d(fig.subplots(1, len(step_keys)))
    cmap = ListedColormap([colormaps["tab10"].colors[i % 10] for i in range(8)])
    summary = []
    for ax, key in zip(axes, step_keys):
        off = sim.offsets(key, operand)
        banks = sim.bank_map(off)
        per_chunk = sim.CHUNK_BYTES // int(off[0, 1] - off[0, 0])
        chunk_banks = banks[:rows, ::per_chunk][:, :8]
        if not all((banks[:rows, c * per_chunk: (c + 1) * per_chunk] // 4 == chunk_banks[:, c:c + 1] // 4).all()
                   for c in range(8)):
            raise ValueError(f"{key}: a 16-byte chunk spans two bank groups")
        group = chunk_banks // 4
        ax.imshow(group, cmap=cmap, vmin=-0.5, vmax=7.5, aspect="auto", interpolation="nearest")
        for (r, c), g in np.ndenumerate(group):
            ax.text(c, r, f"{4 * g}-{4 * g + 3}", ha="center", va="center", fontsize=7)
        col = sim.conflicts(off, "core-matrix column", 0, 0)
        row = sim.conflicts(off, "row", 0, 0)
        ax.add_patch(Rectangle((-0.5, -0.5), 1, 8, fill=False, edgecolor="red", linewidth=2.5))
        ax.add_patch(Rectangle((-0.45, -0.45), 7.9, 0.9, fill=False, edgecolor="blue", linewidth=2, linestyle="--"))
        ax.set_title(f"{_LAYOUT_NAMES.get(key, key)}\n{sim.layout_text(key, operand)}\n"
                     f"red (column read): {col.wavefronts} wavefront{'s' if col.wavefronts > 1 else ''}, "
                     f"{col.conflicts} extra\nblue (128 B row): {row.wavefronts} wavefront{'s' if row.wavefronts > 1 else ''}, "
                     f"{row.conflicts} extra", fontsize=8.5)
        ax.set_xticks(range(8))
        ax.set_xticklabels([f"k {8 * c}-{8 * c + 7}" for c in range(8)], rotation=45, fontsize=7)
        ax.set_yticks(range(rows))
        ax.set_ylabel("row of the tile")
        ax.set_xlabel("16-byte chunk of the row (8 bf16)")
        summary.append(f"{key}: column read {col.wavefronts}, row {row.wavefronts}")
    fig.suptitle(f"Shared-memory banks of operand {operand} (cells: the 4 banks a 16-byte chunk occupies)", fontsize=11)
    return set_caption(fig, "Byte offsets from the kernels' own shared-memory layouts (gemm_course.sim.offsets); "
                            "wavefronts from the bank model (gemm_course.sim.conflicts): " + "; ".join(summary) + ".")


def xor_pattern(step_key: str = "sm90/3", operand: str = "A") -> Figure:
    """The 128-byte swizzle as a table: where logical 16-byte chunk c of row r lands
    (:func:`gemm_course.sim.xor_pattern`, read from the kernel's layout), with the bits spelled out."""
    from .. import sim

    table = np.asarray(sim.xor_pattern(step_key, operand))
    fig = new_figure(7.5, 6.2)
    ax = fig.add_subplot()
    ax.imshow(table, cmap=ListedColormap(colormaps["tab10"].colors[:8]), vmin=-0.5, vmax=7.5, interpolation="nearest")
    for (r, c), p in np.ndenumerate(table):
        ax.text(c, r, f"{p}\n{p:03b}", ha="center", va="center", fontsize=8)
    ax.set_xticks(range(8))
    ax.set_xticklabels([f"{c}\n{c:03b}" for c in range(8)], fontsize=8)
    ax.set_yticks(range(8))
    ax.set_yticklabels([f"{r} = {r:03b}" for r in range(8)], fontsize=8)
    ax.set_xlabel("logical 16-byte chunk of the row (k // 8), binary below")
    ax.set_ylabel("row mod 8, binary")
    ax.set_title(f"{sim.layout_text(step_key, operand)}\nphysical chunk of (row, chunk)", fontsize=10)
    is_xor = all(table[r, c] == (r ^ c) for r in range(8) for c in range(8))
    return set_caption(fig, "Read from the step's own swizzled layout (gemm_course.sim.xor_pattern). "
                            + ("Every cell equals row XOR chunk: address bits 4-6 (the chunk) are XORed with "
                               "bits 7-9 (the row within 8 rows of 128 bytes)." if is_xor else
                               "This layout is not a plain row XOR chunk."))


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
    fig = new_figure(3.2 + 3.0 * cluster_n + 1.2, 2.2 + 2.1 * cluster_m + 0.8)
    ax = fig.add_subplot()
    scale = 1.0 / 128  # 128 elements per drawing unit
    gap = 0.35
    k_w = max(tile_k * scale * 2.0, 0.6)  # K drawn wider than to scale, to leave room for text
    c_w, c_h = tile_n * scale, tile_m * scale
    x0, y0 = k_w + gap, k_w + gap  # C block origin (y grows downwards)

    def rank(i, j):
        return i + cluster_m * j  # CuTe's column-major rank of (m, n) in the cluster layout

    for j in range(cluster_n):
        for i in range(cluster_m):
            r = rank(i, j)
            cx, cy = x0 + j * (c_w + gap), y0 + i * (c_h + gap)
            ax.add_patch(Rectangle((cx, cy), c_w, c_h, facecolor=palette[r], alpha=0.35, edgecolor="black", linewidth=1.5))
            ax.text(cx + c_w / 2, cy + c_h / 2, f"CTA {r} (cluster coord {i},{j})\ncomputes C tile\n{tile_m}x{tile_n}",
                    ha="center", va="center", fontsize=8.5)
            for s in range(cluster_n):  # A tile of row i, sliced across the cluster's columns
                owner = rank(i, s)
                ay = cy + s * a_rows * scale
                ax.add_patch(Rectangle((0, ay), k_w, a_rows * scale, facecolor=palette[owner], edgecolor="black"))
                if j == 0:
                    who = f"loaded by CTA {owner}\nmulticast to the row" if cluster_n > 1 else f"loaded by\nCTA {owner} alone"
                    ax.text(k_w / 2, ay + a_rows * scale / 2, f"A {a_rows}x{tile_k}\n{who}", ha="center", va="center",
                            fontsize=7.5 if cluster_n == 1 else 6.5)
        for s in range(cluster_m):  # B tile of column j, sliced across the cluster's rows
            owner = rank(s, j)
            bx = x0 + j * (c_w + gap) + s * b_rows * scale
            ax.add_patch(Rectangle((bx, 0), b_rows * scale, k_w, facecolor=palette[owner], edgecolor="black"))
            ax.text(bx + b_rows * scale / 2, k_w / 2,
                    f"B rows {s * b_rows}-{(s + 1) * b_rows - 1}\nloaded by CTA {owner}" +
                    ("\nmulticast to the column" if cluster_m > 1 else ""), ha="center", va="center", fontsize=7.5)
            arrow = {"arrowstyle": "-|>", "color": palette[owner], "linewidth": 2.0, "shrinkA": 0, "shrinkB": 0}
            cx = x0 + j * (c_w + gap)
            mid = bx + b_rows * scale / 2
            ax.annotate("", xy=(mid, y0), xytext=(mid, k_w), arrowprops=arrow)  # into the CTA right below
            for i in range(1, cluster_m):  # farther CTAs: routed around the column, entering from the side
                left_side = s < cluster_m / 2
                route = cx - gap * (0.3 + 0.2 * i) if left_side else cx + c_w + gap * (0.3 + 0.2 * i)
                ty = y0 + i * (c_h + gap) + c_h * (0.3 + 0.1 * i)
                ax.plot([mid, mid, route, route], [k_w, k_w + gap * 0.45, k_w + gap * 0.45, ty],
                        color=palette[owner], linewidth=2.0, solid_capstyle="butt")
                ax.annotate("", xy=(cx if left_side else cx + c_w, ty), xytext=(route, ty), arrowprops=arrow)
    width = x0 + cluster_n * (c_w + gap) + gap * 0.5
    height = y0 + cluster_m * (c_h + gap)
    ax.set_xlim(-0.1, width)
    ax.set_ylim(height, -0.1)
    ax.set_aspect("equal")
    ax.axis("off")
    a_bytes, b_bytes = tile_m * tile_k * 2, tile_n * tile_k * 2
    ax.set_title(f"A {cluster_m} x {cluster_n} cluster: per K tile each CTA issues {a_bytes // cluster_n // 1024} KiB "
                 f"of A and {b_bytes // cluster_m // 1024} KiB of B, receives {a_bytes // 1024} + {b_bytes // 1024} KiB",
                 fontsize=10)
    return set_caption(fig, "Tile sizes and cluster shape from the step's traced host objects; each CTA of a column "
                            f"loads {b_rows} of the B tile's {tile_n} rows (and of a row, {a_rows} of A's {tile_m}). "
                            "Colour = the CTA that issues the copy; arrows: a multicast copy lands in the shared memory "
                            "of every CTA it points to. Not to scale along K.")


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
    ax.set_title(title or f"One tcgen05.mma.cta_group::2 of {rows_a} x {rows_b} x {depth}: what each CTA holds",
                 fontsize=TEXT_PT + 1)
    return readable_caption(fig, "From the step's own tiled MMA: get_slice(v).partition_A / partition_B / "
                                 "partition_C of identity tensors of the pair's tiles (traced for sm_100a), and "
                                 "the accumulator's TMEM layout. Each CTA holds half of A and half of B, but "
                                 "all columns of C for its rows.")


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
    return readable_caption(fig, "Rank = x + cluster_m * y; x = place in the pair + 2 * pair along M. A filled "
                                 "cell: the issuing CTA's TMA load also writes that CTA's shared memory "
                                 "(create_tma_multicast_mask with the step's own cluster layout).", width=95)
