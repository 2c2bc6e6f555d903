"""Run a ladder step on real tensors (GPU only): validate, compile once, launch, check.

    from gemm_course.runtime import run
    c = run.gemm("sm90/3", a, b)                 # C = A @ B.T, bf16
    run.check("sm90/3", shapes=[(4096, 4096, 4096), (128, 256, 72)])

Without a ``config`` a step runs its default, except a step that picks one per shape
(``Step.config_for``: steps 11 and 12, from ``gemm_course.rules.tile_rule`` on Hopper's step 11,
``gemm_course.rules.decode_rule`` on Blackwell's, and step 12's own swap-AB rule).
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Optional

from . import arch, ladder, plan
from .problem import GemmInputError, GemmProblem, make_inputs, reference, relative_error, validate

TOLERANCE = 1e-2  # relative Frobenius error vs float32; bf16 output rounding alone gives ~3e-3


def require_gpu_for(step) -> str:
    """The target to run ``step`` on here, or a ``GemmInputError`` saying why it cannot run."""
    m = arch.machine()
    if not m.has_gpu:
        raise GemmInputError(
            f"{step.key} needs a GPU to run and none is visible here. You can still compile it and read "
            f"its PTX/SASS: gemm-course inspect {step.key}"
        )
    if step.any_shape:
        return m.target or "sm_90a"
    if m.target != step.target:
        other = ladder.ladder.get(arch.TARGET_ARCH.get(m.target, ""), {}).get(step.number)
        hint = f"use {other.key} on this GPU" if other else "this GPU has no tensor-core twin of this step"
        raise GemmInputError(
            f"{step.key} is built for {step.target} ({arch.TARGETS[step.target]}), but this GPU is "
            f"{m.gpu_name} ({m.target or 'compute capability ' + '.'.join(map(str, m.capability))}): {hint}."
        )
    return m.target


@dataclasses.dataclass
class Launcher:
    """A compiled step bound to one set of operands: calling it launches the kernel once, on the
    stream it was prepared on.

    Its ``workspace`` (step 11's stream-K partial sums, counters and flags) is its own: ``prepare``
    allocates it per launcher, and the launcher's launches queue on one stream, so no two of them
    touch it at once (with pdl a launch's CTAs start early, but reach the scratch only after their wait
    for the launch before has returned). The last part of a split tile resets its counter and flags for the next launch; a
    launch that stops midway (a trap) leaves the CUDA context unusable, so stale flags are never
    read. Two launches that must overlap need two launchers. Launchers whose launches queue on one
    stream may share one :class:`Workspace` (``prepare``'s ``workspace``), as
    :func:`gemm_course.runtime.linear.linear` does."""

    step: ladder.Step
    config: object
    problem: GemmProblem
    artifacts: arch.Artifacts
    operands: tuple  # CuTe views of (A, B, C) and of the step's scratch tensors, if any
    stream: object
    workspace: tuple = ()  # the torch tensors behind the scratch views (kept alive here)

    def __call__(self):
        self.artifacts.compiled(*arch.call_arguments(self.operands, self.stream))

    def relauncher(self) -> "Relauncher":
        """This launcher without its operands: launches on other tensors of their signature."""
        wrap = arch.runtime_operands_any if self.step.any_shape else arch.runtime_operands
        return Relauncher(self.artifacts, self.stream, wrap, self.operands[3:], self.workspace)


@dataclasses.dataclass(frozen=True, eq=False)
class Relauncher:
    """A launcher's compiled function, stream and scratch without its A, B and C (it keeps no operand
    alive): ``relauncher(a, b, c)`` launches once on tensors of the shapes, strides, dtype and device
    the launcher was prepared for. Nothing is checked: the caller checked them (``linear`` keeps one
    per call signature and checks the data pointers on every call)."""

    artifacts: arch.Artifacts
    stream: object
    wrap: Callable  # torch tensors -> CuTe views, as prepare made them
    workspace_views: tuple = ()
    workspace: tuple = ()  # the torch tensors behind them (kept alive here)

    def __call__(self, a, b, c):
        self.artifacts.compiled(*arch.call_arguments(self.wrap(a, b, c) + self.workspace_views, self.stream))


class KeptArguments:
    """A :class:`Relauncher` whose launch arguments are marshalled once: each call writes the data
    pointers of A, B and C into the descriptors CuTeDSL made for the launcher's own views and calls
    the compiled function with them, instead of making three views and marshalling them again.

    It relies on CuTeDSL's launch arguments for a view (4.8.1): one C pointer per view, to a
    descriptor that starts with the data pointer and then holds the dynamic shape and strides,
    which the signature fixes. The constructor checks what it can (one pointer per view, the data
    pointer first, no checks of CuTeDSL's own on re-entry) and raises a ``ValueError`` otherwise;
    a test compares its arguments with fresh ones on the CPU, and GPU tests compare its launches
    with float32 (``linear`` uses it by default: ``gemm_course.runtime.linear.use_kept_arguments``).
    It takes over the launcher's views: the launcher must not be called after (it would launch on
    the tensors of the last call here)."""

    def __init__(self, launcher: Launcher):
        import ctypes
        import threading

        compiled = launcher.artifacts.compiled
        views = launcher.operands[:3]
        args = arch.call_arguments(launcher.operands, launcher.stream)
        if getattr(compiled, "_pyir_spec", None) is not None:
            raise ValueError("the compiled function checks its arguments on every call: not bypassed")
        exe_args, adapted = compiled.execution_args.generate_execution_args(args, {})
        pointers = [v.__c_pointers__() for v in views]
        descriptors = [getattr(v, "_memref_desc", None) for v in views]
        if any(len(p) != 1 for p in pointers) or list(exe_args[:3]) != [p[0] for p in pointers] or None in descriptors:
            raise ValueError("A, B and C do not marshal to one descriptor each")
        slots = [ctypes.c_void_p.from_address(p[0]) for p in pointers]
        if [s.value for s in slots] != [v.data_ptr for v in views]:
            raise ValueError("a descriptor does not start with its data pointer")
        self._slots, self._exe_args = slots, exe_args
        # what the marshalled pointers point into: the descriptors (not the views, which hold the
        # first call's tensors), the stream, the scratch views and any adapted argument
        self._keep = (descriptors, args[3:], adapted, launcher.workspace)
        self._run = compiled.run_compiled_program
        self._lock = threading.Lock()  # the descriptors are shared: one launch at a time writes them

    def __call__(self, a, b, c):
        sa, sb, sc = self._slots
        with self._lock:
            sa.value, sb.value, sc.value = a.data_ptr(), b.data_ptr(), c.data_ptr()
            self._run(self._exe_args)


def validate_operands(step, a, b, c, config=None, *, device_type: str = "cuda") -> tuple:
    """The checks :func:`prepare` makes before it allocates or compiles anything, without a GPU:
    ``(problem, config)`` of the GEMM's plan (:func:`gemm_course.runtime.plan.for_operands`), or a
    :class:`GemmInputError`. Without a ``config``, the step's choice for this shape
    (``Step.config_for``). ``device_type``: where the operands must be ('cuda'; tests pass 'cpu')."""
    p = plan.for_operands(step, a, b, c, config, device_type=device_type)
    return p.problem, p.config


@dataclasses.dataclass(frozen=True, eq=False)  # one allocation: equal only to itself
class Workspace:
    """A step's scratch tensors for one config on one device, filled and ready for a launch: the
    torch tensors and their CuTe views. :func:`allocate_workspace` makes one; ``prepare`` makes one
    per launcher unless given one to share. Share one only between launches that never overlap (one
    stream): step 11's last part of a split tile resets the flags it read, so each launch leaves the
    scratch as the next one needs it, whatever its shape."""

    step_key: str
    config: object
    device: object  # the torch.device the tensors live on
    tensors: tuple = ()  # torch tensors (``Launcher.workspace``)
    views: tuple = ()  # their CuTe views, passed after the stream


def allocate_workspace(step, config, device) -> Workspace:
    """Zero-filled scratch for ``step`` with ``config`` on ``device``, then the step's own
    ``fill_workspace`` (scratch that is not all zeros: step 11's cluster places on Hopper, which
    probes the GPU the first time). Empty for steps without scratch."""
    import torch

    step = ladder.get(step)
    tensors = tuple(
        torch.zeros(shape, dtype=getattr(torch, dtype), device=device) for dtype, shape in arch.workspace_shapes(step, config)
    )
    fill = getattr(step.load().Gemm, "fill_workspace", None)
    if fill:
        fill(config, tensors)
    device = tensors[0].device if tensors else torch.device(device)  # "cuda" is cuda:N, as the operands say
    return Workspace(step.key, config, device, tensors, arch.runtime_workspace(tensors))


def prepare(step, a, b, c, config=None, *, workspace: Optional[Workspace] = None, checked: bool = False) -> Launcher:
    """Plan (:func:`gemm_course.runtime.plan.for_operands`: every check, before any launch), compile for this
    GPU (cached) and bind the operands. Without a ``config``, the step's choice for this shape
    (``Step.config_for``). ``step`` may be a :class:`gemm_course.runtime.plan.Plan` made for a problem of
    the operands' shape (e.g. ``linear``'s, cached per shape): then only the tensors are checked.

    ``workspace``: a :class:`Workspace` of this step and config on the operands' device to use as it
    is (not zeroed or filled again), e.g. one kept from an earlier call on the same stream; without
    it, fresh scratch for this launcher (:func:`allocate_workspace`). A ``ValueError`` if it belongs
    to another step, config or device.

    ``checked``: with a plan, the caller has already run :func:`gemm_course.runtime.problem.validate` on
    these tensors and got the plan's problem (``linear`` does, in its own words): not run again.

    Step 12's rule at one token loads some of B (the weight) before it waits for the kernel before
    (``w_before_wait``): for a B that a kernel still running may write, such as another launch's C,
    pass a config with ``w_before_wait=0`` (``linear`` does so for any weight not an ``nn.Parameter``)."""
    import torch
    from cuda.bindings import driver as cuda

    target = require_gpu_for(step.step if isinstance(step, plan.Plan) else ladder.get(step))
    if isinstance(step, plan.Plan):
        p = step
        problem = p.problem if checked else validate(a, b, c, need_tma=not p.step.any_shape)
        if (problem, p.target) != (p.problem, target) or config not in (None, p.config):
            raise ValueError(f"the plan is {p} for {p.target}, not {problem.label} with {config or p.config} for {target}")
    else:
        p = plan.for_operands(step, a, b, c, config, target=target)
    step, config = p.step, p.config
    a, b = a.detach(), b.detach()  # the kernels are not differentiable; DLPack refuses tensors that require grad
    wrap = arch.runtime_operands_any if step.any_shape else arch.runtime_operands
    if workspace is None:
        workspace = allocate_workspace(step, config, a.device)
    elif (workspace.step_key, workspace.config) != (step.key, config) or (workspace.tensors and workspace.device != a.device):
        raise ValueError(
            f"this workspace belongs to {workspace.step_key} with {workspace.config} on {workspace.device}, not to "
            f"{step.key} with {config} on {a.device}: allocate one with run.allocate_workspace"
        )
    operands = wrap(a, b, c) + workspace.views
    art = arch.compile_plan(p, operands)
    stream = cuda.CUstream(torch.cuda.current_stream().cuda_stream)
    return Launcher(step, config, p.problem, art, operands, stream, workspace.tensors)


def gemm(step, a, b, c=None, config=None):
    """``C = A @ B.T`` with a ladder step; allocates C if not given. Returns C."""
    import torch

    if c is None and hasattr(a, "shape") and hasattr(b, "shape") and a.dim() == 2 and b.dim() == 2:
        c = torch.empty(a.shape[0], b.shape[0], dtype=torch.bfloat16, device=a.device)
    launch = prepare(step, a, b, c, config)
    launch()
    return c


@dataclasses.dataclass
class CheckResult:
    step: str
    shape: tuple
    rel_error: float
    ok: bool

    def __str__(self):
        m, n, k = self.shape
        return f"{self.step} {m}x{n}x{k}: rel. error {self.rel_error:.2e} {'ok' if self.ok else 'FAIL'}"


def check(step, shapes, config=None, seed: Optional[int] = None, tolerance: float = TOLERANCE) -> list:
    """Fresh random inputs, a NaN-poisoned output, and the float32 reference for each shape."""
    import torch

    step = ladder.get(step)
    results = []
    for i, shape in enumerate(shapes):
        problem = GemmProblem(*shape)
        a, b, c = make_inputs(problem, "cuda", None if seed is None else seed + i)
        prepare(step, a, b, c, config)()
        torch.cuda.synchronize()
        err = relative_error(c, reference(a, b))
        results.append(CheckResult(step.key, tuple(shape), err, err < tolerance))
    return results


def shapes_for(step, config=None, count: int = 6, seed: int = 0) -> list:
    """Random shapes of every class ``step`` claims to handle (always including ragged ones it accepts)."""
    import random

    step = ladder.get(step)
    config = step.default if config is None else config
    rng = random.Random(seed)
    candidates = [(256, 256, 64), (512, 768, 1000), (1024, 512, 72), (64 * 3, 256 * 2, 8), (1000, 1000, 1000)]
    candidates += [(2048, 8192, 136), (1920, 4104, 264)]  # more tiles than SMs: persistent CTAs loop
    candidates += [(rng.randrange(1, 40) * 8, rng.randrange(1, 40) * 8, rng.randrange(1, 200) * 8) for _ in range(count)]
    if step.any_shape:
        candidates += [(1, 1, 1), (33, 17, 5), (129, 255, 3)]
    out = []
    for shape in candidates:
        if step.can_implement(GemmProblem(*shape), config)[0]:
            out.append(shape)
    # shapes the step cannot take are made to fit (rounded up to its tile) so every step gets many shapes
    for m, n, k in candidates:
        if len(out) >= count + 4:
            break
        for tm, tn in ((64, 256), (128, 256), (128, 128)):
            s = (-(-m // tm) * tm, -(-n // tn) * tn, k)
            if s not in out and step.can_implement(GemmProblem(*s), config)[0]:
                out.append(s)
                break
    return out
