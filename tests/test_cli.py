"""The command line on a machine without a GPU: doctor, list, inspect, and its refusals."""

import pytest

from gemm_course import arch, cli


@pytest.mark.fast
def test_doctor_lists_every_step(capsys):
    assert cli.main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert "nvdisasm" in out and "cuobjdump" in out
    for key in ("sm90/1", "sm90/10", "sm100/2", "sm100/3"):
        assert key in out


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


@pytest.mark.fast
def test_invalid_config_is_refused():
    with pytest.raises(SystemExit, match="tile_n must be 64, 128 or 256"):
        cli.main(["inspect", "sm90/2", "--config", "tile_n=96"])


@pytest.mark.fast
def test_unknown_field_is_refused():
    with pytest.raises(SystemExit, match="no config field 'tiles'"):
        cli.main(["inspect", "sm90/2", "--config", "tiles=2"])


@pytest.mark.fast
def test_unknown_step(capsys):
    assert cli.main(["inspect", "sm90/42"]) == 2
    assert "the ladder has" in capsys.readouterr().err


@pytest.mark.fast
def test_list(capsys):
    assert cli.main(["list", "--arch", "sm90"]) == 0
    assert capsys.readouterr().out.count("adds:") == 11  # the seed's ten steps and "beyond the seed"
    assert cli.main(["list", "--arch", "sm100"]) == 0
    assert capsys.readouterr().out.count("adds:") == 11  # and the Blackwell step 11


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
    from gemm_course import ladder
    from gemm_course.problem import GemmInputError

    with pytest.raises(GemmInputError, match="the ladder has"):
        ladder.get("sm100/42")
    with pytest.raises(KeyError):  # still a lookup error for code that catches those
        ladder.get("hopper/x")


@pytest.mark.fast
def test_piping_into_head_ends_quietly(tmp_path):
    import subprocess
    import sys

    cmd = f"{sys.executable} -m gemm_course list | head -1"
    out = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr and "BrokenPipe" not in out.stderr
    assert out.stdout.startswith("sm90/1")
