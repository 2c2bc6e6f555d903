"""The modules' flat names from before the layers were folders (``gemm_course.MOVED``): each is the
same module object as its new home, for readers' code, notebooks and monkeypatches written against
``gemm_course.run``, ``gemm_course.bench`` and the rest."""

import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "src" / "gemm_course"

LAYER_FOLDERS = ("runtime", "rules", "teaching", "measure")


@pytest.mark.fast
def test_the_flat_names_are_the_layers_modules():
    import gemm_course

    homes = {path.stem if path.suffix else path.name: layer for layer in LAYER_FOLDERS
             for path in (PACKAGE / layer).iterdir()
             if (path.suffix == ".py" and path.stem != "__init__") or (path / "__init__.py").exists()}
    assert {name: homes.get(name) for name in gemm_course.MOVED} == gemm_course.MOVED  # each where it says
    assert len(gemm_course.MOVED) == 27  # the flat package's modules and subpackages; a module added later gets none


@pytest.mark.fast
def test_a_flat_name_is_its_new_homes_module_object():
    import importlib

    import gemm_course

    for name, layer in gemm_course.MOVED.items():
        home = importlib.import_module(f"gemm_course.{layer}.{name}")
        assert importlib.import_module(f"gemm_course.{name}") is home, name
        assert getattr(gemm_course, name) is home, name
        assert home.__spec__.name == f"gemm_course.{layer}.{name}"  # its own spec, not the alias's
    from gemm_course import bench, linear, run, sim
    from gemm_course.measure import bench as measure_bench
    from gemm_course.runtime import linear as runtime_linear

    assert (bench, linear.linear, run.TOLERANCE) == (measure_bench, runtime_linear.linear, importlib.import_module(
        "gemm_course.runtime.run").TOLERANCE)
    import gemm_course.sim.banks

    import gemm_course.teaching.sim.banks

    assert gemm_course.sim.banks is gemm_course.teaching.sim.banks and sim.banks is gemm_course.teaching.sim.banks


@pytest.mark.fast
def test_patching_a_flat_name_patches_the_module(monkeypatch):
    import gemm_course
    from gemm_course.measure import bench

    monkeypatch.setattr(gemm_course.bench, "gpu_slug", lambda: "patched")
    assert bench.gpu_slug() == "patched"
    monkeypatch.setattr("gemm_course.records.RESULTS_DIR", "elsewhere")
    assert gemm_course.measure.records.RESULTS_DIR == "elsewhere"


@pytest.mark.fast
def test_a_name_that_never_was_is_still_an_error():
    import gemm_course

    with pytest.raises(ModuleNotFoundError):
        import gemm_course.no_such_module  # noqa: F401
    with pytest.raises(AttributeError):
        gemm_course.no_such_module


@pytest.mark.slow
def test_import_gemm_course_imports_neither_torch_nor_cutedsl_and_python_m_takes_a_flat_name():
    import subprocess
    import sys

    code = "import sys, gemm_course; print(sorted({'torch', 'cutlass'} & set(sys.modules)))"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "[]"
    for name in ("gemm_course.stepwise", "gemm_course.measure.stepwise"):
        out = subprocess.run([sys.executable, "-m", name, "--help"], capture_output=True, text=True)
        assert out.returncode == 0 and "gemm_course.measure.stepwise" in out.stdout, out.stderr
