"""The command line on a machine without a GPU: doctor, list, inspect, and its refusals."""

import pytest

from gemm_course import cli
from gemm_course.runtime import arch, ladder


@pytest.mark.fast
def test_doctor_lists_every_step(capsys):
    assert cli.main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert "nvdisasm" in out and "cuobjdump" in out
    for s in ladder.steps():  # each step's key and its whole title, on one line
        assert any(line.startswith(f"{s.key} ") and line.endswith(f" {s.title}") for line in out.splitlines()), s.key


@pytest.mark.fast
def test_doctor_warns_when_torch_lacks_the_gpus_architecture():
    b200 = arch.Machine("NVIDIA B200", (10, 0), 148, "sm_100a")
    old = ["sm_50", "sm_80", "sm_86", "sm_90"]  # a CUDA 12.4 build: no Blackwell kernels
    assert "not sm_100" in cli.torch_arch_gap(b200, old) and "CUDA 12.8" in cli.torch_arch_gap(b200, old)
    assert cli.torch_arch_gap(b200, old + ["sm_100", "sm_120"]) == ""
    assert cli.torch_arch_gap(arch.Machine("NVIDIA H200", (9, 0), 132, "sm_90a"), old) == ""
    assert cli.torch_arch_gap(arch.Machine(None, None, None, None), []) == ""  # no GPU: nothing to say


@pytest.mark.compile
@pytest.mark.parametrize("step,arch,mma", [("sm90/3", "sm_90a", "HGMMA"), ("sm100/2", "sm_100a", "UTCHMMA")])
def test_inspect_prints_resources_and_mix(capsys, step, arch, mma):
    assert cli.main(["inspect", step, "--arch", arch, "--sass"]) == 0
    out = capsys.readouterr().out
    assert "registers/thread" in out and "shared memory/CTA" in out
    assert "tensor-core MMA" in out and mma in out


@pytest.mark.compile
def test_inspect_with_a_config(capsys):
    assert cli.main(["inspect", "sm90/2", "--config", "tile_n=128"]) == 0
    assert "tile_n=128" in capsys.readouterr().out


def one_error_line(capsys, argv) -> str:
    """Run the CLI in-process: exit code 2, one line on stderr, nothing on stdout, no traceback or
    ANSI escape; returns that line."""
    assert cli.main(argv) == 2
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert out == "" and "Traceback" not in err and "\x1b" not in err
    return lines[0]


@pytest.mark.fast
def test_invalid_config_is_refused(capsys):
    assert "tile_n must be 64, 128 or 256" in one_error_line(capsys, ["inspect", "sm90/2", "--config", "tile_n=96"])


@pytest.mark.fast
@pytest.mark.parametrize("command", [["inspect", "sm90/2"], ["check", "sm90/2"], ["bench", "sm90/2"]])
def test_unknown_field_is_refused_with_the_fields(capsys, command):
    line = one_error_line(capsys, command + ["--config", "warp_count=3"])
    assert line == "error: sm90/2 has no config field 'warp_count'; fields: tile_m, tile_n, tile_k"


@pytest.mark.fast
@pytest.mark.parametrize("item,expected", [
    ("tile_n=abc", "error: tile_n must be an integer, e.g. --config tile_n=256 (got 'abc')"),
    ("tile_n", "error: cannot read 'tile_n': write FIELD=VALUE, e.g. --config tile_n=256"),
])
@pytest.mark.parametrize("command", [["inspect", "sm90/2"], ["check", "sm90/2"], ["bench", "sm90/2"]])
def test_a_bad_value_is_one_line_with_an_example(capsys, command, item, expected):
    assert one_error_line(capsys, command + ["--config", item]) == expected


@pytest.mark.fast
def test_a_bad_boolean_is_one_line_with_an_example(capsys):
    line = one_error_line(capsys, ["inspect", "sm90/11", "--config", "stream_k=maybe"])
    assert line == "error: stream_k must be true or false, e.g. --config stream_k=true (got 'maybe')"


@pytest.mark.fast
@pytest.mark.parametrize("step,target,twin", [("sm100/5", "sm_90a", "sm90/5"), ("sm90/3", "sm_100a", "sm100/3")])
def test_inspect_for_the_other_architecture_is_refused_up_front(capsys, step, target, twin):
    # fast: it must be refused before anything compiles (conftest refuses compiling in fast tests)
    line = one_error_line(capsys, ["inspect", step, "--arch", target])
    built_for = ladder.ARCH_NAMES[ladder.get(step).arch]
    assert line == f"error: {step} is built for {built_for}, not {target}: use its twin, gemm-course inspect {twin}; " \
                   "or leave out --arch"


@pytest.mark.fast
def test_inspect_refuses_an_unknown_target(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["inspect", "sm90/2", "--arch", "sm_80"])
    assert e.value.code == 2 and "invalid choice: 'sm_80'" in capsys.readouterr().err


@pytest.mark.slow  # a Python child per command line: about 1.5 s
def test_errors_from_the_command_line_have_no_traceback_or_colour():
    import subprocess
    import sys

    for argv in (["inspect", "sm100/5", "--arch", "sm_90a"], ["inspect", "sm90/2", "--config", "tile_n=abc"]):
        out = subprocess.run([sys.executable, "-m", "gemm_course", *argv], capture_output=True, text=True)
        assert out.returncode == 2, out.stderr
        assert len(out.stderr.strip().splitlines()) == 1 and out.stderr.startswith("error: "), out.stderr
        assert "\x1b" not in out.stderr and "Traceback" not in out.stderr


@pytest.mark.fast
def test_unknown_step(capsys):
    assert cli.main(["inspect", "sm90/42"]) == 2
    assert "the ladder has" in capsys.readouterr().err


@pytest.mark.fast
@pytest.mark.parametrize("command", [["inspect", "3"], ["source", "3"], ["check", "3"], ["bench", "3"]])
def test_a_bare_step_number_asks_which_architecture(capsys, command):
    assert cli.main(command) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "sm100/3 (Blackwell" in err and "sm90/3" in err


@pytest.mark.fast
def test_list(capsys):
    assert cli.main(["list", "--arch", "sm90"]) == 0
    # the seed's ten steps, "beyond the seed" and the memory roofline's step 12
    assert capsys.readouterr().out.count("adds:") == 12
    assert cli.main(["list", "--arch", "sm100"]) == 0
    assert capsys.readouterr().out.count("adds:") == 12  # and their Blackwell twins


@pytest.mark.fast
def test_list_names_where_each_choice_per_shape_comes_from(capsys):
    """Step 11 takes its tile from a host rule, step 12 from its own swap-AB rule (not step 11's)."""
    assert cli.main(["list"]) == 0
    per_shape = {}
    for line in capsys.readouterr().out.splitlines():
        if line[:1].strip():
            key = line.split()[0]
        elif "per shape:" in line:
            per_shape[key] = line
    assert set(per_shape) == {s.key for s in ladder.steps() if getattr(s.load(), "config_for", None)}
    assert "rules.tile_rule" in per_shape["sm90/11"] and "rules.decode_rule" in per_shape["sm100/11"]
    for key in ("sm90/12", "sm100/12"):
        assert f"{ladder.get(key).module_name}.config_for up to M = 256" in per_shape[key], per_shape[key]


# ---- errors a reader meets: one line each, never a traceback --------------------------------------


@pytest.mark.fast
@pytest.mark.skipif(arch.machine().has_gpu, reason="needs a machine without a GPU")
@pytest.mark.parametrize("argv", [["check", "sm90/3"], ["bench", "sm90/3", "--shapes", "4096"]])
def test_gpu_commands_without_a_gpu_say_so(capsys, argv):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "needs a GPU" in err[0] and "gemm-course inspect sm90/3" in err[0]


@pytest.mark.fast
@pytest.mark.parametrize("bad", ["4096x", "4096x0x8", "big"])
def test_bad_shape_is_one_error_line(capsys, bad):
    assert cli.main(["bench", "sm90/3", "--shapes", bad]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ")


@pytest.mark.fast
def test_unknown_step_is_the_package_error():
    from gemm_course.runtime import ladder
    from gemm_course.runtime.problem import GemmInputError

    with pytest.raises(GemmInputError, match="the ladder has"):
        ladder.get("sm100/42")
    with pytest.raises(KeyError):  # still a lookup error for code that catches those
        ladder.get("hopper/x")


@pytest.mark.slow  # a shell and a Python child: about 1 s
def test_piping_into_head_ends_quietly(tmp_path):
    import subprocess
    import sys

    cmd = f"{sys.executable} -m gemm_course list | head -1"
    out = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr and "BrokenPipe" not in out.stderr
    assert out.stdout.startswith("sm90/1")


@pytest.mark.fast
def test_every_option_of_every_command_has_help():
    import argparse

    parser = cli.build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    helped = {a.dest: a.help for a in sub._choices_actions}
    missing = []
    for name, command in sub.choices.items():
        if not helped.get(name):
            missing.append(name)
        for action in command._actions:
            if not action.help or action.help == argparse.SUPPRESS:
                missing.append(f"{name} {'/'.join(action.option_strings) or action.dest}")
    assert not missing, f"without --help text: {', '.join(missing)}"
    assert len(sub.choices) == 7  # doctor, list, inspect, source, diff, check, bench: the walk saw them all


@pytest.mark.fast
def test_bench_records_no_wrong_output_and_writes_what_it_measured_when_stopped(monkeypatch, tmp_path, capsys):
    """A wrong output is refused, not recorded; a SIGTERM (``timeout``'s) mid-run still writes the
    records measured before it, and the run's status says it did not finish."""
    import json
    import os
    import signal

    from gemm_course.measure import bench
    from gemm_course.runtime import run

    monkeypatch.setattr(run, "require_gpu_for", lambda step: None)
    monkeypatch.setattr(bench, "environment", lambda: {"gpu": "Fake GPU"})
    monkeypatch.setattr(bench, "copy_tb_s", lambda: 3.0)
    timed = []

    def fake_bench_step(step, problem, config, *args, **kw):
        timed.append(problem.m)
        if problem.m == 2:
            raise bench.WrongOutput(f"{step.key} {problem.label}: relative error nan")
        if problem.m == 3:
            os.kill(os.getpid(), signal.SIGTERM)
        return {"step": step.key, "gpu": "Fake GPU", "shape": {"m": problem.m, "n": problem.n, "k": problem.k},
                "tflops": {"median": 1.0, "seed_mean": 1.0}, "cublas_tflops": {"median": 1.0}, "ratio_to_cublas": 1.0,
                "rel_error": 3e-3, "config": {}, "bandwidth": {"tb_s": 1.0, "cublas_tb_s": 1.0}}

    monkeypatch.setattr(bench, "bench_step", fake_bench_step)
    before = signal.getsignal(signal.SIGTERM)
    shapes = ["1x256x256", "2x256x256", "3x256x256", "4x256x256"]
    assert cli.main(["bench", "sm90/11", "--shapes", *shapes, "--rotate", "--out", str(tmp_path)]) == 1
    assert signal.getsignal(signal.SIGTERM) == before  # the handler is the caller's again
    assert timed == [1, 2, 3]  # stopped at the signal: the fourth shape never ran
    err = capsys.readouterr().err
    assert "WRONG OUTPUT, not recorded" in err and "stopped (interrupted) after 1 of 4" in err
    (path,) = tmp_path.iterdir()
    assert [r["shape"]["m"] for r in json.loads(path.read_text())["records"]] == [1]


@pytest.mark.fast
def test_bench_step_refuses_a_wrong_output_before_timing(monkeypatch):
    """bench_step checks before it times: a kernel that leaves the poison or writes a wrong value
    raises WrongOutput, and nothing is timed."""
    import torch

    from gemm_course.measure import bench
    from gemm_course.runtime import run
    from gemm_course.runtime.problem import GemmProblem

    problem = GemmProblem(64, 128, 64)
    for wrong in ("nan", "off"):
        class Launcher:
            config = ladder.get("sm90/11").default

            def __init__(self, a, b, c):
                self.a, self.b, self.c = a, b, c

            def __call__(self):
                if wrong == "off":
                    torch.mm(self.a, self.b.t(), out=self.c)
                    self.c[5, 7] += 100.0  # one element far off

        inputs = lambda problem, device, seed: (torch.randn(problem.m, problem.k).bfloat16(),  # noqa: E731
                                                torch.randn(problem.n, problem.k).bfloat16(),
                                                torch.full((problem.m, problem.n), float("nan")).bfloat16())
        monkeypatch.setattr(bench, "make_inputs", inputs)
        monkeypatch.setattr(run, "prepare", lambda step, a, b, c, config: Launcher(a, b, c))
        monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
        monkeypatch.setattr(bench, "compare", lambda *a, **k: pytest.fail("a wrong kernel was timed"))
        with pytest.raises(bench.WrongOutput, match="relative error .* nothing was timed or recorded"):
            bench.bench_step("sm90/11", problem, env={"gpu": "Fake GPU"})


@pytest.mark.fast
def test_bench_that_fails_part_way_writes_what_it_measured(monkeypatch, tmp_path, capsys):
    """A fault in one measurement (a CUDA error leaves the context unusable) ends the run, which
    writes the records measured before it, prints the traceback and exits 1."""
    import json

    from gemm_course.measure import bench
    from gemm_course.runtime import run

    monkeypatch.setattr(run, "require_gpu_for", lambda step: None)
    monkeypatch.setattr(bench, "environment", lambda: {"gpu": "Fake GPU"})

    def fake_bench_step(step, problem, config, *args, **kw):
        if problem.m == 2:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        return {"step": step.key, "gpu": "Fake GPU", "shape": {"m": problem.m, "n": problem.n, "k": problem.k},
                "tflops": {"median": 1.0, "seed_mean": 1.0}, "cublas_tflops": {"median": 1.0}, "ratio_to_cublas": 1.0,
                "rel_error": 3e-3, "config": {}, "bandwidth": {"tb_s": 1.0, "cublas_tb_s": 1.0}}

    monkeypatch.setattr(bench, "bench_step", fake_bench_step)
    assert cli.main(["bench", "sm90/11", "--shapes", "1x256x256", "2x256x256", "3x256x256", "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "Traceback" in err and "stopped (failed: RuntimeError: CUDA error: an illegal memory access" in err
    (path,) = tmp_path.iterdir()
    assert [r["shape"]["m"] for r in json.loads(path.read_text())["records"]] == [1]
