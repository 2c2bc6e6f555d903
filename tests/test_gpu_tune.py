"""scripts/gpu_tune.py's variants, on the CPU: what each names is the config that would be timed."""

import pathlib
import sys

import pytest

from gemm_course.measure import b200
from gemm_course.runtime import ladder
from gemm_course.runtime.problem import GemmProblem

pytestmark = pytest.mark.fast

SCRIPTS = str(pathlib.Path(__file__).resolve().parent.parent / "scripts")


@pytest.fixture(scope="module")
def gpu_tune():
    sys.path.insert(0, SCRIPTS)  # the tool imports its sibling kernel_copies
    try:
        import gpu_tune

        yield gpu_tune
    finally:
        sys.path.remove(SCRIPTS)


def test_a_plain_step_is_its_choice_for_the_shape(gpu_tune):
    step, changes = gpu_tune.variant("sm90/11")
    assert changes == {}
    few_waves = GemmProblem(1024, 1024, 8192)
    assert gpu_tune.config_on(step, changes, few_waves) == step.config_for(few_waves)
    assert gpu_tune.config_on(step, changes, few_waves).tile_n == 128  # not the 128 x 256 default


def test_named_fields_change_the_choice_typed_like_the_config(gpu_tune):
    step, changes = gpu_tune.variant("sm90/11:stages=4,epi_n=32,stream_k=False")
    assert changes == {"stages": 4, "epi_n": 32, "stream_k": False}
    config = gpu_tune.config_on(step, changes, GemmProblem(8192, 8192, 8192))
    assert (config.stages, config.epi_n, config.stream_k, config.tile_n) == (4, 32, False, 256)


def test_a_refused_config_stops_the_run(gpu_tune):
    with pytest.raises(SystemExit, match="launch allocation"):  # 128 x 48 + 256 x 232 = 65536 > 384 x 168
        gpu_tune.variant("sm90/6:producer_registers=48")
    step, changes = gpu_tune.variant("sm90/11:epi_n=128")  # valid on the 128 x 256 default, not on the
    with pytest.raises(SystemExit, match="epi_n"):          # 192-wide tile the rule picks for 3072^3
        gpu_tune.config_on(step, changes, GemmProblem(3072, 3072, 3072))


def test_the_b200_kits_tail_ab_variants_parse(gpu_tune):
    configs = [gpu_tune.config_on(*gpu_tune.variant(v), GemmProblem(4096, 4096, 4096)) for v in b200.TAIL_AB_VARIANTS]
    assert [c.stream_k for c in configs] == [True, False]
    assert configs[0] == ladder.get("sm100/11").default
