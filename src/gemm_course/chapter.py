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

from . import arch, bench, ladder, viz

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
    from, the excerpt (:func:`gemm_course.source.region` of ``label``; else, with ``start``,
    :func:`gemm_course.source.excerpt`; else the whole method), and, with ``ptx`` and ``patterns``,
    the PTX instructions :func:`gemm_course.source.ptx_lines` finds."""
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
    from . import records as rec

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
    from . import run

    for result in run.check(step, run.shapes_for(step, count=count), seed=0):
        print(result)
        assert result.ok, result


def time_step(step, notebook: str, size: int = 4096) -> dict:
    """Time ``step`` at ``size``^3 next to cuBLAS in this process (a bench record, not written to
    ``results/``; its command names the chapter). Needs a GPU of the step's architecture."""
    from .problem import GemmProblem

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
