import dataclasses

import pytest

from gemm_course.runtime import ladder
from gemm_course.runtime.problem import GemmProblem

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


# ---- config errors: the package's error, naming the step's fields -------------------------------


def test_an_unknown_config_field_is_the_package_error():
    from gemm_course.runtime.problem import GemmInputError

    step = ladder.get("sm90/2")
    with pytest.raises(ladder.ConfigError, match=r"sm90/2 has no config field 'warp_count'; fields: tile_m, tile_n, tile_k$"):
        step.config(warp_count=3)
    with pytest.raises(GemmInputError):  # and a ValueError, as parse_config's errors always were
        step.config(warp_count=3)
    with pytest.raises(TypeError):  # still what dataclasses.replace raised, for code that catches that
        step.config(warp_count=3)
    assert step.config(tile_n=128).tile_n == 128


@pytest.mark.parametrize("item,message", [
    ("tile_n=abc", r"^tile_n must be an integer, e.g. tile_n=256 \(got 'abc'\)$"),
    ("tile_n=", r"^tile_n must be an integer, e.g. tile_n=256 \(got ''\)$"),
    ("tile_n", r"^cannot read 'tile_n': write FIELD=VALUE, e.g. tile_n=256$"),
    ("=128", r"^cannot read '=128': write FIELD=VALUE, e.g. tile_m=64$"),
    ("warp_count=3", r"^sm90/2 has no config field 'warp_count'; fields: tile_m, tile_n, tile_k$"),
    ("tile_n=96", r"^invalid config for sm90/2: tile_n must be 64, 128 or 256"),
])
def test_parse_config_errors_are_one_line_with_an_example(item, message):
    with pytest.raises(ladder.ConfigError, match=message):
        ladder.get("sm90/2").parse_config([item])


def test_parse_config_reads_booleans_strictly():
    step = ladder.get("sm90/11")
    assert step.parse_config(["stream_k=false"]).stream_k is False
    assert step.parse_config(["stream_k=Yes"]).stream_k is True
    with pytest.raises(ladder.ConfigError, match=r"stream_k must be true or false, e.g. --config stream_k=true"):
        step.parse_config(["stream_k=maybe"], option="--config")


def test_can_implement_without_a_config_uses_the_steps_choice(monkeypatch):
    step = ladder.get("sm90/11")
    mod = step.load()
    refused = dataclasses.replace(mod.Config(), epi_n=48)  # what check_config refuses
    assert not step.check_config(refused)[0]
    monkeypatch.setattr(mod, "config_for", lambda problem: refused)
    problem = GemmProblem(4096, 4096, 4096)
    assert step.can_implement(problem, step.default) == (True, "")
    assert step.can_implement(problem) == step.check_config(refused)  # config_for's config was asked


def test_a_boolean_without_a_value_gets_an_example_it_reads():
    step = ladder.get("sm90/11")
    with pytest.raises(ladder.ConfigError, match=r"^cannot read 'stream_k': write FIELD=VALUE, e.g. stream_k=true$"):
        step.parse_config(["stream_k"])
    assert step.parse_config(["stream_k=true"]).stream_k is True  # the example is accepted
