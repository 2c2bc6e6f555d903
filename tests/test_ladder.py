import dataclasses

import pytest

from gemm_course import ladder
from gemm_course.problem import GemmProblem

pytestmark = pytest.mark.fast


def test_every_step_is_complete():
    for s in ladder.steps():
        assert s.title and s.adds and s.shapes and s.instructions
        cfg = s.default
        assert dataclasses.is_dataclass(cfg) and type(cfg).__dataclass_params__.frozen  # a cache key: immutable
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(cfg, dataclasses.fields(cfg)[0].name, None)
        assert s.check_config(cfg) == (True, "")
        for field, values in s.knobs:  # the widgets and sweeps offer the default
            assert getattr(cfg, field) in values, (s.key, field)
        assert not s.knobs or cfg in set(s.knob_grid()), s.key
        mod = s.load()
        assert mod.__doc__ and "Parent" in mod.__doc__ or s.number == 1
        for name in ("Config", "check_config", "can_implement", "Gemm"):
            assert hasattr(mod, name), f"{s.key} lacks {name}"


def test_both_architectures_have_the_first_three_steps():
    for arch in ("sm90", "sm100"):
        assert [1, 2, 3] == [n for n in ladder.ladder[arch] if n <= 3]


def test_lookup_spellings():
    assert ladder.get("sm90/3") is ladder.get("sm90:3") is ladder.get(("sm90", 3)) is ladder.get(3)
    assert ladder.get("hopper/2") is ladder.get("sm90/2")
    with pytest.raises(KeyError, match="the ladder has"):
        ladder.get("sm90/99")


def test_knob_grid_only_yields_valid_configs():
    step = ladder.get("sm90/2")
    grid = list(step.knob_grid())
    assert grid and all(step.check_config(c)[0] for c in grid)
    assert len(set(grid)) == len(grid)


def test_naive_takes_any_shape():
    step = ladder.get("sm90/1")
    assert step.can_implement(GemmProblem(1, 3, 5)) == (True, "")
