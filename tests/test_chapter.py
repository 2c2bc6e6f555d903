"""gemm_course.teaching.chapter: the chapters' recurring cells, as functions (no GPU needed: the GPU paths
run against stand-ins for the check and the bench)."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from gemm_course import viz
from gemm_course.kernels import naive
from gemm_course.measure import bench
from gemm_course.runtime import arch, ladder, run
from gemm_course.teaching import chapter

pytestmark = pytest.mark.fast


@pytest.fixture
def shown(monkeypatch):
    """What the functions hand to IPython's display, in order."""
    out = []
    monkeypatch.setattr(chapter, "display", out.append)
    return out


def _pretend_gpu(monkeypatch, target):
    monkeypatch.setattr(chapter.arch, "machine", lambda: arch.Machine("a pretend GPU", (9, 0), 132, target))


def test_setup_prints_the_machine(capsys):
    machine, gpu_arch = chapter.setup()
    assert machine == arch.machine()
    assert gpu_arch == arch.TARGET_ARCH.get(machine.target)
    assert capsys.readouterr().out.strip() == machine.describe()


def test_source_of_objects_and_strings(shown):
    text = chapter.source_markdown(naive).data
    assert text.startswith("```python\n") and text.endswith("\n```")
    assert inspect.getsource(naive) in text
    assert chapter.source_markdown("x = 1").data == "```python\nx = 1\n```"
    method = ladder.get("sm90/6").load().Gemm.consume_tile
    chapter.show_source(method)
    assert len(shown) == 1 and inspect.getsource(method) in shown[0].data


def test_introduce(capsys):
    step, parent = chapter.introduce("sm90/4", "sm90/3")
    assert (step.key, parent.key) == ("sm90/4", "sm90/3")
    out = capsys.readouterr().out
    assert out.startswith(str(step)) and f"parent: {parent}" in out and step.adds in out and step.shapes in out


def test_step_bars_is_the_chapters_view(monkeypatch):
    calls = []
    monkeypatch.setattr(viz, "ladder_bars", lambda records, **kw: calls.append(kw))
    chapter.step_bars([], (3, 4), size=8192)
    assert calls == [dict(arch="sm90", shape=(8192, 8192, 8192), highlight=(3, 4), log=False,
                          numbers=chapter.TENSOR_CORE_STEPS, live=None, seed=False, own_ratios=True)]
    assert list(chapter.TENSOR_CORE_STEPS) == list(range(3, 12))  # Hopper's step 11 too


def test_without_a_gpu_nothing_runs_and_the_cell_says_so(monkeypatch, capsys, shown):
    monkeypatch.setattr(chapter.arch, "machine", lambda: arch.Machine(None, None, None, None))
    monkeypatch.setattr(run, "check", lambda *a, **k: pytest.fail("checked without a GPU"))
    monkeypatch.setattr(bench, "bench_step", lambda *a, **k: pytest.fail("timed without a GPU"))
    assert chapter.check_and_time((3, 4), [], "04_tma_store.ipynb", arch="sm90", highlight=True) == []
    assert chapter.check_and_time((2, 3), [], "03_swizzling.ipynb") == []
    chapter.check("sm90/1", missing="custom")
    chapter.check("sm100/2")
    assert capsys.readouterr().out.splitlines() == [
        "No Hopper GPU (sm_90a) here: the bars above are the recorded measurements.",
        "No GPU here: the bars above are the recorded measurements.",
        "custom",
        "No Blackwell GPU (sm_100a) here: the check runs on a GPU (tests/test_gpu.py does the same).",
    ]
    assert shown == []


@dataclasses.dataclass
class _Result:
    ok: bool = True


def test_on_a_gpu_each_step_is_checked_then_timed(monkeypatch, capsys, shown):
    _pretend_gpu(monkeypatch, "sm_90a")
    checked, timed, bars = [], [], []
    monkeypatch.setattr(run, "shapes_for", lambda step, count: [f"{step.key} shape {i}" for i in range(count)])
    monkeypatch.setattr(run, "check", lambda step, shapes, seed: checked.append((step.key, shapes, seed)) or [_Result()])

    def fake_bench(step, problem, repeats, rounds, command):
        timed.append((step.key, problem.m, problem.n, problem.k, repeats, rounds, command))
        return {"step": step.key}

    monkeypatch.setattr(bench, "bench_step", fake_bench)
    monkeypatch.setattr(viz, "ladder_bars", lambda records, **kw: bars.append(kw) or "figure")
    live = chapter.check_and_time((3, 4), ["rec"], "04_tma_store.ipynb", arch="sm90", highlight=True)
    assert live == [{"step": "sm90/3"}, {"step": "sm90/4"}]
    assert [c[0] for c in checked] == ["sm90/3", "sm90/4"] and all(len(c[1]) == 3 and c[2] == 0 for c in checked)
    assert timed == [(k, 4096, 4096, 4096, 20, 3, "notebooks/04_tma_store.ipynb") for k in ("sm90/3", "sm90/4")]
    assert bars == [dict(arch="sm90", shape=(4096, 4096, 4096), highlight=(3, 4), log=False,
                         numbers=chapter.TENSOR_CORE_STEPS, live=live, seed=False, own_ratios=True)]
    assert shown == ["figure"]
    # Another architecture's chapter cell does not run here.
    assert chapter.check_and_time((3, 4), [], "x.ipynb", arch="sm100") == []
    # A failed check stops the cell.
    monkeypatch.setattr(run, "check", lambda step, shapes, seed: [_Result(ok=False)])
    with pytest.raises(AssertionError):
        chapter.check("sm90/2")


def test_the_whole_ladders_live_bars_draw_no_seed_panel_on_a_hopper_chart(monkeypatch, shown):
    _pretend_gpu(monkeypatch, "sm_90a")
    bars = []
    monkeypatch.setattr(run, "shapes_for", lambda step, count: [])
    monkeypatch.setattr(run, "check", lambda step, shapes, seed: [_Result()])
    monkeypatch.setattr(bench, "bench_step", lambda step, problem, repeats, rounds, command: {"step": step.key})
    monkeypatch.setattr(viz, "ladder_bars", lambda records, **kw: bars.append(kw) or "figure")
    live = chapter.check_and_time((2, 3), ["rec"], "03_swizzling.ipynb", arch="sm90")
    assert bars == [dict(arch="sm90", live=live, seed=False, own_ratios=True)]
