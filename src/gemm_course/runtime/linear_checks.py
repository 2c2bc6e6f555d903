"""What :func:`gemm_course.runtime.linear.linear` and :func:`~gemm_course.runtime.linear.patch_linears`
check of their own arguments before the GEMM's rules (:func:`gemm_course.runtime.problem.validate`):
the weight and bias as a Linear layer's (:func:`_weight_rule`), where they are (:func:`_device_rule`),
the input and ``out`` against them (:func:`_arguments`, which the fake ops also run at trace time),
the (M, K) view of the input and the (M, N) output (:func:`_operands`: a view the kernel cannot read
is copied, not refused), and whether a layer can be routed at all (:func:`_layer_rule`). Each
refusal is a :class:`~gemm_course.runtime.problem.GemmInputError` that says what to do.
"""

from __future__ import annotations

import math

import torch

from .problem import ELEMS_PER_16B, GemmInputError, operand_rule, shape_rules

_NO_BACKWARD = (
    "linear: autograd is on and an operand requires grad, but the course's kernels have no backward "
    "(the output would carry no gradient): run under torch.no_grad() or torch.inference_mode(), or use "
    "torch.nn.functional.linear to train."
)


def _weight_rule(weight, bias) -> str:
    """Why the kernels cannot take ``weight`` (and ``bias``) as a Linear layer's, wherever they are,
    or '' (shared by ``linear`` and ``patch_linears``; :func:`_device_rule` asks where)."""
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


def _arguments(input, weight, bias, out) -> tuple:
    """linear's checks of what the tensors are, none of where they are or of their data pointers
    (the fake op runs them on FakeTensors at trace time): ``(lead, n)``, the input's leading
    dimensions and N, the output's shape being ``(*lead, n)``."""
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
    if math.prod(lead) == 0:
        raise GemmInputError(
            f"linear: input of shape {tuple(input.shape)} is empty (M = 0 rows): the kernels need at least one; "
            "use torch.nn.functional.linear, which returns an empty output."
        )
    if out is not None and (not isinstance(out, torch.Tensor) or out.dtype != torch.bfloat16
                            or tuple(out.shape) != (*lead, n) or not out.is_contiguous()):
        what = f"{out.dtype} {tuple(out.shape)}{'' if out.is_contiguous() else ' non-contiguous'}" \
            if isinstance(out, torch.Tensor) else type(out).__name__
        raise GemmInputError(
            f"linear: out must be a contiguous bfloat16 tensor of shape {(*lead, n)} (the input's leading "
            f"dimensions, then N), got {what}: allocate it with torch.empty({(*lead, n)}, dtype=torch.bfloat16, "
            "device=input.device)."
        )
    return lead, n


def _operands(input, weight, bias, out, device_type: str):
    """linear's own checks, then (A, C, result): the input flattened to (M, K) (a copy only where the
    kernel cannot read the view), the (M, N) output to write, and what ``linear`` returns. What the
    tensors are (:func:`_arguments`) is checked before where they are."""
    lead, n = _arguments(input, weight, bias, out)
    why = _device_rule(weight, bias, device_type)
    if why:
        raise GemmInputError(f"linear: {why}")
    if input.device != weight.device:
        raise GemmInputError(f"linear: input is on {input.device} and weight on {weight.device}: put both on the same GPU.")
    if torch.is_grad_enabled() and (input.requires_grad or weight.requires_grad or (bias is not None and bias.requires_grad)):
        raise GemmInputError(_NO_BACKWARD)
    m, k = math.prod(lead), weight.shape[1]
    x = input.reshape(m, k)  # a view when the strides allow
    if operand_rule("A", x):  # the GEMM's own rule for A: a view the kernel cannot read is copied, not refused
        x = x.clone(memory_format=torch.contiguous_format)  # TMA reads 16-byte aligned rows: a fresh copy has them
    if out is None:
        out2d = torch.empty(m, n, dtype=torch.bfloat16, device=input.device)
        return x, out2d, out2d.view(*lead, n)
    if bias is not None and overlaps(out, bias):
        raise GemmInputError(
            "linear: out shares memory with bias: the GEMM would overwrite the bias before it is added. "
            f"Pass an out of its own (torch.empty({(*lead, n)}, dtype=torch.bfloat16, device=input.device))."
        )
    return x, out.view(m, n), out


def overlaps(out, bias) -> bool:
    """Whether the contiguous ``out`` and the 1-D ``bias`` can touch the same bytes."""
    first, span = bias.data_ptr(), ((bias.shape[0] - 1) * bias.stride(0) + 1) * bias.element_size()
    return first < out.data_ptr() + out.numel() * out.element_size() and out.data_ptr() < first + span


def _layer_rule(layer) -> str:
    """Why ``patch_linears`` cannot route ``layer`` (an nn.Linear) through ``linear``, or ''."""
    import torch.nn as nn

    if type(layer).forward is not nn.Linear.forward:
        return (f"a {type(layer).__name__}, a subclass of nn.Linear with a forward of its own, which routing would skip: "
                "patch the plain nn.Linear layers inside it, or leave it on torch.")
    if "forward" in layer.__dict__:
        return ("its forward is already replaced on the instance (a hook library, or another patch), which routing "
                "would skip: remove that first, or leave the layer on torch.")
    why = _weight_rule(layer.weight, layer.bias) or _device_rule(layer.weight, layer.bias, "cuda")
    if why:
        return why
    unreadable = operand_rule("B", layer.weight)  # the GEMM's rule for its B, refused at patch time, not at a forward
    if unreadable:
        return (f"its weight cannot be read by TMA as it lies in memory ({unreadable.replace('b.', 'weight.')}) Replace "
                "it once: layer.weight = nn.Parameter(layer.weight.detach().clone(memory_format=torch.contiguous_format)).")
    return ""
