"""scripts/gpu_tune.py's variants, on the CPU: what each names is the config that would be timed."""


import pytest
from conftest import import_script

from gemm_course.measure import b200
from gemm_course.runtime import ladder
from gemm_course.runtime.problem import GemmProblem

pytestmark = pytest.mark.fast



@pytest.fixture(scope="module")
def gpu_tune():
    return import_script("gpu_tune")


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


def test_a_wrong_variant_is_left_out_and_a_stopped_run_writes_its_rows(gpu_tune, monkeypatch, tmp_path):
    """A variant whose output misses float32 is reported and never timed, the others are; a SIGTERM
    (``timeout``'s) after the first shape still writes that shape's rows, and the run exits 1."""
    import json
    import os
    import signal

    import torch

    from gemm_course.runtime import run

    class Launch:
        def __init__(self, a, b, c, config):
            self.a, self.b, self.c, self.config = a, b, c, config

        def __call__(self):
            torch.mm(self.a, self.b.t(), out=self.c)
            if self.config.tile_n == 64:  # the wrong variant: one element far off
                self.c[0, 0] += 1000.0

    timed = []

    def compare(providers, repeats, rounds):
        timed.append(sorted(providers))
        if len(timed) == 2:
            os.kill(os.getpid(), signal.SIGTERM)
        return {name: {"each": [0.01] * 3, "seed_mean": 0.01} for name in providers}

    monkeypatch.setattr(gpu_tune, "make_inputs", lambda problem, device, seed: (
        torch.randn(problem.m, problem.k).bfloat16(), torch.randn(problem.n, problem.k).bfloat16(),
        torch.full((problem.m, problem.n), float("nan")).bfloat16()))
    monkeypatch.setattr(run, "prepare", lambda step, a, b, c, config: Launch(a, b, c, config))
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    monkeypatch.setattr(gpu_tune.bench, "compare", compare)
    monkeypatch.setattr(gpu_tune.bench, "environment", lambda: {"gpu": "Fake GPU"})
    wrong = "sm90/11:tile_n=64,epi_n=64,epi_stages=1"
    status = gpu_tune.main(["sm90/11", wrong, "--shapes", "128x256x64", "256x256x64", "384x256x64", "--out", str(tmp_path),
                            "--what", "a narrower tile"])
    assert status == 1 and timed == [["cublas", "sm90/11"]] * 2  # the wrong variant never timed; stopped at the 2nd
    saved = json.loads((tmp_path / "tune.json").read_text())
    assert saved["stopped"] and [(r["shape"], r["variant"]) for r in saved["rows"]] == [
        ("128x256x64", "sm90/11"), ("128x256x64", "cublas")]
    assert [w[:2] for w in saved["wrong"]] == [[wrong, "128x256x64"], [wrong, "256x256x64"]]
    assert saved["what"] == "a narrower tile" and saved["date"]  # what results/tuning keeps with the rows
    assert saved["command"].startswith("python3 scripts/gpu_tune.py sm90/11 ") and "--out $OUT" in saved["command"]
    assert str(tmp_path) not in saved["command"]
