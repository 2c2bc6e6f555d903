"""The tile explorer: pick a step, a target and the step's knobs; see what the compiler made of it.

* :class:`TileExplorer` (ipywidgets): on every change it compiles the chosen configuration for
  the chosen target (:func:`gemm_course.runtime.arch.compile_step`, a fraction of a second on a CPU) and
  shows shared memory, registers, spills and the instruction mix (:func:`gemm_course.teaching.inspect.report`).
  Knob values that would make the configuration invalid are marked and explained, using the
  step's own ``check_config``. On a GPU whose target matches the step, "time it" runs
  :func:`gemm_course.measure.bench.bench_step` at a chosen size and shows TFLOP/s next to cuBLAS timed in
  the same run.
* :func:`precompute_sweep` (no widgets needed): every combination of the step's knobs, valid or
  not, with its compiled resources; :func:`sweep_html` renders it as a table.
* :func:`explorer_table` (no widgets needed): every step of both ladders, every combination of its
  knobs, compiled for the step's target (in worker processes, one per core), with the facts the
  explorer shows and the TFLOP/s recorded for that configuration under ``results/``: plain JSON.
  :func:`explorer_html` turns it into the *static* explorer, plain ``<select>`` elements and a
  small inline script over the table embedded in the page: no kernel, no network. Given the table,
  a :class:`TileExplorer` displays as both: the live widget in Jupyter, the static explorer in the
  book, whose build prefers an output's ``text/html`` to its widget view (``_config.yml``:
  ``nb_mime_priority_overrides``).

Facts of a configuration (:func:`compile_row`): registers/thread, shared memory/CTA, spills,
threads/CTA, tensor-memory columns (sm_100a), its pipeline stages (the config's ``*stages``
fields), CTAs per SM and the resource that limits them (:func:`ctas_per_sm`), and the static
instruction mix by class.

Taught in chapter 3 (the swizzle chapter), reused by later chapters as knobs grow (stages, ...).
"""

from __future__ import annotations

import dataclasses
import html
import itertools
import json
import os
import time
from typing import Optional, Sequence

from .. import hardware
from ..runtime import arch, ladder
from . import inspect, sim

SIZES = (1024, 2048, 4096, 8192)

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


def sweep_html(rows: list) -> str:
    """The sweep as an HTML table; invalid combinations greyed out with the reason."""
    head = ("<tr><th>step</th><th>config</th><th>target</th><th>registers/thread</th><th>shared memory/CTA</th>"
            "<th>spills</th><th>SASS instr.</th><th>tensor-core MMA</th><th>TMA</th></tr>")
    body = []
    for r in rows:
        if not r["ok"]:
            body.append(f'<tr style="color:#999"><td>{r["step"]}</td><td>{html.escape(r["label"])}</td><td>{r["target"]}</td>'
                        f'<td colspan="6"><i>invalid: {html.escape(r["reason"])}</i></td></tr>')
            continue
        mix = r["mix"]
        body.append(
            f"<tr><td>{r['step']}</td><td>{html.escape(r['label'])}</td><td>{r['target']}</td><td>{r['registers']}</td>"
            f"<td>{r['smem_bytes'] / 1024:.1f} KiB</td><td>{'yes' if r['spills'] else 'no'}</td>"
            f"<td>{r['sass_instructions']}</td><td>{mix.get('tensor-core MMA', 0)}</td><td>{mix.get('TMA copy', 0)}</td></tr>"
        )
    # wider than a page column: the table scrolls sideways inside its own box
    return f'<div style="overflow-x:auto;max-width:100%"><table class="gemm-sweep">{head}{"".join(body)}</table></div>'


def resources_html(row: dict) -> str:
    """One compiled configuration: resources and instruction mix, as HTML."""
    if not row["ok"]:
        return f'<div style="color:#999"><b>{html.escape(row["label"])}</b>: invalid, {html.escape(row["reason"])}</div>'
    mix = "".join(f"<tr><td>{html.escape(k)}</td><td style='text-align:right'>{v}</td></tr>" for k, v in row["mix"].items())
    spill = ("<span style='color:#c00'>spills: "
             f"{row['local_bytes']} B local, {row['stack_bytes']} B stack</span>") if row["spills"] else "no spills"
    tmem = f", {row['tmem_columns']} tensor-memory columns" if row.get("tmem_columns") else ""
    stages = ", ".join(f"{dict(STAGE_FIELDS)[k]} {v}" for k, v in row.get("stages", {}).items())
    stages = f"; stages: {html.escape(stages)}" if stages else ""
    ctas = (f"; {row['ctas_per_sm']} CTA(s) per SM, limited by {html.escape(' and '.join(row['limiter']))}"
            if "ctas_per_sm" in row else "")
    return (f"<b>{html.escape(row['step'])}</b> ({html.escape(row['label'])}) for <b>{row['target']}</b>: "
            f"{row['registers']} registers/thread, {row['smem_bytes']} B ({row['smem_bytes'] / 1024:.1f} KiB) "
            f"shared memory/CTA{tmem}, {spill}{stages}{ctas}; compiled in {row['compile_s']} s."
            f"<table><tr><th>instruction class</th><th>static count</th></tr>{mix}</table>")


def timing_html(record: dict) -> str:
    t, c = record["tflops"]["median"], record["cublas_tflops"]["median"]
    s = record["shape"]
    return (f"{record['step']} at {s['m']}x{s['n']}x{s['k']} on {html.escape(str(record.get('gpu')))}: "
            f"<b>{t:.1f} TFLOP/s</b> (median), cuBLAS in the same run {c:.1f} TFLOP/s: "
            f"<b>{t / c:.1%}</b> of cuBLAS; relative error {record['rel_error']:.1e}.")


# ---------------------------------------------------------------------------------------------
# the static explorer: every configuration precomputed, shown without a kernel
# ---------------------------------------------------------------------------------------------


def config_key(step, values: Sequence) -> str:
    """The table's key of a configuration: ``'sm90/2:128,32'``, the step's knob values in order (JSON)."""
    return ladder.get(step).key + ":" + ",".join(json.dumps(v) for v in values)


def knob_values(step, config) -> tuple:
    step = ladder.get(step)
    return tuple(getattr(config, name) for name, _ in step.knobs)


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
        cmd = [sys.executable, "-c", "from gemm_course.teaching.widgets import _serve; _serve()"]
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


def measured(records: Sequence[dict], step, config) -> list:
    """The bench records of ``step`` run with exactly ``config`` (a record from before a config field
    existed counts at its old value, :data:`gemm_course.measure.records.LEGACY_FIELDS`): the newest per GPU
    and shape, smallest problem first, as ``{shape, m, n, k, gpu, tflops, cublas_tflops, ratio, date, file}``
    (TFLOP/s: medians)."""
    from ..measure import records as rec

    step = ladder.get(step)
    want = dataclasses.asdict(config)
    legacy = {k: v for k, v in rec.LEGACY_FIELDS.items() if k in want}
    newest: dict = {}
    for r in records:
        if r.get("kind", "bench") != "bench" or str(r.get("step", "")).split(":")[0] != step.key:
            continue
        if r.get("config") is None or {**legacy, **r["config"]} != want:
            continue
        where = (r.get("gpu"), rec.shape_of(r))
        if where not in newest or r.get("date", "") >= newest[where].get("date", ""):
            newest[where] = r
    out = []
    def order(item):
        (gpu, (m, n, k)), _ = item
        return str(gpu), m * n * k, (m, n, k)

    for (gpu, (m, n, k)), r in sorted(newest.items(), key=order):
        t, c = r["tflops"]["median"], r["cublas_tflops"]["median"]
        out.append({"shape": f"{m}x{n}x{k}", "m": m, "n": n, "k": k, "gpu": gpu, "tflops": round(t, 1),
                    "cublas_tflops": round(c, 1), "ratio": round(t / c, 4), "date": r.get("date", "")[:10],
                    "file": r.get("_file", "")})
    return out


def explorer_table(steps: Optional[Sequence] = None, records: Optional[Sequence[dict]] = None,
                   workers: Optional[int] = None) -> dict:
    """What the static explorer shows, precomputed: every combination of each step's knobs (default:
    every step of both ladders), compiled for the step's own target with :func:`compile_row`
    (invalid combinations carry their reason), and the TFLOP/s recorded for it (:func:`measured`;
    ``records`` default: :func:`gemm_course.measure.records.load_records`). Plain JSON::

        {"steps": [{"key", "title", "target", "knobs": [{"name", "values", "labels"}], "default": [...]}],
         "rows": {config_key: row}, "compiled": {"configurations", "seconds", "workers", "records"}}
    """
    from ..measure import records as rec

    steps = [ladder.get(s) for s in (ladder.steps() if steps is None else steps)]
    records = rec.load_records() if records is None else records
    jobs = [(s.key, values, s.target) for s in steps for values in itertools.product(*(v for _, v in s.knobs))]
    workers = default_workers(len(jobs)) if workers is None else workers
    t0 = time.perf_counter()
    rows = compile_rows(jobs, workers)
    seconds = time.perf_counter() - t0
    table: dict = {"steps": [], "rows": {}}
    for s in steps:
        table["steps"].append({
            "key": s.key, "title": s.title, "target": s.target,
            "knobs": [{"name": n, "values": list(vs), "labels": [str(v) for v in vs]} for n, vs in s.knobs],
            "default": list(knob_values(s, s.default)),
        })
    for (key, values, _), row in zip(jobs, rows):
        step = ladder.get(key)
        config = step.config(**dict(zip((n for n, _ in step.knobs), values)))
        row["measured"] = measured(records, step, config) if row["ok"] else []
        table["rows"][config_key(step, values)] = row
    table["compiled"] = {"configurations": sum(r["ok"] for r in rows), "combinations": len(rows),
                         "seconds": round(seconds, 1), "workers": workers,
                         "records": sum(len(r["measured"]) for r in rows)}
    return table


def table_row(table: dict, step, config=None) -> dict:
    """The row of ``table`` for ``step`` with ``config`` (default: the step's default)."""
    step = ladder.get(step)
    return table["rows"][config_key(step, knob_values(step, step.default if config is None else config))]


def table_rows(table: dict, *steps) -> list:
    """The rows of ``steps`` in :func:`precompute_sweep`'s order (for :func:`sweep_html`, ``viz.sweep``)."""
    keys = {ladder.get(s).key for s in steps}
    return [r for r in table["rows"].values() if r["step"] in keys]


def table_summary(table: dict) -> str:
    c = table["compiled"]
    return (f"{c['configurations']} configurations of {len(table['steps'])} steps compiled "
            f"({c['combinations'] - c['configurations']} knob combinations invalid) in {c['seconds']} s "
            f"with {c['workers']} worker process(es); {c['records']} measurements matched a configuration")


_EXPLORER_CSS = """
.gemm-explorer{border:1px solid #ccc;border-radius:4px;padding:.6em .8em;margin:.5em 0;max-width:100%;
  box-sizing:border-box;overflow-x:auto}
.gemm-explorer label{margin-right:1em;display:inline-block;max-width:100%}
.gemm-explorer select{margin-left:.3em;max-width:100%}
.gemm-explorer select.gemm-explorer-step{width:40em}
.gemm-explorer .gemm-explorer-knobs{margin:.4em 0}
.gemm-explorer table{margin:.4em 0;border-collapse:collapse}
.gemm-explorer th,.gemm-explorer td{padding:.1em .6em;text-align:left;vertical-align:top}
.gemm-explorer td.num{text-align:right}
.gemm-explorer table.gemm-explorer-measured{font-size:85%}
.gemm-explorer table.gemm-explorer-measured td,.gemm-explorer table.gemm-explorer-measured th{white-space:nowrap;
  padding:.1em .3em}
.gemm-explorer .gemm-explorer-invalid{color:#888}
.gemm-explorer .gemm-explorer-note{font-size:85%;color:#666}
"""

# Reads the JSON table embedded beside it; builds the knob <select>s of the chosen step; shows the
# row of the chosen combination. Every fact cell carries data-fact (the browser test reads them).
_EXPLORER_JS = r"""
(function () {
  var root = document.currentScript.closest('.gemm-explorer');
  var data = JSON.parse(root.querySelector('script.gemm-explorer-data').textContent);
  var stepBox = root.querySelector('select.gemm-explorer-step');
  var knobArea = root.querySelector('.gemm-explorer-knobs');
  var out = root.querySelector('.gemm-explorer-facts');
  var steps = {};
  data.steps.forEach(function (s) { steps[s.key] = s; });
  var STAGES = JSON.parse(root.dataset.stageNames);
  function esc(t) {
    return String(t).replace(/[&<>"]/g, function (c) { return {'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;'}[c]; });
  }
  function key(s, values) { return s.key + ':' + values.map(function (v) { return JSON.stringify(v); }).join(','); }
  function boxes() { return Array.prototype.slice.call(knobArea.querySelectorAll('select')); }
  function values() { return boxes().map(function (b) { return JSON.parse(b.value); }); }
  function buildKnobs(s, chosen) {
    knobArea.textContent = '';
    s.knobs.forEach(function (knob, i) {
      var label = document.createElement('label');
      label.appendChild(document.createTextNode(knob.name));
      var box = document.createElement('select');
      box.name = knob.name;
      box.dataset.knob = knob.name;
      knob.values.forEach(function (v) {
        var o = document.createElement('option');
        o.value = JSON.stringify(v);
        box.appendChild(o);
      });
      box.value = JSON.stringify(chosen[i]);
      box.addEventListener('change', show);
      label.appendChild(box);
      knobArea.appendChild(label);
    });
  }
  function relabel(s, now) {
    boxes().forEach(function (box, i) {
      Array.prototype.forEach.call(box.options, function (o, j) {
        var other = now.slice();
        other[i] = s.knobs[i].values[j];
        var r = data.rows[key(s, other)];
        o.textContent = s.knobs[i].labels[j] + (r && r.ok ? '' : ' (invalid)');
      });
    });
  }
  function fact(name, label, text) {
    return '<tr><th>' + esc(label) + '</th><td data-fact="' + name + '">' + esc(text) + '</td></tr>';
  }
  function render(r) {
    if (!r) { return '<p class="gemm-explorer-invalid" data-fact="missing">not in the table</p>'; }
    if (!r.ok) {
      return '<p class="gemm-explorer-invalid" data-fact="invalid"><b>' + esc(r.label) + '</b>: invalid, ' +
        esc(r.reason) + '</p>';
    }
    var h = '<table class="gemm-explorer-resources"><tbody>';
    h += fact('config', 'configuration', r.label);
    h += fact('target', 'target', r.target);
    h += fact('registers', 'registers/thread', r.registers);
    h += fact('smem_bytes', 'shared memory/CTA', r.smem_bytes + ' B (' + (r.smem_bytes / 1024).toFixed(1) + ' KiB)');
    h += fact('spills', 'spills', r.spills ? 'yes: ' + r.local_bytes + ' B local, ' + r.stack_bytes + ' B stack' : 'no');
    if (r.tmem_columns !== null && r.tmem_columns !== undefined) {
      h += fact('tmem_columns', 'tensor memory/CTA', r.tmem_columns + ' columns (of 512 per SM)');
    }
    var st = Object.keys(r.stages).map(function (k) { return STAGES[k] + ' ' + r.stages[k]; });
    if (st.length) { h += fact('stages', 'pipeline stages', st.join(', ')); }
    h += fact('threads', 'threads/CTA', r.threads);
    var allowed = Object.keys(r.ctas_allowed).map(function (k) { return k + ' ' + r.ctas_allowed[k]; }).join(', ');
    h += fact('ctas_per_sm', 'CTAs per SM', r.ctas_per_sm + ', limited by ' + r.limiter.join(' and ') +
      ' (each resource allows: ' + allowed + ')');
    h += '</tbody></table>';
    h += '<table class="gemm-explorer-mix"><thead><tr><th>instruction class</th><th>static count</th></tr></thead><tbody>';
    Object.keys(r.mix).forEach(function (k) {
      h += '<tr data-class="' + esc(k) + '"><td>' + esc(k) + '</td><td class="num">' + r.mix[k] + '</td></tr>';
    });
    h += '</tbody></table>';
    if (!r.measured.length) {
      h += '<p data-fact="measured">No measurement of this configuration under results/.</p>';
    } else {
      h += '<p class="gemm-explorer-note">Recorded: the newest run of exactly this configuration per GPU and ' +
        'shape (median TFLOP/s; cuBLAS timed in the same run).</p>';
      h += '<table class="gemm-explorer-measured"><thead><tr><th>M x N x K</th><th>GPU</th><th>TFLOP/s</th>' +
        '<th>cuBLAS</th><th>of cuBLAS</th><th>results file</th></tr></thead><tbody>';
      r.measured.forEach(function (m) {
        h += '<tr data-shape="' + esc(m.shape) + '"><td>' + esc(m.shape) + '</td><td>' + esc(m.gpu) +
          '</td><td class="num" data-fact="tflops">' + m.tflops.toFixed(1) + '</td><td class="num">' +
          m.cublas_tflops.toFixed(1) + '</td><td class="num">' + (100 * m.ratio).toFixed(1) + '%</td>' +
          '<td title="' + esc(m.file) + '">' + esc(m.file.split('/').pop()) + '</td></tr>';
      });
      h += '</tbody></table>';
    }
    return h;
  }
  function show() {
    var s = steps[stepBox.value], now = values(), k = key(s, now);
    relabel(s, now);
    root.dataset.selected = k;
    out.innerHTML = render(data.rows[k]);
  }
  stepBox.addEventListener('change', function () { var s = steps[stepBox.value]; buildKnobs(s, s.default); show(); });
  var start = JSON.parse(root.dataset.start);
  stepBox.value = start.step;
  buildKnobs(steps[start.step], start.values);
  show();
  root.dataset.ready = '1';
})();
"""


def explorer_html(table: dict, step=None, config=None) -> str:
    """The static explorer over ``table`` (:func:`explorer_table`): a step ``<select>``, one per
    knob, and the chosen configuration's facts, drawn by an inline script from the table embedded
    as JSON. Starts at ``step`` with ``config`` (default: the first step, its default config)."""
    have = [s["key"] for s in table["steps"]]
    step = ladder.get(step) if step is not None else None
    if step is None or step.key not in have:  # start where asked, where the table has it
        step, config = ladder.get(have[0]), None
    values = list(knob_values(step, step.default if config is None else config))
    options = "".join(f'<option value="{html.escape(s["key"])}">{html.escape(s["key"] + ": " + s["title"])}</option>'
                      for s in table["steps"])
    blob = json.dumps(table, separators=(",", ":")).replace("<", "\\u003c")  # no "</script>" inside
    start = html.escape(json.dumps({"step": step.key, "values": values}))
    stage_names = html.escape(json.dumps(dict(STAGE_FIELDS)))
    c = table["compiled"]
    note = (f"Precomputed when this page was built: {c['configurations']} configurations compiled for each "
            f"step's own target; TFLOP/s from the records under results/ that ran exactly that configuration.")
    return (f'<div class="gemm-explorer" data-start="{start}" data-stage-names="{stage_names}">'
            f"<style>{_EXPLORER_CSS}</style>"
            f'<label>step<select class="gemm-explorer-step">{options}</select></label>'
            '<div class="gemm-explorer-knobs"></div>'
            '<div class="gemm-explorer-facts"><noscript>The explorer needs JavaScript.</noscript></div>'
            f'<p class="gemm-explorer-note">{html.escape(note)}</p>'
            f'<script type="application/json" class="gemm-explorer-data">{blob}</script>'
            f"<script>{_EXPLORER_JS}</script></div>")


class TileExplorer:
    """Step, target and knobs in; resources, instruction mix (and on a GPU, timing) out.

    ``TileExplorer().widget`` is the ipywidgets box; :meth:`select` and :attr:`row` let code
    (and tests) drive it without a browser. ``display(TileExplorer(table=explorer_table()))``
    shows the widget where a kernel runs it (Jupyter) and :func:`explorer_html` over the table
    where none does (the book): the output carries both, and each front end picks its own.
    """

    def __init__(self, step="sm90/3", size: int = 4096, table: Optional[dict] = None):
        import ipywidgets as w

        self._w = w
        self.table = table  # explorer_table(): displayed, the explorer carries its static rendering too
        self.step = ladder.get(step)
        self.row: Optional[dict] = None
        self.records: list = []  # bench records of "time it" clicks, for viz.ladder_bars(live=...)
        self.step_box = w.Dropdown(options=[(str(s), s.key) for s in ladder.steps()], value=self.step.key,
                                   description="step", layout=w.Layout(width="520px"))
        self.target_box = w.Dropdown(description="target")
        self.knob_area = w.HBox()
        self.out = w.HTML()
        self.size_box = w.Dropdown(options=[(f"{s}^3", s) for s in SIZES], value=size, description="size")
        self.time_button = w.Button(description="time it", button_style="primary", icon="clock")
        self.time_out = w.HTML()
        self.gpu_note = w.HTML()
        self.time_button.on_click(lambda _: self.time_it())
        self.step_box.observe(lambda ch: self._on_step(ch["new"]), names="value")
        self.target_box.observe(lambda ch: self.update(), names="value")
        self.knob_boxes: dict = {}
        self._building = False
        self._on_step(self.step.key)
        self.widget = w.VBox([
            self.step_box,
            w.HBox([self.target_box, self.knob_area]),
            self.out,
            w.HBox([self.size_box, self.time_button]),
            self.gpu_note,
            self.time_out,
        ])

    def _repr_mimebundle_(self, **kwargs):
        """The widget's view, and with a table, the static explorer as ``text/html`` beside it."""
        bundle = self.widget._repr_mimebundle_(**kwargs)
        if self.table is not None:
            bundle["text/html"] = explorer_html(self.table, self.step, self.config())
        return bundle

    # ---- state ----------------------------------------------------------------------------

    def config(self):
        values = {name: box.value for name, box in self.knob_boxes.items()}
        return self.step.config(**values)

    def _valid_value(self, name, value) -> tuple:
        """Whether ``name=value`` with the other knobs as they are gives a valid config."""
        values = {n: b.value for n, b in self.knob_boxes.items()}
        values[name] = value
        try:
            cfg = self.step.config(**values)
        except Exception as e:  # a knob the Config does not know
            return False, str(e)
        return self.step.check_config(cfg)

    def _relabel(self):
        """Mark each knob value that would be invalid with the current choice of the others."""
        self._building = True
        try:
            for name, box in self.knob_boxes.items():
                current = box.value
                box.options = [((f"{v}" if self._valid_value(name, v)[0] else f"{v} (invalid)"), v)
                               for v in dict(self.step.knobs)[name]]
                box.value = current
        finally:
            self._building = False

    def _on_step(self, key):
        w = self._w
        self.step = ladder.get(key)
        self._building = True
        try:
            targets = targets_for(self.step)
            self.target_box.options = [(t if t in targets else f"{t} (not for this step)", t) for t in arch.TARGETS]
            present = arch.machine().target
            self.target_box.value = present if present in targets else targets[0]
            self.knob_boxes = {}
            default = self.step.default
            for name, values in self.step.knobs:
                box = w.Dropdown(options=list(values), value=getattr(default, name), description=name,
                                 layout=w.Layout(width="180px"))
                box.observe(lambda ch: None if self._building else self.update(), names="value")
                self.knob_boxes[name] = box
            self.knob_area.children = tuple(self.knob_boxes.values())
        finally:
            self._building = False
        self.update()

    def select(self, step=None, target=None, **knobs):
        """Set the widgets from code: ``explorer.select('sm90/2', tile_n=128)``; returns :attr:`row`."""
        if step is not None and ladder.get(step).key != self.step.key:
            self.step_box.value = ladder.get(step).key
        self._building = True
        try:
            if target is not None:
                self.target_box.value = arch.resolve_target(target)
            for name, value in knobs.items():
                if name not in self.knob_boxes:
                    raise KeyError(f"{self.step.key} has no knob {name!r}; its knobs: {', '.join(self.knob_boxes) or 'none'}")
                self.knob_boxes[name].value = value
        finally:
            self._building = False
        self.update()
        return self.row

    # ---- actions --------------------------------------------------------------------------

    def update(self):
        if self._building:
            return
        self._relabel()
        config = self.config()
        self.row = compile_row(self.step, config, self.target_box.value)
        self.out.value = resources_html(self.row)
        runnable = self.can_time()
        self.time_button.disabled = not runnable
        m = arch.machine()
        self.gpu_note.value = "" if runnable else (
            f"<i>time it: needs a GPU for {self.step.target} and a valid config; here: {html.escape(m.describe())}</i>")

    def can_time(self) -> bool:
        m = arch.machine()
        if not (self.row and self.row["ok"] and m.has_gpu):
            return False
        return m.target == self.target_box.value and (self.step.any_shape or m.target == self.step.target)

    def time_it(self, repeats: int = 20, rounds: int = 3):
        """Check, then time the selected config and cuBLAS interleaved (GPU only); keep the record."""
        from ..measure import bench
        from ..runtime.problem import GemmProblem

        if not self.can_time():
            self.time_out.value = "<i>nothing to time here (see the note above)</i>"
            return None
        problem = GemmProblem.square(self.size_box.value)
        ok, why = self.step.can_implement(problem, self.config())
        if not ok:
            self.time_out.value = f"<span style='color:#c00'>{html.escape(why)}</span>"
            return None
        self.time_out.value = "<i>timing...</i>"
        rec = bench.bench_step(self.step, problem, self.config(), repeats=repeats, rounds=rounds,
                               command="widgets.TileExplorer.time_it")
        self.records.append(rec)
        self.time_out.value = timing_html(rec)
        return rec
