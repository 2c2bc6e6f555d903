"""Drop-in use: ``torch.nn.functional.linear`` through the course's final step, for bf16 on a course GPU.

    from gemm_course.linear import linear, patch_linears
    y = linear(x, layer.weight, layer.bias)          # as F.linear(x, weight, bias)
    with torch.inference_mode(), patch_linears(mlp):  # every nn.Linear inside mlp runs linear
        y = mlp(x)

``y = x W^T (+ bias)`` runs as the course's GEMM ``C = A @ B.T`` with A the input flattened to
(M, K), B the weight (N, K) as ``nn.Linear`` stores it, and C the output (M, N), on the last step
of this GPU's ladder (step 11: ``sm90/11`` on Hopper, ``sm100/11`` on Blackwell) with the step's
own config for the shape (``Step.config_for``). Everything it cannot take is refused before
launch with a :class:`~gemm_course.problem.GemmInputError` that says what to do.

Host time counts here (a decode GEMM runs for 10-30 us), so what does not change between calls is
kept: the config per shape, and step 11's scratch per (step, config, device, stream)
(:class:`gemm_course.run.Workspace`), allocated and filled on the first call only. The kernels
themselves are compiled once per config by :func:`gemm_course.arch.compile_step`. What each call
still does on the host: linear's own checks, ``run.prepare``'s (the GEMM's rules) and the CuTe views
of A, B and C. The kept scratch is one fp32 tile per CTA of the grid for each config in use (17 MB
for a 128 x 256 tile on 132 SMs); :func:`clear_cache` frees it.
"""

from __future__ import annotations

import contextlib
import functools
import math

import torch

from . import arch, ladder, run
from .problem import ELEMS_PER_16B, GemmInputError, GemmProblem, shape_rules
from .problem import validate as validate_gemm

# what the GEMM's messages call A, B and C, said once after a message of run.prepare's checks
_ROLES = "(in the GEMM behind linear, A is the input as (M, K), B the weight (N, K), C the output (M, N))"
_MARK = "_gemm_course_linear"  # set on the forwards patch_linears installs

_workspaces: dict = {}  # (step key, config, device index, stream handle) -> run.Workspace


def final_step() -> ladder.Step:
    """The step :func:`linear` runs on this machine: the last of the present GPU's ladder (step 11,
    ``sm90/11`` on sm_90a, ``sm100/11`` on sm_100a), or a :class:`GemmInputError` when device 0 is
    no course GPU (or there is none)."""
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
    return ladder.final(arch.TARGET_ARCH[m.target])


def linear(input, weight, bias=None, *, out=None):
    """``torch.nn.functional.linear(input, weight, bias)`` for bf16 CUDA tensors, on the course's
    final step (:func:`final_step`). Returns the (..., N) bf16 output (``out`` when given).

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
    """
    step = final_step()
    x, out2d, result = _operands(input, weight, bias, out, "cuda")
    if x.device.index != torch.cuda.current_device():
        raise GemmInputError(
            f"linear: input is on {x.device} but the current device is cuda:{torch.cuda.current_device()}: "
            f"call it under `with torch.cuda.device({x.device.index}):`."
        )
    m, k = x.shape
    n = weight.shape[0]
    config = _config_for(step.key, m, n, k)
    # launches on one stream never overlap, so calls on it can share the step's scratch
    key = (step.key, config, x.device.index, torch.cuda.current_stream().cuda_stream)
    workspace = _workspaces.get(key)
    if workspace is None:
        workspace = _workspaces[key] = run.allocate_workspace(step, config, x.device)
    try:
        launch = run.prepare(step, x, weight, out2d, config, workspace=workspace)
    except GemmInputError as e:  # the GEMM's rules (strides, alignment, aliasing), in linear's words
        raise GemmInputError(f"linear: {e} {_ROLES}") from None
    launch()
    if bias is not None:
        out2d.add_(bias)
    return result


def validate(input, weight, bias=None, *, out=None, device_type: str = "cuda") -> GemmProblem:
    """The checks :func:`linear` makes before launch, without a GPU: the (M, N, K) problem, or a
    :class:`GemmInputError`. Its own checks of the arguments, then the GEMM's
    (:func:`gemm_course.problem.validate`: strides, alignment, aliasing) on the flattened operands.
    ``device_type``: where the tensors must be ('cuda'; tests pass 'cpu'). Whether a course GPU is
    present is :func:`final_step`'s question."""
    x, out2d, _ = _operands(input, weight, bias, out, device_type)
    try:
        return validate_gemm(x, weight, out2d, device_type=device_type)
    except GemmInputError as e:
        raise GemmInputError(f"linear: {e} {_ROLES}") from None


def clear_cache() -> None:
    """Free the scratch :func:`linear` keeps per (step, config, device, stream) and the configs it
    chose per shape; the next call allocates again."""
    _workspaces.clear()
    _config_for.cache_clear()


@functools.lru_cache(maxsize=4096)
def _config_for(step_key: str, m: int, n: int, k: int):
    """The step's own config for an M x N x K problem (``Step.config_for``), checked once per shape."""
    step = ladder.get(step_key)
    problem = GemmProblem(m, n, k)
    config = step.config_for(problem)
    ok, why = step.can_implement(problem, config)
    if not ok:
        raise GemmInputError(f"linear: {step.key} cannot compute {problem.label}: {why}; use torch.nn.functional.linear.")
    return config


def _weight_rule(weight, bias) -> str:
    """Why the kernels cannot take ``weight`` (and ``bias``) as a Linear layer's, wherever they are,
    or '' (shared by :func:`linear` and :func:`patch_linears`; :func:`_device_rule` asks where)."""
    if not isinstance(weight, torch.Tensor):
        return f"weight must be a torch.Tensor, got {type(weight).__name__}"
    if weight.dtype != torch.bfloat16:
        return (f"weight has dtype {weight.dtype}; the course's kernels take bfloat16: cast with "
                ".to(torch.bfloat16) (a module: module.to(torch.bfloat16)), or use torch.nn.functional.linear.")
    if weight.dim() != 2:
        return f"weight must be 2-D (N, K) = (out_features, in_features) as nn.Linear stores it, got shape {tuple(weight.shape)}."
    n, k = weight.shape
    empty = shape_rules(1, n, k, need_tma=False)
    if empty:
        return f"weight has shape {tuple(weight.shape)}: {empty[0]} Use torch.nn.functional.linear."
    for name, v, feature in (("N", n, "out_features"), ("K", k, "in_features")):
        if v % ELEMS_PER_16B:
            padded = math.ceil(v / ELEMS_PER_16B) * ELEMS_PER_16B
            what = (f"the weight with zero rows up to {padded} (and slice the output back to {v} columns)" if name == "N"
                    else f"the last dimension of the weight and of the input with zeros up to {padded}")
            return (f"{name} = {v} ({feature}) is not a multiple of {ELEMS_PER_16B}: TMA needs every row of the weight "
                    f"(K elements) and of the output (N elements) to start on a 16-byte boundary. Pad {what}, "
                    "or use torch.nn.functional.linear.")
    if weight.stride(1) != 1:
        return (f"weight is not K-major (shape {tuple(weight.shape)}, strides {tuple(weight.stride())}): the kernels read it "
                "as nn.Linear stores it, (N, K) row-major. Pass weight.contiguous() (once, not per call); if you hold "
                "W^T (K, N), pass w.t().contiguous().")
    if bias is not None:
        if not isinstance(bias, torch.Tensor):
            return f"bias must be a torch.Tensor or None, got {type(bias).__name__}"
        if bias.dtype != torch.bfloat16:
            return f"bias has dtype {bias.dtype}; cast it with .to(torch.bfloat16) like the weight."
        if tuple(bias.shape) != (n,):
            return f"bias has shape {tuple(bias.shape)}, expected (N,) = ({n},), one value per output feature."
    return ""


def _device_rule(weight, bias, device_type: str) -> str:
    """Why ``weight`` and ``bias`` (which passed :func:`_weight_rule`) are not where the kernels run, or ''."""
    if weight.device.type != device_type:
        move = ".cuda()" if device_type == "cuda" else f".to({device_type!r})"
        return (f"weight is on {weight.device}; the course's kernels run on {device_type}: move it (a module: the "
                f"module) with {move}, or use torch.nn.functional.linear.")
    if bias is not None and bias.device != weight.device:
        return f"bias is on {bias.device} and weight on {weight.device}: put both on the same GPU."
    return ""


def _operands(input, weight, bias, out, device_type: str):
    """linear's own checks, then (A, C, result): the input flattened to (M, K) (a copy only where the
    kernel cannot read the view), the (M, N) output to write, and what ``linear`` returns. What the
    tensors are is checked before where they are."""
    why = _weight_rule(weight, bias)
    if why:
        raise GemmInputError(f"linear: {why}")
    if not isinstance(input, torch.Tensor):
        raise GemmInputError(f"linear: input must be a torch.Tensor, got {type(input).__name__}")
    if input.dtype != torch.bfloat16:
        raise GemmInputError(
            f"linear: input has dtype {input.dtype}; the course's kernels take bfloat16: cast with "
            "input.to(torch.bfloat16), or use torch.nn.functional.linear."
        )
    n, k = weight.shape
    if input.dim() == 0 or input.shape[-1] != k:
        raise GemmInputError(
            f"linear: K mismatch: input has shape {tuple(input.shape)} (..., K) and weight {tuple(weight.shape)} (N, K) "
            f"with K = {k}: the input's last dimension must be the weight's second (in_features); a weight held as "
            "(K, N) must be passed as w.t().contiguous()."
        )
    lead = tuple(input.shape[:-1])
    m = math.prod(lead)
    if m == 0:
        raise GemmInputError(
            f"linear: input of shape {tuple(input.shape)} is empty (M = 0 rows): the kernels need at least one; "
            "use torch.nn.functional.linear, which returns an empty output."
        )
    why = _device_rule(weight, bias, device_type)
    if why:
        raise GemmInputError(f"linear: {why}")
    if input.device != weight.device:
        raise GemmInputError(f"linear: input is on {input.device} and weight on {weight.device}: put both on the same GPU.")
    if torch.is_grad_enabled() and (input.requires_grad or weight.requires_grad or (bias is not None and bias.requires_grad)):
        raise GemmInputError(
            "linear: autograd is on and an operand requires grad, but the course's kernels have no backward "
            "(the output would carry no gradient): run under torch.no_grad() or torch.inference_mode(), or use "
            "torch.nn.functional.linear to train."
        )
    x = input.reshape(m, k)  # a view when the strides allow
    if x.stride(1) != 1 or x.stride(0) < k or x.stride(0) % ELEMS_PER_16B or x.data_ptr() % 16:
        x = x.clone(memory_format=torch.contiguous_format)  # TMA reads 16-byte aligned rows: a fresh copy has them
    if out is None:
        out2d = torch.empty(m, n, dtype=torch.bfloat16, device=input.device)
        return x, out2d, out2d.view(*lead, n)
    if not isinstance(out, torch.Tensor) or out.dtype != torch.bfloat16 or tuple(out.shape) != (*lead, n) \
            or not out.is_contiguous():
        what = f"{out.dtype} {tuple(out.shape)}{'' if out.is_contiguous() else ' non-contiguous'}" \
            if isinstance(out, torch.Tensor) else type(out).__name__
        raise GemmInputError(
            f"linear: out must be a contiguous bfloat16 tensor of shape {(*lead, n)} (the input's leading "
            f"dimensions, then N), got {what}: allocate it with torch.empty({(*lead, n)}, dtype=torch.bfloat16, "
            "device=input.device)."
        )
    return x, out.view(m, n), out


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
        why = _layer_rule(layer)
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


def _layer_rule(layer) -> str:
    """Why :func:`patch_linears` cannot route ``layer`` (an nn.Linear) through :func:`linear`, or ''."""
    import torch.nn as nn

    if type(layer).forward is not nn.Linear.forward:
        return (f"a {type(layer).__name__}, a subclass of nn.Linear with a forward of its own, which routing would skip: "
                "patch the plain nn.Linear layers inside it, or leave it on torch.")
    if "forward" in layer.__dict__:
        return ("its forward is already replaced on the instance (a hook library, or another patch), which routing "
                "would skip: remove that first, or leave the layer on torch.")
    return _weight_rule(layer.weight, layer.bias) or _device_rule(layer.weight, layer.bias, "cuda")


def _routed(layer):
    """The instance forward that :func:`patch_linears` gives ``layer``: its current weight and bias, through linear."""

    def forward(input):
        return linear(input, layer.weight, layer.bias)

    setattr(forward, _MARK, True)
    return forward
