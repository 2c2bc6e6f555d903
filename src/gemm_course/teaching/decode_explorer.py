"""The decode explorer (chapter 12): M tokens through one layer on one card, ``sm90/11`` beside ``sm90/12``.

A model, not a measurement. For the chosen M, layer (N x K) and card it shows, per step, what the
step's own host code launches: the tile its ``config_for`` picks, the cluster-tiles
(``cluster_grid``), the CTAs launched (``launched_clusters``: ``rules.schedule.grid_clusters``), the
parts each tile's K loop is cut into (``rules.schedule.plan``), the share of the card's SMs that
stream W, the bytes moved (W, x and y once, plus each handed-over fp32 partial tile written and
read back through L2) against the fewest, and the time floor: those bytes at the card's measured
copy bandwidth (``hardware``'s ``measured_copy_tb_s``); beside it, the busiest CTA's MMAs at the
card's measured product rate shared by its SMs (``mma_floor_us``), which near the ridge passes the
bytes'. The grid is planned for the SMs the steps' host code sees (``max_clusters``: this GPU's,
or a full H200's 132 without one; an H100 SXM has as many). Given the decode run's records
(``viz.memory_roofline.decode_runs``), a recorded time of exactly that shape is shown beside it, and
at up to ``LINE_MAX_M`` tokens the line through the step's recorded times on that card (:func:`line`:
a fixed cost per launch plus the bytes at a rate) at the shape's bytes.

* :func:`layout`: one step's launch at one shape (chapter 12's tables call it too);
* :func:`model`: both steps at one shape on one card; :func:`model_html` its table;
* :class:`DecodeExplorer`: the ipywidgets controls in Jupyter; displayed, its output also carries
  :func:`static_html` (every layer at the M of :data:`BOOK_MS`, both cards), which the book shows
  (``_config.yml``: ``nb_mime_priority_overrides``), as chapter 3's tile explorer does.
"""

from __future__ import annotations

import functools
import html
from typing import NamedTuple, Optional, Sequence

from .. import hardware
from ..measure.bandwidth import LINE_MAX_M, line_fit
from ..measure.record_queries import shape_of
from ..rules import schedule
from ..runtime import ladder
from ..runtime.problem import GemmProblem
from .exercises import problem_shape

STEPS = ("sm90/11", "sm90/12")
LAYERS = ((4096, 4096), (14336, 4096), (4096, 14336), (1024, 4096), (2048, 8192))  # N x K, the chapter's shapes
CARDS = (hardware.H100_SXM, hardware.H200)
MAX_M = 512
BOOK_MS = (1, 8, 16, 32, 64, 128, 256, 512)  # the rows of the static explorer
MODEL_NOTE = ("A model, not a measurement: the launch the steps' host code plans, the time its bytes would "
              "take at the card's measured copy bandwidth (the partial sums counted at that rate too, though L2 "
              "serves them), and the time the busiest CTA's MMAs take at the card's measured product rate per SM.")


class Layout(NamedTuple):
    """One step's launch at one shape, from its own host code."""

    step: str
    tile_m: int
    tile_n: int
    cluster: tuple  # (cluster_m, cluster_n)
    swapped: bool  # C^T = W x^T: W's rows in the MMA's M, the tokens in its N
    real: float  # share of the MMAs' rows x columns that hold real values
    tiles: int  # cluster-tiles
    clusters: int  # clusters launched
    ctas: int  # CTAs launched
    parts: int  # the most parts one tile's K loop is cut into
    handovers: int  # partial cluster-tiles handed over (parts beyond each tile's first)
    partial: int  # fp32 bytes of one CTA's partial tile (0 when nothing is split)
    busiest_k_tiles: int  # K tiles of the cluster with the most (each of its CTAs runs them all)
    tile_k: int

    @property
    def what(self) -> str:
        cm, cn = self.cluster
        return (f"{self.tile_m} x {self.tile_n} ({'W rows x tokens' if self.swapped else 'tokens x W rows'}), "
                f"cluster {cm} x {cn}")

    @property
    def partial_bytes(self) -> int:
        """Bytes of partial sums through L2: each handed-over partial cluster-tile written once, read once."""
        return 2 * self.handovers * self.cluster[0] * self.cluster[1] * self.tile_m * self.tile_n * 4


@functools.lru_cache(maxsize=None)
def layout(key: str, m: int, n: int, k: int, config=None) -> Layout:
    """``key``'s launch at M x N x K: its ``config_for`` (its default before step 11) or ``config`` (a
    frozen Config of the step, e.g. the one a record ran), ``cluster_grid`` and ``launched_clusters``
    with the SMs of this GPU (a full H200 without one), and the parts per tile of the static schedule
    (``schedule.plan``)."""
    step = ladder.get(key)
    problem = GemmProblem(m, n, k)
    if config is None:
        config = step.config_for(problem)  # step 10 has no rule per shape: its default
    gemm = step.load().Gemm(config)
    swapped = getattr(config, "swap_ab", False)
    rows, cols = (n, m) if swapped else (m, n)  # the GEMM the kernel computes: C^T = W x^T when swapped
    a_shape, c_shape = problem_shape(rows, k), problem_shape(rows, cols)
    cm, cn, _ = gemm.cluster_shape_mnk
    tiles_m, tiles_n = gemm.cluster_grid(c_shape)
    tiles = tiles_m * tiles_n
    if hasattr(gemm, "launched_clusters"):
        clusters = gemm.launched_clusters(a_shape, c_shape)
        k_tiles = -(-k // config.tile_k)
        per_tile, busiest = [0] * tiles, 0
        for units in schedule.plan(tiles, clusters, k_tiles, config.stream_k, gemm.lockstep_from):
            for tile, _, _ in units:
                per_tile[tile] += 1
            busiest = max(busiest, sum(end - begin for _, begin, end in units))
    else:
        clusters, per_tile = min(tiles, gemm.max_clusters), [1]
        busiest = -(-tiles // clusters) * -(-k // config.tile_k)
    real = (rows * cols) / (tiles_m * config.tile_m * cm * tiles_n * config.tile_n * cn)
    handovers = sum(p - 1 for p in per_tile)
    return Layout(key, config.tile_m, config.tile_n, (cm, cn), swapped, real, tiles, clusters, clusters * cm * cn,
                  max(per_tile), handovers, config.tile_m * config.tile_n * 4 if handovers else 0, busiest, config.tile_k)


def mma_floor_us(lay: Layout, card: hardware.Card) -> float:
    """Microseconds the busiest CTA's MMAs take at ``card``'s measured product rate shared by its SMs:
    every K tile of the busiest cluster is a tile_m x tile_n x tile_k product in each of its CTAs (padding
    included). Near the ridge this, not W's bytes, can set the time."""
    per_sm = card.measured_bf16_tflops * 1e12 / card.sms
    return lay.busiest_k_tiles * 2 * lay.tile_m * lay.tile_n * lay.tile_k / per_sm * 1e6


class Estimate(NamedTuple):
    """One step at one shape on one card: its launch, its bytes and its floor (a model)."""

    layout: Layout
    sm_share: float  # CTAs streaming W over the card's SMs (at most 1)
    bytes: int  # W, x, y once, plus the partial sums through L2
    min_bytes: int
    floor_us: float  # bytes at the card's measured copy bandwidth
    mma_us: float  # the busiest CTA's MMAs at the card's measured product rate per SM (``mma_floor_us``)
    measured_us: Optional[float]  # a decode run's median time of exactly this shape and step, if recorded
    measured_gpu: str
    line: Optional[tuple]  # (fixed us, TB/s, farthest point in us): the step's times at up to LINE_MAX_M tokens on this card
    line_us: Optional[float]  # that line at this shape's bytes, where M <= LINE_MAX_M


def check_m(m) -> str:
    """'' when ``m`` tokens is a shape the explorer models, else why not."""
    if not isinstance(m, int) or isinstance(m, bool) or not 1 <= m <= MAX_M:
        return f"M must be a whole number of tokens from 1 to {MAX_M}, not {m!r}: a decode batch has at least one token."
    return ""


def measured(runs: Sequence[dict], key: str, m: int, n: int, k: int) -> tuple:
    """(microseconds, GPU) of ``key`` at exactly M x N x K in ``runs`` (``decode_runs``), else (None, '')."""
    for r in runs or ():
        if r.get("step") == key and shape_of(r) == (m, n, k):
            ms = (r.get("time_ms") or {}).get("median")
            if ms:
                return ms * 1e3, r.get("gpu", "")
    return None, ""


def line(runs: Sequence[dict], key: str, card: hardware.Card) -> Optional[tuple]:
    """(fixed us, TB/s, farthest point in us) of ``key``'s median times at up to ``LINE_MAX_M`` tokens in
    ``runs`` (``decode_runs``) on ``card`` (``hardware.card`` of the record's GPU): a fixed cost per
    launch plus the bytes at a rate (``bandwidth.line_fit``); None without two sizes to fit."""
    points = [(r["bandwidth"]["min_bytes"], r["time_ms"]["median"] * 1e3) for r in runs or ()
              if r.get("step") == key and shape_of(r)[0] <= LINE_MAX_M and hardware.card(r.get("gpu", "")) is card
              and r.get("bandwidth") and (r.get("time_ms") or {}).get("median")]
    return line_fit(points)


def model(m: int, n: int, k: int, card: hardware.Card = hardware.H100_SXM, runs: Sequence[dict] = (),
          steps: Sequence[str] = STEPS) -> dict:
    """``{step: Estimate}`` for M tokens through an N x K layer on ``card``; ValueError for an M out of range."""
    why = check_m(m)
    if why:
        raise ValueError(why)
    problem = GemmProblem(m, n, k)
    out = {}
    for key in steps:
        lay = layout(key, m, n, k)
        moved = problem.min_bytes + lay.partial_bytes
        us, gpu = measured(runs, key, m, n, k)
        fit = line(runs, key, card)
        on_line = fit[0] + problem.min_bytes / (fit[1] * 1e6) if fit and m <= LINE_MAX_M else None
        out[key] = Estimate(lay, min(lay.ctas, card.sms) / card.sms, moved, problem.min_bytes,
                            moved / (card.measured_copy_tb_s * 1e12) * 1e6, mma_floor_us(lay, card), us, gpu,
                            fit, on_line)
    return out


def _on_line(e: Estimate) -> str:
    if not e.line:
        return "no run on this card"
    if e.line_us is None:
        return f"only up to {LINE_MAX_M} tokens"
    fixed, tb_s, worst = e.line
    return f"{e.line_us:.1f} us ({fixed:.1f} us + the bytes at {tb_s:.2f} TB/s; the run's points within {worst:.1f} us)"


def _mb(b: int) -> str:
    return f"{b / 1e6:.2f} MB"


def model_html(m, n: int, k: int, card: hardware.Card = hardware.H100_SXM, runs: Sequence[dict] = ()) -> str:
    """Both steps side by side at one shape on one card, as an HTML table; a refusal for a bad M."""
    why = check_m(m)
    if why:
        return f"<p style='color:#c00'>{html.escape(why)}</p>"
    est = model(m, n, k, card, runs)
    cells = {
        "tile (cluster)": lambda e: e.layout.what,
        "parts per tile": lambda e: str(e.layout.parts),
        "cluster-tiles": lambda e: str(e.layout.tiles),
        "CTAs launched": lambda e: str(e.layout.ctas),
        f"SMs streaming W (of {card.sms})": lambda e: f"{e.sm_share:.0%}",
        "bytes moved (W, x, y + partial sums)": lambda e: f"{_mb(e.bytes)} = {e.bytes / e.min_bytes:.3f}x the fewest",
        f"time floor at {card.measured_copy_tb_s:g} TB/s": lambda e: f"{e.floor_us:.1f} us",
        f"busiest CTA's MMAs at {card.measured_bf16_tflops / card.sms:.2f} TFLOP/s per SM": lambda e: f"{e.mma_us:.1f} us",
        "measured (decode run)": lambda e: f"{e.measured_us:.1f} us ({e.measured_gpu})" if e.measured_us else "no record",
        "the run's line: a fixed cost per launch + the bytes at a rate": _on_line,
    }
    head = "".join(f"<th>{key}</th>" for key in est)
    body = "".join(f"<tr><td>{html.escape(name)}</td>" + "".join(f"<td>{html.escape(f(e))}</td>" for e in est.values())
                   + "</tr>" for name, f in cells.items())
    title = (f"<b>M = {m} tokens through a {n} x {k} layer on an {html.escape(card.name)}</b> "
             f"(the fewest bytes: {_mb(GemmProblem(m, n, k).min_bytes)})")
    return (f"<div class='decode-explorer'><p>{title}<br><i>{html.escape(MODEL_NOTE)}</i></p>"
            f"<table><tr><th></th>{head}</tr>{body}</table></div>")


def static_html(ms: Sequence[int] = BOOK_MS, layers=LAYERS, cards=CARDS, runs: Sequence[dict] = ()) -> str:
    """The explorer without a kernel: per layer, a row per M with both steps' launch, bytes and floor per card."""
    parts = [f"<div class='decode-explorer'><p><b>The decode explorer</b> (static: run the notebook to choose any M "
             f"from 1 to {MAX_M}). <i>{html.escape(MODEL_NOTE)}</i></p>"]
    for i, (n, k) in enumerate(layers):
        head = ("<tr><th>M</th>" + "".join(f"<th>{s}: tile, parts, CTAs, SMs</th><th>{s}: bytes / fewest</th>" for s in STEPS)
                + "".join(f"<th>{s} floor, {html.escape(c.name)}</th>" for c in cards for s in STEPS) + "</tr>")
        rows = []
        for m in ms:
            per_card = [model(m, n, k, c, runs) for c in cards]
            first = per_card[0]
            cells = "".join(f"<td>{e.layout.tile_m} x {e.layout.tile_n}, {e.layout.parts}, {e.layout.ctas}, "
                            f"{e.sm_share:.0%}</td><td>{e.bytes / e.min_bytes:.3f}x</td>" for e in first.values())
            cells += "".join(f"<td>{est[s].floor_us:.1f} us, MMAs {est[s].mma_us:.1f}"
                             + (f" (measured {est[s].measured_us:.1f})" if est[s].measured_us else "") + "</td>"
                             for est in per_card for s in STEPS)
            rows.append(f"<tr><td>{m}</td>{cells}</tr>")
        parts.append(f"<details{' open' if i == 0 else ''}><summary>layer {n} x {k} (N x K)</summary>"
                     f"<table>{head}{''.join(rows)}</table></details>")
    return "".join(parts) + "</div>"


class DecodeExplorer:
    """M, layer and card in; both steps' launch, bytes and time floor out (a model).

    ``DecodeExplorer(runs=mroof.decode_runs(records)).widget`` is the ipywidgets box; :meth:`select`
    drives it from code and returns :attr:`html`. Displayed, it carries :func:`static_html` too.
    """

    def __init__(self, m: int = 16, layer: tuple = LAYERS[0], card: hardware.Card = hardware.H100_SXM,
                 runs: Sequence[dict] = ()):
        import ipywidgets as w

        self.runs = list(runs)
        self.m_box = w.IntSlider(value=m, min=1, max=MAX_M, description="M (tokens)", continuous_update=False)
        self.layer_box = w.Dropdown(options=[(f"{n} x {k}", (n, k)) for n, k in LAYERS], value=tuple(layer),
                                    description="layer N x K")
        self.card_box = w.Dropdown(options=[(c.name, c.name) for c in CARDS], value=card.name, description="card")
        self.out = w.HTML()
        for box in (self.m_box, self.layer_box, self.card_box):
            box.observe(lambda _: self.update(), names="value")
        self.widget = w.VBox([w.HBox([self.m_box, self.layer_box, self.card_box]), self.out])
        self.update()

    @property
    def card(self) -> hardware.Card:
        return hardware.CARDS[self.card_box.value]

    def estimates(self) -> dict:
        n, k = self.layer_box.value
        return model(self.m_box.value, n, k, self.card, self.runs)

    def update(self):
        n, k = self.layer_box.value
        self.html = self.out.value = model_html(self.m_box.value, n, k, self.card, self.runs)

    def select(self, m: Optional[int] = None, layer: Optional[tuple] = None, card: Optional[hardware.Card] = None) -> str:
        """Set the controls from code: ``explorer.select(m=64, layer=(1024, 4096))``; returns the HTML shown."""
        if m is not None:
            self.m_box.value = m
        if layer is not None:
            self.layer_box.value = tuple(layer)
        if card is not None:
            self.card_box.value = card.name
        return self.html

    def _repr_mimebundle_(self, **kwargs):
        """The widget's view, and the static explorer as ``text/html`` beside it (the book shows that)."""
        bundle = self.widget._repr_mimebundle_(**kwargs)
        bundle["text/html"] = static_html(runs=self.runs)
        return bundle
