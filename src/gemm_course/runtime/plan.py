"""One plan per GEMM: every decision and every check made once, before anything is allocated.

    from gemm_course.runtime import plan
    p = plan.for_operands("sm90/12", x, w, y)      # the tensors' rules, the shape's, the config's
    p.step, p.problem, p.config, p.workspace        # what run.prepare compiles and launches
    plan.for_problem("sm90/11", GemmProblem(4096, 4096, 4096))   # the same without tensors

:func:`for_operands` checks the tensors (:func:`gemm_course.runtime.problem.validate`: dtype, device,
majorness, 16-byte base and row strides of A, B and C, aliasing, sizes) and hands the problem to
:func:`for_problem`, which checks the shape's rules, picks the step's config for the shape when
none is given (``Step.config_for``), checks the config (``check_config``) and the step's own limits
(``can_implement``), and records the scratch the kernel takes. ``run.prepare``, ``run.gemm``,
``linear`` and the benchmarks start from a plan and check nothing again; ``arch.compile_plan``
compiles one. A refusal is a :class:`gemm_course.runtime.problem.GemmInputError` that says what to do.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Optional, Protocol, runtime_checkable

from . import arch, ladder
from .problem import GemmInputError, GemmProblem, shape_rules, validate


@runtime_checkable
class StepModule(Protocol):
    """What a ladder step's module provides (``gemm_course.kernels.<arch>.stepNN_*``; a test checks
    every step). Optional: ``config_for(problem) -> Config`` (a config per shape), and on ``Gemm``
    the static methods ``workspace_shapes(config)`` (scratch tensors, passed after the stream) and
    ``fill_workspace(config, tensors)`` (scratch that does not start as zeros)."""

    Config: type  # a frozen dataclass: the step's knobs, hashable (it keys every cache)

    def check_config(self, config) -> tuple: ...  # (ok, why) for the config alone

    def can_implement(self, problem, config) -> tuple: ...  # (ok, why) for a problem with the config

    Gemm: type  # Gemm(config); its @cute.jit __call__(a, b, c, stream, *workspace) launches the kernel


@dataclasses.dataclass(frozen=True)
class Plan:
    """A checked GEMM: the step, the problem, the config it runs with and the architecture it is
    compiled for; ``workspace``: the scratch its kernel takes (``((dtype, shape), ...)``)."""

    step: Any  # gemm_course.runtime.ladder.Step
    problem: GemmProblem
    config: Any
    target: str

    @property
    def workspace(self) -> tuple:
        return arch.workspace_shapes(self.step, self.config)

    def __str__(self):
        return f"{self.step.key} on {self.problem.label} with {self.config}"


def for_problem(step, problem, config=None, target: Optional[str] = None) -> Plan:
    """The plan of ``step`` for ``problem`` (a :class:`GemmProblem` or ``(m, n, k)``), with
    ``config`` or the step's choice for the shape; a :class:`GemmInputError` when it cannot run.
    ``target``: the architecture compiled for (by default the step's own, ``Step.target``: the naive
    step's twins are ``sm90/1`` for sm_90a and ``sm100/1`` for sm_100a)."""
    step = _step(step)
    if not isinstance(problem, GemmProblem):
        m, n, k = problem
        broken = shape_rules(m, n, k, need_tma=not step.any_shape)
        if broken:
            raise GemmInputError(f"{step.key} cannot compute {m}x{n}x{k}: {broken[0]}")
        problem = GemmProblem(m, n, k)
    return _for_problem(step, problem, config, target)


def _step(step):
    return step if hasattr(step, "config_for") else ladder.get(step)


@functools.lru_cache(maxsize=4096)
def _for_problem(step, problem: GemmProblem, config, target: Optional[str]) -> Plan:
    if config is None:
        config = step.config_for(problem)
    ok, why = step.can_implement(problem, config)  # the shape's rules, the config's, the step's limits
    if not ok:
        raise GemmInputError(f"{step.key} cannot compute {problem.label}: {why}")
    return Plan(step, problem, config, target or getattr(step, "target", None) or "sm_90a")


def for_operands(step, a, b, c, config=None, *, device_type: str = "cuda", target: Optional[str] = None) -> Plan:
    """The plan of ``C = A @ B.T`` on these tensors: their rules first (:func:`validate`, with TMA's
    unless the step is ``any_shape``), then :func:`for_problem`. ``device_type``: where the operands
    must be ('cuda'; tests pass 'cpu')."""
    step = _step(step)
    problem = validate(a, b, c, need_tma=not step.any_shape, device_type=device_type)
    return _for_problem(step, problem, config, target)


def clear_cache() -> None:
    _for_problem.cache_clear()
