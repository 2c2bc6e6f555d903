"""What the figure families share: the page they are drawn for, creating a figure, its caption and
alt text, how a notebook and the book show it (HTML: an image and its caption), the colours.

A figure is drawn for the book's content column: at most :data:`PAGE_WIDTH` inches wide, every
text at :data:`TEXT_PT` points or more, shown at its own size (1 inch = 96 CSS pixels, a point a
point) and never wider than the column. Its caption is not drawn: it is ``fig.caption``, which the
HTML shows under the image (``<figcaption>``), with an ``alt`` text made from the figure's titles,
axis labels and the caption's first sentence.
"""

from __future__ import annotations

import base64
import dataclasses
import html
import io
import re
from typing import List, Optional

import numpy as np
from matplotlib import colormaps
from matplotlib import image as mimage
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.text import Text
from matplotlib.transforms import Bbox

MEASURED = "#1f77b4"
LIVE = "#2ca02c"
CUBLAS = "#d62728"
SEED = "#7f7f7f"
CTA_COLORS = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3", "#8c8c8c")

# The book's content column (sphinx-book-theme, in a 1280-pixel-wide window) is 688 CSS pixels,
# 7.17 inches at 96 pixels per inch. Figures are drawn at most PAGE_WIDTH wide and shown at their
# own size, so a text of TEXT_PT points or more in the figure reads at TEXT_PT or more on the page.
PAGE_WIDTH = 7.0  # inches
TEXT_PT = 9  # the smallest text a figure may draw, in points
CSS_DPI = 96  # CSS pixels per inch: an image shown at width_in * CSS_DPI pixels has its text at its size
PNG_DPI = 144  # pixels per inch of the PNG the HTML embeds (1.5 device pixels per CSS pixel: sharp on HiDPI)


class CourseFigure(Figure):
    """A :class:`~matplotlib.figure.Figure` that knows its caption and shows itself as HTML.

    IPython asks objects for ``_repr_html_``: a notebook (and myst-nb, whose HTML output prefers
    ``text/html``) then shows ``<figure><img alt=...><figcaption>caption</figcaption></figure>``;
    the ``image/png`` that ``%matplotlib inline`` adds beside it stays for other front ends."""

    caption: str = ""
    alt_prefix: str = ""  # what kind of figure it is ("Horizontal bar chart"), the start of its alt text

    def _repr_html_(self) -> str:
        return figure_html(self)


def new_figure(width: float, height: float) -> CourseFigure:
    """A figure outside ``pyplot``: a notebook shows it once, as a cell's value, and tests leak no
    windows. ``width`` is at most :data:`PAGE_WIDTH`: a wider figure would be shown shrunk, its
    text below :data:`TEXT_PT`."""
    if width > PAGE_WIDTH + 1e-9:
        raise ValueError(f"a figure {width:.2f} in wide is wider than the page ({PAGE_WIDTH} in)")
    fig = CourseFigure(figsize=(width, height), layout="constrained", facecolor="white")
    fig.get_layout_engine().set(w_pad=5 / 72, h_pad=5 / 72)  # a little more than the default 3 pt around the edges
    return fig


def message_figure(text: str, caption: str, height: float = 1.5, fontsize: float = TEXT_PT + 1) -> Figure:
    """A page-wide figure that says, in place of a plot, why there is none (e.g. no record yet); the
    text is wrapped to the page (a long line would run out of the image at both sides)."""
    fig = new_figure(PAGE_WIDTH, height)
    ax = fig.add_subplot()
    ax.text(0.5, 0.5, wrap_title(text, round(70 * (TEXT_PT + 1) / fontsize)), ha="center", va="center",
            transform=ax.transAxes, fontsize=fontsize)
    ax.axis("off")
    return set_caption(fig, caption)


def set_caption(fig: Figure, caption: str, alt: str = "") -> Figure:
    """Attach ``caption`` to ``fig`` (``fig.caption``; each line of it a paragraph), shown under the
    figure by its HTML, not drawn in it. ``alt``: what kind of figure it is, the start of its alt text."""
    fig.caption = caption
    if alt:
        fig.alt_prefix = alt
    return fig


def thread_colors(count: int) -> ListedColormap:
    """``count`` distinct colours, one per thread (tab20 then tab20b, repeating)."""
    base = list(colormaps["tab20"].colors) + list(colormaps["tab20b"].colors)
    return ListedColormap([base[i % len(base)] for i in range(count)])


def wrap_title(text: str, width: int = 70) -> str:
    """``text`` broken into lines of at most ``width`` characters (a title at 10 pt across the page)."""
    import textwrap

    return "\n".join(textwrap.fill(line, width) for line in text.split("\n"))


# ---------------------------------------------------------------------------------------------
# drawing, and what was drawn
# ---------------------------------------------------------------------------------------------


@dataclasses.dataclass
class DrawnText:
    """One text as the renderer drew it: its string, size in points, and box in pixels of the
    rendered image (``bbox``), and the part of it inside its clip box (``visible``: None if none)."""

    text: str
    size: float
    bbox: Bbox
    visible: Optional[Bbox]
    artist: object


@dataclasses.dataclass
class Rendering:
    png: bytes
    width_px: int
    height_px: int
    dpi: float
    texts: List[DrawnText]

    @property
    def shown(self) -> List[DrawnText]:
        """The texts any part of which is visible (not clipped away entirely)."""
        return [t for t in self.texts if t.visible is not None]

    def min_pt(self) -> float:
        return min((t.size for t in self.shown), default=float(TEXT_PT))

    def cut(self, tolerance: float = 1.0) -> List[DrawnText]:
        """Texts that stick out of the image, or are partly clipped."""
        out = []
        for t in self.shown:
            b = t.bbox
            outside = (b.x0 < -tolerance or b.y0 < -tolerance or b.x1 > self.width_px + tolerance
                       or b.y1 > self.height_px + tolerance)
            clipped = t.visible.width < b.width - tolerance or t.visible.height < b.height - tolerance
            if outside or clipped:
                out.append(t)
        return out

    def overlaps(self, tolerance: float = 1.5) -> list:
        """Pairs of shown texts whose boxes overlap by more than ``tolerance`` pixels both ways."""
        shown = [t for t in self.shown if t.text.strip()]
        pairs = []
        for i, a in enumerate(shown):
            for b in shown[i + 1:]:
                if a.artist is b.artist:
                    continue
                w = min(a.bbox.x1, b.bbox.x1) - max(a.bbox.x0, b.bbox.x0)
                h = min(a.bbox.y1, b.bbox.y1) - max(a.bbox.y0, b.bbox.y0)
                if w > tolerance and h > tolerance:
                    pairs.append((a.text, b.text))
        return pairs


def render(fig: Figure, dpi: float = PNG_DPI) -> Rendering:
    """Draw ``fig`` once with Agg at ``dpi`` at its own size (no tight bounding box: the layout
    engine keeps everything inside), recording every text drawn (each :class:`~matplotlib.text.Text`
    whose ``draw`` ran while visible and not empty)."""
    drawn = []
    plain = Text.draw

    def draw(self, renderer):
        if self.get_visible() and self.get_text() != "":
            drawn.append(self)
        return plain(self, renderer)

    old_canvas, old_dpi = fig.canvas, fig.dpi
    Text.draw = draw
    try:
        canvas = FigureCanvasAgg(fig)
        fig.dpi = dpi
        canvas.draw()
        renderer = canvas.get_renderer()
        width, height = (int(v) for v in renderer.get_canvas_width_height())
        texts = []
        for t in dict.fromkeys(drawn):  # once each, in drawing order
            box = t.get_window_extent(renderer)
            clip = t.get_clip_box() if t.get_clip_on() else None
            visible = box if clip is None else Bbox.intersection(box, clip)
            if visible is not None and (visible.width <= 0 or visible.height <= 0):
                visible = None
            texts.append(DrawnText(t.get_text(), t.get_fontsize(), box, visible, t))
        buf = io.BytesIO()
        mimage.imsave(buf, np.asarray(canvas.buffer_rgba()), format="png", dpi=dpi)
        return Rendering(buf.getvalue(), width, height, dpi, texts)
    finally:
        Text.draw = plain
        fig.dpi = old_dpi
        fig.canvas = old_canvas


# ---------------------------------------------------------------------------------------------
# the HTML: <figure><img alt><figcaption>
# ---------------------------------------------------------------------------------------------


def _first_sentence(text: str) -> str:
    text = " ".join(text.split())
    m = re.search(r"(?<=[.!?])\s+(?=[A-Z(])", text)
    return text[: m.start()] if m else text


def _plain(text: str) -> str:
    return " ".join(text.replace("$", "").split())


def figure_alt(fig: Figure) -> str:
    """What the figure shows, in words: its kind (``fig.alt_prefix``), its titles, what each panel
    plots (y against x), and the caption's first sentence."""
    parts = []
    if getattr(fig, "alt_prefix", ""):
        parts.append(fig.alt_prefix)
    suptitle = fig._suptitle.get_text() if getattr(fig, "_suptitle", None) else ""
    if suptitle.strip():
        parts.append(_plain(suptitle))
    for legend in fig.legends:
        title = legend.get_title().get_text()
        if title.strip():
            parts.append(_plain(title))
    for ax in fig.axes:
        if getattr(ax, "_colorbar", None) is not None or ax.get_label() == "<colorbar>":
            continue
        title = " ".join(_plain(ax.get_title(loc)) for loc in ("left", "center", "right") if ax.get_title(loc).strip())
        y, x = _plain(ax.get_ylabel()), _plain(ax.get_xlabel())
        plotted = f"{y} against {x}" if x and y else (x or y)
        panel = ": ".join(p for p in (title, plotted) if p)
        if panel and panel not in parts:
            parts.append(panel)
    caption = getattr(fig, "caption", "")
    if caption.strip():
        parts.append(_first_sentence(caption))
    return ". ".join(p.rstrip(".") for p in parts if p) + "." if parts else "A figure."


def figure_html(fig: Figure) -> str:
    """``<figure>``: the PNG (base64) shown at the figure's own size and at most the column's
    width, its alt text, and the caption (``fig.caption``) as ``<figcaption>``. The image carries
    its designed width (``data-width-in``) and its smallest text (``data-min-pt``), which the
    book's browser test checks against the width it is shown at."""
    r = render(fig)
    width_in = fig.get_size_inches()[0]
    css_width = round(width_in * CSS_DPI)
    data = base64.b64encode(r.png).decode("ascii")
    alt = html.escape(figure_alt(fig), quote=True)
    caption = getattr(fig, "caption", "")
    paragraphs = "".join(f'<p style="margin: 0 0 0.4em 0;">{html.escape(p)}</p>' for p in caption.split("\n") if p.strip())
    figcaption = (f'<figcaption style="font-size: 0.9em; line-height: 1.4; margin-top: 0.4em; text-align: start;">'
                  f"{paragraphs}</figcaption>") if paragraphs else ""
    return (f'<figure class="gemm-figure" style="margin: 0.5em 0 1.5em 0; max-width: 100%;">'
            f'<img src="data:image/png;base64,{data}" alt="{alt}" width="{css_width}" '
            f'style="width: {css_width}px; max-width: 100%; height: auto; display: block;" '
            f'data-width-in="{width_in:g}" data-min-pt="{r.min_pt():g}">'
            f"{figcaption}</figure>")

