"""Validation refuses bad input before any launch, with a message that says what to do."""

import math

import pytest
import torch

from gemm_course.runtime import ladder
from gemm_course.runtime.problem import GemmInputError, GemmProblem, reference, relative_error, shape_rules, validate

pytestmark = pytest.mark.fast

BF = torch.bfloat16


def ok_operands(m=128, n=256, k=64):
    return torch.randn(m, k).to(BF), torch.randn(n, k).to(BF), torch.empty(m, n, dtype=BF)


def expect(match, a, b, c=None, **kw):
    kw.setdefault("device_type", "cpu")
    with pytest.raises(GemmInputError, match=match):
        validate(a, b, c, **kw)


def test_good_operands_give_the_problem():
    a, b, c = ok_operands()
    p = validate(a, b, c, device_type="cpu")
    assert (p.m, p.n, p.k) == (128, 256, 64)
    assert p.flops == 2 * 128 * 256 * 64


def test_not_a_tensor():
    _, b, c = ok_operands()
    expect("must be a torch.Tensor", [[1.0]], b, c)


def test_wrong_dtype_float16():
    a, b, c = ok_operands()
    expect(r"dtype torch.float16.*a.to\(torch.bfloat16\)", a.half(), b, c)


def test_wrong_dtype_float32_b():
    a, b, c = ok_operands()
    expect(r"B has dtype torch.float32", a, b.float(), c)


def test_wrong_output_dtype():
    a, b, c = ok_operands()
    expect(r"C has dtype torch.float32", a, b, c.float())


def test_wrong_device_is_refused_with_a_hint():
    a, b, c = ok_operands()
    expect(r"A is on cpu.*a.cuda\(\)", a, b, c, device_type="cuda")


def test_not_2d():
    a, b, c = ok_operands()
    expect("must be 2-D", a[None], b, c)


def test_k_mismatch():
    a, b, c = ok_operands()
    expect(r"K mismatch.*b.t\(\).contiguous\(\)", a, b[:, :32].contiguous(), c)


def test_b_given_as_k_by_n_is_explained():
    a = torch.randn(128, 64).to(BF)
    b_kn = torch.randn(64, 256).to(BF)
    expect("K mismatch", a, b_kn, None)


def test_empty_matrix():
    a, b, c = ok_operands()
    expect("empty matrix", a[:0], b, None)


def test_empty_problem_object():
    with pytest.raises(GemmInputError, match="empty matrix"):
        GemmProblem(0, 16, 16)


def test_empty_k_is_refused_before_the_strides():
    a, b = torch.empty(128, 0, dtype=BF), torch.empty(256, 0, dtype=BF)
    expect(r"empty matrix: K = 0", a, b, torch.empty(128, 256, dtype=BF))


def test_shape_rules_are_the_ones_validate_and_the_problem_apply():
    assert shape_rules(128, 256, 64) == [] and shape_rules(3, 5, 7, need_tma=False) == []
    (why,) = shape_rules(128, 4095, 64)
    assert why.startswith("N = 4095 is not a multiple of 8") and "every row of C" in why and "Pad N up to 4096" in why
    assert len(shape_rules(128, 4095, 63)) == 2  # K and N
    with pytest.raises(GemmInputError) as e:
        GemmProblem(16, 0, 16)
    assert str(e.value) == shape_rules(16, 0, 16)[0]  # one message for the empty rule
    assert shape_rules(16, 16.0, 16) == ["N must be an int, got 16.0"]
    assert shape_rules(True, 8, 8) == ["M must be an int, got True"]
    a, b, c = ok_operands(n=4095)
    with pytest.raises(GemmInputError) as e:
        validate(a, b, c, device_type="cpu")
    assert str(e.value) == shape_rules(128, 4095, 64)[0]


def test_n_not_multiple_of_8_is_refused_without_an_output_too():
    a, b, _ = ok_operands(n=250)
    expect(r"N = 250 is not a multiple of 8", a, b, None)


def test_column_major_a():
    a, b, c = ok_operands()
    a_col = a.t().contiguous().t()  # same values, stride (1, M)
    expect(r"column-major.*a.contiguous\(\)", a_col, b, c)


def test_non_contiguous_rows():
    a = torch.randn(128, 128).to(BF)[:, ::2]
    _, b, c = ok_operands()
    expect("not contiguous", a, b, c)


def test_output_wrong_shape():
    a, b, _ = ok_operands()
    expect(r"C has shape \(256, 128\), expected \(M, N\) = \(128, 256\)", a, b, torch.empty(256, 128, dtype=BF))


def test_output_transposed():
    a, b, _ = ok_operands()
    c = torch.empty(256, 128, dtype=BF).t()
    expect("C is", a, b, c)


def test_output_aliases_input():
    a = torch.randn(128, 128).to(BF)
    expect("shares memory", a, a, a)


def test_k_not_multiple_of_8_for_tma():
    a, b, c = ok_operands(k=60)
    expect(r"K = 60 is not a multiple of 8.*Pad K up to 64.*step 1", a, b, c)


def test_k_not_multiple_of_8_is_fine_for_naive():
    a, b, c = ok_operands(k=60)
    assert validate(a, b, c, need_tma=False, device_type="cpu").k == 60


def test_n_not_multiple_of_8_for_tma_store():
    a, b, c = ok_operands(n=250)
    expect(r"N = 250 is not a multiple of 8", a, b, c)


def test_misaligned_pointer():
    flat = torch.randn(128 * 64 + 1).to(BF)
    a = flat[1:].view(128, 64)  # contiguous, but 2 bytes past an aligned address
    _, b, c = ok_operands()
    expect(r"not 16-byte aligned.*clone\(\)", a, b, c)


def test_shape_a_step_cannot_handle_names_the_step_that_can():
    step = ladder.get("sm90/2")
    ok, why = step.can_implement(GemmProblem(100, 256, 64))
    assert not ok
    assert "M = 100 is not a multiple of 64" in why and "step 4" in why


def test_invalid_config_is_refused():
    step = ladder.get("sm90/2")
    ok, why = step.check_config(step.config(tile_n=96))
    assert not ok and "tile_n" in why


def test_parse_shapes():
    assert GemmProblem.parse("4096") == GemmProblem(4096, 4096, 4096)
    assert GemmProblem.parse("8192x4096x14336") == GemmProblem(8192, 4096, 14336)
    with pytest.raises(GemmInputError, match="cannot read shape"):
        GemmProblem.parse("12x")


def test_relative_error_flags_unwritten_output():
    a, b, _ = ok_operands(16, 16, 16)
    ref = reference(a, b)
    c = ref.to(BF)
    assert relative_error(c, ref) < 1e-2
    c[3, 4] = float("nan")
    assert math.isinf(relative_error(c, ref))


def test_reference_is_float32_and_matches_definition():
    a, b, _ = ok_operands(8, 8, 8)
    ref = reference(a, b)
    assert ref.dtype == torch.float32
    assert torch.allclose(ref[2, 3], (a[2].float() * b[3].float()).sum(), rtol=1e-5)


def test_output_that_requires_grad_is_refused_inputs_are_read_detached():
    import torch

    a = torch.randn(64, 64, dtype=torch.bfloat16, requires_grad=True)
    b = torch.randn(64, 64, dtype=torch.bfloat16, requires_grad=True)
    assert validate(a, b, device_type="cpu") == GemmProblem(64, 64, 64)  # inputs: accepted
    c = torch.empty(64, 64, dtype=torch.bfloat16, requires_grad=True)
    with pytest.raises(GemmInputError, match="requires grad"):
        validate(a, b, c, device_type="cpu")
    assert validate(a, b, c.detach(), device_type="cpu")
