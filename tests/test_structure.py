"""The kernels' structure: each step's Config and Gemm are written against the same parent step."""

import pytest

from gemm_course.runtime import ladder
from gemm_course.teaching import source

pytestmark = pytest.mark.fast


def parent_modules(cls) -> set:
    """The modules of ``cls``'s nearest ancestors defined outside its own module (step 7's Config
    derives from its module's ``OverlapConfig``, which derives from step 6's Config); mixins of the
    machinery several steps share (``kernels.common``, e.g. ``DependentLaunch``) are not parent steps."""
    out = set()
    for base in cls.__bases__:
        if base.__module__ == "gemm_course.kernels.common":
            continue
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


def _imports(path, src) -> set:
    """The absolute names of the modules the source file ``path`` (under ``src``) imports, at any depth."""
    import ast

    parts = path.relative_to(src).with_suffix("").parts
    package = ".".join(parts[:-1])  # what a relative import is relative to (also for an __init__.py)
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            module = ".".join(part for part in (base, node.module or "") if part)
            out |= {module} | {f"{module}.{alias.name}" for alias in node.names}
    return out


def test_the_kernels_do_not_import_the_ladder():
    """The ladder lists the kernels; a kernel module (or the layouts read from them) importing it
    back would be an upward dependency."""
    import pathlib

    import gemm_course.kernels

    root = pathlib.Path(gemm_course.kernels.__file__).parent
    src = root.parent.parent
    found = {str(p.relative_to(root)): _imports(p, src) for p in root.rglob("*.py")}
    assert "gemm_course.kernels.sm100.step04_tma_store" in found["sm100/step05_cta_pair_multicast.py"]  # the scan sees imports
    assert "gemm_course.hardware" in found["sm100/step02_tcgen05_tma.py"]
    assert not {name for name, imported in found.items() if "gemm_course.runtime.ladder" in imported}
    # nor the teaching models: a kernel reads its hardware facts from gemm_course.hardware, not from sim
    assert not {name for name, imported in found.items() if "gemm_course.teaching.sim" in imported}


def test_layouts_find_the_ladders_modules():
    from gemm_course.kernels.sm100 import layouts

    for step in ladder.steps("sm100")[1:]:
        assert layouts._step_module(step.key)[1] is step.load()
        assert layouts._step_module(step)[0] == step.key
    with pytest.raises(ValueError):
        layouts._step_module("sm90/5")
