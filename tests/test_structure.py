"""The kernels' structure: each step's Config and Gemm are written against the same parent step."""

import pytest

from gemm_course import ladder, source

pytestmark = pytest.mark.fast


def parent_modules(cls) -> set:
    """The modules of ``cls``'s nearest ancestors defined outside its own module (step 7's Config
    derives from its module's ``OverlapConfig``, which derives from step 6's Config)."""
    out = set()
    for base in cls.__bases__:
        out |= parent_modules(base) if base.__module__ == cls.__module__ else {base.__module__}
    return out


@pytest.mark.parametrize("step", ladder.steps(), ids=lambda s: s.key)
def test_config_and_gemm_derive_from_the_same_parent_step(step):
    """Step 8 drops step 7's ``tiles_per_cta`` by deriving from step 7's ``OverlapConfig``, not
    from step 6's Config: a step's two classes never skip a step apart."""
    mod = step.load()
    config_parents, gemm_parents = parent_modules(mod.Config), parent_modules(mod.Gemm)
    assert config_parents == gemm_parents
    parent = source.parent(step)
    if parent is not None:
        assert config_parents == {parent.module_name}


@pytest.mark.parametrize("arch", ["sm90", "sm100"])
def test_step_8s_scheduler_has_no_tiles_per_cta(arch):
    seven, eight = ladder.ladder[arch][7], ladder.ladder[arch][8]
    assert "tiles_per_cta" in seven.config_fields() and "tiles_per_cta" not in eight.config_fields()
    assert set(eight.config_fields()) - set(seven.config_fields()) == ({"clc_stages"} if arch == "sm100" else set())
    assert not seven.check_config(seven.config(tiles_per_cta=0))[0]
