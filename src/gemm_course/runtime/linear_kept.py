"""What :func:`gemm_course.runtime.linear.linear` keeps between calls, so that a later call does less
on the host (a decode GEMM runs for 10-30 us on the GPU).

* Per call signature (:func:`_signature`: the tensors' shapes, strides, dtypes and devices, the
  current device and stream), what the signature's first call found (:class:`_Call`): the shape,
  whether the input's view must be copied, the bytes each operand spans, and the launch
  (:class:`gemm_course.runtime.run.Relauncher`, or with :func:`use_kept_arguments`
  :class:`gemm_course.runtime.run.KeptArguments`). A later call of the signature checks only the
  data pointers (16-byte alignment, output bytes shared with an input), in :meth:`_Call.run`. At
  most :data:`_MAX_CALLS` signatures, the oldest dropped first (:func:`_keep`).
* Per (step, config, device, stream), the step's scratch (:func:`_workspace`, allocated outside any
  CUDA-graph pool: :func:`_allocate_outside_graph_pools`), and the scratch
  that captured CUDA graphs launch with (``_in_graphs``, kept for the process).
* Whether an eager call may skip the torch dispatcher (:func:`use_direct_calls`, :func:`_unobserved`).

The state is read at each call from this module (``linear`` reads it as ``linear_kept._calls``, ...),
so a test patches it here (``_KEPT_DEVICE_TYPE``, ``_MAX_CALLS``, ``_direct_calls``, ``_in_graphs``).
"""

from __future__ import annotations

import dataclasses
import threading
import warnings

import torch

from . import linear_checks, run
from .problem import TMA_ALIGN_BYTES, GemmInputError, layout_rule

_workspaces: dict = {}  # (step key, config, device index, stream handle) -> run.Workspace
_calls: dict = {}  # a call's signature (_signature) -> _Call, what its first call found
_MAX_CALLS = 4096  # signatures kept, as route_plan's shapes
_KEPT_DEVICE_TYPE = "cuda"  # where calls are kept per signature (tests of the kept path on the CPU change it)
_kept_arguments = True  # use_kept_arguments
_direct_calls = True  # use_direct_calls
_in_graphs: list = []  # the scratch captured CUDA graphs launch with: kept for the process, as they may replay


def _signature(input, weight, bias, out) -> tuple:
    """What linear's checks and plan depend on besides the data pointers: the tensors' shapes, strides,
    dtypes and devices, whether the weight is an ``nn.Parameter`` (:func:`static_weight`), the current
    device and stream."""
    return (input.shape, input.stride(), input.dtype, input.device,
            weight.shape, weight.stride(), weight.dtype, weight.device, static_weight(weight),
            None if bias is None else (bias.shape, bias.dtype, bias.device),
            None if out is None else (out.shape, out.stride(), out.dtype, out.device),
            torch.cuda.current_device(), torch.cuda.current_stream().cuda_stream)


@dataclasses.dataclass(frozen=True, eq=False)
class _Call:
    """What a call of a signature (:func:`_signature`) found that holds for every call of it: the
    shape, whether the input's (M, K) view must be copied for its strides, the bytes each operand
    spans (for the aliasing check) and the launch (no tensor of the first call). :meth:`run` checks the rest, the data pointers'
    alignment and aliasing, on every call; where one fails it returns None and the whole path
    refuses in its words."""

    m: int
    n: int
    k: int
    lead: tuple
    copy: bool  # the (M, K) view's strides break the kernels' rules: copied every call
    a_bytes: int
    b_bytes: int
    c_bytes: int
    launch: object  # run.KeptArguments or run.Relauncher (_relauncher): (a, b, c) -> None

    def run(self, input, weight, bias, out):
        if torch.is_grad_enabled() and (input.requires_grad or weight.requires_grad
                                        or (bias is not None and bias.requires_grad)):
            return None
        m, n = self.m, self.n
        x = input if input.dim() == 2 else input.reshape(m, self.k)
        a = x.data_ptr()
        if self.copy or a % TMA_ALIGN_BYTES:
            x = x.clone(memory_format=torch.contiguous_format)  # as linear_checks._operands: a fresh copy is aligned
            a = None  # and overlaps nothing
        b = weight.data_ptr()
        if b % TMA_ALIGN_BYTES:
            return None
        if out is None:
            c2d = torch.empty(m, n, dtype=torch.bfloat16, device=input.device)
            result = c2d if len(self.lead) == 1 else c2d.view(*self.lead, n)
        else:
            if out.requires_grad:
                return None
            c2d, result = (out if out.dim() == 2 else out.view(m, n)), out
            c = c2d.data_ptr()
            if c % TMA_ALIGN_BYTES or (b < c + self.c_bytes and c < b + self.b_bytes) or (
                    a is not None and a < c + self.c_bytes and c < a + self.a_bytes) or (
                    bias is not None and linear_checks.overlaps(out, bias)):
                return None
        if x.requires_grad:  # possible with autograd off; DLPack refuses such tensors
            x = x.detach()
        self.launch(x, weight.detach() if weight.requires_grad else weight, c2d)
        if bias is not None:
            c2d.add_(bias)
        return result


def _keep(signature, shape, input, weight, out2d, launch) -> None:
    """Keep what the first call of ``signature`` found: its (M, N, K) ``shape``, its operands' layout
    (``out2d``: the (M, N) output it wrote) and its ``launch`` (a :class:`run.Launcher` that has run)."""
    if len(_calls) >= _MAX_CALLS:  # many shapes (prefill lengths): the oldest signature goes
        _calls.pop(next(iter(_calls)), None)
    m, n, k = shape
    flat = input.reshape(m, k)
    _calls[signature] = _Call(m, n, k, tuple(input.shape[:-1]), bool(layout_rule("A", flat)), _span(flat),
                              _span(weight), _span(out2d), _relauncher(launch))


def use_kept_arguments(on: bool = True) -> None:
    """Whether a kept call (:class:`_Call`) launches with its signature's arguments marshalled once
    (:class:`gemm_course.runtime.run.KeptArguments`: only the three data pointers are written per call)
    instead of making and marshalling three CuTe views per call. On by default (checked against
    float32 by ``tests/test_linear_kept.py``'s GPU test, timed by ``scripts/gpu_linear_host.py``).
    Calls kept before are forgotten, so the next call of each signature takes the whole path."""
    global _kept_arguments
    _kept_arguments = bool(on)
    _calls.clear()


def use_direct_calls(on: bool = True) -> None:
    """Whether ``linear``, called eagerly, runs its body without the torch dispatcher (the custom op
    costs 5-20 us a call on the host, more with ``out``) where nothing could tell the difference:
    plain tensors (``torch.Tensor`` or ``nn.Parameter``) on the GPU, no torch.compile, no
    ``torch.jit`` trace, no torch function or dispatch mode (a FakeTensorMode, ``make_fx``, a
    profiler's or a FLOP counter's mode); everything else goes through the op as before. ``out``'s
    version counter is bumped as the op does. On by default (``tests/test_linear_kept.py``'s GPU test)."""
    global _direct_calls
    _direct_calls = bool(on)


_PLAIN = (torch.Tensor, torch.nn.Parameter)


def static_weight(weight) -> bool:
    """Whether ``weight`` is an ``nn.Parameter``: a model's weight, which no kernel of its forward writes,
    so step 12 may load it before pdl's wait (``w_before_wait``); any other tensor (attention's keys, a
    cache) may be the output of a kernel still running and is loaded after it."""
    return isinstance(weight, torch.nn.Parameter)


def _unobserved(tensors) -> bool:
    """Whether an eager call on ``tensors`` can skip the dispatcher (:func:`use_direct_calls`)."""
    return (tensors[0].device.type == _KEPT_DEVICE_TYPE and all(type(t) in _PLAIN for t in tensors)
            and not torch.compiler.is_compiling() and not torch.jit.is_tracing()
            and torch._C._len_torch_dispatch_stack() == 0 and not torch._C._is_torch_function_mode_enabled())


def _relauncher(launch):
    if _kept_arguments:
        try:
            return run.KeptArguments(launch)
        except ValueError as e:  # this CuTeDSL marshals otherwise: views per call, as without the option
            warnings.warn(f"gemm_course.runtime.linear: kept arguments unavailable here ({e}); making views per call",
                          RuntimeWarning, stacklevel=5)  # past _keep, _first_call and _linear
    return launch.relauncher()


def _span(t) -> int:
    """Bytes a row-major 2-D tensor spans from its data pointer (problem's aliasing rule)."""
    rows, cols = t.shape
    return ((rows - 1) * t.stride(0) + cols) * t.element_size()


def _workspace(step, config, device, shape) -> tuple:
    """``(key, workspace)`` for a launch on the current stream: the stream's kept scratch for the
    config (key None), or new scratch to keep under ``key`` once the launch has run. Under CUDA-graph
    capture nothing is allocated: the capture stream's own scratch, else that of the first stream
    that ran the config, else a :class:`GemmInputError` asking for a warm-up; either way the scratch
    joins ``_in_graphs``, which :func:`clear_cache` does not free (the graph may replay)."""
    capturing = torch.cuda.is_current_stream_capturing()
    # launches on one stream never overlap, so calls on it can share the step's scratch
    key = (step.key, config, device.index, torch.cuda.current_stream().cuda_stream)
    workspace = _workspaces.get(key)
    if workspace is None and not capturing:
        return key, _allocate_outside_graph_pools(step, config, device)
    if workspace is None:
        workspace = next((w for kept, w in _workspaces.items() if kept[:3] == key[:3]), None)
    if workspace is None:
        m, n, k = shape
        raise GemmInputError(
            f"linear: called during CUDA-graph capture with a config that has not run yet on {device} ({step.key} for "
            f"{m}x{n}x{k}, {config}): its kernel would be compiled and its scratch allocated inside the capture, which "
            "a graph cannot hold. Run the model once eagerly with the shapes you capture (a warm-up, as serving engines "
            "do before capturing), then capture."
        )
    if capturing and all(w is not workspace for w in _in_graphs):
        _in_graphs.append(workspace)
    return None, workspace


def _allocate_outside_graph_pools(step, config, device) -> run.Workspace:
    """``run.allocate_workspace`` for the current stream, from the caching allocator's ordinary memory.
    torch.compile's CUDA graphs (``mode="reduce-overhead"``) run their warm-up with every allocation of
    the calling thread routed to the graphs' pool, and refuse to record while a tensor of that pool
    outlives the call; kept scratch would. Another thread is not routed: it allocates, and fills the
    scratch on the caller's stream, while the caller waits."""
    if device.type != "cuda":
        return run.allocate_workspace(step, config, device)
    stream, result = torch.cuda.current_stream(), []

    def allocate():
        try:
            with torch.cuda.device(device), torch.cuda.stream(stream):
                result.append(run.allocate_workspace(step, config, device))
        except BaseException as e:  # raised again in the caller
            result.append(e)

    helper = threading.Thread(target=allocate, name="gemm_course scratch")
    helper.start()
    helper.join()
    if isinstance(result[0], BaseException):
        raise result[0]
    return result[0]
