"""One plan per GEMM (gemm_course.runtime.plan): every check once, the step modules' protocol, the layers.

The plan is where the tensors', the shape's and the config's rules meet: run.validate_operands,
run.prepare and linear start from it and check nothing again. Every step module provides what
the ladder, arch and run reach for (``plan.StepModule``). The layers are the package's folders,
and each imports only the layers above it: kernels only the runtime, the host rules and the
hardware facts, never the teaching or measuring modules.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import pathlib

import pytest
import torch
from test_imports import import_graph

from gemm_course.runtime import ladder, plan, problem, run
from gemm_course.runtime.problem import GemmInputError, GemmProblem

PACKAGE = pathlib.Path(plan.__file__).parent.parent


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

# The package's folders are its layers (ARCHITECTURE.md): the facts (``hardware``), ``runtime/``,
# ``rules/`` (the host rules), ``kernels/``, then ``teaching/``, ``measure/`` and ``viz/``. A layer
# imports only the layers above it. Imports anywhere in a file count, a function's lazy ones too.
LAYERS = ("hardware", "runtime", "rules", "kernels", "teaching", "measure", "viz")
TOP_LEVEL = {"gemm_course", "gemm_course.cli", "gemm_course.__main__"}  # the package, its command line
# what a kernel may import of the runtime: the target and compile (arch), the problem, the debug build
KERNEL_RUNTIME = {"gemm_course.runtime.arch", "gemm_course.runtime.problem", "gemm_course.runtime.watchdog"}
# the imports across the layers' order that stand, each with its reason
ACROSS = {
    ("gemm_course.runtime.linear", "gemm_course.measure.records"): "the decode step is routed to only after a record of it",
    ("gemm_course.runtime.linear", "gemm_course.measure.b200_status"): "the warning on a B200 step without a B200 record",
    ("gemm_course.rules.placement", "gemm_course.measure.records"): "main, the probes' command line, writes their record",
}
GRAPH = import_graph(PACKAGE)


def layer(module: str) -> str:
    """``gemm_course.runtime.run`` -> ``runtime``; the package itself -> ``""``."""
    return module.split(".")[1] if "." in module else ""


def imports_across(module: str, allowed) -> set:
    """The package's modules ``module`` imports outside the layers ``allowed``, less :data:`ACROSS`."""
    return {m for m in GRAPH[module] if layer(m) not in allowed and (module, m) not in ACROSS}


@pytest.mark.fast
def test_every_module_sits_in_a_layers_folder():
    assert {m for m in GRAPH if m not in TOP_LEVEL and layer(m) not in LAYERS} == set()
    assert {p.name for p in PACKAGE.glob("*.py")} == {"__init__.py", "__main__.py", "cli.py", "hardware.py"}
    assert {layer(m) for m in GRAPH if m not in TOP_LEVEL} == set(LAYERS)


@pytest.mark.fast
@pytest.mark.parametrize("module", sorted(m for m in GRAPH if m.startswith("gemm_course.kernels")))
def test_kernels_import_only_the_runtime_the_rules_and_the_facts(module):
    found = imports_across(module, {"hardware", "rules", "kernels", "runtime"})
    found |= {m for m in GRAPH[module] if layer(m) == "runtime" and m not in KERNEL_RUNTIME}
    assert not found, f"{module} imports {found}"


@pytest.mark.fast
def test_the_facts_the_runtime_and_the_rules_import_no_teaching_or_measuring_module():
    assert GRAPH["gemm_course.hardware"] == set()
    for module in GRAPH:
        if layer(module) in ("runtime", "rules"):
            # the rules may read the runtime (above them); neither reads the kernels, teaching, measure or viz
            allowed = {"hardware", "runtime"} | ({"rules"} if layer(module) == "rules" else set())
            assert not imports_across(module, allowed), f"{module} imports {imports_across(module, allowed)}"
    for module, imported in ACROSS:  # each exception still there, or it goes from the list
        assert imported in GRAPH[module], (module, imported)


@pytest.mark.fast
def test_placement_reads_the_records_only_in_its_command_line():
    tree = ast.parse((PACKAGE / "rules" / "placement.py").read_text())
    main = next(node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == "main")
    everywhere = [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level and "records" in
                  [a.name for a in n.names] + [n.module or ""]]
    assert everywhere and all(n in list(ast.walk(main)) for n in everywhere)


MAX_MODULE_LINES = 600  # issue 41: a module past this mixes concerns; split it beside itself


@pytest.mark.fast
def test_no_module_is_over_600_lines():
    sizes = {str(p.relative_to(PACKAGE)): len(p.read_text().splitlines()) for p in PACKAGE.rglob("*.py")}
    assert len(sizes) > 60  # the scan sees the whole package
    assert {name: n for name, n in sizes.items() if n > MAX_MODULE_LINES} == {}
