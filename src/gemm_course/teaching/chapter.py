"""The cells that recur in the chapter notebooks, as functions, so that a chapter stays prose plus
short calls (the chapters are the MyST Markdown notebooks ``notebooks/*.md``).

* :func:`setup`: which machine this is, printed; every chapter's first code cell.
* :func:`show_source`: a module's, class's or function's source (or a source string) as a Python block.
* :func:`introduce`: a chapter's step and the step it builds on, printed with what it adds.
* :func:`show_diff`: what a step changes against its parent (``gemm-course diff``).
* :func:`show_hunk`: a short excerpt of a step's code (a banner's region of a method, or one
  method), then the PTX lines it compiles to, found by pattern in the compiled step.
* :func:`step_bars`: the recorded bars of the tensor-core steps, a chapter's steps outlined.
* :func:`headline`: a chapter's first-screen line, its step's measured effect read from the records.
* :func:`check`, :func:`time_step`, :func:`check_and_time`: on a GPU that can run the steps, check
  them against the float32 reference, time them next to cuBLAS, and redraw the bars with the live
  numbers; on any other machine, say so instead (the GPU-less contract of the setup page).

Nothing here decides what a chapter shows: each function is the code a chapter ran inline before.
"""

from __future__ import annotations

import inspect as _pyinspect
from typing import Optional, Sequence

from IPython.display import Markdown, display

from .. import viz
from ..measure import bench
from ..runtime import arch, ladder

# the bars of chapters 4-11: steps 3-11 (chapter 3 shows steps 1-3), both architectures
TENSOR_CORE_STEPS = range(3, 12)
GPU_NAMES = {"sm90": "Hopper GPU (sm_90a)", "sm100": "Blackwell GPU (sm_100a)"}


def setup():
    """Print what this machine can do; return ``(machine, GPU_ARCH)``.

    ``GPU_ARCH`` is the ladder architecture of the GPU here (``"sm90"`` or ``"sm100"``) when it is
    a course target, else ``None``: the chapters run their GPU cells only when it is set.
    """
    machine = arch.machine()
    print(machine.describe())
    return machine, arch.TARGET_ARCH.get(machine.target)


def source_markdown(obj) -> Markdown:
    """``obj``'s source as a fenced Python block: a string is taken as source already; a module,
    class, method or function is read with :func:`inspect.getsource`."""
    text = obj if isinstance(obj, str) else _pyinspect.getsource(obj)
    return Markdown("```python\n" + text + "\n```")


def show_source(obj) -> None:
    """Display :func:`source_markdown` of ``obj`` (a chapter's "here is the code" cell)."""
    display(source_markdown(obj))


def show_diff(step) -> None:
    """Display what ``step`` changes against its parent: the flattened diff of ``gemm-course diff``,
    with its count of changed lines (the whole step is one ``gemm-course source`` away)."""
    from . import source

    step = ladder.get(step)
    added, removed = source.changed_lines(step)
    parent = source.parent(step)
    display(Markdown(f"`{step.key}` against `{parent.key if parent else '-'}`: {added} lines added, {removed} removed "
                     f"(the whole step: `gemm-course source {step.key}`)\n\n```diff\n{source.diff(step)}```"))


def hunk_markdown(step, label: Optional[str] = None, method: str = "kernel", ptx: Optional[str] = None,
                  patterns: Sequence = (), per_pattern: int = 1, after: Optional[str] = None,
                  before: Optional[str] = None, start: Optional[str] = None, occurrence: int = 1,
                  stop: Optional[str] = None) -> str:
    """The Markdown of :func:`show_hunk`: a heading line naming the step and method the excerpt comes
    from, the excerpt (:func:`gemm_course.teaching.source.region` of ``label``; else, with ``start``,
    :func:`gemm_course.teaching.source.excerpt`; else the whole method), and, with ``ptx`` and ``patterns``,
    the PTX instructions :func:`gemm_course.teaching.source.ptx_lines` finds."""
    from . import source

    step = ladder.get(step)
    where, whole = source.method_source(step, method)
    if label is not None:
        code, part = source.region(step, label, method), f", phase {label}"
    elif start is not None:
        code, part = source.excerpt(step, method, start, occurrence, stop), " (excerpt)"
    else:
        code, part = whole, ""
    text = f"`{step.key}`: `Gemm.{method}`{part} (defined in `{where}`)\n\n```python\n{code.rstrip()}\n```"
    if ptx is not None and patterns:
        lines = source.ptx_lines(ptx, patterns, per_pattern=per_pattern, after=after, before=before)
        text += "\n\ncompiles to (PTX, found by pattern in the compiled step):\n\n```text\n" + "\n".join(lines) + "\n```"
    return text


def show_hunk(step, label: Optional[str] = None, method: str = "kernel", ptx: Optional[str] = None,
              patterns: Sequence = (), per_pattern: int = 1, after: Optional[str] = None,
              before: Optional[str] = None, start: Optional[str] = None, occurrence: int = 1,
              stop: Optional[str] = None) -> None:
    """Display a short excerpt of ``step``'s code and the PTX it compiles to (:func:`hunk_markdown`):
    the annotated hunks a chapter explains line by line before its full diff."""
    display(Markdown(hunk_markdown(step, label, method, ptx, patterns, per_pattern, after, before, start, occurrence, stop)))


def introduce(key, parent) -> tuple:
    """A chapter's step and its parent (ladder keys such as ``"sm90/4"``), printed with what the
    step adds and which problems it accepts; returns ``(step, parent)``."""
    step, parent = ladder.get(key), ladder.get(parent)
    print(f"{step}\n  parent: {parent}\n  adds: {step.adds}\n  accepts: {step.shapes}")
    return step, parent


def step_bars(records: Sequence[dict], numbers: Sequence[int], arch: str = "sm90", size: int = 4096,
              live: Optional[Sequence[dict]] = None):
    """The newest record of each tensor-core step of ``arch`` (:data:`TENSOR_CORE_STEPS`) at
    ``size``^3 on a linear scale, the chapter's steps ``numbers`` outlined
    (:func:`gemm_course.viz.ladder_bars`). No quoted seed panel (the seed quotes steps 1-3 on a B200,
    which a later chapter's view is not about), and each bar's ratio to its own run's cuBLAS,
    rounded as the chapter's ``step_table`` rounds it, so the two agree."""
    return viz.ladder_bars(records, arch=arch, shape=(size, size, size), highlight=tuple(numbers), log=False,
                           numbers=TENSOR_CORE_STEPS, live=live, seed=False, own_ratios=True)


def headline_markdown(records: Sequence[dict], number: int, sizes: Sequence[int] = (4096, 8192)) -> str:
    """One line on what a chapter's step buys, from the records: for each architecture, step
    ``number``'s newest record at each size^3 against the previous step's newest on the same GPU,
    and its ratio to the cuBLAS of its own run (two decimals, as the chapter's tables); or that it
    has no record yet (the Blackwell steps are compiled and checked on the CPU until a B200 run lands)."""
    from ..measure import records as rec

    parts = []
    for family in ("sm100", "sm90"):
        key, before = f"{family}/{number}", f"{family}/{number - 1}"
        cells, gpu = [], None
        for size in sizes:
            now = rec.latest(records, key, size, size, size)
            if now is None:
                continue
            gpu = now.get("gpu")
            old = rec.latest(records, before, size, size, size, gpu=gpu)
            versus = f"x{now['tflops']['median'] / old['tflops']['median']:.2f}" if old else "no parent record"
            cells.append(f"{versus} at {size}^3 ({now['tflops']['median']:.0f} TFLOP/s, "
                         f"{now['ratio_to_cublas']:.2f} of cuBLAS in the same run)")
        if not cells:
            parts.append(f"`{key}` has no record yet" + (" (compiled and checked on the CPU, not yet run)"
                                                         if family == "sm100" else ""))
        else:
            parts.append(f"`{key}` against `{before}` on the {gpu}: " + ", ".join(cells))
    return "**What it buys, measured.** " + "; ".join(parts) + "."


def headline(records: Sequence[dict], number: int, sizes: Sequence[int] = (4096, 8192)) -> None:
    """Display :func:`headline_markdown`: the first screen's headline number of chapter ``number``."""
    display(Markdown(headline_markdown(records, number, sizes)))


def runnable_arch() -> Optional[str]:
    """The ladder architecture whose kernels can run here (``None`` without a course GPU)."""
    return arch.TARGET_ARCH.get(arch.machine().target)


def check(step, count: int = 3, missing: Optional[str] = None) -> None:
    """Check ``step`` against the float32 reference on ``count`` random shapes it accepts (fresh
    inputs, a NaN-poisoned output) and print each result; every one must pass. Without a GPU of the
    step's architecture, print ``missing`` (or a default) instead."""
    step = ladder.get(step)
    if runnable_arch() != step.arch:
        print(missing or f"No {GPU_NAMES[step.arch]} here: the check runs on a GPU (tests/test_gpu.py does the same).")
        return
    from ..runtime import run

    for result in run.check(step, run.shapes_for(step, count=count), seed=0):
        print(result)
        assert result.ok, result


def time_step(step, notebook: str, size: int = 4096) -> dict:
    """Time ``step`` at ``size``^3 next to cuBLAS in this process (a bench record, not written to
    ``results/``; its command names the chapter). Needs a GPU of the step's architecture."""
    from ..runtime.problem import GemmProblem

    return bench.bench_step(ladder.get(step), GemmProblem.square(size), repeats=20, rounds=3,
                            command=f"notebooks/{notebook}")


def check_and_time(numbers: Sequence[int], records: Sequence[dict], notebook: str, arch: Optional[str] = None,
                   count: int = 3, missing: Optional[str] = None, highlight: bool = False) -> list:
    """The live end of a chapter's measured section. On a GPU that runs ``arch``'s steps (any course
    GPU when ``arch`` is ``None``): check each step ``numbers`` (:func:`check`), time it
    (:func:`time_step`), and draw the recorded bars with the live ones beside them (with
    ``highlight``, :func:`step_bars`' view; else the whole ladder, each bar labelled with its ratio
    to its own run's cuBLAS, and the seed's quoted B200 panel on a Blackwell chart only). Elsewhere
    print ``missing``. Returns the live records (empty without such a GPU)."""
    here = runnable_arch()
    if here is None or (arch is not None and here != arch):
        print(missing or f"No {GPU_NAMES.get(arch, 'GPU')} here: the bars above are the recorded measurements.")
        return []
    live = []
    for number in numbers:
        step = ladder.get((here, number))
        check(step, count=count)
        live.append(time_step(step, notebook))
    if highlight:
        display(step_bars(records, numbers, arch=here, live=live))
    else:
        display(viz.ladder_bars(records, arch=here, live=live, seed=here == "sm100", own_ratios=True))
    return live


# ---- chapter 11: step 11's thresholds beside the records that set them --------------------------

H200_CLUSTERS = 66  # clusters of two on an H200's 132 SMs: what the runs below launched on


def _shape(shape: str) -> tuple:
    return tuple(int(v) for v in shape.split("x"))


def _tail(shape: str, tile_n: int = 256) -> tuple:
    """``(tail tiles r, idle clusters G - r, K tiles)`` of a shape's last wave for the 128 x ``tile_n``
    tile in its clusters on an H200 (every cluster-tile count in these runs exceeds G)."""
    from ..rules import tile_rule

    m, n, k = _shape(shape)
    tiles = tile_rule.cluster_tiles(m, n, tile_n)
    r = tiles % H200_CLUSTERS
    return r, H200_CLUSTERS - r, -(-k // tile_rule.TILE_K)


def _idle_k_tiles_short(shape: str) -> bool:
    """A partial last wave whose idle share is no more than a hand-over's price (the split declined
    by ``FIXUP_K_TILES``)."""
    from ..rules import schedule

    r, idle, k_tiles = _tail(shape)
    return r > 0 and idle * k_tiles <= schedule.FIXUP_K_TILES * H200_CLUSTERS


def _idle_clusters(shape: str, few: bool) -> bool:
    """A last wave the hand-over's price allows, with at most (``few``) or more than G / ``IDLE_SHARE``
    idle clusters."""
    from ..rules import schedule

    r, idle, k_tiles = _tail(shape)
    if r == 0 or idle * k_tiles <= schedule.FIXUP_K_TILES * H200_CLUSTERS:
        return False
    return (idle * schedule.IDLE_SHARE <= H200_CLUSTERS) == few


def _split_k_tiles(shape: str) -> Optional[int]:
    """K tiles per tile of a shape whose tail today's rule splits (its tile from ``tile_rule.choose``),
    else None."""
    from ..rules import schedule, tile_rule

    m, n, k = _shape(shape)
    tiles = tile_rule.cluster_tiles(m, n, tile_rule.choose(m, n, k, H200_CLUSTERS).tile_n)
    k_tiles = -(-k // tile_rule.TILE_K)
    grid = schedule.grid_clusters(tiles, H200_CLUSTERS, k_tiles)
    return k_tiles if schedule.split_tail(tiles, grid, k_tiles)[1] > 0 else None


LOCKSTEP_RUNS_K_TILES = (64, 256)  # runs 43 and 44: the copy's threshold, and the kernel's at the time


def _lockstep_band(shape: str, above: bool) -> bool:
    """A split tail that runs 43 and 44's two copies schedule differently (K tiles within
    :data:`LOCKSTEP_RUNS_K_TILES`), from ``LOCKSTEP_K_TILES`` on (``above``) or below it."""
    from ..rules import schedule

    k_tiles = _split_k_tiles(shape)
    low, high = LOCKSTEP_RUNS_K_TILES
    if k_tiles is None or not low <= k_tiles < high:
        return False
    return (k_tiles >= schedule.LOCKSTEP_K_TILES) == above


def _many_waves(shape: str, many: bool) -> bool:
    from ..rules import tile_rule

    m, n, _ = _shape(shape)
    return (tile_rule.waves(m, n, tile_rule.TILE_NS[0], H200_CLUSTERS) >= tile_rule.MANY_WAVES) == many


def _fill_tie(shape: str) -> bool:
    """The narrowest tile's wave fill within ``FILL_TIE`` of the rule's wider pick."""
    from ..rules import tile_rule

    m, n, k = _shape(shape)
    pick = tile_rule.choose(m, n, k, H200_CLUSTERS).tile_n
    narrow = tile_rule.TILE_NS[-1]
    fill = {w: tile_rule.wave_fill(tile_rule.waves(m, n, w, H200_CLUSTERS)) for w in (pick, narrow)}
    return pick != narrow and fill[narrow] >= fill[pick] - tile_rule.FILL_TIE


_NARROW = "sm90/11:tile_n=128,cluster_m=1,cluster_n=2,stages=6,epi_n=32"

# (constant, module of gemm_course.rules, [(label, [(run, new, old)], keep(shape))]): each threshold with the A/B runs
# under results/tuning that set it (named in the constant's comment in its module and in NOTES.md),
# and the shapes of those runs each comparison reads, chosen by the constant itself
CONSTANT_EVIDENCE = (
    ("FIXUP_K_TILES", "schedule", (
        ("the tail split against kept whole, where a cluster's idle share is at most the hand-over's price",
         (("tune_run5", "sm90/10", "sm90/10:stream_k=0"),
          ("tune_run23_vector_handover_forced_split", "sm90/10:fixup_k_tiles=0", "sm90/10")),
         _idle_k_tiles_short),)),
    ("IDLE_SHARE", "schedule", (
        ("whole against split, at most G / IDLE_SHARE clusters idle",
         (("tune_run24_idle_share_rule_epi256", "sm90/10", "sm90_head@sm90/10"),
          ("tune_run15_variants_weak_shapes", "sm90/10:stream_k=0", "sm90/10"),
          ("tune_run18_lockstep_tail", "sm90/10:stream_k=0", "sm90/10")),
         lambda shape: _idle_clusters(shape, few=True)),
        ("whole against split, more idle clusters",
         (("tune_run15_variants_weak_shapes", "sm90/10:stream_k=0", "sm90/10"),
          ("tune_run18_lockstep_tail", "sm90/10:stream_k=0", "sm90/10")),
         lambda shape: _idle_clusters(shape, few=False)))),
    ("LOCKSTEP_K_TILES", "schedule", (
        ("lockstep against the classic tail, K tiles from the threshold on",
         (("tune_run43_lockstep_tail_first_few_wave", "sm90_lockstep@sm90/11", "sm90/11"),
          ("tune_run44_lockstep_one_to_nine_waves", "sm90_lockstep@sm90/11", "sm90/11")),
         lambda shape: _lockstep_band(shape, above=True)),
        ("the same, fewer K tiles",
         (("tune_run43_lockstep_tail_first_few_wave", "sm90_lockstep@sm90/11", "sm90/11"),
          ("tune_run44_lockstep_one_to_nine_waves", "sm90_lockstep@sm90/11", "sm90/11")),
         lambda shape: _lockstep_band(shape, above=False)))),
    ("MANY_WAVES", "tile_rule", (
        ("128 x 192 and 128 x 128 against 128 x 256, from MANY_WAVES waves on",
         (("tune_run36_tile_192", "sm90/11:tile_n=192,stages=4,epi_n=96", "sm90/11"),
          ("tune_run36_tile_192", "sm90/11:tile_n=128,stages=6,epi_n=32", "sm90/11")),
         lambda shape: _many_waves(shape, many=True)),
        ("the same, fewer waves",
         (("tune_run36_tile_192", "sm90/11:tile_n=192,stages=4,epi_n=96", "sm90/11"),
          ("tune_run36_tile_192", "sm90/11:tile_n=128,stages=6,epi_n=32", "sm90/11")),
         lambda shape: _many_waves(shape, many=False)))),
    ("FILL_TIE", "tile_rule", (
        ("128 x 128 against the rule's wider tile, where their wave fills tie",
         (("tune_run42_fill_ties", _NARROW, "sm90/11"),),
         _fill_tie),)),
)


def spread(values: Sequence[float]) -> dict:
    """``n``, ``median``, ``min``, ``max``, ``p10`` and ``p90`` (linear interpolation) of ``values``."""
    v = sorted(values)

    def q(p):
        x = p * (len(v) - 1)
        lo = int(x)
        return v[lo] + (v[min(lo + 1, len(v) - 1)] - v[lo]) * (x - lo)

    return {"n": len(v), "median": q(0.5), "min": v[0], "max": v[-1], "p10": q(0.1), "p90": q(0.9)}


def constant_evidence(results_dir: Optional[str] = None) -> list:
    """``[(constant, value, label, {run: {shape: None}}, spread of the speed-ups or None)]``: for each of
    step 11's thresholds (:data:`CONSTANT_EVIDENCE`), each comparison's speed-ups
    (:func:`gemm_course.measure.records.ab_changes`, ``new`` over ``old``) on the shapes it reads, pooled
    over its runs."""
    import importlib

    from ..measure import records

    out = []
    for name, module, comparisons in CONSTANT_EVIDENCE:
        value = getattr(importlib.import_module(f"gemm_course.rules.{module}"), name)
        for label, runs, keep in comparisons:
            values, shapes = [], {}
            for run, new, old in runs:
                tune = records.load_tuning(run, results_dir)
                if tune is None:
                    continue
                for shape, vs in records.ab_changes(tune, new, old).items():
                    if keep(shape):
                        values += vs
                        shapes.setdefault(run, {})[shape] = None  # a shape once per run
            out.append((name, value, label, shapes, spread(values) if values else None))
    return out


def _pct(v: float) -> str:
    text = f"{v:+.1%}"
    return "0.0%" if text in ("+0.0%", "-0.0%") else text


def constants_table(names: Sequence[str], results_dir: Optional[str] = None, files: bool = False) -> str:
    """A Markdown table: each constant ``names`` with its value, each comparison that set it, the
    median speed-up over its shape-runs with the range (min to max; p10 to p90 where there are ten
    or more), and the records it reads: how many A/B records, on which GPU and when (a chapter does
    not cite runs by number; ``files``: their names under ``results/tuning/``, for the appendix)."""
    from ..measure import records, tuning_history

    rows = ["| constant | comparison (shapes chosen by the constant) | median (range), shape-runs | records |",
            "|---|---|---|---|"]
    for name, value, label, shapes, s in constant_evidence(results_dir):
        if name not in names:
            continue
        if s is None:
            effect = "not recorded"
        else:
            band = f"p10-p90 {_pct(s['p10'])} to {_pct(s['p90'])}; " if s["n"] >= 10 else ""
            effect = f"**{_pct(s['median'])}** ({band}min-max {_pct(s['min'])} to {_pct(s['max'])}), {s['n']}"
        if files:
            where = "<br>".join(f"`{run}` ({len(v)} shape{'s' if len(v) > 1 else ''})" for run, v in shapes.items())
        else:
            tunes = [records.load_tuning(run, results_dir) for run in shapes]
            gpus = sorted({tuning_history.run_provenance(tune).split(", ")[0] for tune in tunes})
            dates = sorted({tuning_history.run_date(tune) for tune in tunes} - {None})
            count = len({shape for v in shapes.values() for shape in v})
            where = (f"{len(tunes)} A/B record{'s' if len(tunes) > 1 else ''}, {count} shape{'s' if count > 1 else ''}, "
                     f"{' and '.join(gpus)}" + (f", {', '.join(dates)}" if dates else ""))
        rows.append(f"| `{name}` = {value} | {label} | {effect} | {where or '-'} |")
    return "\n".join(rows)
