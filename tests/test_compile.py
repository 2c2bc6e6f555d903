"""Every registered step compiles on this (GPU-less) machine for its architecture, and its
PTX/SASS contain the instructions the step is about."""

import re

import pytest

from gemm_course.runtime import arch, ladder
from gemm_course.teaching import inspect

pytestmark = pytest.mark.compile

CASES = [(s, t) for s in ladder.steps() for t in ((("sm_90a", "sm_100a") if s.any_shape else (s.target,)))]
CASES = [(s, t) for s, t in CASES if not (s.any_shape and s.arch != arch.TARGET_ARCH[t])]


@pytest.mark.parametrize("step,target", CASES, ids=[f"{s.key}@{t}" for s, t in CASES])
def test_step_compiles_with_its_instructions(step, target):
    art = arch.compile_step(step, target=target)
    assert f".target {target}" in art.ptx
    for marker in step.ptx_markers:
        assert marker in art.ptx, f"{step.key}: PTX lacks {marker!r}"
    rep = inspect.report(art)
    for cls in step.instructions:
        assert rep.mix.get(cls, 0) > 0, f"{step.key} on {target}: no {cls!r} instruction in SASS: {dict(rep.mix)}"
    assert not rep.resources.spills, f"{step.key} spills: {rep.resources}"


def test_tensor_core_steps_use_tensor_cores_and_naive_does_not():
    naive = inspect.report(arch.compile_step(ladder.get("sm90/1"), target="sm_90a"))
    assert naive.mix.get("tensor-core MMA", 0) == 0
    step2 = arch.compile_step(ladder.get("sm90/2"), target="sm_90a")
    assert inspect.ptx_count(step2.ptx, "wgmma.mma_async") == 4  # BK=64 -> four k16 wgmma per K tile


def test_swizzle_needs_fewer_tma_copies():
    """Step 2's interleaved layout can only be written 16 bytes of a row at a time; 128-byte rows in step 3."""
    n2 = inspect.ptx_count(arch.compile_step(ladder.get("sm90/2"), target="sm_90a").ptx, "cp.async.bulk.tensor")
    n3 = inspect.ptx_count(arch.compile_step(ladder.get("sm90/3"), target="sm_90a").ptx, "cp.async.bulk.tensor")
    assert n3 < n2


def test_persistent_schedule_divides_with_fast_dividers():
    """Step 11's schedule is worked out with dividers prepared on the host (a multiply-high and
    shifts per division): the 32-bit divisions left are the row raster's (first tile and loop) and
    the finisher's helper range, not the ten a per-cluster schedule makes without them."""
    ptx = arch.compile_step(ladder.get("sm90/11"), target="sm_90a").ptx
    divisions = len(re.findall(r"^\s*(?:@%?!?\w+\s+)?(?:div|rem)\.[su]32", ptx, flags=re.M))
    assert divisions <= 4, divisions
    assert inspect.ptx_count(ptx, "mul.hi.u32") >= 4


def test_compile_cache_returns_the_same_artifacts():
    step = ladder.get("sm90/3")
    assert arch.compile_step(step, target="sm_90a") is arch.compile_step(step, target="sm_90a")


def test_static_shape_class_compiles():
    art = arch.compile_step(ladder.get("sm90/3"), target="sm_90a", shape_class="512x512x256")
    assert "wgmma" in art.ptx


@pytest.mark.parametrize("shape_class", ["2048x2048x4096", "8192x4096x28672"])
def test_persistent_step_compiles_for_static_shapes(shape_class):
    """The schedule's host-side constants are Python ints when the shapes are static."""
    art = arch.compile_step(ladder.get("sm90/11"), target="sm_90a", shape_class=shape_class)
    assert "wgmma" in art.ptx


def test_unknown_target_is_refused():
    with pytest.raises(ValueError, match="unknown target"):
        arch.compile_step(ladder.get("sm90/2"), target="sm_80")


def test_timeline_tool_still_finds_its_points_in_step_11():
    """scripts/gpu_timeline.py instruments a copy of step 11 by anchor lines; a kernel edit that
    removes one must update the tool, not break it on the GPU machine."""
    import importlib.util
    import os
    import shutil
    import sys

    scripts = os.path.join(os.path.dirname(__file__), "..", "scripts")
    sys.path.insert(0, scripts)  # the tool imports its sibling kernel_copies
    try:
        spec = importlib.util.spec_from_file_location("gpu_timeline", os.path.join(scripts, "gpu_timeline.py"))
        tool = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(tool)
        import kernel_copies
    finally:
        sys.path.remove(scripts)
    source = open(ladder.get("sm90/11").load().__file__).read()
    instrumented = tool.instrument(source)
    assert instrumented.count("self.stamp(mPartials, ") == len(tool.POINTS)
    # the instrumented copy lives outside src/ and compiles, one timer read per point
    target = tool.build_package()
    try:
        assert "src" not in os.path.relpath(target, kernel_copies.ROOT).split(os.sep)
        step = kernel_copies.step_from(tool.PACKAGE, ladder.get("sm90/11"))
        ptx = arch.compile_step(step, step.default, target="sm_90a").ptx
        assert ptx.count("globaltimer") == len(tool.POINTS)
    finally:
        shutil.rmtree(target, ignore_errors=True)
    row = {"shape": (2048, 2048, 2048), "step": "sm90/11", "config": {}, "launches": 3, "event_us": 27.0,
           "last_exit_us": 24.4, "points_us": {name: 1.0 for _, name, *_ in tool.POINTS}}
    record = tool.to_record(row, {"gpu": "NVIDIA H200"}, "python3 scripts/gpu_timeline.py", "2026-11-30T00:00:00+00:00")
    assert record["kind"] == "timeline" and record["shape"] == {"m": 2048, "n": 2048, "k": 2048}
    from gemm_course import viz

    assert {label for label, *_ in viz.TIMELINE_PHASES} and all(
        point is None or point in record["points_us"] for _, *ends in viz.TIMELINE_PHASES for point in ends
    )  # the figure's phases name the tool's points
