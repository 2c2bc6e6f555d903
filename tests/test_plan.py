"""One plan per GEMM (gemm_course.plan): every check once, the step modules' protocol, the layers.

The plan is where the tensors', the shape's and the config's rules meet: run.validate_operands,
run.prepare and linear start from it and check nothing again. Every step module provides what
the ladder, arch and run reach for (``plan.StepModule``). Kernels import only the runtime, the
host rules and the hardware facts, never the teaching or measuring modules.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import pathlib

import pytest
import torch

from gemm_course import ladder, plan, problem, run
from gemm_course.problem import GemmInputError, GemmProblem

PACKAGE = pathlib.Path(plan.__file__).parent


@pytest.mark.fast
@pytest.mark.parametrize("step", ladder.steps(), ids=lambda s: s.key)
def test_every_step_module_provides_the_protocol(step):
    module = step.load()
    assert isinstance(module, plan.StepModule), f"{step.module_name} lacks part of plan.StepModule"
    assert dataclasses.is_dataclass(module.Config) and module.Config.__dataclass_params__.frozen
    assert hash(module.Config()) == hash(module.Config())  # it keys the compile and plan caches
    assert module.check_config(module.Config()) == (True, "")
    if hasattr(module.Gemm, "workspace_shapes"):  # optional: the scratch, from the config alone
        assert all(len(entry) == 2 for entry in module.Gemm.workspace_shapes(module.Config()))


@pytest.mark.fast
@pytest.mark.parametrize("step", ladder.steps(), ids=lambda s: s.key)
def test_a_plan_holds_the_steps_own_choice(step):
    problem = GemmProblem(512, 1024, 1024)
    p = plan.for_problem(step, problem)
    assert (p.step, p.problem, p.config) == (step, problem, step.config_for(problem))
    assert p.workspace == tuple(step.load().Gemm.workspace_shapes(p.config)) if hasattr(step.load().Gemm, "workspace_shapes") \
        else p.workspace == ()


@pytest.mark.fast
def test_refusals_come_from_the_one_check():
    with pytest.raises(GemmInputError, match="multiple of 8"):
        plan.for_problem("sm90/11", (128, 100, 64))
    bad = dataclasses.replace(ladder.get("sm90/11").default, tile_n=72)
    with pytest.raises(GemmInputError, match="sm90/11 cannot compute"):
        plan.for_problem("sm90/11", GemmProblem(128, 128, 64), bad)
    a = torch.randn(256, 260, dtype=torch.bfloat16)[:, :256]
    b, c = torch.randn(256, 256, dtype=torch.bfloat16), torch.empty(256, 256, dtype=torch.bfloat16)
    with pytest.raises(GemmInputError, match="16 bytes"):
        plan.for_operands("sm90/12", a, b, c, device_type="cpu")


@pytest.mark.fast
def test_validate_operands_is_the_plan():
    x, w = torch.randn(16, 1024, dtype=torch.bfloat16), torch.randn(2048, 1024, dtype=torch.bfloat16)
    y = torch.empty(16, 2048, dtype=torch.bfloat16)
    p = plan.for_operands("sm90/12", x, w, y, device_type="cpu")
    assert run.validate_operands("sm90/12", x, w, y, device_type="cpu") == (p.problem, p.config)


@pytest.mark.fast
def test_plans_are_made_once_per_shape():
    plan.clear_cache()
    first = plan.for_problem("sm90/12", GemmProblem(16, 4096, 4096))
    assert plan.for_problem("sm90/12", (16, 4096, 4096)) is first


@pytest.mark.fast
def test_prepare_takes_a_plan_and_checks_only_the_tensors(monkeypatch):
    """A plan for another shape is refused before anything is allocated or compiled."""
    monkeypatch.setattr(run, "require_gpu_for", lambda step: "sm_90a")
    monkeypatch.setattr(run, "validate", functools.partial(problem.validate, device_type="cpu"))
    p = plan.for_problem("sm90/12", GemmProblem(16, 2048, 1024))
    x, w = torch.randn(8, 1024, dtype=torch.bfloat16), torch.randn(2048, 1024, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="the plan is"):
        run.prepare(p, x, w, torch.empty(8, 2048, dtype=torch.bfloat16))


# ---- the layers ----------------------------------------------------------------------------------

# what a kernel may import from the package: the runtime's arch, the host rules, the hardware facts,
# the watchdog (debug builds), the tile orders and the placement probe step 11 runs on the host
KERNEL_MAY_IMPORT = {"arch", "hardware", "schedule", "tile_order", "tile_rule", "decode_rule", "placement", "watchdog",
                     "problem", "kernels"}


def _package_imports(path: pathlib.Path) -> set:
    """The gemm_course modules a source file imports (relative imports resolved to top-level names)."""
    tree = ast.parse(path.read_text())
    depth = len(path.relative_to(PACKAGE).parts) - 1
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level == 0 and (node.module or "").startswith("gemm_course"):
                parts = node.module.split(".")[1:]
                names |= {parts[0]} if parts else {a.name for a in node.names}
            elif node.level > 0:
                up = depth - (node.level - 1)
                if up <= 0:  # from the package itself
                    names |= {node.module.split(".")[0]} if node.module else {a.name for a in node.names}
                else:
                    names.add("kernels")
        elif isinstance(node, ast.Import):
            names |= {a.name.split(".")[1] for a in node.names if a.name.startswith("gemm_course.")}
    return names


@pytest.mark.fast
@pytest.mark.parametrize("path", sorted((PACKAGE / "kernels").rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_kernels_import_only_the_runtime_the_rules_and_the_facts(path):
    assert _package_imports(path) <= KERNEL_MAY_IMPORT, f"{path.name} imports {_package_imports(path) - KERNEL_MAY_IMPORT}"


@pytest.mark.fast
def test_the_rules_and_facts_import_no_teaching_or_measuring_module():
    teaching_and_measuring = {"sim", "exercises", "widgets", "viz", "bench", "records", "notes", "tuning_history",
                              "chapter", "inspect", "source", "stepwise", "b200", "cute_basics"}
    for name in ("plan", "problem", "ladder", "arch", "run", "hardware", "schedule", "tile_order", "tile_rule",
                 "decode_rule"):
        assert not (_package_imports(PACKAGE / f"{name}.py") & teaching_and_measuring), name
