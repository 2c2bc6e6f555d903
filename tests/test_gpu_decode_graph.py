"""scripts/gpu_decode_graph.py on the CPU, its measurement faked: what it records and when."""

import dataclasses
import json
import os
import signal

import pytest
from conftest import import_script

from gemm_course.measure import bench

pytestmark = pytest.mark.fast



@pytest.fixture(scope="module")
def graph_script():
    return import_script("gpu_decode_graph")


def test_a_wrong_output_is_not_recorded_and_a_stopped_run_writes_its_records(graph_script, monkeypatch, tmp_path):
    """A wrong output is reported, not recorded, and the run goes on; a SIGTERM (``timeout``'s) in the
    middle of a measurement ends the run, which writes the records finished before it and exits 1."""
    import torch

    measured = []

    def measure(spec, problem, rounds, launches, replays, copy, seed, kind):
        measured.append((spec, problem.m))
        if spec == "sm90/11" and problem.m == 1:
            raise bench.WrongOutput(f"{spec} {problem.label}: relative error nan against float32")
        if len(measured) == 3:
            os.kill(os.getpid(), signal.SIGTERM)
        return {"kind": kind, "step": spec, "gpu": "Fake GPU", "rel_error": 3e-3,
                "shape": {"m": problem.m, "n": problem.n, "k": problem.k}, "step_ms": 0.01, "cublas_ms": 0.01,
                "ratio": 1.0, "bandwidth": {"tb_s": 3.0, "fraction_of_copy": 0.9, "cublas_fraction_of_copy": 0.9}}

    monkeypatch.setattr(graph_script, "measure", measure)
    monkeypatch.setattr(bench, "copy_tb_s", lambda: 3.3)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=0: "Fake GPU")
    before = signal.getsignal(signal.SIGTERM)
    status = graph_script.main(["--out", str(tmp_path), "--steps", "sm90/12", "sm90/11",
                                "--shapes", "1x256x256", "16x256x256", "64x256x256"])
    assert status == 1 and signal.getsignal(signal.SIGTERM) == before
    assert measured == [("sm90/12", 1), ("sm90/11", 1), ("sm90/12", 16)]  # stopped at the third
    (path,) = tmp_path.iterdir()
    kept = json.loads(path.read_text())["records"]
    assert [(r["step"], r["shape"]["m"]) for r in kept] == [("sm90/12", 1)]  # the third was cut off mid-way


def test_a_variant_changes_only_the_fields_it_names_and_is_checked(graph_script):
    """``key:field=value`` is the step's choice for the shape with those fields changed; a field the step
    lacks or a config it refuses stops the run before anything is measured."""
    from gemm_course.runtime import ladder
    from gemm_course.runtime.problem import GemmProblem

    problem = GemmProblem(16, 4096, 4096)
    chosen = ladder.get("sm90/12").config_for(problem)
    step, config = graph_script.step_config("sm90/12:prefetch_w=16", problem)
    assert step.key == "sm90/12" and config.prefetch_w == 16 and chosen.prefetch_w != 16
    assert dataclasses.replace(config, prefetch_w=chosen.prefetch_w) == chosen
    assert graph_script.step_config("sm90/12", problem)[1] == chosen
    with pytest.raises((SystemExit, ValueError)):
        graph_script.step_config("sm90/12:no_such_field=1", problem)
    with pytest.raises((SystemExit, ValueError)):
        graph_script.step_config("sm90/12:tile_m=96", problem)
