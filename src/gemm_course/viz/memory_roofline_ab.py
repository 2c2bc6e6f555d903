"""The A/B runs behind step 12's rule, drawn for chapter 12 from ``results/tuning/NAME.json.gz``
(``scripts/gpu_tune.py``: every variant checked against float32, then timed interleaved with cuBLAS):
:func:`pairs_ab` (the token-tile pairs), :func:`partial_tiles_ab` (partly empty token tiles),
:func:`split_ab` (K split or whole), :func:`pdl_ab` (the next kernel launched early) and
:func:`handover_ab` (what a hand-over costs); and from the records of an A/B inside CUDA graphs (kind
``decode_graph_ab``, ``scripts/gpu_decode_graph.py``), :func:`graph_ab`. Each row is labelled by the
config it recorded; each figure says so when its file is absent. Re-exported by
:mod:`gemm_course.viz.memory_roofline`.
"""

from __future__ import annotations

from collections import Counter
from typing import Optional

import numpy as np
from matplotlib.figure import Figure

from ._style import CTA_COLORS, CUBLAS, PAGE_WIDTH, TEXT_PT, message_figure, new_figure, set_caption, wrap_title

PAIRS_AB_RUN = "tune_run51_decode12_pairs_256"  # the A/B behind pair_tile_m at 128 tokens (NOTES.md)
SPLIT_AB_RUN = "tune_run47_decode12_few_tokens"  # the A/B behind splits_k at 16 tokens (NOTES.md)
HANDOVER_AB_RUNS = ("tune_run58_decode12_handover", "tune_run59_decode12_handover_warm")  # W cold, then warm (NOTES.md)
HANDOVER_VARIANT = "sm90/12:gather_parts=false"  # the pairs' hand-over, as the rule now runs it
PARTIAL_AB_RUNS = ("tune_run63_decode12_partial_m_160", "tune_run64_decode12_partial_m_200")  # behind ROWS_IN_N_TOKENS
BAR_COLORS = [c for c in CTA_COLORS if c != "#c44e52"]  # no red bar: red is the cuBLAS line across them


def _ab_bars(tune: dict, run, series: dict, title: str, xlabel: str, what: str) -> Figure:
    """Grouped bars of an A/B run (``run``: its name, or the names of the runs whose rows ``tune`` holds):
    per shape, the ratio to cuBLAS of the first row each of ``series``' predicates (``{label: row -> bool}``)
    takes, and the stages those rows' configs recorded."""
    ratios: dict = {label: {} for label in series}
    stages: dict = {label: set() for label in series}
    for r in tune["rows"]:
        for label, takes in series.items():
            if takes(r) and r["shape"] not in ratios[label]:
                ratios[label][r["shape"]] = r["ratio_to_cublas"]
                stages[label].add((r.get("config") or {}).get("stages"))
    shapes = list(dict.fromkeys(r["shape"] for r in tune["rows"] if any(r["shape"] in v for v in ratios.values())))
    columns = 3 if max(map(len, series)) <= 32 else 2  # long labels: two legend columns, and more rows below
    fig = new_figure(PAGE_WIDTH, 3.2 + 0.3 * -(-(len(series) + 1) // columns))
    ax = fig.add_subplot()
    width = 0.8 / len(series)
    for j, (label, values) in enumerate(ratios.items()):
        xs = [i + (j - (len(series) - 1) / 2) * width for i, sh in enumerate(shapes) if sh in values]
        ax.bar(xs, [values[sh] for sh in shapes if sh in values], width, color=BAR_COLORS[j % len(BAR_COLORS)], label=label)
    ax.axhline(1.0, color=CUBLAS, linewidth=1.3, label="cuBLAS, same rounds")
    whole = len({sh.split("x")[0] for sh in shapes}) > 1  # more than one M: each label names its M too
    ax.set_xticks(range(len(shapes)), [(sh if whole else sh.split("x", 1)[1]).replace("x", " x ") for sh in shapes],
                  fontsize=TEXT_PT)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("cuBLAS time / this time")
    ax.set_ylim(0.5, 1.25)
    ax.grid(True, axis="y", alpha=0.25)
    ax.set_title(wrap_title(title, 72), fontsize=TEXT_PT + 2)
    ax.legend(fontsize=TEXT_PT, loc="upper left", bbox_to_anchor=(0.0, -0.2), ncol=columns, frameon=False)
    env = tune.get("env", {})
    staged = "; ".join(f"{label} {sorted(v)[0]}" for label, v in stages.items() if len(v) == 1)
    files = ", ".join(f"results/tuning/{r}.json.gz" for r in ((run,) if isinstance(run, str) else run))
    return set_caption(fig, f"An A/B run: each variant checked against float32, then timed interleaved with cuBLAS, "
                            f"weights rotated out of L2; {what}; stages: {staged}. On {env.get('gpu')}, driver "
                            f"{env.get('driver')}, torch {env.get('torch')}, cutlass-dsl {env.get('cutlass_dsl')} "
                            f"({files}).", alt="Grouped bars of ratio to cuBLAS per layer")


def pairs_ab(results_dir: Optional[str] = None, run: str = PAIRS_AB_RUN, m: int = 128,
             title: str = "128 tokens over 64-row tiles of W: who shares what") -> Figure:
    """The A/B behind step 12's token-tile pairs (``results/tuning/RUN.json.gz``): per layer at ``m``
    tokens, the ratio to cuBLAS of the swapped 64-row tile with all tokens in one CTA, with half of them
    in each of two CTAs sharing nothing, sharing x by multicast (2 x 1) and sharing W (1 x 2, the pair),
    K whole; each row labelled by the config it recorded. A message without the file."""
    from ..measure.records import load_tuning

    tune = load_tuning(run, results_dir)
    if tune is None:
        return message_figure(f"No A/B run {run} under results/tuning/.", "The pairs' A/B: not recorded here.")

    def kind(tile_n, cm, cn):
        def takes(r):
            c = r.get("config") or {}
            return (r["shape"].startswith(f"{m}x") and c.get("swap_ab") and c.get("tile_m") == 64
                    and not c.get("stream_k") and (c.get("tile_n"), c.get("cluster_m"), c.get("cluster_n")) == (tile_n, cm, cn))
        return takes

    series = {"one CTA, all tokens": kind(m, 1, 1), "two CTAs, nothing shared": kind(m // 2, 1, 1),
              "two W tiles share x (2 x 1)": kind(m // 2, 2, 1), "a pair shares W (1 x 2)": kind(m // 2, 1, 2)}
    return _ab_bars(tune, run, series, title, f"layer (N x K) at M = {m}", "swapped 64-row tiles of W, K whole")


def partial_tiles_ab(results_dir: Optional[str] = None, runs: tuple = PARTIAL_AB_RUNS,
                     title: str = "160 and 200 tokens over 128-row tiles of W: partly empty token tiles") -> Figure:
    """The A/B behind ``ROWS_IN_N_TOKENS`` (``results/tuning/RUN.json.gz``, one run per token count): per
    layer, the ratio to cuBLAS of the rule then (step 11's kernel with the tokens in two 128-row tiles and
    W's rows in N), of step 11's own choice and of two token tiles in a pair over 128- or 64-row W tiles;
    each row labelled by the config it recorded. A message without the files."""
    from ..measure.records import load_tuning

    tunes = [load_tuning(run, results_dir) for run in runs]
    if any(t is None for t in tunes):
        names = ", ".join("_".join(run.split("_")[:2]) for run in runs)  # tune_runN
        return message_figure(f"No A/B runs {names} under results/tuning/.", "Partly empty token tiles: not recorded here.")

    def pair(tile_m):
        return lambda r: (r.get("config") or {}).get("swap_ab") and r["config"].get("tile_m") == tile_m \
            and r["config"].get("cluster_n") == 2

    series = {"the rule then: two 128-token tiles, W's rows in N": lambda r: r["variant"] == "sm90/12",
              "step 11's choice": lambda r: r["variant"] == "sm90/11",
              "a pair over 128-row W tiles": pair(128), "a pair over 64-row W tiles": pair(64)}
    merged = {"rows": [r for t in tunes for r in t["rows"]], "env": tunes[0].get("env", {})}
    return _ab_bars(merged, runs, series, title, "M x N x K", "K whole in the pairs")


def split_ab(results_dir: Optional[str] = None, run: str = SPLIT_AB_RUN, m: int = 16,
             title: str = "16 tokens over 64-row tiles of W: K split or whole") -> Figure:
    """The A/B behind ``splits_k`` (``results/tuning/RUN.json.gz``): per layer at ``m`` tokens, step 12's
    64-row swapped tile with K cut into parts by the stream-K schedule (the variant ``sm90/12``, the rule
    then) against K whole (``sm90/12:stream_k=false``); each row's config recorded. A message without
    the file."""
    from ..measure.records import load_tuning

    tune = load_tuning(run, results_dir)
    if tune is None:
        return message_figure(f"No A/B run {run} under results/tuning/.", "The split's A/B: not recorded here.")

    def kind(variant, split):
        def takes(r):
            c = r.get("config") or {}
            return (r["variant"] == variant and r["shape"].startswith(f"{m}x") and c.get("tile_m") == 64
                    and bool(c.get("stream_k")) == split)
        return takes

    series = {"K split into parts": kind("sm90/12", True), "K whole": kind("sm90/12:stream_k=false", False)}
    return _ab_bars(tune, run, series, title, f"layer (N x K) at M = {m}", f"swapped 64 x {m} tiles of W")


PDL_AB_RUN = "tune_run49_decode12_pdl"  # the A/B behind pdl on by default (NOTES.md)
PDL_VARIANTS = ("sm90/12", "sm90/12:pdl=true", "sm90/12:pdl=false")


def pdl_ab(results_dir: Optional[str] = None, run: str = PDL_AB_RUN,
           title: str = "The next kernel launched early (pdl): per launch and back to back") -> Figure:
    """The A/B behind ``pdl`` (``results/tuning/RUN.json.gz``): per shape, how much faster step 12 ran
    with programmatic dependent launch than without (each row's recorded config says which), one launch
    at a time (the median of single launches) and back to back (the mean of a burst of launches, the
    seed's protocol), weights rotated out of L2 in both. A message without the file."""
    from ..measure.records import load_tuning

    tune = load_tuning(run, results_dir)
    if tune is None:
        return message_figure(f"No A/B run {run} under results/tuning/.", "The early launch's A/B: not recorded here.")
    rows: dict = {}
    for r in tune["rows"]:
        if r["variant"] in PDL_VARIANTS and r.get("config") is not None:
            rows.setdefault((r["shape"], bool(r["config"].get("pdl"))), r)
    shapes = [sh for sh in dict.fromkeys(r["shape"] for r in tune["rows"]) if (sh, True) in rows and (sh, False) in rows]
    single = [rows[sh, False]["median_ms"] / rows[sh, True]["median_ms"] for sh in shapes]
    burst = [rows[sh, True]["seed_tflops"] / rows[sh, False]["seed_tflops"] for sh in shapes]
    fig = new_figure(PAGE_WIDTH, 3.6)
    ax = fig.add_subplot()
    xs = np.arange(len(shapes))
    ax.bar(xs - 0.2, single, 0.4, color=CTA_COLORS[0], label="one launch at a time (median)")
    ax.bar(xs + 0.2, burst, 0.4, color=CTA_COLORS[1], label="launches back to back (mean of a burst)")
    ax.axhline(1.0, color="grey", linewidth=1.2)
    ax.set_xticks(xs, [f"M = {sh.split('x')[0]}\n{sh.split('x', 1)[1]}" for sh in shapes], fontsize=TEXT_PT)
    ax.set_xlabel("tokens, and the layer (N x K)")
    ax.set_ylabel("time without pdl / with it")
    ax.set_ylim(0.9, max(burst + single + [1.0]) * 1.05)
    ax.grid(True, axis="y", alpha=0.25)
    ax.set_title(wrap_title(title, 72), fontsize=TEXT_PT + 2)
    ax.legend(fontsize=TEXT_PT, loc="upper left", frameon=False)
    env = tune.get("env", {})
    return set_caption(fig, f"An A/B run of step 12 with and without pdl (each row's recorded config), every variant "
                            f"checked against float32 first, weights rotated out of L2. On {env.get('gpu')}, driver "
                            f"{env.get('driver')}, torch {env.get('torch')}, cutlass-dsl {env.get('cutlass_dsl')} "
                            f"(results/tuning/{run}.json.gz).", alt="Paired bars of speed-up per shape")


GRAPH_AB_KIND = "decode_graph_ab"  # records of an A/B inside CUDA graphs, apart from the chapter's graph runs


def graph_ab(records, title: str = "Inside CUDA graphs: what the next kernel does with W before its wait, "
                                   "and when it launches", arch: str = "sm90") -> Figure:
    """The newest A/B inside CUDA graphs of ``arch``'s step 12 (records of kind ``decode_graph_ab``, one
    file, at the layer it measured most often; the caption names the others): per M, the share of the run's
    copy bandwidth each variant reached (the rule's config as it was then, or the fields the variant
    changed), with the 85% of issue 40's bar. A message without records."""
    found = [r for r in records if r.get("kind") == GRAPH_AB_KIND and r.get("bandwidth", {}).get("fraction_of_copy")
             and str(r.get("step", "")).startswith(arch + "/")]
    if not found:
        writer = "the B200 kit's decode_graph_launch phase" if arch == "sm100" else "gpu_decode12.sh's graph A/B phases"
        return message_figure(f"No record yet of {arch}/12: {writer} writes them (kind decode_graph_ab).",
                              "The early launch inside CUDA graphs: not measured yet.")
    newest = max(found, key=lambda r: (r.get("date", ""), r.get("_file", "")))["_file"]
    rows = [r for r in found if r["_file"] == newest]
    layers = Counter((r["shape"]["n"], r["shape"]["k"]) for r in rows)
    layer = max(layers, key=lambda nk: (layers[nk], -list(layers).index(nk)))  # the most rows, then the first measured
    others = [f"{n} x {k}" for n, k in layers if (n, k) != layer]
    rows = [r for r in rows if (r["shape"]["n"], r["shape"]["k"]) == layer]
    variants = list(dict.fromkeys(r["variant"] for r in rows))
    ms = sorted({r["shape"]["m"] for r in rows})
    share = {(r["variant"], r["shape"]["m"]): 100 * r["bandwidth"]["fraction_of_copy"] for r in rows}
    labels = {v: "the rule then" if ":" not in v else v.split(":", 1)[1].replace(",", ", ") for v in variants}
    columns = 2 if max(len(label) for label in labels.values()) <= 42 else 1  # long labels would run off the page
    legend_rows = -(-(len(variants) + 1) // columns)  # below the axes, the 85% line among them
    fig = new_figure(PAGE_WIDTH, 3.2 + 0.3 * legend_rows)
    ax = fig.add_subplot()
    width = 0.8 / len(variants)
    for j, v in enumerate(variants):
        xs = [i + (j - (len(variants) - 1) / 2) * width for i, m in enumerate(ms) if (v, m) in share]
        ax.bar(xs, [share[v, m] for m in ms if (v, m) in share], width, color=CTA_COLORS[j % len(CTA_COLORS)],
               label=labels[v])
    # black: red is cuBLAS in the course's figures, and a bar's colour here (the fourth variant)
    ax.axhline(85, color="black", linewidth=1.3, linestyle="--", label="85% of the copy bandwidth")
    shape = rows[0]["shape"]
    ax.set_xticks(range(len(ms)), [f"M = {m}" for m in ms], fontsize=TEXT_PT)
    ax.set_xlabel(f"tokens, layer {shape['n']} x {shape['k']}")
    ax.set_ylabel("% of the copy bandwidth")
    ax.set_ylim(50, 100)
    ax.grid(True, axis="y", alpha=0.25)
    ax.set_title(wrap_title(title, 72), fontsize=TEXT_PT + 2)
    ax.legend(fontsize=TEXT_PT, loc="upper left", bbox_to_anchor=(0.0, -0.2), ncol=columns, frameon=False)
    r = rows[0]
    configs = {(r["variant"], r["shape"]["m"]): r.get("config") for r in rows}
    same = [f"at M = {m} the rule ran {v.split(':', 1)[1].replace(',', ', ')}" for m in ms for v in variants
            if ":" in v and configs.get((v, m)) is not None and configs.get((v, m)) == configs.get((variants[0], m))
            and ":" not in variants[0]]
    return set_caption(fig, f"An A/B inside CUDA graphs, variants of step 12 in one run, each checked against float32; "
                            f"{'; '.join(same) + ' (the same kernel twice: the bars differ by noise); ' if same else ''}"
                            f"{'the file also holds the layers ' + ', '.join(others) + ', not drawn; ' if others else ''}"
                            f"copy bandwidth {r['bandwidth']['copy_tb_s']:.2f} TB/s measured in the same run. On "
                            f"{r.get('gpu')}, {r.get('date', '')[:10]}, driver {r.get('driver')}, torch {r.get('torch')}, "
                            f"cutlass-dsl {r.get('cutlass_dsl')} ({newest}).",
                       alt="Grouped bars of share of copy bandwidth per M")


def handover_ab(results_dir: Optional[str] = None, runs: tuple = HANDOVER_AB_RUNS, m: int = 256,
                title: str = "256 tokens: a layer split along K against the same CTAs with K whole") -> Figure:
    """The A/B behind the pairs' hand-over (``results/tuning/RUN.json.gz``, W rotated out of L2, then left
    in it): per layer, microseconds of step 12 with the pairs' one-by-one hand-over, W from HBM and W in
    L2; each layer labelled with the CTAs and the K parts its recorded config launches (``decode_explorer
    .layout``). A message without the files."""
    from ..kernels.sm90 import step12_swap_ab
    from ..measure.records import load_tuning
    from ..teaching import decode_explorer

    tunes = [load_tuning(run, results_dir) for run in runs]
    if any(t is None for t in tunes):
        return message_figure(f"No A/B runs {', '.join(runs)} under results/tuning/.", "The hand-over's A/B: not recorded here.")
    series = {}
    for label, tune in zip(("W from HBM", "W in L2"), tunes):
        series[label] = {r["shape"]: r for r in tune["rows"] if r["variant"] == HANDOVER_VARIANT}
    shapes = [sh for sh in series["W from HBM"] if all(sh in rows for rows in series.values())]
    fig = new_figure(PAGE_WIDTH, 3.6)
    ax = fig.add_subplot()
    xs = np.arange(len(shapes))
    for j, (label, rows) in enumerate(series.items()):
        ax.bar(xs + (j - 0.5) * 0.4, [rows[sh]["median_ms"] * 1e3 for sh in shapes], 0.4, color=CTA_COLORS[j], label=label)
    ticks = []
    for sh in shapes:
        _, n, k = (int(v) for v in sh.split("x"))
        lay = decode_explorer.layout("sm90/12", m, n, k, config=step12_swap_ab.Config(**series["W from HBM"][sh]["config"]))
        ticks.append(f"{n} x {k}\n{lay.ctas} CTAs, K {'in %d parts' % lay.parts if lay.parts > 1 else 'whole'}")
    ax.set_xticks(xs, ticks, fontsize=TEXT_PT)
    ax.set_xlabel(f"layer (N x K) at M = {m}")
    ax.set_ylabel("microseconds (median)")
    ax.set_ylim(0, 1.3 * max(rows[sh]["median_ms"] * 1e3 for rows in series.values() for sh in shapes))
    ax.grid(True, axis="y", alpha=0.25)
    ax.set_title(wrap_title(title, 72), fontsize=TEXT_PT + 2)
    ax.legend(fontsize=TEXT_PT, loc="upper right", ncol=2, frameon=False)
    env = tunes[0].get("env", {})
    return set_caption(fig, f"Two A/B runs of step 12 with the pairs' hand-over (each variant checked against float32 "
                            f"first): W rotated out of L2, then left in it. A split layer's CTAs each take half of K; "
                            f"a layer with K whole and the same tile gives each CTA the same bytes and MMAs without a "
                            f"hand-over. On {env.get('gpu')}, driver {env.get('driver')}, torch {env.get('torch')}, "
                            f"cutlass-dsl {env.get('cutlass_dsl')} (results/tuning/{runs[0]}.json.gz, {runs[1]}.json.gz).",
                       alt="Paired bars of microseconds per layer, W cold and warm")
