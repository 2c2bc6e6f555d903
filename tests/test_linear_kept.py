"""linear's kept calls (gemm_course.runtime.linear._Call): a call whose signature (shapes, strides, dtypes,
devices, stream) ran before skips the checks that depend only on the signature, and still checks
every data pointer, on every call. On the CPU with the launch faked (test_linear's fixture) and the
kept path allowed on CPU tensors."""

import functools

import pytest
import test_linear
import torch
import torch.nn.functional as F
from test_linear import bf16

from gemm_course.runtime import linear as lin
from gemm_course.runtime import linear_kept
from gemm_course.runtime.problem import GemmInputError

fake_launch = test_linear.fake_launch  # the fixture, shared


@pytest.fixture
def kept(fake_launch, monkeypatch):
    monkeypatch.setattr(linear_kept, "_KEPT_DEVICE_TYPE", "cpu")
    return fake_launch


def _odd(*shape):
    """A bf16 tensor of ``shape``, contiguous, starting 2 bytes past a 16-byte boundary: the same
    signature as ``bf16(*shape)``, another data pointer."""
    n = 1
    for s in shape:
        n *= s
    t = bf16(n + 1)[1:].view(*shape)
    assert t.data_ptr() % 16 == 2
    return t


def _message(fn):
    with pytest.raises(GemmInputError) as e:
        fn()
    return str(e.value)


@pytest.mark.fast
def test_a_signatures_second_call_is_kept_and_agrees(kept):
    x, w, b = bf16(2, 3, 64), bf16(128, 64), bf16(128)
    y = lin.linear(x, w, b)
    assert len(linear_kept._calls) == 1
    x2 = bf16(2, 3, 64)
    y2 = lin.linear(x2, w, b)  # the same signature: no new launcher, one more launch
    assert len(linear_kept._calls) == 1 and len(kept.prepared) == 2
    assert kept.prepared[-1].a.data_ptr() == x2.data_ptr()  # a view, not a copy
    for xi, yi in ((x, y), (x2, y2)):
        assert yi.shape == (2, 3, 128)
        assert torch.allclose(yi.float(), F.linear(xi, w, b).float(), rtol=2e-2, atol=2e-2)
    out = torch.empty(6, 128, dtype=torch.bfloat16)
    for _ in range(2):
        assert lin.linear(bf16(6, 64), w, out=out) is out
    assert lin.linear(bf16(64), w).shape == (128,)  # F.linear's 1-D input, kept too
    assert lin.linear(bf16(64), w).shape == (128,)
    assert len(linear_kept._calls) == 3
    lin.clear_cache()
    assert linear_kept._calls == {}


@pytest.mark.fast
def test_another_stream_or_a_capture_takes_the_whole_path(kept):
    x, w = bf16(4, 64), bf16(128, 64)
    lin.linear(x, w)
    kept.stream = 2
    lin.linear(x, w)
    assert len(linear_kept._calls) == 2 and len(kept.allocated) == 2
    kept.capturing = True  # a capture checks everything and keeps nothing new
    lin.linear(bf16(4, 64), w)
    assert len(linear_kept._calls) == 2


@pytest.mark.fast
def test_a_kept_signature_refuses_a_weight_off_16_bytes_in_the_first_calls_words(kept):
    x = bf16(4, 64)
    first = _message(lambda: lin.linear(x, _odd(128, 64)))
    assert "16-byte aligned" in first and "B the weight" in first
    lin.linear(x, bf16(128, 64))  # the signature is kept now
    assert len(linear_kept._calls) == 1
    assert _message(lambda: lin.linear(x, _odd(128, 64))) == first


@pytest.mark.fast
def test_a_kept_signature_refuses_an_output_off_16_bytes(kept):
    x, w = bf16(4, 64), bf16(128, 64)
    first = _message(lambda: lin.linear(x, w, out=_odd(4, 128)))
    assert "C's data pointer is not 16-byte aligned" in first
    lin.linear(x, w, out=torch.empty(4, 128, dtype=torch.bfloat16))
    assert _message(lambda: lin.linear(x, w, out=_odd(4, 128))) == first


@pytest.mark.fast
def test_a_kept_signature_copies_an_input_off_16_bytes(kept):
    w = bf16(128, 64)
    lin.linear(bf16(4, 64), w)
    odd = _odd(4, 64)
    y = lin.linear(odd, w)
    a = kept.prepared[-1].a
    assert a.data_ptr() % 16 == 0 and a.data_ptr() != odd.data_ptr() and torch.equal(a, odd)
    assert torch.allclose(y.float(), F.linear(odd, w).float(), rtol=2e-2, atol=2e-2)


@pytest.mark.fast
def test_a_kept_signature_copies_what_its_strides_need_copied_every_call(kept):
    w = bf16(128, 64)
    for _ in range(3):
        padded = bf16(4, 68)[:, :64]  # a row stride of 68: TMA needs a multiple of 8
        lin.linear(padded, w)
        a = kept.prepared[-1].a
        assert a.stride() == (64, 1) and a.data_ptr() != padded.data_ptr() and torch.equal(a, padded)
    assert len(linear_kept._calls) == 1


@pytest.mark.fast
@pytest.mark.parametrize("what", ["input", "weight"])
def test_a_kept_signature_refuses_an_output_sharing_bytes_with_an_operand(kept, what):
    x, w = bf16(4, 64), bf16(128, 64)
    lin.linear(x, w, out=torch.empty(4, 128, dtype=torch.bfloat16))  # kept: (4, 64) x (128, 64) into (4, 128)
    buf = torch.zeros(128 * 64 + 4 * 128, dtype=torch.bfloat16)
    if what == "input":
        x = buf[: 4 * 64].view(4, 64)  # the same signature as before, inside the output's bytes
        out = buf[128: 128 + 4 * 128].view(4, 128)
    else:
        w = buf[: 128 * 64].view(128, 64)
        out = buf[128 * 64 - 8: 128 * 64 - 8 + 4 * 128].view(4, 128)  # its first row ends the weight
    launches = len(kept.prepared)
    assert _message(lambda: lin.linear(x, w, out=out)).startswith(
        f"linear: C shares memory with an input ({'A' if what == 'input' else 'B'})")
    assert len(kept.prepared) == launches and len(linear_kept._calls) == 1  # refused before any launch


@pytest.mark.fast
def test_a_kept_signature_refuses_an_output_sharing_bytes_with_the_bias(kept):
    x, w = bf16(4, 64), bf16(128, 64)
    lin.linear(x, w, bf16(128), out=torch.empty(4, 128, dtype=torch.bfloat16))  # kept, with a bias
    buf = bf16(4 * 128 + 128)
    launches = len(kept.prepared)
    assert _message(lambda: lin.linear(x, w, buf[:128], out=buf[:512].view(4, 128))).startswith(
        "linear: out shares memory with bias")
    assert len(kept.prepared) == launches  # refused before any launch


@pytest.mark.fast
def test_a_kept_signature_refuses_an_output_that_requires_grad_and_operands_under_autograd(kept):
    x, w = bf16(4, 64), bf16(128, 64)
    out = torch.empty(4, 128, dtype=torch.bfloat16)
    with torch.no_grad():
        lin.linear(x, w, out=out)
    with pytest.raises(GemmInputError, match="C requires grad"):
        lin._linear(x, w, None, torch.empty(4, 128, dtype=torch.bfloat16).requires_grad_())
    with pytest.raises(GemmInputError, match="no backward"):  # linear refuses before the op; its body does too
        lin._linear(x, w.clone().requires_grad_(), None, out)
    with torch.no_grad():  # autograd off: a weight that requires grad is read detached
        lin.linear(x, w.clone().requires_grad_(), out=out)
    assert not kept.prepared[-1].b.requires_grad


@pytest.mark.fast
def test_a_relauncher_keeps_no_operand_of_the_launcher_alive():
    import gc
    import weakref

    from gemm_course.runtime import arch, ladder, run

    calls = []
    art = arch.Artifacts("sm90/10", None, "sm_90a", "runtime", "", b"", lambda *args: calls.append(args))
    a, b, c = bf16(4, 64), bf16(128, 64), torch.empty(4, 128, dtype=torch.bfloat16)
    first = weakref.ref(a), weakref.ref(c)
    scratch = torch.zeros(8)
    views = arch.runtime_operands(a, b, c) + arch.runtime_workspace((scratch,))
    launcher = run.Launcher(ladder.get("sm90/10"), None, None, art, views, "stream", (scratch,))
    launcher()
    relaunch = launcher.relauncher()
    del launcher, views, a, c
    calls.clear()  # the fake compiled function's own hold on them
    gc.collect()
    assert first[0]() is None and first[1]() is None
    a2, c2 = bf16(4, 64), torch.empty(4, 128, dtype=torch.bfloat16)
    relaunch(a2, b, c2)
    args = calls[-1]
    assert [v.data_ptr for v in args[:3]] == [a2.data_ptr(), b.data_ptr(), c2.data_ptr()]
    assert args[3] == "stream" and len(args) == 5  # A, B, C, the stream, the scratch


# ---- kept arguments (run.KeptArguments, on by default): the same launch arguments as fresh views ----


def _descriptor(address: int) -> bytes:
    """A 2-D view's launch descriptor: its data pointer, then its dynamic shape (two int32) and row stride (int64)."""
    import ctypes

    return ctypes.string_at(address, 24)


@pytest.mark.compile
def test_kept_arguments_are_the_arguments_fresh_views_marshal_to(monkeypatch):
    """sm90/11 compiled on the CPU (sm_90a, fake operands: the runtime signature), a launcher bound to
    CPU tensors, and KeptArguments with the C call replaced: for new tensors of the signature, what it
    passes is byte for byte what CuTeDSL marshals from fresh views of them."""
    from cuda.bindings import driver as cuda
    from cutlass.cute.runtime import make_fake_stream

    from gemm_course.runtime import arch, ladder, run

    step = ladder.get("sm90/11")
    config = step.config_for(lin.GemmProblem(16, 256, 128))
    fakes = arch.fake_operands() + arch.fake_workspace(step, config)
    compiled, _ = arch.trace(step.load().Gemm(config), *arch.call_arguments(fakes, make_fake_stream()), target="sm_90a")
    seen = []
    monkeypatch.setattr(compiled, "run_compiled_program",
                        lambda exe_args: seen.append([_descriptor(p) for p in exe_args[:3]] + list(exe_args[3:])))
    scratch = tuple(torch.zeros(shape, dtype=getattr(torch, dtype)) for dtype, shape in arch.workspace_shapes(step, config))
    stream = cuda.CUstream(0)
    art = arch.Artifacts(step.key, config, "sm_90a", "runtime", "", b"", compiled)

    def tensors(m, ld_a=128):
        return bf16(m, ld_a)[:, :128], bf16(256, 128), torch.empty(m, 256, dtype=torch.bfloat16)

    ws = arch.runtime_workspace(scratch)
    for m, ld_a in ((16, 128), (5, 136)):
        first = tensors(m, ld_a)
        launcher = run.Launcher(step, config, None, art, arch.runtime_operands(*first) + ws, stream, scratch)
        kept = run.KeptArguments(launcher)
        for _ in range(3):
            now = tensors(m, ld_a)
            kept(*now)
            views = arch.runtime_operands(*now)  # alive while their descriptors are read
            fresh, _ = compiled.execution_args.generate_execution_args(arch.call_arguments(views + ws, stream), {})
            assert seen[-1] == [_descriptor(p) for p in fresh[:3]] + list(fresh[3:])
            assert [int.from_bytes(d[:8], "little") for d in seen[-1][:3]] == [t.data_ptr() for t in now]


@pytest.mark.gpu
@pytest.mark.parametrize("kept_arguments,direct_calls", [(False, False), (True, False), (True, True)])
def test_kept_calls_on_the_gpu_match_the_reference(kept_arguments, direct_calls):
    """Each signature called four times on fresh tensors (poisoned outputs), with and without kept
    arguments and direct calls: the kept path (views per call, or the arguments marshalled once)
    against float32."""
    from gemm_course.runtime import run
    from gemm_course.runtime.problem import relative_error

    lin.clear_cache()
    defaults = linear_kept._kept_arguments, linear_kept._direct_calls
    lin.use_kept_arguments(kept_arguments)
    lin.use_direct_calls(direct_calls)
    try:
        torch.manual_seed(7)
        w = torch.randn(2816, 1024, device="cuda").to(torch.bfloat16)
        b = torch.randn(2816, device="cuda").to(torch.bfloat16)
        for shape, bias, with_out in (((16, 1024), None, True), ((2, 150, 1024), b, False), ((1024,), b, False)):
            for _ in range(4):
                x = torch.randn(*shape, device="cuda").to(torch.bfloat16)
                out = torch.full((*shape[:-1], 2816), float("nan"), dtype=torch.bfloat16, device="cuda")
                with torch.inference_mode():
                    y = lin.linear(x, w, bias, out=out if with_out else None)
                ref = F.linear(x.float(), w.float(), None if bias is None else bias.float())
                assert relative_error(y.reshape(-1, 2816), ref.reshape(-1, 2816)) < run.TOLERANCE
        kinds = {type(call.launch) for call in linear_kept._calls.values()}
        assert kinds == ({run.KeptArguments} if kept_arguments else {run.Relauncher})
        padded = torch.randn(16, 1032, device="cuda").to(torch.bfloat16)[:, :1024]  # a view, read in place
        odd = torch.randn(16 * 1024 + 1, device="cuda").to(torch.bfloat16)[1:].view(16, 1024)  # copied per call
        for x in (padded, odd, padded, odd):
            with torch.inference_mode():
                y = lin.linear(x, w)
            assert relative_error(y, F.linear(x.float(), w.float())) < run.TOLERANCE
    finally:
        lin.use_kept_arguments(defaults[0])
        lin.use_direct_calls(defaults[1])
        lin.clear_cache()


@pytest.mark.gpu
def test_a_weight_the_kernel_before_writes_is_read_once_written():
    """Attention's pattern: keys from a projection, then one token's scores against them (the keys as the
    weight, at one token, where step 12's rule loads W before pdl's wait). The keys' memory is poisoned
    before each projection and the GPU is kept busy ahead of both launches, so a score read from the keys
    before the projection wrote them is NaN; against float32, on the whole path and kept. A parameter of
    the same shape takes W before the wait."""
    from gemm_course.runtime import run
    from gemm_course.runtime.problem import relative_error

    lin.clear_cache()
    torch.manual_seed(5)
    x = torch.randn(64, 4096, device="cuda").to(torch.bfloat16)
    wk = torch.nn.Parameter(torch.randn(4096, 4096, device="cuda").to(torch.bfloat16), requires_grad=False)
    keys = torch.empty(64, 4096, dtype=torch.bfloat16, device="cuda")
    with torch.inference_mode():
        assert lin.route_plan(lin.machine_arch(), 1, 64, 4096).config.w_before_wait > 0  # the step's rule
        for _ in range(6):
            q = torch.randn(1, 4096, device="cuda").to(torch.bfloat16)
            torch.cuda._sleep(20_000_000)  # the launches below queue behind it, back to back
            keys.fill_(float("nan"))
            lin.linear(x, wk, out=keys)
            scores = lin.linear(q, keys)
            torch.cuda.synchronize()
            assert relative_error(scores, F.linear(q.float(), keys.float())) < run.TOLERANCE
        param = torch.nn.Parameter(keys.clone(), requires_grad=False)
        scores = lin.linear(q, param)
        assert relative_error(scores, F.linear(q.float(), param.float())) < run.TOLERANCE
    lin.clear_cache()


# ---- direct calls (linear.use_direct_calls, on by default): eager calls without the dispatcher ----


@pytest.fixture
def direct(kept, monkeypatch):
    """Direct calls on, on CPU tensors (the launch faked); ``direct.ops``: the ops' calls, counted."""
    import sys

    calls, body = [], lin._linear

    def counted(*args):  # who called linear's body: linear itself (direct) or an op's implementation
        caller = sys._getframe(1).f_code.co_name
        if caller != "linear":
            calls.append(caller)
        return body(*args)

    monkeypatch.setattr(lin, "_linear", counted)
    monkeypatch.setattr(linear_kept, "_direct_calls", True)
    kept.ops = calls
    return kept


@pytest.mark.fast
def test_direct_calls_skip_the_op_and_bump_outs_version(direct, monkeypatch):
    x, w, b = bf16(2, 3, 64), bf16(128, 64), bf16(128)
    out = torch.empty(2, 3, 128, dtype=torch.bfloat16)
    bumped = []
    monkeypatch.setattr(torch.autograd.graph, "increment_version", bumped.append)
    for _ in range(2):
        assert lin.linear(x, w, b, out=out) is out
        assert torch.allclose(lin.linear(x, w, b).float(), F.linear(x, w, b).float(), rtol=2e-2, atol=2e-2)
    assert bumped == [out, out]  # as the op's ADInplaceOrView kernel does for out
    assert direct.ops == []
    with pytest.raises(GemmInputError, match="K mismatch"):  # the same refusals
        lin.linear(bf16(4, 72), w)
    lin.use_direct_calls(False)
    lin.linear(x, w)
    lin.linear(x, w, out=out)
    assert direct.ops == ["_linear_op", "_linear_out_op"]


@pytest.mark.fast
def test_direct_calls_leave_modes_subclasses_and_other_devices_to_the_op(direct):
    from torch.utils._python_dispatch import TorchDispatchMode

    class Seen(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.ops.append(str(func))
            return func(*args, **(kwargs or {}))

    x, w = bf16(4, 64), bf16(128, 64)
    with Seen() as seen:
        lin.linear(x, w)
    assert "gemm_course.linear.default" in seen.ops and direct.ops == ["_linear_op"]
    lin.linear(x, torch.nn.Parameter(w, requires_grad=False))  # a Parameter is a plain tensor here
    assert direct.ops == ["_linear_op"]
    y = lin.linear(bf16(4, 64, device="meta"), bf16(128, 64, device="meta"))  # not where calls run: the fake op
    assert y.device.type == "meta" and direct.ops == ["_linear_op"]


@pytest.mark.fast
def test_direct_calls_stay_ops_in_a_torch_compile_graph(direct):
    from test_linear_graph import _calls, _compiled

    def block(x, w, out):
        lin.linear(x, w, out=out)
        return F.silu(lin.linear(x, w))

    compiled, graphs = _compiled(block)
    x, w, out = bf16(4, 64), bf16(128, 64), torch.empty(4, 128, dtype=torch.bfloat16)
    y = compiled(x, w, out)
    assert [str(n.target) for n in _calls(graphs[0])] == ["gemm_course.linear_out", "gemm_course.linear"]
    assert y.shape == (4, 128) and "_linear_op" in direct.ops


@pytest.mark.fast
def test_arguments_that_are_not_tensors_are_refused_in_words(monkeypatch):
    from gemm_course.runtime import arch

    monkeypatch.setattr(arch, "machine", lambda: test_linear.H200)
    w = bf16(8, 16)
    with pytest.raises(GemmInputError, match="input must be a torch.Tensor, got list"):
        lin.linear([0.0] * 16, w)
    with pytest.raises(GemmInputError, match="weight must be a torch.Tensor, got str"):
        lin.linear(bf16(4, 16), "w")
    with pytest.raises(GemmInputError, match="bias must be a torch.Tensor or None"):
        lin.linear(bf16(4, 16), w, [0.0] * 8)


@pytest.mark.fast
def test_the_kept_signatures_are_bounded_oldest_first(kept, monkeypatch):
    monkeypatch.setattr(linear_kept, "_MAX_CALLS", 3)
    w = bf16(128, 64)
    for m in range(1, 6):
        lin.linear(bf16(m, 64), w)
    assert [sig[0] for sig in linear_kept._calls] == [torch.Size([3, 64]), torch.Size([4, 64]), torch.Size([5, 64])]


@pytest.mark.fast
def test_w_before_the_wait_only_for_a_parameter(kept, monkeypatch):
    """Step 12's rule loads W's first K tiles before pdl's wait at one token (``w_before_wait``). With pdl a
    chain of kernels may run at once, so linear takes it only for an nn.Parameter (a model's weight, which no
    kernel of the forward writes); a plain tensor of the same shape (attention's keys, which a projection
    just wrote) runs without it, on the whole path and on a kept one, kept apart."""
    from gemm_course.runtime import ladder

    monkeypatch.setattr(ladder, "decode", lambda arch="sm90": ladder.get("sm90/12"))  # route: step 12 to 256 tokens
    monkeypatch.setattr(lin, "_decode_verified", functools.lru_cache(lambda arch: True))
    lin.route_plan.cache_clear()
    assert lin.route_plan("sm90", 1, 64, 128).config.w_before_wait > 0
    weight = torch.nn.Parameter(bf16(64, 128), requires_grad=False)
    for path in ("whole", "kept"):
        lin.linear(bf16(1, 128), weight)
        assert kept.prepared[-1].config.w_before_wait > 0, path
        keys = lin.linear(bf16(64, 64), bf16(128, 64))  # (64, 128), just written
        y = lin.linear(bf16(1, 128), keys)
        assert kept.prepared[-1].config.w_before_wait == 0, path
        assert torch.allclose(y.float(), F.linear(kept.prepared[-1].a, keys).float(), rtol=2e-2, atol=2e-2)
    assert len(linear_kept._calls) == 3  # the parameter's signature, the keys', the projection's
