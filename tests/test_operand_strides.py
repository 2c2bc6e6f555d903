"""Row strides TMA cannot address are refused before launch, on every tensor-core step; legal
padded views are accepted (and, on a Hopper GPU, computed right).

A tensor map's global stride must be a multiple of 16 bytes: a bf16 row of 260 elements (520
bytes) is not, one of 264 (528 bytes) is. ``problem.validate`` is the one check every path uses
(``run.prepare``, ``run.validate_operands``, ``linear``), so these go through ``run.validate_operands``.
"""

import pytest
import torch

from gemm_course.runtime import arch, ladder, run
from gemm_course.runtime.problem import GemmInputError, operand_rule, validate

BF = torch.bfloat16
M = N = K = 256
TENSOR_CORE_STEPS = [s for s in ladder.steps() if not s.any_shape]


def padded(rows, cols, row_stride, device="cpu"):
    """A (rows, cols) view whose rows lie ``row_stride`` elements apart in a wider allocation."""
    return torch.randn(rows, row_stride, device=device).to(BF)[:, :cols]


def operands(role=None, row_stride=None, device="cpu"):
    """A (M, K), B (N, K), C (M, N), contiguous, except ``role`` ('A', 'B' or 'C') as a padded view."""
    a, b, c = torch.randn(M, K).to(BF), torch.randn(N, K).to(BF), torch.empty(M, N, dtype=BF)
    ops = dict(A=a, B=b, C=c)
    if role:
        rows, cols = ops[role].shape
        ops[role] = padded(rows, cols, row_stride)
    return tuple(t.to(device) for t in ops.values())


@pytest.mark.fast
@pytest.mark.parametrize("step", TENSOR_CORE_STEPS, ids=lambda s: s.key)
@pytest.mark.parametrize("role", ["A", "B", "C"])
def test_a_row_stride_of_260_is_refused_and_264_accepted(step, role):
    a, b, c = operands(role, 260)
    assert a.stride(0) * 2 % 16 or b.stride(0) * 2 % 16 or c.stride(0) * 2 % 16  # 520 bytes somewhere
    with pytest.raises(GemmInputError, match=rf"{role}'s rows are 260 elements \(520 bytes\) apart.*contiguous\(\)"):
        run.validate_operands(step, a, b, c, device_type="cpu")
    problem, _ = run.validate_operands(step, *operands(role, 264), device_type="cpu")
    assert (problem.m, problem.n, problem.k) == (M, N, K)


@pytest.mark.fast
def test_the_naive_step_takes_any_row_stride():
    for step in (s for s in ladder.steps() if s.any_shape):
        for role in "ABC":
            run.validate_operands(step, *operands(role, 260), device_type="cpu")


@pytest.mark.fast
def test_a_one_row_view_is_told_a_copy_that_fixes_it():
    """torch calls a one-row view contiguous whatever its row stride, so ``.contiguous()`` would keep it."""
    a = padded(1, K, 260)
    assert a.contiguous().stride(0) == 260
    why = operand_rule("A", a)
    assert "clone(memory_format=torch.contiguous_format)" in why
    assert operand_rule("A", a.clone(memory_format=torch.contiguous_format)) == ""


@pytest.mark.fast
def test_the_message_names_the_padded_width():
    with pytest.raises(GemmInputError, match=r"multiple of 8 elements \(here 264\)"):
        validate(padded(M, K, 260), torch.randn(N, K).to(BF), device_type="cpu")


@pytest.mark.fast
def test_an_output_overlapping_an_input_is_refused_even_at_another_address():
    """Aliasing is overlapping bytes, not equal pointers: C as a view into A's rows further on."""
    store = torch.randn(2 * M, K).to(BF)
    a, c = store[:M], store[M // 2 : M // 2 + M, :N]  # K == N: C starts half-way through A
    assert c.data_ptr() != a.data_ptr()
    with pytest.raises(GemmInputError, match=r"C shares memory with an input \(A\)"):
        validate(a, torch.randn(N, K).to(BF), c, device_type="cpu")
    # disjoint rows of one allocation are fine, and A and B may share memory (both only read)
    validate(store[:M], store[:N], torch.empty(M, N, dtype=BF), device_type="cpu")
    validate(store[:M], torch.randn(N, K).to(BF), store[M:, :N], device_type="cpu")


@pytest.mark.gpu
@pytest.mark.skipif(arch.machine().target != "sm_90a", reason="sm90/11 runs on Hopper")
@pytest.mark.parametrize("shape,row_pad", [((256, 256, 256), 8), ((384, 520, 1000), 24)])
def test_padded_views_compute_right_on_the_final_hopper_step(shape, row_pad):
    """A, B and C all views with legal (16-byte multiple) row strides; the padding of C's rows is
    left as it was."""
    from gemm_course.runtime.problem import reference, relative_error

    m, n, k = shape
    a, b = padded(m, k, k + row_pad, "cuda"), padded(n, k, k + row_pad, "cuda")
    c_store = torch.full((m, n + row_pad), 7.0, dtype=BF, device="cuda")
    c = c_store[:, :n]
    c.fill_(float("nan"))
    run.prepare("sm90/11", a, b, c)()
    torch.cuda.synchronize()
    assert relative_error(c, reference(a, b)) < run.TOLERANCE
    assert bool((c_store[:, n:] == 7.0).all())
