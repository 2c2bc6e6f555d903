"""The static explorer: every configuration of every step precomputed, shown without a kernel.

:func:`explorer_table` compiles every knob combination of each step for its own target
(:func:`gemm_course.teaching.explorer_rows.compile_rows`, in worker processes) and adds the TFLOP/s
recorded for each configuration under ``results/`` (:func:`measured`): plain JSON.
:func:`explorer_html` turns it into the page's explorer, plain ``<select>`` elements and a small
inline script over the table embedded in the page: no kernel, no network. Also the HTML of rows
and records that the live explorer (:mod:`gemm_course.teaching.widgets`) and the chapters show:
:func:`sweep_html`, :func:`resources_html`, :func:`timing_html`.
"""

from __future__ import annotations

import dataclasses
import html
import itertools
import json
import time
from typing import Optional, Sequence

from ..runtime import ladder
from .explorer_rows import STAGE_FIELDS, compile_rows, default_workers


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


def config_key(step, values: Sequence) -> str:
    """The table's key of a configuration: ``'sm90/2:128,32'``, the step's knob values in order (JSON)."""
    return ladder.get(step).key + ":" + ",".join(json.dumps(v) for v in values)


def knob_values(step, config) -> tuple:
    step = ladder.get(step)
    return tuple(getattr(config, name) for name, _ in step.knobs)


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
    every step of both ladders), compiled for the step's own target
    (:func:`gemm_course.teaching.explorer_rows.compile_row`; invalid combinations carry their reason),
    and the TFLOP/s recorded for it (:func:`measured`;
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
    """The rows of ``steps`` in :func:`gemm_course.teaching.explorer_rows.precompute_sweep`'s order
    (for :func:`sweep_html`, ``viz.sweep``)."""
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
