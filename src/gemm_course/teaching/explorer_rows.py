"""A step's configuration compiled and summarized: the facts the tile explorer shows.

:func:`compile_row` compiles one ``(step, config, target)`` (:func:`gemm_course.runtime.arch.compile_step`)
and summarizes it as a row of plain JSON (:func:`compile_rows_here`): registers/thread, shared
memory/CTA, spills, threads/CTA, tensor-memory columns (sm_100a), its pipeline stages (the config's
``*stages`` fields), CTAs per SM and the resource that limits them (:func:`ctas_per_sm`), and the
static instruction mix by class (:func:`gemm_course.teaching.inspect.report`). A config its step's
``check_config`` refuses, or a target the step is not built for, is not compiled: its row has
``ok=False`` and the reason. :func:`precompute_sweep`: the rows of every knob combination of a step;
:func:`compile_rows`: the rows of many jobs, in worker processes (one per core).
:mod:`gemm_course.teaching.widgets` shows the rows live, :mod:`gemm_course.teaching.explorer_page`
in a static page.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
from typing import Optional, Sequence

from .. import hardware
from ..runtime import arch, ladder
from . import inspect, sim

# Per-SM limits for CTAs per SM (gemm_course.hardware): compute capabilities 9.0 and 10.0 have the
# same registers, shared memory, warps and CTA slots; sm_100a adds tensor memory, 512 columns (of
# 128 lanes x 32 bits) per SM, which every resident CTA allocates from.
SM_LIMITS = {name: t.occupancy_limits() for name, t in hardware.TARGETS.items()}
TMEM_COLUMNS_PER_SM = hardware.SM100A.tmem_columns

# Config fields that count pipeline stages, and what each one stages.
STAGE_FIELDS = (
    ("stages", "A/B tiles (shared memory)"),
    ("acc_stages", "accumulators (tensor memory)"),
    ("epi_stages", "epilogue buffers (shared memory)"),
    ("clc_stages", "scheduler answers (shared memory)"),
)


def _label(config, names) -> str:
    return ", ".join(f"{n}={getattr(config, n)}" for n in names) or "default config"


def targets_for(step) -> list:
    """Targets a step can be compiled for: the naive step runs anywhere, tensor-core steps on their own."""
    step = ladder.get(step)
    return list(arch.TARGETS) if step.any_shape else [step.target]


def compile_row(step, config, target: str) -> dict:
    """Compile one configuration and summarize its resources (a row of the sweep)."""
    return compile_rows_here([(step, config, target)])[0]


def compile_rows_here(jobs: Sequence[tuple]) -> list:
    """:func:`compile_row` of each ``(step, config, target)``, in this process: compile each (invalid
    ones not), then disassemble all of a target's at once (:func:`gemm_course.teaching.inspect.sass_many`)."""
    rows, compiled = [], []
    for step, config, target in jobs:
        step = ladder.get(step)
        names = [k for k, _ in step.knobs]
        row = {"step": step.key, "target": target, "config": dataclasses.asdict(config), "label": _label(config, names)}
        rows.append(row)
        ok, why = step.check_config(config)
        row.update(ok=ok, reason=why)
        if not ok:
            continue
        if target not in targets_for(step):
            row.update(ok=False, reason=f"{step.key} is built for {step.target} only")
            continue
        try:
            compiled.append((row, config, arch.compile_step(step, config, target)))
        except Exception as e:  # a widget shows the failure instead of dying with it
            row.update(ok=False, reason=f"compile failed: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
    for target in {t for _, _, t in jobs}:
        mine = [item for item in compiled if item[0]["target"] == target]
        for (row, config, art), listing in zip(mine, inspect.sass_many([art.cubin for _, _, art in mine], target)):
            row.update(_facts(art, inspect.report(art, listing), config, target))
    return rows


def _facts(art, rep, config, target: str) -> dict:
    r = rep.resources
    threads = inspect.threads_per_cta(art.ptx) or 0
    tmem = tmem_columns(art.ptx) if target == "sm_100a" else None
    occ = ctas_per_sm(r.registers, threads, rep.smem_bytes, target, tmem)
    return dict(
        registers=r.registers,
        smem_bytes=rep.smem_bytes,
        local_bytes=r.local,
        stack_bytes=r.stack,
        spills=r.spills,
        threads=threads,
        tmem_columns=tmem,
        stages={name: getattr(config, name) for name, _ in STAGE_FIELDS if hasattr(config, name)},
        ctas_per_sm=occ["ctas"],
        limiter=occ["limiter"],
        ctas_allowed=occ["limits"],
        sass_instructions=rep.sass_lines,
        mix=dict(rep.mix),
        compile_s=round(art.seconds, 2),
    )


def tmem_columns(ptx: str) -> Optional[int]:
    """Tensor-memory columns a CTA allocates (its largest ``tcgen05.alloc``), None without one."""
    found = []
    for v in inspect.tmem_alloc_columns(ptx):
        found += list(v) if isinstance(v, tuple) else [] if v is None else [v]
    return max(found) if found else None


def ctas_per_sm(registers: int, threads: int, smem_bytes: int, target: str, tmem: Optional[int] = None) -> dict:
    """How many CTAs of a compiled kernel fit on one SM of ``target`` and which resources limit it:
    :func:`gemm_course.teaching.sim.occupancy` (registers, shared memory, warps, CTA slots) and, on sm_100a,
    the tensor memory each CTA allocates. ``{'ctas', 'limits': {resource: CTAs it allows}, 'limiter'}``."""
    occ = sim.occupancy(registers, threads, smem_bytes, limits=SM_LIMITS[target]) if threads else None
    limits = dict(occ["limits"]) if occ else {}
    if tmem:
        limits["tensor memory"] = TMEM_COLUMNS_PER_SM // tmem
    ctas = min(limits.values()) if limits else 0
    return {"ctas": ctas, "limits": limits, "limiter": [name for name, v in limits.items() if v == ctas]}


def precompute_sweep(step, target: Optional[str] = None, include_invalid: bool = True) -> list:
    """Every combination of ``step.knobs`` (invalid ones too, with the reason), compiled for ``target``
    (default: the step's own target). A compile takes ~0.3-1 s; results are cached per config."""
    step = ladder.get(step)
    target = arch.resolve_target(target, step) if target else step.target
    names = [k for k, _ in step.knobs]
    configs = [step.config(**dict(zip(names, values))) for values in itertools.product(*(v for _, v in step.knobs))]
    rows = compile_rows_here([(step, config, target) for config in configs or [step.default]])
    return [row for row in rows if row["ok"] or include_invalid]


def _configs(jobs: Sequence[tuple]) -> list:
    """``(step key, knob values, target)`` -> ``(step, config, target)``."""
    out = []
    for key, values, target in jobs:
        step = ladder.get(key)
        out.append((step, step.config(**dict(zip((n for n, _ in step.knobs), values))), target))
    return out


def default_workers(jobs: int) -> int:
    """Worker processes for ``jobs`` compiles: one per core, at most 8, none for fewer than 8 jobs."""
    return 1 if jobs < 8 else max(1, min(jobs // 4, os.cpu_count() or 1, 8))


def compile_rows(jobs: Sequence[tuple], workers: Optional[int] = None) -> list:
    """:func:`compile_row` of each ``(step key, knob values, target)``, in order. With ``workers`` > 1
    the jobs are dealt out to that many worker processes (a compile holds one core), fresh
    interpreters (:func:`_serve`), so the caller needs no ``__main__`` guard; each honors the
    on-disk compile cache (``GEMM_COURSE_COMPILE_CACHE``) as a compile here would."""
    import subprocess
    import sys
    import threading

    jobs = [(key, list(values), target) for key, values, target in jobs]
    workers = default_workers(len(jobs)) if workers is None else max(1, min(workers, len(jobs)))
    if workers == 1:
        return compile_rows_here(_configs(jobs))
    shares = [list(range(w, len(jobs), workers)) for w in range(workers)]  # dealt: each gets every step
    results: list = [None] * len(jobs)
    failures: list = []

    def work(share):
        cmd = [sys.executable, "-c", "from gemm_course.teaching.explorer_rows import _serve; _serve()"]
        try:
            out = subprocess.run(cmd, input=json.dumps([jobs[i] for i in share]), stdout=subprocess.PIPE,
                                 text=True, check=True).stdout
            for i, row in zip(share, json.loads(out)):
                results[i] = row
        except Exception as e:
            failures.append(e)

    threads = [threading.Thread(target=work, args=(share,), daemon=True) for share in shares]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failures:
        raise RuntimeError(f"a compile worker failed: {failures[0]}") from failures[0]
    return results


def _serve() -> None:
    """A compile worker: a JSON list of jobs on stdin, the JSON list of their rows on stdout (anything
    else written to stdout, by Python or by the compiler, goes to stderr)."""
    import sys

    answer = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    rows = compile_rows_here(_configs(json.load(sys.stdin)))
    answer.write(json.dumps(rows))
    answer.close()
