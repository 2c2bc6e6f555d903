"""Every configuration a widget or sweep can pick (each step's knob grid) compiles, without spills."""

import pytest

from gemm_course.runtime import arch, ladder
from gemm_course.teaching import inspect

pytestmark = pytest.mark.compile

CASES = [(s, c) for s in ladder.steps() for c in s.knob_grid()]


@pytest.mark.parametrize("step,config", CASES, ids=[f"{s.key}:{i}" for i, (s, c) in enumerate(CASES)])
def test_knob_config_compiles(step, config):
    art = arch.compile_step(step, config, target=step.target)
    rep = inspect.report(art)
    assert rep.mix.get("tensor-core MMA", 0) > 0 or step.any_shape
    assert not rep.resources.spills, f"{step.key} {config} spills: {rep.resources}"
