"""gemm_course.runtime.linear as a serving engine uses it: a torch custom op that torch.compile keeps in its
graph, and a call that CUDA-graph capture can hold. On the CPU (fast): the ops' registration, their
fake implementation (opcheck, FakeTensor, torch.compile(fullgraph=True) on meta tensors), and the
capture rules with the launch faked. On a course GPU: a Llama-style MLP block through patch_linears
captured in a CUDA graph and replayed on fresh inputs, and under torch.compile(fullgraph=True),
against F.linear and a float32 computation."""

import pytest
import test_linear
import torch
import torch.nn.functional as F
from test_linear import MLP, _mlp_float32, _weights_pass, bf16
from torch._subclasses.fake_tensor import FakeTensorMode

from gemm_course.runtime import linear as lin
from gemm_course.runtime import linear_kept, run
from gemm_course.runtime.problem import GemmInputError, relative_error

pretend, fake_launch = test_linear.pretend, test_linear.fake_launch  # the fixtures, shared

# ---- the custom ops ----


@pytest.mark.fast
def test_linear_is_a_registered_custom_op_with_its_schema():
    ops = torch.ops.gemm_course
    assert str(ops.linear.default._schema) == "gemm_course::linear(Tensor input, Tensor weight, Tensor? bias=None) -> Tensor"
    assert str(ops.linear_out.default._schema) == (
        "gemm_course::linear_out(Tensor input, Tensor weight, Tensor? bias, Tensor(a!) out) -> ()")


@pytest.mark.fast
def test_the_fake_implementation_gives_the_outputs_metadata():
    with FakeTensorMode():
        x = torch.empty(2, 3, 64, dtype=torch.bfloat16, device="cuda")
        w = torch.empty(128, 64, dtype=torch.bfloat16, device="cuda")
        y = torch.ops.gemm_course.linear(x, w, torch.empty(128, dtype=torch.bfloat16, device="cuda"))
        assert (tuple(y.shape), y.dtype, y.device.type, y.is_contiguous()) == ((2, 3, 128), torch.bfloat16, "cuda", True)
        assert tuple(lin.linear(torch.empty(64, dtype=torch.bfloat16, device="cuda"), w).shape) == (128,)  # as F.linear
        with pytest.raises(GemmInputError, match="K mismatch"):  # refused at trace time, in linear's words
            lin.linear(torch.empty(4, 72, dtype=torch.bfloat16, device="cuda"), w)
        with pytest.raises(GemmInputError, match=r"out must be a contiguous bfloat16 tensor of shape \(2, 3, 128\)"):
            lin.linear(x, w, out=torch.empty(6, 128, dtype=torch.bfloat16, device="cuda"))


@pytest.mark.fast
def test_opcheck_with_the_launch_faked(fake_launch):
    """torch.library.opcheck (schema, fake against real, autograd registration, AOT dispatch with
    dynamic shapes) on CPU tensors, the real implementation running linear with the launch faked."""
    x, w, b = bf16(5, 64), bf16(128, 64), bf16(128)
    torch.library.opcheck(torch.ops.gemm_course.linear.default, (x, w, b))
    torch.library.opcheck(torch.ops.gemm_course.linear.default, (bf16(2, 3, 64), w, None))
    out = torch.empty(5, 128, dtype=torch.bfloat16)
    torch.library.opcheck(torch.ops.gemm_course.linear_out.default, (x, w, b, out))


def _compiled(fn, **kwargs):
    """torch.compile(fn, fullgraph=True) with a backend that keeps each graph Dynamo gives it and runs
    it as it is (on meta tensors: the ops' fake implementation)."""
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    return torch.compile(fn, fullgraph=True, backend=backend, **kwargs), graphs


def _calls(gm, name="gemm_course.linear"):
    return [node for node in gm.graph.nodes if node.op == "call_function" and str(node.target).startswith(name)]


@pytest.mark.fast
@pytest.mark.parametrize("dynamic", [False, True])
def test_torch_compile_fullgraph_traces_linear_as_one_node(dynamic):
    def block(x, w, b, w2, out):
        y = F.silu(lin.linear(x, w, b)) * 2
        lin.linear(y, w2, out=out)
        return y, out

    compiled, graphs = _compiled(block, dynamic=dynamic)
    w, b, w2 = bf16(128, 64, device="meta"), bf16(128, device="meta"), bf16(32, 128, device="meta")
    for m in (8, 24):
        y, out = compiled(bf16(m, 64, device="meta"), w, b, w2, bf16(m, 32, device="meta"))
        assert (tuple(y.shape), y.dtype, y.device.type) == ((m, 128), torch.bfloat16, "meta")
    assert len(graphs) == (1 if dynamic else 2)  # with dynamic shapes, one graph for every M
    assert [str(n.target) for n in _calls(graphs[0])] == ["gemm_course.linear", "gemm_course.linear_out"]
    aot = torch.compile(block, fullgraph=True, backend="aot_eager", dynamic=dynamic)  # functionalized: linear_out too
    y, out = aot(bf16(8, 64, device="meta"), w, b, w2, bf16(8, 32, device="meta"))
    assert (tuple(y.shape), tuple(out.shape)) == ((8, 128), (8, 32))


@pytest.mark.fast
def test_a_patched_mlp_block_compiles_to_one_graph_with_three_linear_calls(pretend, monkeypatch):
    _weights_pass(monkeypatch)  # meta layers pass patch_linears' checks
    mlp = MLP(device="meta")
    with torch.no_grad(), lin.patch_linears(mlp):
        compiled, graphs = _compiled(mlp)
        y = compiled(bf16(3, 5, 64, device="meta"))
    assert tuple(y.shape) == (3, 5, 64) and len(graphs) == 1
    assert len(_calls(graphs[0])) == 3


@pytest.mark.fast
def test_requires_grad_is_refused_before_the_op(pretend):
    w = bf16(8, 16, device="meta").requires_grad_()
    with pytest.raises(GemmInputError, match="no backward"):
        lin.linear(bf16(4, 16, device="meta"), w)
    with torch.no_grad():
        assert tuple(lin.linear(bf16(4, 16, device="meta"), w).shape) == (4, 8)


# ---- CUDA-graph capture, with the launch faked ----


@pytest.mark.fast
def test_a_config_first_met_during_capture_is_refused_asking_for_a_warm_up(fake_launch):
    x, w = bf16(7, 64), bf16(128, 64)
    fake_launch.capturing = True
    with pytest.raises(GemmInputError, match=r"during CUDA-graph capture .*sm90/11 for 7x128x64.*Run the model once "
                                             r"eagerly with the shapes you capture \(a warm-up"):
        lin.linear(x, w)
    assert fake_launch.allocated == [] and fake_launch.prepared == [] and linear_kept._workspaces == {}


@pytest.mark.fast
def test_a_capture_after_a_warm_up_allocates_no_scratch(fake_launch):
    x, w = bf16(7, 64), bf16(128, 64)
    lin.linear(x, w)  # the warm-up, eager, on stream 1
    (warm,) = linear_kept._workspaces.values()
    fake_launch.stream, fake_launch.capturing = 2, True  # torch.cuda.graph captures on a stream of its own
    x2 = bf16(7, 64)
    y = lin.linear(x2, w)
    assert fake_launch.allocated == [warm.config] and fake_launch.prepared[-1].workspace is warm
    assert list(linear_kept._workspaces.values()) == [warm]  # nothing kept for the capture stream
    assert torch.allclose(y.float(), F.linear(x2, w).float(), rtol=2e-2, atol=2e-2)
    with pytest.raises(GemmInputError, match="during CUDA-graph capture"):  # N = 4096: another config, not warmed
        lin.linear(bf16(7, 64), bf16(4096, 64))
    fake_launch.capturing = False  # eager on that stream: scratch of its own, as before
    lin.linear(x, w)
    assert len(fake_launch.allocated) == 2 and len(linear_kept._workspaces) == 2
    fake_launch.capturing = True  # a capture now uses its own stream's scratch
    lin.linear(x, w)
    own = linear_kept._workspaces[("sm90/11", warm.config, None, 2)]
    assert fake_launch.prepared[-1].workspace is own
    assert linear_kept._in_graphs == [warm, own]  # what the graphs launch with, once each
    lin.clear_cache()
    assert linear_kept._workspaces == {} and linear_kept._in_graphs == [warm, own]  # the graphs may replay: kept for the process


@pytest.mark.fast
def test_scratch_is_kept_only_once_prepare_has_taken_it(fake_launch, monkeypatch):
    """A call prepare refuses keeps nothing, so a later capture cannot mistake its config for a warm one."""
    def refuse(*args, **kwargs):
        raise GemmInputError("B's data pointer is not 16-byte aligned")

    monkeypatch.setattr(run, "prepare", refuse)
    with pytest.raises(GemmInputError, match="16-byte"):
        lin.linear(bf16(4, 64), bf16(128, 64))
    assert linear_kept._workspaces == {}


# ---- on a course GPU: an MLP block in a CUDA graph and under torch.compile ----

MS = [1, 8, 16, 64, 128, 300]


def _block(m, seed):
    torch.manual_seed(seed)
    mlp = MLP(d=1024, hidden=2816, device="cuda")
    with torch.no_grad():
        mlp.down.bias.normal_()  # a bias that matters
    return mlp, torch.randn(m, 1024, device="cuda").to(torch.bfloat16)


def _agrees(ours, mlp, x):
    """ours against the float32 block and against the same block on F.linear (torch's own bf16 error)."""
    with torch.inference_mode():
        ref, theirs = _mlp_float32(mlp, x), mlp(x)
    assert ours.shape == theirs.shape and ours.dtype == torch.bfloat16
    assert relative_error(theirs, ref) < run.TOLERANCE
    assert relative_error(ours, ref) < run.TOLERANCE, relative_error(ours, ref)
    assert relative_error(ours, theirs.float()) < run.TOLERANCE


@pytest.mark.gpu
@pytest.mark.parametrize("m", MS)
def test_an_mlp_block_captured_in_a_cuda_graph_replays_on_fresh_inputs(m):
    mlp, static_x = _block(m, 2000 + m)
    lin.clear_cache()
    graph = torch.cuda.CUDAGraph()
    with torch.inference_mode(), lin.patch_linears(mlp):
        side = torch.cuda.Stream()  # the warm-up, as torch's documentation does it: eager, on a side stream
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            mlp(static_x)
        torch.cuda.current_stream().wait_stream(side)
        kept = dict(linear_kept._workspaces)
        with torch.cuda.graph(graph):
            static_out = mlp(static_x)
    assert linear_kept._workspaces == kept  # the capture allocated no scratch
    steps = {key[0] for key in kept}
    assert steps == {lin.route(lin.machine_arch(), m, n, k)[0].key for n, k in ((2816, 1024), (1024, 2816))}
    for i in range(3):  # fresh inputs copied into the static input, then a replay
        x = torch.randn(m, 1024, device="cuda", generator=torch.Generator("cuda").manual_seed(i)).to(torch.bfloat16)
        static_x.copy_(x)
        graph.replay()
        torch.cuda.synchronize()
        _agrees(static_out.clone(), mlp, x)
    graph.reset()


@pytest.mark.gpu
def test_capturing_a_shape_without_a_warm_up_is_refused():
    mlp, x = _block(24, 24)
    lin.clear_cache()
    graph = torch.cuda.CUDAGraph()
    with pytest.raises(GemmInputError, match="Run the model once eagerly"):
        with torch.inference_mode(), lin.patch_linears(mlp), torch.cuda.graph(graph):
            mlp(x)
    assert linear_kept._workspaces == {}
    with torch.inference_mode(), lin.patch_linears(mlp):  # the GPU is fine afterwards: an eager call works
        _agrees(mlp(x), mlp, x)


@pytest.mark.gpu
@pytest.mark.parametrize("m", MS)
def test_an_mlp_block_under_torch_compile_fullgraph(m):
    mlp, x = _block(m, 3000 + m)
    torch._dynamo.reset()
    with torch.inference_mode(), lin.patch_linears(mlp):
        compiled = torch.compile(mlp, fullgraph=True)
        first = compiled(x)
        second = compiled(x + 1)
    _agrees(first, mlp, x)
    _agrees(second, mlp, x + 1)


@pytest.mark.gpu
@pytest.mark.parametrize("m", [1, 16, 300])
def test_an_mlp_block_under_torch_compile_reduce_overhead(m):
    """torch.compile's CUDA graphs: its own warm-up runs linear eagerly, then it captures and replays."""
    mlp, x = _block(m, 4000 + m)
    torch._dynamo.reset()
    inputs = [x + i for i in range(4)]
    with torch.inference_mode(), lin.patch_linears(mlp):
        compiled = torch.compile(mlp, mode="reduce-overhead", fullgraph=True)
        outs = [compiled(xi).clone() for xi in inputs]  # a replay's output is overwritten by the next
    assert linear_kept._in_graphs, "the compiled block was captured with the kept scratch"
    for out, xi in zip(outs, inputs):
        _agrees(out, mlp, xi)
