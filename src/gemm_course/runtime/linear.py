"""Drop-in use: ``torch.nn.functional.linear`` through the course's kernels, for bf16 on a course GPU.

    from gemm_course.runtime.linear import linear, patch_linears
    y = linear(x, layer.weight, layer.bias)          # as F.linear(x, weight, bias)
    with torch.inference_mode(), patch_linears(mlp):  # every nn.Linear inside mlp runs linear
        y = mlp(x)

``y = x W^T (+ bias)`` runs as the course's GEMM ``C = A @ B.T`` with A the input flattened to
(M, K), B the weight (N, K) as ``nn.Linear`` stores it, and C the output (M, N). Which step runs is
:func:`route`'s choice per shape: on Hopper the memory-roofline step (``sm90/12``, swap-AB) for at
most :data:`SMALL_M` rows once a GPU record of it exists (:func:`decode_step_verified`), else the
last step of the compute ladder (step 11: ``sm90/11`` on Hopper, ``sm100/11`` on Blackwell), each
with its own config for the shape (``Step.config_for``).
Everything it cannot take is refused before launch with a
:class:`~gemm_course.runtime.problem.GemmInputError` that says what to do.

``linear`` is the torch custom op ``gemm_course::linear`` (``gemm_course::linear_out`` with
``out=``), with a fake implementation that gives the output's shape, dtype and device, so
``torch.compile(fullgraph=True)`` puts the call in its graph as one node instead of breaking there.

Host time counts here (a decode GEMM runs for 10-30 us), so what does not change between calls is
kept: the step and config per shape (:func:`route_plan`), and the step's scratch per (step, config,
device, stream) (:class:`gemm_course.runtime.run.Workspace`), allocated and filled on the first call
only. The kernels themselves are compiled once per config by :func:`gemm_course.runtime.arch.compile_plan`.
The first call of a signature (the tensors' shapes, strides, dtypes and devices, the stream) makes
every check once, linear's (:mod:`gemm_course.runtime.linear_checks`) and then the GEMM's
(:func:`gemm_course.runtime.problem.validate`), and keeps what it found with its launcher; a later
call of the signature checks only what can change, the data pointers (16-byte alignment, output
bytes shared with an input), and launches (what is kept, and how: :mod:`gemm_course.runtime.linear_kept`).
With :func:`use_kept_arguments` (on by default) the launch's arguments are marshalled once per
signature and only the data pointers are written per call (off: CuTe views of A, B and C made and
marshalled per call); with :func:`use_direct_calls` (on by default) an eager call skips
the torch dispatcher where no mode, trace or compile could see the op. Together they take a
16 x 4096 x 4096 call's host time from 87 to 19 us on an H100 host (F.linear: 15 us;
``scripts/gpu_linear_host.py``); both pass the GPU tests in ``tests/test_linear_kept.py``. The
kept scratch is one fp32 tile per CTA of the grid for each config in use (17 MB for a 128 x 256
tile on 132 SMs); :func:`clear_cache` frees it.

**A weight that is not a parameter.** Step 12's rule loads W's first K tiles before it waits for
the kernel before (``w_before_wait``: one token, the next kernel launched at the start). With pdl a
chain of kernels may run at once, so ``linear`` takes that only for an ``nn.Parameter``, a model's
weight, which no kernel of the forward writes; any other weight (attention's keys, computed by a
projection just before) runs without it (:func:`gemm_course.runtime.linear_kept.static_weight`).

**CUDA graphs.** A call under ``torch.cuda.graph`` capture synchronises nothing and allocates only
its output (and a copy of an input the kernel cannot read) through torch's caching allocator,
which puts them in the graph's pool. It compiles nothing and allocates no scratch: a config is
ready once an eager call has run it, on any stream, and a capture uses the scratch of its own
stream if it has some, else of the first stream that ran the config. So run the model once eagerly
with the shapes you will capture (a warm-up, as serving engines do, and as ``torch.compile``'s
``mode="reduce-overhead"`` does by itself); a config first met during capture is refused with a
:class:`GemmInputError` that says so. The graph's launches share that scratch with the eager calls
on that stream: replay the graph on it, or on a stream whose work is ordered with it (the usual
pattern, warm-up and replay on the current stream, capture on the graph's own, does both). Scratch
a graph was captured with stays allocated for the process, :func:`clear_cache` included.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import warnings

import torch

from ..measure import b200_status
from ..measure import records as rec
from . import arch, ladder, linear_checks, linear_kept, plan, run
from .linear_kept import use_direct_calls, use_kept_arguments  # noqa: F401  (linear's options, re-exported)
from .problem import GemmInputError, GemmProblem
from .problem import validate as validate_gemm

# what the GEMM's messages call A, B and C, said once after a message of run.prepare's checks
_ROLES = "(in the GEMM behind linear, A is the input as (M, K), B the weight (N, K), C the output (M, N))"
_MARK = "_gemm_course_linear"  # set on the forwards patch_linears installs

# Up to this many rows (tokens) a GEMM on Hopper runs the memory-roofline step: it is bound by W's
# bytes (about M FLOP per byte of W against a ridge of ~180-270: NOTES.md, "Decode-sized GEMMs on
# Hopper"), and step 12 swaps A and B up to its SWAP_MAX_M (above 128 only with its token tiles in
# pairs); elsewhere its config is step 11's own, the same compiled kernel as step 11's.
SMALL_M = 256
SMALL_M_ARCHS = ("sm90",)  # where linear routes small M to ladder.decode(arch); Blackwell's step 11 has its own decode path


def decode_step_verified(arch_name: str, records=None) -> bool:
    """Whether the ladder's memory-roofline step of ``arch_name`` has a bench record under results/
    whose output matched the float32 reference (``rel_error`` within ``run.TOLERANCE``) on the GPU
    it names; ``bench`` refuses to record a wrong output, and this reads the error again. Until
    then :func:`route` keeps that step out of the drop-in path: a model's layers run on the steps
    that have been checked on a GPU."""
    step = ladder.decode(arch_name)
    if step is None:
        return False
    recs = records if records is not None else rec.load_records()
    return any(r.get("step", "").split(":")[0] == step.key and r.get("gpu") and r.get("rel_error", 1.0) < run.TOLERANCE
               for r in recs)


_b200_warned: set = set()  # step keys linear warned about, once per process (no B200 record yet)


def machine_arch() -> str:
    """The course architecture of device 0 ('sm90' on sm_90a, 'sm100' on sm_100a), or a
    :class:`GemmInputError` when it is no course GPU (or there is none)."""
    m = arch.machine()
    if not m.has_gpu:
        raise GemmInputError(
            "linear runs the course's kernels, which need a GPU (sm_90a or sm_100a), and none is visible "
            "here: use torch.nn.functional.linear."
        )
    if m.target is None:
        cc = ".".join(map(str, m.capability))
        raise GemmInputError(
            f"this GPU is {m.gpu_name} (compute capability {cc}); the course's kernels run on sm_90a "
            "(H100/H200) or sm_100a (B200) only: use torch.nn.functional.linear."
        )
    return arch.TARGET_ARCH[m.target]


def final_step() -> ladder.Step:
    """The last step of the present GPU's compute ladder (step 11, ``sm90/11`` on sm_90a,
    ``sm100/11`` on sm_100a), which :func:`linear` runs above :data:`SMALL_M` rows, or a
    :class:`GemmInputError` when device 0 is no course GPU (or there is none)."""
    return ladder.final(machine_arch())


def route(arch_name: str, m: int, n: int, k: int) -> tuple:
    """``(step, config)`` that :func:`linear` runs an M x N x K GEMM with on ``arch_name``
    ('sm90' or 'sm100'): the :func:`route_plan`'s; pure host work, cached per shape, callable on the CPU."""
    p = route_plan(arch_name, m, n, k)
    return p.step, p.config


@functools.lru_cache(maxsize=4096)
def route_plan(arch_name: str, m: int, n: int, k: int) -> plan.Plan:
    """The :class:`gemm_course.runtime.plan.Plan` :func:`linear` runs an M x N x K GEMM with on ``arch_name``.

    On an architecture of :data:`SMALL_M_ARCHS`, at most :data:`SMALL_M` rows go to the ladder's
    memory-roofline step (``ladder.decode``: ``sm90/12``, swap-AB) when it exists, has a GPU record
    (:func:`decode_step_verified`) and takes the shape; everything else runs the last step of the
    compute ladder (``ladder.final``: step 11).
    Each with the step's own config for the shape (``Step.config_for``), checked once
    (:func:`gemm_course.runtime.plan.for_problem`); a :class:`GemmInputError` when no step takes it."""
    problem = GemmProblem(m, n, k)
    final = ladder.final(arch_name)
    small = ladder.decode(arch_name) if arch_name in SMALL_M_ARCHS and m <= SMALL_M else None
    if small is not None and not _decode_verified(arch_name):
        small = None  # no GPU record of the decode step yet: the checked compute step runs every M
    if small is not None:
        try:
            return plan.for_problem(small, problem)
        except GemmInputError:
            pass  # the decode step's own limits: the compute step below
    try:
        return plan.for_problem(final, problem)
    except GemmInputError as e:
        raise GemmInputError(f"linear: {e}; use torch.nn.functional.linear.") from None


def linear(input, weight, bias=None, *, out=None):
    """``torch.nn.functional.linear(input, weight, bias)`` for bf16 CUDA tensors, on the course's
    kernels (the step :func:`route` picks for the shape). Returns the (..., N) bf16 output (``out``
    when given).

    ``input``: (..., K) bf16, on the current CUDA device. ``weight``: (N, K) bf16, K-major, as
    ``nn.Linear`` stores it. ``bias``: (N,) bf16 or None. ``out``: an optional contiguous (..., N)
    bf16 tensor to write into (not part of F.linear).

    The input is flattened to (M, K) with ``reshape`` (a view when its strides allow); a view the
    kernel cannot read (last dimension not contiguous, a row stride that is not a multiple of 8, a
    start that is not 16-byte aligned) is first copied into a fresh contiguous tensor: an extra
    pass over the input. The weight is never copied: one the kernel cannot read is refused. The
    bias is added after the GEMM (``out.add_(bias)``), an extra pass over the output.

    Inference only: the kernels have no backward, so with autograd on, an input, weight or bias
    that requires grad is refused (run under ``torch.no_grad()`` or ``torch.inference_mode()``).
    N and K must be multiples of 8 (TMA's 16-byte rows); every refusal is a
    :class:`GemmInputError` raised before launch, and says what to do.

    The call goes through the custom op ``torch.ops.gemm_course.linear`` (``linear_out`` with
    ``out``), so ``torch.compile`` keeps it in its graph; inside ``torch.cuda.graph`` capture it
    needs a warm-up first (the module docstring, "CUDA graphs").
    """
    tensors = (input, weight) + tuple(t for t in (bias, out) if t is not None)
    if not all(isinstance(t, torch.Tensor) for t in tensors):
        # refused there, in words the op's schema would not find
        return _first_call(machine_arch(), input, weight, bias, out, None)
    if torch.is_grad_enabled() and (input.requires_grad or weight.requires_grad or (bias is not None and bias.requires_grad)):
        raise GemmInputError(linear_checks._NO_BACKWARD)  # checked here: inside the op, autograd is already off
    if linear_kept._direct_calls and linear_kept._unobserved(tensors):
        result = _linear(input, weight, bias, out)
        if out is not None:
            torch.autograd.graph.increment_version(out)  # as the op's ADInplaceOrView kernel does for out
        return result
    if out is None:
        return torch.ops.gemm_course.linear(input, weight, bias)
    torch.ops.gemm_course.linear_out(input, weight, bias, out)
    return out


def _linear(input, weight, bias, out):
    """What the op runs: linear's checks, the route, the kept scratch, the launch, the bias. A call
    whose signature ran before on this stream takes what was kept for it
    (:class:`gemm_course.runtime.linear_kept._Call`)."""
    arch_name = machine_arch()
    signature = None
    # on a GPU, outside a capture (which runs once): what the signature's first call found
    if input.device.type == linear_kept._KEPT_DEVICE_TYPE and not torch.cuda.is_current_stream_capturing():
        signature = linear_kept._signature(input, weight, bias, out)
        call = linear_kept._calls.get(signature)
        if call is not None:
            result = call.run(input, weight, bias, out)
            if result is not None:
                return result
    return _first_call(arch_name, input, weight, bias, out, signature)


def _first_call(arch_name, input, weight, bias, out, signature):
    """The whole path: every check (linear's, then the GEMM's), the route, the scratch, the launch;
    kept under ``signature`` (None: not kept) for the calls after."""
    x, out2d, result = linear_checks._operands(input, weight, bias, out, "cuda")
    if x.device.index != torch.cuda.current_device():
        raise GemmInputError(
            f"linear: input is on {x.device} but the current device is cuda:{torch.cuda.current_device()}: "
            f"call it under `with torch.cuda.device({x.device.index}):`."
        )
    m, k = x.shape
    n = weight.shape[0]
    p = route_plan(arch_name, m, n, k)
    if getattr(p.config, "w_before_wait", 0) and not linear_kept.static_weight(weight):
        # not a model's weight: a kernel still running (pdl) may be writing it, so all of W waits
        p = plan.for_problem(p.step, p.problem, dataclasses.replace(p.config, w_before_wait=0))
    step, config = p.step, p.config
    if step.arch == "sm100":
        _warn_without_b200_record(step)
    key, workspace = linear_kept._workspace(step, config, x.device, (m, n, k))
    try:
        # the GEMM's rules, once (prepare is told); where the tensors are, _operands checked
        validate_gemm(x, weight, out2d, need_tma=not step.any_shape, device_type=x.device.type)
        launch = run.prepare(p, x, weight, out2d, workspace=workspace, checked=True)
    except GemmInputError as e:  # the GEMM's rules (strides, alignment, aliasing), in linear's words
        raise GemmInputError(f"linear: {e} {_ROLES}") from None
    launch()
    if key is not None:
        linear_kept._workspaces[key] = workspace  # kept once its kernel is compiled and has run: ready for a capture
    if signature is not None:
        linear_kept._keep(signature, (m, n, k), input, weight, out2d, launch)
    if bias is not None:
        out2d.add_(bias)
    return result


def _warn_without_b200_record(step) -> None:
    """Warn, once per process and step, that ``step`` (a Blackwell step) has no B200 record yet
    (:func:`gemm_course.measure.b200_status.has_b200_record`: a bench record of it under ``results/nvidia-b200*/``)."""
    if step.key in _b200_warned:
        return
    _b200_warned.add(step.key)
    if not b200_status.has_b200_record(step.key):
        warnings.warn(
            f"gemm_course.runtime.linear runs {step.key} on this B200, and the course has no B200 record of it yet: its "
            "kernels are compiled and checked on the CPU but have not been run on a B200 by the course. Check its "
            "output against torch.nn.functional.linear before relying on it; `make b200 OUT=DIR` (book/setup.md, "
            "'The B200 kit') checks and times every step and writes the records that would end this warning.",
            RuntimeWarning,
            stacklevel=3,
        )


def validate(input, weight, bias=None, *, out=None, device_type: str = "cuda") -> GemmProblem:
    """The checks :func:`linear` makes before launch, without a GPU: the (M, N, K) problem, or a
    :class:`GemmInputError`. Its own checks of the arguments, then the GEMM's
    (:func:`gemm_course.runtime.problem.validate`: strides, alignment, aliasing) on the flattened operands.
    ``device_type``: where the tensors must be ('cuda'; tests pass 'cpu'). Whether a course GPU is
    present is :func:`machine_arch`'s question."""
    x, out2d, _ = linear_checks._operands(input, weight, bias, out, device_type)
    try:
        return validate_gemm(x, weight, out2d, device_type=device_type)
    except GemmInputError as e:
        raise GemmInputError(f"linear: {e} {_ROLES}") from None


@functools.lru_cache(maxsize=None)
def _decode_verified(arch_name: str) -> bool:
    return decode_step_verified(arch_name)


def clear_cache() -> None:
    """Free the scratch :func:`linear` keeps per (step, config, device, stream), except what a
    captured CUDA graph launches with, and forget the step and config it chose per shape; the next
    call allocates again (so a capture after this needs a warm-up again)."""
    linear_kept._workspaces.clear()
    linear_kept._calls.clear()
    route_plan.cache_clear()
    _decode_verified.cache_clear()
    plan.clear_cache()


# ---- the custom ops: what torch.compile and the dispatcher see ----


@torch.library.custom_op("gemm_course::linear", mutates_args=(),
                         schema="(Tensor input, Tensor weight, Tensor? bias=None) -> Tensor")
def _linear_op(input, weight, bias=None):
    return _linear(input, weight, bias, None)


def _fake_arguments(input, weight, bias, out) -> tuple:
    """The fake ops' ``(lead, n)``: linear's checks of what the tensors are where the shapes are
    concrete; symbolic ones (``torch.compile(dynamic=True)``) are checked when the op runs."""
    if all(type(d) is int for d in (*input.shape, *weight.shape)):
        return linear_checks._arguments(input, weight, bias, out)
    return tuple(input.shape[:-1]), weight.shape[0]


@_linear_op.register_fake
def _(input, weight, bias=None):
    lead, n = _fake_arguments(input, weight, bias, None)
    return input.new_empty((*lead, n))


@torch.library.custom_op("gemm_course::linear_out", mutates_args=("out",),
                         schema="(Tensor input, Tensor weight, Tensor? bias, Tensor(a!) out) -> ()")
def _linear_out_op(input, weight, bias, out):
    _linear(input, weight, bias, out)


@_linear_out_op.register_fake
def _(input, weight, bias, out):
    _fake_arguments(input, weight, bias, out)


@contextlib.contextmanager
def patch_linears(module):
    """Inside the ``with`` block, every ``torch.nn.Linear`` in ``module`` (itself included) runs
    :func:`linear` on its weight and bias; yields the names of the layers it routed::

        with torch.inference_mode(), patch_linears(mlp) as names:
            y = mlp(x)

    Each layer gets an instance ``forward`` that calls ``linear(input, layer.weight, layer.bias)``
    (hooks still run); leaving the block deletes it, on an exception too. Before it changes
    anything it checks that a course GPU is present and every layer is one the kernels can take,
    and refuses otherwise with a :class:`GemmInputError` naming every such layer: a weight that is not
    bf16, N (out_features) or K (in_features) not a multiple of 8, a weight that is not K-major or
    not on CUDA, a bias of another dtype; a subclass of nn.Linear with a forward of its own, or a
    layer whose forward is already replaced on the instance (by a hook library), which routing
    would skip. Layers an enclosing ``patch_linears`` already routed are left to it. The inputs
    are checked at each call, by :func:`linear`.
    """
    import torch.nn as nn

    if not isinstance(module, nn.Module):
        raise GemmInputError(f"patch_linears takes a torch.nn.Module, got {type(module).__name__}")
    final_step()
    todo, refusals = [], []
    for name, layer in module.named_modules():  # each shared layer once
        if not isinstance(layer, nn.Linear) or getattr(layer.__dict__.get("forward"), _MARK, False):
            continue
        why = linear_checks._layer_rule(layer)
        if why:
            label = repr(name) if name else f"{type(module).__name__} (the module itself)"
            refusals.append(f"  layer {label} ({layer}): {why}")
        todo.append((name, layer))
    if refusals:  # all of them at once, and nothing patched
        raise GemmInputError(
            f"patch_linears: the course's kernels cannot take {len(refusals)} of the {len(todo)} Linear layers "
            "to route; nothing was patched:\n" + "\n".join(refusals)
        )
    for _, layer in todo:
        layer.forward = _routed(layer)
    try:
        yield [name for name, _ in todo]
    finally:
        for _, layer in todo:
            del layer.forward  # back to nn.Linear.forward


def _routed(layer):
    """The instance forward that :func:`patch_linears` gives ``layer``: its current weight and bias, through linear."""

    def forward(input):
        return linear(input, layer.weight, layer.bias)

    setattr(forward, _MARK, True)
    return forward
