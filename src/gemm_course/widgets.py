"""The tile explorer: pick a step, a target and the step's knobs; see what the compiler made of it.

* :class:`TileExplorer` (ipywidgets): on every change it compiles the chosen configuration for
  the chosen target (:func:`gemm_course.arch.compile_step`, a fraction of a second on a CPU) and
  shows shared memory, registers, spills and the instruction mix (:func:`gemm_course.inspect.report`).
  Knob values that would make the configuration invalid are marked and explained, using the
  step's own ``check_config``. On a GPU whose target matches the step, "time it" runs
  :func:`gemm_course.bench.bench_step` at a chosen size and shows TFLOP/s next to cuBLAS timed in
  the same run.
* :func:`precompute_sweep` (no widgets needed): every combination of the step's knobs, valid or
  not, with its compiled resources; :func:`sweep_html` renders it as a table, so the static book
  page is useful without a live kernel.

Taught in chapter 3 (the swizzle chapter), reused by later chapters as knobs grow (stages, ...).
"""

from __future__ import annotations

import dataclasses
import html
import itertools
from typing import Optional

from . import arch, inspect, ladder

SIZES = (1024, 2048, 4096, 8192)


def _label(config, names) -> str:
    return ", ".join(f"{n}={getattr(config, n)}" for n in names) or "default config"


def targets_for(step) -> list:
    """Targets a step can be compiled for: the naive step runs anywhere, tensor-core steps on their own."""
    step = ladder.get(step)
    return list(arch.TARGETS) if step.any_shape else [step.target]


def compile_row(step, config, target: str) -> dict:
    """Compile one configuration and summarize its resources (a row of the sweep)."""
    step = ladder.get(step)
    names = [k for k, _ in step.knobs]
    row = {"step": step.key, "target": target, "config": dataclasses.asdict(config), "label": _label(config, names)}
    ok, why = step.check_config(config)
    row.update(ok=ok, reason=why)
    if not ok:
        return row
    if target not in targets_for(step):
        row.update(ok=False, reason=f"{step.key} is built for {step.target} only")
        return row
    try:
        art = arch.compile_step(step, config, target)
        rep = inspect.report(art)
    except Exception as e:  # a widget shows the failure instead of dying with it
        row.update(ok=False, reason=f"compile failed: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
        return row
    r = rep.resources
    row.update(
        registers=r.registers,
        smem_bytes=rep.smem_bytes,
        local_bytes=r.local,
        stack_bytes=r.stack,
        spills=r.spills,
        sass_instructions=rep.sass_lines,
        mix=dict(rep.mix),
        compile_s=round(art.seconds, 2),
    )
    return row


def precompute_sweep(step, target: Optional[str] = None, include_invalid: bool = True) -> list:
    """Every combination of ``step.knobs`` (invalid ones too, with the reason), compiled for ``target``
    (default: the step's own target). A compile takes ~0.3-1 s; results are cached per config."""
    step = ladder.get(step)
    target = arch.resolve_target(target, step) if target else step.target
    names = [k for k, _ in step.knobs]
    rows = []
    for values in itertools.product(*(v for _, v in step.knobs)):
        config = step.config(**dict(zip(names, values)))
        row = compile_row(step, config, target)
        if row["ok"] or include_invalid:
            rows.append(row)
    if not step.knobs:
        rows.append(compile_row(step, step.default, target))
    return rows


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
    return f'<table class="gemm-sweep">{head}{"".join(body)}</table>'


def resources_html(row: dict) -> str:
    """One compiled configuration: resources and instruction mix, as HTML."""
    if not row["ok"]:
        return f'<div style="color:#999"><b>{html.escape(row["label"])}</b>: invalid, {html.escape(row["reason"])}</div>'
    mix = "".join(f"<tr><td>{html.escape(k)}</td><td style='text-align:right'>{v}</td></tr>" for k, v in row["mix"].items())
    spill = ("<span style='color:#c00'>spills: "
             f"{row['local_bytes']} B local, {row['stack_bytes']} B stack</span>") if row["spills"] else "no spills"
    return (f"<b>{html.escape(row['step'])}</b> ({html.escape(row['label'])}) for <b>{row['target']}</b>: "
            f"{row['registers']} registers/thread, {row['smem_bytes']} B ({row['smem_bytes'] / 1024:.1f} KiB) "
            f"shared memory/CTA, {spill}; compiled in {row['compile_s']} s."
            f"<table><tr><th>instruction class</th><th>static count</th></tr>{mix}</table>")


def timing_html(record: dict) -> str:
    t, c = record["tflops"]["median"], record["cublas_tflops"]["median"]
    s = record["shape"]
    return (f"{record['step']} at {s['m']}x{s['n']}x{s['k']} on {html.escape(str(record.get('gpu')))}: "
            f"<b>{t:.1f} TFLOP/s</b> (median), cuBLAS in the same run {c:.1f} TFLOP/s: "
            f"<b>{t / c:.1%}</b> of cuBLAS; relative error {record['rel_error']:.1e}.")


class TileExplorer:
    """Step, target and knobs in; resources, instruction mix (and on a GPU, timing) out.

    ``TileExplorer().widget`` is the ipywidgets box; :meth:`select` and :attr:`row` let code
    (and tests) drive it without a browser.
    """

    def __init__(self, step="sm90/3", size: int = 4096):
        import ipywidgets as w

        self._w = w
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
        from . import bench
        from .problem import GemmProblem

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
