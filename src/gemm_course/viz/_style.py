"""What the figure families share: creating a figure, attaching its caption, the colours."""

from __future__ import annotations

import textwrap

from matplotlib import colormaps
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure

MEASURED = "#1f77b4"
LIVE = "#2ca02c"
CUBLAS = "#d62728"
SEED = "#7f7f7f"
CTA_COLORS = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3", "#8c8c8c")

PAGE_WIDTH = 7.0  # inches: figures drawn at page width keep their text at TEXT_PT or more
TEXT_PT = 9


def new_figure(width: float, height: float) -> Figure:
    """A figure outside ``pyplot``: a notebook shows it once, as a cell's value, and tests leak no windows."""
    return Figure(figsize=(width, height), layout="constrained")


def set_caption(fig: Figure, caption: str, width: int = 110, fontsize: float = 7.5, h_pad: float = 0.1) -> Figure:
    """Attach ``caption`` to ``fig`` (``fig.caption``) and print it under the axes, wrapped at
    ``width`` characters; each line of ``caption`` starts a paragraph."""
    fig.caption = caption
    wrapped = "\n".join(textwrap.fill(p, width) for p in caption.split("\n") if p)
    fig.get_layout_engine().set(h_pad=h_pad)
    fig.supxlabel(wrapped, fontsize=fontsize, ha="left", x=0.01, color="#333333")
    return fig


def readable_caption(fig: Figure, caption: str, width: int = 100) -> Figure:
    """:func:`set_caption` at :data:`TEXT_PT`, for the figures drawn at :data:`PAGE_WIDTH`."""
    return set_caption(fig, caption, width, fontsize=TEXT_PT, h_pad=0.05)


def thread_colors(count: int) -> ListedColormap:
    """``count`` distinct colours, one per thread (tab20 then tab20b, repeating)."""
    base = list(colormaps["tab20"].colors) + list(colormaps["tab20b"].colors)
    return ListedColormap([base[i % len(base)] for i in range(count)])
