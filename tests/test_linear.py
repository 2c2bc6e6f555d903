"""gemm_course.runtime.linear, the drop-in F.linear: every refusal before launch on the CPU (fast; a GPU is
pretended where a check needs one, by monkeypatching arch.machine as test_chapter.py does), and on a
course GPU a Llama-style MLP block under patch_linears against torch and a float32 computation."""

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from gemm_course.runtime import arch, ladder, linear_checks, linear_kept, run
from gemm_course.runtime import linear as lin
from gemm_course.runtime.problem import GemmInputError, GemmProblem, relative_error

H200 = arch.Machine("NVIDIA H200", (9, 0), 132, "sm_90a")
B200 = arch.Machine("NVIDIA B200", (10, 0), 148, "sm_100a")
NO_GPU = arch.Machine(None, None, None, None)
RTX = arch.Machine("NVIDIA GeForce RTX 4090", (8, 9), 128, None)


@pytest.fixture
def pretend(monkeypatch):
    """Make arch.machine() answer ``machine`` (H200 unless told)."""

    def install(machine=H200):
        monkeypatch.setattr(arch, "machine", lambda: machine)

    install()
    return install


def bf16(*shape, device="cpu"):
    return torch.randn(*shape).to(torch.bfloat16).to(device)


def refused(match, *args, **kwargs):
    with pytest.raises(GemmInputError, match=match):
        lin.validate(*args, device_type="cpu", **kwargs)


# ---- which step, and no course GPU ----


@pytest.mark.fast
@pytest.mark.parametrize("machine,key", [(H200, "sm90/11"), (B200, "sm100/11")])
def test_the_final_step_is_step_11_of_the_present_gpu(pretend, machine, key):
    pretend(machine)
    assert lin.final_step().key == key


@pytest.mark.fast
@pytest.mark.parametrize("machine,match", [(NO_GPU, "none is visible"), (RTX, "RTX 4090.*8.9.*sm_90a")])
def test_without_a_course_gpu_linear_and_patch_linears_refuse(pretend, machine, match):
    pretend(machine)
    with pytest.raises(GemmInputError, match=match) as e:
        lin.linear(bf16(4, 16), bf16(8, 16))
    assert "torch.nn.functional.linear" in str(e.value)
    with pytest.raises(GemmInputError, match=match):
        with lin.patch_linears(nn.Linear(16, 8, dtype=torch.bfloat16)):
            pass


# ---- the arguments (CPU tensors stand for CUDA ones in validate(device_type='cpu')) ----


@pytest.mark.fast
def test_not_bf16_is_refused_with_a_cast_or_f_linear(pretend):
    for args in [(bf16(4, 16).float(), bf16(8, 16)), (bf16(4, 16), bf16(8, 16).float())]:
        with pytest.raises(GemmInputError, match=r"bfloat16.*\.to\(torch\.bfloat16\).*torch\.nn\.functional\.linear"):
            lin.linear(*args)
    refused("bias has dtype torch.float32.*to\\(torch.bfloat16\\)", bf16(4, 16), bf16(8, 16), torch.zeros(8))


@pytest.mark.fast
def test_tensors_off_cuda_are_refused(pretend):
    with pytest.raises(GemmInputError, match=r"weight is on cpu.*\.cuda\(\)"):
        lin.linear(bf16(4, 16), bf16(8, 16))
    refused(r"weight is on meta.*\.to\('cpu'\)", bf16(4, 16, device="meta"), bf16(8, 16, device="meta"))


@pytest.mark.fast
def test_meta_tensors_get_the_outputs_metadata_as_from_f_linear(pretend):
    """The op's fake implementation is its meta kernel too: a dry run, as F.linear on meta tensors."""
    x, w, b = bf16(2, 3, 16, device="meta"), bf16(8, 16, device="meta"), bf16(8, device="meta")
    y = lin.linear(x, w, b)
    assert (y.shape, y.dtype, y.device.type) == ((2, 3, 8), torch.bfloat16, "meta")
    with pytest.raises(GemmInputError, match="K mismatch"):  # what the tensors are is checked there too
        lin.linear(bf16(4, 24, device="meta"), w)


@pytest.mark.fast
def test_operands_on_different_devices_are_refused():
    refused("input is on meta and weight on cpu", bf16(4, 16, device="meta"), bf16(8, 16))
    refused("bias is on meta and weight on cpu", bf16(4, 16), bf16(8, 16), bf16(8, device="meta"))


@pytest.mark.fast
def test_the_weight_must_be_2d_and_k_major():
    refused("weight must be 2-D", bf16(4, 16), bf16(16))
    refused("weight must be 2-D", bf16(4, 16), bf16(2, 8, 16))
    refused(r"not K-major.*w\.t\(\)\.contiguous\(\)", bf16(4, 16), bf16(16, 8).t())  # a (K, N) matrix transposed
    big = bf16(8 * 16 + 1)  # K-major but starting 2 bytes in: the GEMM's own alignment rule, in linear's words
    refused("16-byte aligned.*B the weight", bf16(4, 16), big[1:].view(8, 16))


@pytest.mark.fast
def test_k_mismatch_is_refused():
    refused(r"K mismatch: input has shape \(4, 24\).*K = 16", bf16(4, 24), bf16(8, 16))
    refused("K mismatch", bf16(()), bf16(8, 16))  # a 0-D input has no K


@pytest.mark.fast
def test_bias_of_the_wrong_shape_is_refused():
    refused(r"bias has shape \(16,\), expected \(N,\) = \(8,\)", bf16(4, 16), bf16(8, 16), bf16(16))
    refused(r"bias has shape \(1, 8\)", bf16(4, 16), bf16(8, 16), bf16(1, 8))
    refused("bias must be a torch.Tensor", bf16(4, 16), bf16(8, 16), [0.0] * 8)


@pytest.mark.fast
@pytest.mark.parametrize("n,k,name,padded", [(12, 16, "N = 12", 16), (8, 20, "K = 20", 24), (100, 36, "N = 100", 104)])
def test_n_or_k_not_a_multiple_of_8_says_pad_or_use_f_linear(n, k, name, padded):
    with pytest.raises(GemmInputError, match=rf"{name} .*multiple of 8.*16-byte.*{padded}.*torch\.nn\.functional\.linear"):
        lin.validate(bf16(4, k), bf16(n, k), device_type="cpu")


@pytest.mark.fast
def test_empty_operands_are_refused():
    refused(r"input of shape \(0, 16\) is empty.*functional\.linear", bf16(0, 16), bf16(8, 16))
    refused(r"input of shape \(3, 0, 16\) is empty", bf16(3, 0, 16), bf16(8, 16))
    refused("empty matrix: N = 0", bf16(4, 16), bf16(0, 16))
    refused("empty matrix: K = 0", bf16(4, 0), bf16(8, 0))


@pytest.mark.fast
def test_operands_that_require_grad_need_no_grad():
    w = bf16(8, 16).requires_grad_()
    refused(r"no backward.*torch\.no_grad\(\).*inference_mode", bf16(4, 16), w)
    with torch.no_grad():
        assert lin.validate(bf16(4, 16), w, device_type="cpu").m == 4


@pytest.mark.fast
def test_out_must_match_and_be_contiguous():
    x, w = bf16(2, 3, 16), bf16(8, 16)
    refused(r"out must be a contiguous bfloat16 tensor of shape \(2, 3, 8\)", x, w, out=torch.empty(6, 8, dtype=torch.bfloat16))
    refused("out must be", x, w, out=torch.empty(2, 3, 8))
    refused("non-contiguous", x, w, out=torch.empty(2, 8, 3, dtype=torch.bfloat16).transpose(1, 2))
    a = bf16(8, 8)
    refused("C shares memory.*C the output", a, bf16(8, 8), out=a)
    odd = bf16(6 * 8 + 1)[1:].view(2, 3, 8)  # an output 2 bytes off 16: a copy of it would keep the result from the caller
    refused(r"C's data pointer is not 16-byte aligned.*write into a fresh output, torch\.empty", x, w, out=odd)


@pytest.mark.fast
def test_an_out_sharing_bytes_with_the_bias_is_refused():
    """The GEMM writes out before the bias is added: an out over the bias would add overwritten values."""
    x, w = bf16(4, 16), bf16(8, 16)
    buf = bf16(4 * 8 + 8)
    for bias, out in ((buf[:8], buf[:32].view(4, 8)), (buf[32:], buf[8:40].view(4, 8))):
        refused("out shares memory with bias.*an out of its own", x, w, bias, out=out)
    assert lin.validate(x, w, buf[32:], out=buf[:32].view(4, 8), device_type="cpu").m == 4  # side by side: fine
    assert lin.validate(x, w, bf16(1).expand(8), out=bf16(4, 8), device_type="cpu").n == 8  # a stride-0 bias


@pytest.mark.fast
def test_inputs_are_flattened_and_copied_only_when_the_kernel_cannot_read_them():
    w = bf16(8, 16)
    x = bf16(2, 3, 16)
    a, c, result = linear_checks._operands(x, w, None, None, "cpu")
    assert a.shape == (6, 16) and a.data_ptr() == x.data_ptr()  # a view
    assert c.shape == (6, 8) and result.shape == (2, 3, 8) and result.data_ptr() == c.data_ptr()
    one, _, result = linear_checks._operands(bf16(16), w, None, None, "cpu")
    assert one.shape == (1, 16) and result.shape == (8,)  # F.linear's 1-D input
    t = bf16(3, 2, 16).transpose(0, 1)  # rows not evenly spaced: reshape copies
    a, *_ = linear_checks._operands(t, w, None, None, "cpu")
    assert a.is_contiguous() and torch.equal(a, t.reshape(6, 16))
    padded = bf16(6, 20)[:, :16]  # a view with a row stride of 20: TMA needs a multiple of 8
    a, *_ = linear_checks._operands(padded, w, None, None, "cpu")
    assert a.data_ptr() != padded.data_ptr() and a.stride() == (16, 1) and torch.equal(a, padded)
    wide = bf16(6, 24)[:, :16]  # a row stride of 24 is fine: no copy
    assert linear_checks._operands(wide, w, None, None, "cpu")[0].data_ptr() == wide.data_ptr()
    odd = bf16(6 * 16 + 1)[1:].view(6, 16)  # 2 bytes in: copied to an aligned tensor
    assert linear_checks._operands(odd, w, None, None, "cpu")[0].data_ptr() % 16 == 0


# ---- patch_linears ----


class MLP(nn.Module):
    """A Llama-style MLP block: down(silu(gate(x)) * up(x)); the down projection has a bias."""

    def __init__(self, d=64, hidden=176, device="cpu", dtype=torch.bfloat16):
        super().__init__()
        kw = dict(device=device, dtype=dtype)
        self.gate = nn.Linear(d, hidden, bias=False, **kw)
        self.up = nn.Linear(d, hidden, bias=False, **kw)
        self.down = nn.Linear(hidden, d, bias=True, **kw)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))


def _patched(module):
    return [name for name, m in module.named_modules() if "forward" in m.__dict__]


@pytest.mark.fast
def test_patch_linears_refuses_layers_the_kernels_cannot_take_naming_them(pretend):
    mlp = MLP()
    mlp.up = nn.Linear(64, 176, bias=False)  # float32
    with pytest.raises(GemmInputError, match=r"layer 'up' .*dtype torch\.float32.*to\(torch\.bfloat16\)"):
        with lin.patch_linears(mlp):
            pass
    mlp = MLP()
    mlp.down = nn.Linear(176, 60, dtype=torch.bfloat16)
    with pytest.raises(GemmInputError, match=r"layer 'down' .*N = 60 \(out_features\).*multiple of 8"):
        with lin.patch_linears(mlp):
            pass
    block = nn.Sequential(nn.Linear(36, 64, dtype=torch.bfloat16))
    with pytest.raises(GemmInputError, match=r"layer '0' .*K = 36 \(in_features\).*Pad .* up to 40"):
        with lin.patch_linears(block):
            pass
    layer = nn.Linear(16, 8, dtype=torch.bfloat16)
    layer.bias.data = layer.bias.data.float()
    with pytest.raises(GemmInputError, match=r"Linear \(the module itself\).*bias has dtype torch\.float32"):
        with lin.patch_linears(layer):
            pass
    with pytest.raises(GemmInputError, match=r"layer 'gate' .*weight is on cpu.*\.cuda\(\)"):
        with lin.patch_linears(MLP()):
            pass
    with pytest.raises(GemmInputError, match="weight is on meta"):
        with lin.patch_linears(MLP(device="meta")):
            pass
    with pytest.raises(GemmInputError, match="takes a torch.nn.Module"):
        with lin.patch_linears(lambda x: x):
            pass


@pytest.mark.fast
def test_patch_linears_refuses_a_weight_tma_cannot_read_before_patching(pretend, monkeypatch):
    monkeypatch.setattr(linear_checks, "_device_rule", lambda weight, bias, device_type: "")
    for weight, match in ((bf16(176, 68)[:, :64], "rows are 68 elements"), (bf16(1, 64).expand(176, 64), "rows overlap"),
                          (bf16(176 * 64 + 1)[1:].view(176, 64), "not 16-byte aligned")):
        mlp = MLP()
        mlp.up.weight = nn.Parameter(weight, requires_grad=False)
        with pytest.raises(GemmInputError, match=rf"layer 'up' .*{match}.*Replace it once"):
            with lin.patch_linears(mlp):
                pass
        assert _patched(mlp) == []


@pytest.mark.fast
def test_patch_linears_refuses_linears_with_a_forward_of_their_own(pretend, monkeypatch):
    _weights_pass(monkeypatch)

    class Scaled(nn.Linear):
        def forward(self, x):
            return 2 * super().forward(x)

    with pytest.raises(GemmInputError, match=r"layer '1' .*a Scaled, a subclass of nn\.Linear with a forward of its own"):
        with lin.patch_linears(nn.Sequential(nn.Linear(16, 16), Scaled(16, 16))):
            pass
    hooked = nn.Linear(16, 16)
    hooked.forward = lambda x: x  # as a hook library does
    with pytest.raises(GemmInputError, match="already replaced on the instance"):
        with lin.patch_linears(nn.Sequential(nn.Linear(16, 16), hooked)):
            pass


def _weights_pass(monkeypatch, unless=lambda weight: False):
    """Let CPU layers pass patch_linears' weight checks (all, or all but those ``unless`` picks)."""
    monkeypatch.setattr(linear_checks, "_weight_rule", lambda weight, bias: "refused" if unless(weight) else "")
    monkeypatch.setattr(linear_checks, "_device_rule", lambda weight, bias, device_type: "")


@pytest.mark.fast
def test_a_refusal_names_every_refused_layer_and_changes_none(pretend, monkeypatch):
    mlp = MLP()
    with pytest.raises(GemmInputError, match="cannot take 3 of the 3 Linear layers") as e:
        with lin.patch_linears(mlp):
            pass
    assert all(f"layer '{name}'" in str(e.value) for name in ("gate", "up", "down"))
    _weights_pass(monkeypatch, unless=lambda weight: weight.shape[0] == 64)  # down only: gate and up were fine
    with pytest.raises(GemmInputError, match=r"cannot take 1 of the 3 .*nothing was patched:\n  layer 'down'"):
        with lin.patch_linears(mlp):
            pass
    assert _patched(mlp) == []


@pytest.mark.fast
def test_patch_linears_routes_every_linear_and_restores_them(pretend, monkeypatch):
    """The routing itself, on the CPU: the weights' rules pass and linear is F.linear that counts."""
    calls = []
    _weights_pass(monkeypatch)
    monkeypatch.setattr(lin, "linear", lambda x, w, b=None: calls.append(w) or F.linear(x, w, b))
    shared = nn.Linear(64, 64, dtype=torch.bfloat16)
    model = nn.Sequential(MLP(), shared, nn.ReLU(), shared)  # one layer in two places: routed once
    x = bf16(5, 64)
    expected = model(x)
    with lin.patch_linears(model) as names:
        assert names == ["0.gate", "0.up", "0.down", "1"]
        assert torch.equal(model(x), expected)
        assert len(calls) == 5 and calls[-1] is shared.weight
        with lin.patch_linears(model[0]) as inner:  # already routed by the outer block: left to it
            assert inner == []
        assert _patched(model) == ["0.gate", "0.up", "0.down", "1"]
    assert _patched(model) == []
    with pytest.raises(RuntimeError, match="inside"):
        with lin.patch_linears(model):
            raise RuntimeError("inside")
    assert _patched(model) == []  # restored on an exception too
    assert type(model[1]).forward is nn.Linear.forward


# ---- the hot path's caches, with the launch faked (no GPU here) ----


@pytest.mark.fast
def test_allocate_workspace_fills_once_and_prepare_takes_it_as_it_is():
    """run.allocate_workspace on the CPU: step 11's scratch, zeros but for the places (gpc_order off:
    no GPU probe), and the CuTe views that prepare passes after the stream."""
    step = ladder.get("sm90/11")
    config = step.config(gpc_order=False)
    ws = run.allocate_workspace(step, config, "cpu")
    assert (ws.step_key, ws.config, ws.device) == ("sm90/11", config, torch.device("cpu"))
    assert [str(t.dtype) for t in ws.tensors] == ["torch.float32", "torch.int32", "torch.int32"]
    assert len(ws.views) == 3 and not ws.tensors[0].any() and not ws.tensors[1].any()
    assert ws.tensors[2].tolist() == list(range(ws.tensors[2].numel()))
    assert run.allocate_workspace(ladder.get("sm90/10"), None, "cpu").tensors == ()  # no scratch


class FakeLaunch:
    """What run.prepare returns, faked: records its operands and workspace; a launch writes A @ B.T."""

    prepared = []

    def __init__(self, plan, a, b, c, config=None, workspace=None, checked=False):
        config = plan.config if config is None else config  # linear passes its route's plan
        self.a, self.b, self.c, self.config, self.workspace = a, b, c, config, workspace
        FakeLaunch.prepared.append(self)

    def __call__(self):
        self.c.copy_(self.a @ self.b.t())

    def relauncher(self):  # later calls of the same signature: each recorded as one more launch
        return lambda a, b, c: FakeLaunch(self, a, b, c, self.config, self.workspace)()


@pytest.fixture
def fake_launch(monkeypatch):
    """linear on CPU tensors with everything below its own checks and caches faked: the GPU (an H200
    whose ladder has no decode step, so step 11 at every M), the device's checks, the stream
    (``fake_launch.stream``) and whether it is capturing (``fake_launch.capturing``), allocate_workspace
    and prepare."""
    import types

    allocated = []
    state = types.SimpleNamespace(stream=1, capturing=False, allocated=allocated, prepared=FakeLaunch.prepared)
    FakeLaunch.prepared.clear()
    lin.clear_cache()
    monkeypatch.setattr(lin, "machine_arch", lambda: "sm90")
    monkeypatch.setattr(ladder, "decode", lambda arch="sm90": None)  # route: step 11 at every M
    monkeypatch.setattr(linear_checks, "_device_rule", lambda weight, bias, device_type: "")
    monkeypatch.setattr(torch.cuda, "current_device", lambda: None)  # a CPU tensor's device index
    monkeypatch.setattr(torch.cuda, "current_stream", lambda: types.SimpleNamespace(cuda_stream=state.stream))
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: state.capturing)
    monkeypatch.setattr(linear_kept, "_in_graphs", [])
    monkeypatch.setattr(linear_kept, "_kept_arguments", False)  # the fake launcher has no arguments to keep,
    monkeypatch.setattr(linear_kept, "_direct_calls", False)  # and the op's path is the one faked (tests turn them on)
    monkeypatch.setattr(run, "allocate_workspace", lambda step, config, device: allocated.append(config) or
                        run.Workspace(step.key, config, torch.device(device)))
    monkeypatch.setattr(run, "prepare", FakeLaunch)
    yield state
    lin.clear_cache()


@pytest.mark.fast
def test_calls_on_one_stream_share_one_workspace_per_config(fake_launch):
    x, w, b = bf16(7, 64), bf16(128, 64), bf16(128)
    y = lin.linear(x, w, b)
    assert y.shape == (7, 128) and torch.allclose(y.float(), F.linear(x, w, b).float(), rtol=2e-2, atol=2e-2)
    lin.linear(bf16(1, 7, 64), w)  # the same M x N x K, another input: the same config, the same scratch
    assert len(fake_launch.allocated) == 1
    first, second = fake_launch.prepared
    assert second.workspace is first.workspace and second.config == first.config
    assert second.a.shape == (7, 64) and second.a is not first.a
    fake_launch.stream = 2  # another stream: scratch of its own
    lin.linear(x, w)
    assert len(fake_launch.allocated) == 2 and fake_launch.prepared[-1].workspace is not first.workspace
    fake_launch.stream = 1
    lin.linear(x, w)
    assert len(fake_launch.allocated) == 2 and fake_launch.prepared[-1].workspace is first.workspace
    assert set(linear_kept._workspaces) == {("sm90/11", first.config, None, 1), ("sm90/11", first.config, None, 2)}
    lin.clear_cache()
    lin.linear(x, w)
    assert len(fake_launch.allocated) == 3


@pytest.mark.fast
def test_linear_writes_into_out_and_keeps_the_leading_dimensions(fake_launch):
    x, w, b = bf16(2, 3, 64), bf16(128, 64), bf16(128)
    out = torch.full((2, 3, 128), float("nan"), dtype=torch.bfloat16)
    assert lin.linear(x, w, b, out=out) is out
    assert fake_launch.prepared[-1].c.data_ptr() == out.data_ptr() and fake_launch.prepared[-1].a.shape == (6, 64)
    assert torch.isfinite(out).all()
    assert lin.linear(bf16(64), w).shape == (128,)  # a 1-D input, as F.linear


@pytest.mark.fast
def test_prepares_refusals_come_back_in_linears_words(fake_launch, monkeypatch):
    def refuse(*args, **kwargs):
        raise GemmInputError("B's data pointer is not 16-byte aligned")

    monkeypatch.setattr(run, "prepare", refuse)
    with pytest.raises(GemmInputError, match=r"^linear: B's data pointer.*B the weight \(N, K\)"):
        lin.linear(bf16(4, 64), bf16(128, 64))


# ---- on a B200: a warning until the course has a record of the step ----


@pytest.fixture
def b200_results(fake_launch, monkeypatch, tmp_path):
    """linear faked on a B200 (sm100/11 at every M), with ``tmp_path`` as results/ and no warning given yet."""
    from gemm_course.measure import records

    monkeypatch.setattr(lin, "machine_arch", lambda: "sm100")
    monkeypatch.setattr(lin, "_b200_warned", set())
    monkeypatch.setattr(records, "RESULTS_DIR", str(tmp_path))
    return tmp_path


@pytest.mark.fast
def test_on_a_b200_linear_warns_once_that_its_step_has_no_b200_record(b200_results):
    import os
    import warnings

    with pytest.warns(RuntimeWarning, match=r"runs sm100/11 on this B200, and the course has no B200 record of it yet.*"
                                            r"torch\.nn\.functional\.linear.*make b200 OUT=DIR` "
                                            r"\(book/setup\.md, 'The B200 kit'\)"):
        lin.linear(bf16(4, 64), bf16(128, 64))
    with open(os.path.join(os.path.dirname(__file__), "..", "book", "setup.md")) as f:  # the section it sends the reader to
        assert any(line.startswith("#") and "The B200 kit" in line for line in f)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per process: a second call, another shape, says nothing
        lin.linear(bf16(300, 64), bf16(256, 64))


@pytest.mark.fast
def test_a_b200_record_of_the_step_ends_the_warning(b200_results):
    import json
    import warnings

    folder = b200_results / "nvidia-b200"
    folder.mkdir()
    record = {"kind": "bench", "step": "sm100/11", "gpu": "NVIDIA B200", "date": "2026-12-07T00:00:00+00:00"}
    (folder / "20261207T000000Z_ladder.json").write_text(json.dumps({"schema": 1, "records": [record]}))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        lin.linear(bf16(4, 64), bf16(128, 64))


# ---- which step and config per shape (route) ----


class StubStep:
    """A memory-roofline step as route sees one: a key, a config per shape, and limits."""

    def __init__(self, key="sm90/12", refuse=lambda problem: ""):
        self.key, self.arch, self.refuse = key, key.split("/")[0], refuse

    def config_for(self, problem):
        return ("stub config", problem.m)

    def can_implement(self, problem, config=None):
        why = self.refuse(problem)
        return not why, why


@pytest.fixture
def decode_step(monkeypatch):
    """Give the ladder a decode step of one's choosing (``decode_step(step)``; None: none)."""

    def install(step):
        monkeypatch.setattr(ladder, "decode", lambda arch="sm90": step if step is None or step.arch == arch else None)
        monkeypatch.setattr(lin, "decode_step_verified", lambda arch_name, records=None: step is not None)  # as if recorded
        lin.clear_cache()

    yield install
    lin.clear_cache()


@pytest.mark.fast
def test_small_m_on_hopper_routes_to_the_decode_step_when_the_ladder_has_one(decode_step):
    small = StubStep()
    decode_step(small)
    from gemm_course.kernels.sm90 import step12_swap_ab

    assert lin.SMALL_M == step12_swap_ab.SWAP_MAX_M  # above it step 12's config is step 11's: step 11 runs
    for m in (1, 8, 100, lin.SMALL_M):
        assert lin.route("sm90", m, 4096, 4096) == (small, ("stub config", m))
    for m in (lin.SMALL_M + 1, 257):  # above SMALL_M: the compute ladder's last step
        step, config = lin.route("sm90", m, 4096, 4096)
        assert step.key == "sm90/11" and config == step.config_for(GemmProblem(m, 4096, 4096))
    decode_step(StubStep("sm100/12"))
    assert lin.route("sm100", 16, 4096, 4096)[0].key == "sm100/11"  # Blackwell: step 11's own decode path


@pytest.mark.fast
def test_without_a_decode_step_or_where_it_refuses_the_shape_step_11_runs(decode_step):
    decode_step(None)  # the code lands before the step does
    for m, n, k in [(1, 4096, 4096), (128, 14336, 4096), (300, 2816, 1024), (8192, 8192, 8192)]:
        step, config = lin.route("sm90", m, n, k)
        assert step.key == "sm90/11" and config == step.config_for(GemmProblem(m, n, k))
    decode_step(StubStep(refuse=lambda problem: "N must be a multiple of 64" if problem.n % 64 else ""))
    assert lin.route("sm90", 16, 4096, 4096)[0].key == "sm90/12"
    assert lin.route("sm90", 16, 4104, 4096)[0].key == "sm90/11"
    assert lin.route_plan.cache_info().currsize == 2
    lin.clear_cache()
    assert lin.route_plan.cache_info().currsize == 0


@pytest.mark.fast
def test_the_route_on_the_ladder_as_it_is():
    """With the ladder's own steps: sm90/12 up to SMALL_M rows once it has a GPU record (else sm90/11),
    sm90/11 above."""
    lin.clear_cache()
    small = ladder.decode("sm90") if lin.decode_step_verified("sm90") else ladder.final("sm90")
    for m in (1, 16, lin.SMALL_M):
        assert lin.route("sm90", m, 4096, 4096)[0] is small
    for m in (lin.SMALL_M + 1, 4096):
        assert lin.route("sm90", m, 4096, 4096)[0].key == "sm90/11"
    assert lin.route("sm100", 64, 4096, 4096)[0].key == "sm100/11"
    lin.clear_cache()


# ---- on a course GPU ----


def _mlp_float32(mlp, x):
    """The same block in float32 from the bf16 weights and input, no rounding between layers."""
    g, u, d = (layer.weight.float() for layer in (mlp.gate, mlp.up, mlp.down))
    x = x.float()
    return F.linear(F.silu(F.linear(x, g)) * F.linear(x, u), d, mlp.down.bias.float())


@pytest.mark.gpu
@pytest.mark.parametrize("m", [1, 7, 128, 300])
def test_an_mlp_block_under_patch_linears_matches_torch(m):
    torch.manual_seed(1000 + m)
    mlp = MLP(d=1024, hidden=2816, device="cuda")
    with torch.no_grad():
        mlp.down.bias.normal_()  # a bias that matters
    shapes = [(m, 1024), (1024,)] if m == 1 else [(m, 1024)]
    if m == 300:
        shapes.append((2, 150, 1024))  # leading dimensions are flattened
    for shape in shapes:
        x = torch.randn(*shape, device="cuda").to(torch.bfloat16)
        with torch.inference_mode():
            ref = _mlp_float32(mlp, x)
            theirs = mlp(x)
            with lin.patch_linears(mlp) as names:
                ours = mlp(x)
        assert names == ["gate", "up", "down"] and _patched(mlp) == []
        assert ours.shape == theirs.shape == tuple(shape) and ours.dtype == torch.bfloat16
        for got in (ours, theirs):
            assert relative_error(got, ref) < run.TOLERANCE, (shape, relative_error(got, ref))
        assert relative_error(ours, theirs.float()) < run.TOLERANCE


@pytest.mark.gpu
@pytest.mark.parametrize("m", [1, 7, 128, 300])
def test_linear_into_a_poisoned_buffer(m):
    torch.manual_seed(m)
    x = torch.randn(m, 1024, device="cuda").to(torch.bfloat16)
    w = torch.randn(2816, 1024, device="cuda").to(torch.bfloat16)
    b = torch.randn(2816, device="cuda").to(torch.bfloat16)
    for bias in (None, b):
        out = torch.full((m, 2816), float("nan"), dtype=torch.bfloat16, device="cuda")
        assert lin.linear(x, w, bias, out=out) is out
        ref = F.linear(x.float(), w.float(), None if bias is None else bias.float())
        assert relative_error(out, ref) < run.TOLERANCE  # inf if any element stayed NaN
    t = torch.randn(1024, m, device="cuda").to(torch.bfloat16).t()  # column-major input: copied first
    assert relative_error(lin.linear(t, w, b), F.linear(t.float(), w.float(), b.float())) < run.TOLERANCE


@pytest.mark.gpu
def test_a_second_call_reuses_the_cached_workspace_and_agrees():
    step = lin.final_step()
    torch.manual_seed(7)
    x = torch.randn(1000, 4000, device="cuda").to(torch.bfloat16)  # a split tail: the hand-over's flags are used
    w = torch.randn(1000, 4000, device="cuda").to(torch.bfloat16)
    lin.clear_cache()
    first = lin.linear(x, w)
    assert len(linear_kept._workspaces) == 1
    (key, workspace), = linear_kept._workspaces.items()
    assert (key[0], key[1]) == (step.key, lin.route(step.arch, 1000, 1000, 4000)[1])
    ptrs = [t.data_ptr() for t in workspace.tensors]
    second = lin.linear(x, w)
    torch.cuda.synchronize()
    assert list(linear_kept._workspaces) == [key] and linear_kept._workspaces[key] is workspace
    assert [t.data_ptr() for t in workspace.tensors] == ptrs

    def same(a, b):  # Hopper's static schedule sums the parts in one order; on Blackwell the last to arrive sums
        return torch.equal(a, b) if step.arch == "sm90" else relative_error(a, b.float()) < 1e-3

    assert same(second, first)
    assert relative_error(first, F.linear(x.float(), w.float())) < run.TOLERANCE
    flags = workspace.tensors[1:] if step.arch == "sm100" else workspace.tensors[1:2]  # sm90's third holds places
    assert not any(int(t.abs().sum()) for t in flags), "every counter and flag back at zero for the next call"
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):  # another stream: scratch of its own
        third = lin.linear(x, w)
    side.synchronize()
    assert len(linear_kept._workspaces) == 2 and same(third, first)


@pytest.mark.gpu
def test_linear_refuses_operands_that_require_grad_on_the_gpu():
    w = torch.randn(64, 64, device="cuda").to(torch.bfloat16).requires_grad_()
    with pytest.raises(GemmInputError, match="no backward"):
        lin.linear(torch.randn(4, 64, device="cuda").to(torch.bfloat16), w)
    assert ladder.get(lin.final_step().key).number == 11


@pytest.mark.fast
def test_the_decode_step_joins_the_route_once_a_gpu_record_of_it_exists():
    """An unchecked kernel is no drop-in: until results/ holds a record of sm90/12 whose output matched
    float32 on a GPU, linear runs step 11 at every M."""
    step = ladder.decode("sm90")
    h100 = "NVIDIA H100 80GB HBM3"
    assert not lin.decode_step_verified("sm90", records=[])
    assert not lin.decode_step_verified("sm90", records=[{"step": "sm90/11", "gpu": "NVIDIA H200", "rel_error": 3e-3}])
    assert lin.decode_step_verified("sm90", records=[{"step": f"{step.key}:tile_m=64", "gpu": h100, "rel_error": 3e-3}])
    assert not lin.decode_step_verified("sm100", records=[{"step": step.key, "gpu": "NVIDIA H200", "rel_error": 3e-3}])
    for wrong in (0.5, float("nan"), None):  # a wrong, unwritten or unchecked output is no verification
        fields = {} if wrong is None else {"rel_error": wrong}
        assert not lin.decode_step_verified("sm90", records=[{"step": step.key, "gpu": h100, **fields}])


@pytest.mark.fast
def test_clusters_at_once_for_counts_what_a_shared_gpu_must_leave_a_call():
    """Decode shapes: at most two clusters at once (chapter 12's table); a long K loop under step 11's
    lockstep tail: its main parts and a helper; Blackwell: one; a whole-tile grid: one."""
    from gemm_course.rules import schedule

    decode = {(16, 1024, 4096): 2, (16, 4096, 4096): 1, (16, 28672, 4096): 1, (128, 4096, 14336): 1}
    for (m, n, k), need in decode.items():
        assert schedule.clusters_at_once_for(*lin.route("sm90", m, n, k), m, n, k) == need, (m, n, k)
    step, config = lin.route("sm90", 1024, 1024, 16384)
    assert step.key == "sm90/11" and config.stream_k
    assert schedule.clusters_at_once_for(step, config, 1024, 1024, 16384) > 2
    assert schedule.clusters_at_once_for(*lin.route("sm100", 1024, 1024, 16384), 1024, 1024, 16384) == 1
