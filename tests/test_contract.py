"""One contract for what a step accepts: ``Step.can_implement`` answers, before anything is allocated,
what ``run.prepare``'s checks (``run.validate_operands``, the part that needs no GPU) answer on real
operands of that shape, for every step of both architectures."""

import random

import pytest
import torch

from gemm_course.runtime import ladder, run
from gemm_course.runtime.problem import GemmInputError, GemmProblem, shape_rules, validate

pytestmark = pytest.mark.fast

EDGE = [
    (4096, 4095, 64),  # N one short of TMA's 16 bytes
    (256, 4095, 64),
    (256, 256, 4095),  # K one short
    (128, 256, 8),  # the smallest K a TMA step takes
    (1, 256, 8),  # M = 1
    (1, 8, 8),
    (1, 1, 1),
    (3, 5, 7),  # every dimension odd
    (128, 256, 7),  # odd K
    (128, 256, 65),
    (128, 250, 64),  # N even, not a multiple of 8
    (100, 256, 64),  # M not a multiple of any tile
    (64, 256, 64),
    (128, 256, 64),
    (256, 512, 72),
    (192, 512, 8),
    (0, 256, 64),  # empty matrices
    (128, 0, 64),
    (128, 256, 0),
    (0, 0, 0),
]
_rng = random.Random(20240611)
RANDOM = [
    (_rng.randrange(1, 700), _rng.choice([_rng.randrange(1, 700), 8 * _rng.randrange(1, 90)]),
     _rng.choice([_rng.randrange(1, 600), 8 * _rng.randrange(1, 80)]))
    for _ in range(40)
]
SHAPES = EDGE + RANDOM


def operands(m, n, k):
    """Fresh, well-formed CPU operands of the shape (validation reads no values)."""
    bf = torch.bfloat16
    return torch.empty(m, k, dtype=bf), torch.empty(n, k, dtype=bf), torch.empty(m, n, dtype=bf)


def configs(step):
    """None (the step's choice per shape, as prepare picks it), and the first and last of its knob grid."""
    grid = list(step.knob_grid())
    return [None] + ([grid[0], grid[-1]] if grid else [])


def prepare_checks(step, tensors, config):
    """(ok, message) from the checks prepare makes before it compiles."""
    try:
        run.validate_operands(step, *tensors, config, device_type="cpu")
    except GemmInputError as e:
        return False, str(e)
    return True, ""


def test_the_shapes_cover_both_answers():
    # the contract is only tested where both answers occur: accepted and refused shapes, TMA and not
    tma = ladder.get("sm90/4")
    answers = {tma.can_implement(s)[0] for s in SHAPES}
    assert answers == {True, False}
    assert any(not shape_rules(*s, need_tma=True) for s in RANDOM) and any(shape_rules(*s, need_tma=True) for s in RANDOM)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_can_implement_agrees_with_prepare(shape):
    tensors = operands(*shape)
    for step in ladder.steps():
        for config in configs(step):
            ok, why = step.can_implement(shape, config)
            prep_ok, prep_why = prepare_checks(step, tensors, config)
            # accepted by can_implement => accepted by prepare's checks, and the other way round
            assert ok == prep_ok, (step.key, shape, config, why, prep_why)
            if not ok:
                assert why and why in prep_why, (step.key, shape, why, prep_why)  # the same reason
            if all(isinstance(d, int) and d > 0 for d in shape):
                assert step.can_implement(GemmProblem(*shape), config) == (ok, why)  # either spelling


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_every_refusal_of_validate_is_a_refusal_of_can_implement(shape):
    tensors = operands(*shape)
    for need_tma in (True, False):
        try:
            validate(*tensors, need_tma=need_tma, device_type="cpu")
            refused = ""
        except GemmInputError as e:
            refused = str(e)
        for step in ladder.steps():
            if step.any_shape == (not need_tma) and refused:
                ok, why = step.can_implement(shape)
                assert not ok and why == refused, (step.key, shape)


def test_n_4095_is_refused_before_allocation_by_every_tma_step():
    for step in ladder.steps():
        ok, why = step.can_implement(GemmProblem(4096, 4095, 4096))
        if step.any_shape:
            assert ok, step.key
        else:
            assert not ok and "N = 4095 is not a multiple of 8" in why and "Pad N up to 4096" in why, step.key
            assert "step 1" in why  # which step can


def test_empty_and_tiny_shapes():
    for step in ladder.steps():
        for shape in ((0, 8, 8), (8, 0, 8), (8, 8, 0)):
            ok, why = step.can_implement(shape)
            assert not ok and why.startswith("empty matrix"), (step.key, shape)
        assert step.can_implement((1, 1, 1))[0] == step.any_shape, step.key
    assert ladder.get("sm90/4").can_implement((1, 8, 8)) == (True, "")  # M = 1, K = 8: TMA steps 4+ take it
    assert ladder.get("sm100/11").can_implement((1, 8, 8)) == (True, "")
    assert not ladder.get("sm90/2").can_implement((1, 8, 8))[0]  # whole tiles only


def test_a_step_refusal_names_the_step_that_can():
    ok, why = ladder.get("sm100/2").can_implement((100, 256, 64))
    assert not ok and "M = 100 is not a multiple of 64" in why and "step 4" in why
    with pytest.raises(GemmInputError, match=r"sm100/2 cannot compute 100x256x64: M = 100.*step 4"):
        run.validate_operands("sm100/2", *operands(100, 256, 64), device_type="cpu")


def test_the_size_rule_is_refused_by_can_implement_too():
    huge = (2**31, 8, 8)
    assert shape_rules(*huge, need_tma=True) == [f"problem {2**31}x8x8 is too large for 32-bit tile coordinates; split it."]
    for step in ladder.steps():
        ok, why = step.can_implement(huge)
        assert not ok and "too large" in why, step.key
