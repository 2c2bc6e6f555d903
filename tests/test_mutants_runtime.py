"""Refusals and routes that hand-made mutants of runtime/problem.py, linear_checks.py, linear.py and plan.py
got past the other tests: each test pins a boundary or a case the docstrings promise."""

import pytest
import torch

from gemm_course.runtime import ladder, plan
from gemm_course.runtime import linear as lin
from gemm_course.runtime.problem import GemmInputError, GemmProblem, shape_rules, validate


def bf16(*shape):
    return torch.randn(*shape).to(torch.bfloat16)


# ---- problem.py ----


@pytest.mark.fast
def test_32_bit_coordinates_bound_each_dimension_and_each_operand():
    """Every dimension below 2**31, and A (M x K) and B (N x K) below 2**34 elements each."""
    too_large = "too large for 32-bit tile coordinates"
    assert shape_rules(2**31 - 1, 1, 1, need_tma=False) == []
    assert too_large in shape_rules(2**31, 1, 1, need_tma=False)[0]  # the dimension alone, A and B small
    assert shape_rules(8, 2**28, 56) == []
    assert too_large in shape_rules(8, 2**28, 64)[0]  # B is 2**34 elements, A only 512


@pytest.mark.fast
def test_a_single_row_never_overlaps_itself():
    """A one-row view whose row stride is below K (here 0, as a broadcast) has no rows to overlap: accepted."""
    a = bf16(64).as_strided((1, 64), (0, 1))
    assert validate(a, bf16(8, 64), device_type="cpu") == GemmProblem(1, 8, 64)


@pytest.mark.fast
def test_an_output_over_a_one_row_input_is_refused():
    """C written over the one row of A (an in-place decode step) overlaps it, last row included."""
    a = bf16(1, 64)
    with pytest.raises(GemmInputError, match=r"C shares memory with an input \(A\)"):
        validate(a, bf16(64, 64), a, device_type="cpu")
    buf = bf16(3 * 64)
    a, c = buf[:128].view(2, 64), buf[64:].view(2, 64)  # C starts on A's last row
    with pytest.raises(GemmInputError, match=r"C shares memory with an input \(A\)"):
        validate(a, bf16(64, 64), c, device_type="cpu")


# ---- linear_checks.py ----


def refused(match, *args, **kwargs):
    with pytest.raises(GemmInputError, match=match):
        lin.validate(*args, device_type="cpu", **kwargs)


@pytest.mark.fast
def test_a_bias_must_be_one_dimensional():
    refused(r"bias has shape \(8, 1\), expected \(N,\) = \(8,\)", bf16(4, 16), bf16(8, 16), bf16(8, 1))


@pytest.mark.fast
def test_an_out_touching_the_bias_by_one_element_is_refused():
    """out and bias that share a single element still overlap: the GEMM would overwrite it first."""
    x, w = bf16(4, 16), bf16(8, 16)
    buf = bf16(4 * 8 + 8)
    out = buf[:32].view(4, 8)
    refused("out shares memory with bias", x, w, buf[31:39], out=out)  # bias starts on out's last element
    refused("out shares memory with bias", x, w, buf[:1].expand(8), out=out)  # a stride-0 bias on out's first


@pytest.mark.fast
def test_a_bias_that_requires_grad_needs_no_grad():
    bias = bf16(8).requires_grad_()
    refused(r"no backward.*torch\.no_grad\(\)", bf16(4, 16), bf16(8, 16), bias)
    with torch.no_grad():
        assert lin.validate(bf16(4, 16), bf16(8, 16), bias, device_type="cpu").n == 8


# ---- linear.py ----


@pytest.mark.fast
def test_without_a_gpu_record_the_decode_step_stays_off_the_route(monkeypatch):
    """route_plan: small M goes to ladder.decode only once it has a GPU record; until then step 11."""
    monkeypatch.setattr(lin, "decode_step_verified", lambda arch_name, records=None: False)
    lin.clear_cache()
    try:
        assert ladder.decode("sm90") is not None
        for m in (1, 16, lin.SMALL_M):
            assert lin.route("sm90", m, 4096, 4096)[0].key == "sm90/11"
    finally:
        lin.clear_cache()


@pytest.mark.fast
def test_a_record_without_a_gpu_does_not_verify_the_decode_step():
    key = ladder.decode("sm90").key
    for gpu in ({}, {"gpu": None}, {"gpu": ""}):
        assert not lin.decode_step_verified("sm90", records=[{"step": key, "rel_error": 3e-3, **gpu}])


# ---- plan.py ----


@pytest.mark.fast
def test_the_naive_step_plans_any_shape_given_as_a_tuple():
    """plan.for_problem with (m, n, k): the naive step has no alignment rule (any_shape)."""
    p = plan.for_problem("sm90/1", (100, 100, 100))
    assert p.problem == GemmProblem(100, 100, 100)
    with pytest.raises(GemmInputError, match="multiple of 8"):
        plan.for_problem("sm90/11", (100, 100, 100))


@pytest.mark.fast
def test_a_plan_is_for_the_target_asked_for():
    """``target``: the architecture compiled for; by default the step's own."""
    assert plan.for_problem("sm90/1", GemmProblem(64, 64, 64)).target == "sm_90a"
    assert plan.for_problem("sm90/1", GemmProblem(64, 64, 64), target="sm_100a").target == "sm_100a"
