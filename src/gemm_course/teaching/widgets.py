"""The tile explorer: pick a step, a target and the step's knobs; see what the compiler made of it.

* :class:`TileExplorer` (ipywidgets): on every change it compiles the chosen configuration for
  the chosen target (:func:`gemm_course.teaching.explorer_rows.compile_row`, a fraction of a second
  on a CPU) and shows shared memory, registers, spills and the instruction mix. Knob values that
  would make the configuration invalid are marked and explained, using the step's own
  ``check_config``. On a GPU whose target matches the step, "time it" plans the chosen size
  (:func:`gemm_course.runtime.plan.for_problem`, whose refusal it shows), then runs
  :func:`gemm_course.measure.bench.bench_step` and shows TFLOP/s next to cuBLAS timed in the same run.
  Given the table of :func:`explorer_table`, a :class:`TileExplorer` displays as both: the live
  widget in Jupyter, the static explorer in the book, whose build prefers an output's
  ``text/html`` to its widget view (``_config.yml``: ``nb_mime_priority_overrides``).
* The facts of a configuration, compiled (:func:`compile_row`, :func:`precompute_sweep`,
  :func:`ctas_per_sm`): :mod:`gemm_course.teaching.explorer_rows`.
* The static explorer, every configuration precomputed (:func:`explorer_table`,
  :func:`explorer_html`), and the HTML of rows and records (:func:`sweep_html`, ...):
  :mod:`gemm_course.teaching.explorer_page`.

Both are re-exported here, the names the chapters use (``widgets.explorer_table``, ...).
Taught in chapter 3 (the swizzle chapter), reused by later chapters as knobs grow (stages, ...).
"""

from __future__ import annotations

import html
from typing import Optional

from ..runtime import arch, ladder, plan
from ..runtime.problem import GemmInputError, GemmProblem
from .explorer_page import (  # noqa: F401  (re-exported: the chapters' and tests' names)
    config_key,
    explorer_html,
    explorer_table,
    knob_values,
    measured,
    resources_html,
    sweep_html,
    table_row,
    table_rows,
    table_summary,
    timing_html,
)
from .explorer_rows import (  # noqa: F401
    SM_LIMITS,
    STAGE_FIELDS,
    TMEM_COLUMNS_PER_SM,
    compile_row,
    compile_rows,
    compile_rows_here,
    ctas_per_sm,
    default_workers,
    precompute_sweep,
    targets_for,
    tmem_columns,
)

SIZES = (1024, 2048, 4096, 8192)


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

        if not self.can_time():
            self.time_out.value = "<i>nothing to time here (see the note above)</i>"
            return None
        problem = GemmProblem.square(self.size_box.value)
        try:  # whether the size runs with this config: the plan's rule, as run.prepare's
            plan.for_problem(self.step, problem, self.config())
        except GemmInputError as e:
            self.time_out.value = f"<span style='color:#c00'>{html.escape(str(e))}</span>"
            return None
        self.time_out.value = "<i>timing...</i>"
        try:
            rec = bench.bench_step(self.step, problem, self.config(), repeats=repeats, rounds=rounds,
                                   command="widgets.TileExplorer.time_it")
        except bench.WrongOutput as e:  # a config that computes wrong values is shown, never timed
            self.time_out.value = f"<span style='color:#c00'>{html.escape(str(e))}</span>"
            return None
        self.records.append(rec)
        self.time_out.value = timing_html(rec)
        return rec
