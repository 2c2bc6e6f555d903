import pytest

SPEED_MARKS = ("fast", "slow", "compile", "book", "gpu")
SLOW = (
    "slow: pure Python like fast, but a second or more (a subprocess, figures drawn and measured, an "
    "exhaustive enumeration): `make test` runs these, `make test-fast` (pytest -m fast) does not"
)


def pytest_configure(config):
    config.addinivalue_line("markers", SLOW)


def _gpu_target():
    try:
        from gemm_course.runtime.arch import machine

        return machine().target
    except Exception:
        return None


def pytest_collection_modifyitems(config, items):
    if _gpu_target():
        return
    skip = pytest.mark.skip(reason="needs a GPU with a course target (sm_90a or sm_100a)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def pytest_runtest_setup(item):
    """Every test carries one of the marks of pyproject.toml: fast, compile, book or gpu."""
    if not any(item.get_closest_marker(m) for m in SPEED_MARKS):
        pytest.fail(f"{item.nodeid} has none of the marks {', '.join(SPEED_MARKS)} (pyproject.toml's markers, and slow)")
    if item.get_closest_marker("fast") and item.get_closest_marker("slow"):
        pytest.fail(f"{item.nodeid} is marked both fast and slow: `pytest -m fast` would still run it")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """A test marked fast (or slow, its pure-Python sibling) neither compiles a kernel nor traces a
    CuTeDSL function, in its fixtures either (`make test-fast` relies on it). Compiled kernels are
    cached per process, so a fast test that compiled would pass after a compile test and slow `-m fast`
    down alone: it is refused either way."""
    if item.get_closest_marker("fast") is None and item.get_closest_marker("slow") is None:
        yield
        return
    from cutlass.base_dsl.dsl import BaseDSL

    from gemm_course.runtime import arch

    def refuse(*args, **kwargs):
        raise AssertionError(f"{item.nodeid} is marked fast or slow but compiles or traces a CuTeDSL function: mark it compile")

    saved = BaseDSL.generate_mlir, arch.compile_step
    BaseDSL.generate_mlir, arch.compile_step = refuse, refuse
    try:
        yield
    finally:
        BaseDSL.generate_mlir, arch.compile_step = saved


SCRIPTS_DIR = __import__("pathlib").Path(__file__).resolve().parent.parent / "scripts"


def import_script(name: str):
    """The module of ``scripts/<name>.py`` (scripts import their siblings, so scripts/ is on the path
    while it loads; a second call returns the module already loaded)."""
    import importlib
    import sys

    sys.path.insert(0, str(SCRIPTS_DIR))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(SCRIPTS_DIR))
