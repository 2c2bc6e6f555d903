"""The package's import graph, from its source (ast: module-level and function-level imports alike):
bench, records and placement import each other in no circle."""

import ast
import pathlib

import pytest

pytestmark = pytest.mark.fast

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "src" / "gemm_course"
OPEN = ("gemm_course.measure.bench", "gemm_course.measure.records", "gemm_course.rules.placement")


def import_graph(package: pathlib.Path, name: str = "gemm_course") -> dict:
    """{module: {modules of the package it imports anywhere in its source}}; ``from . import x``
    counts as importing module ``x`` when there is one, else the package it names."""
    modules = {}
    for path in package.rglob("*.py"):
        parts = [name, *path.relative_to(package).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    graph = {}
    for module, path in modules.items():
        base = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
        found = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                found |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                target = ".".join(base[:len(base) - node.level + 1] + ([node.module] if node.module else [])) \
                    if node.level else node.module
                found |= {f"{target}.{a.name}" if f"{target}.{a.name}" in modules else target for a in node.names}
        graph[module] = {m for m in found if m in modules and m != module}
    return graph


def cycles_through(graph: dict, modules) -> list:
    """Every import circle (as a list of modules, first repeated last) that passes through one of
    ``modules``: a path back to the start found by depth-first search."""
    found = []
    for start in modules:
        stack = [(start, [start])]
        seen = set()
        while stack:
            node, path = stack.pop()
            for nxt in sorted(graph.get(node, ())):
                if nxt == start:
                    found.append(path + [start])
                elif nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, path + [nxt]))
    return found


def test_the_search_finds_a_circle_through_a_function_level_import(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from . import b\n")
    (pkg / "b.py").write_text("def f():\n    from .sub import c\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "c.py").write_text("import os\n\ndef g():\n    from ..a import thing\n")
    graph = import_graph(pkg, "pkg")
    assert graph["pkg.a"] == {"pkg.b"} and graph["pkg.b"] == {"pkg.sub.c"} and graph["pkg.sub.c"] == {"pkg.a"}
    assert cycles_through(graph, ["pkg.a"]) == [["pkg.a", "pkg.b", "pkg.sub.c", "pkg.a"]]
    (pkg / "sub" / "c.py").write_text("import os\n")
    assert cycles_through(import_graph(pkg, "pkg"), ["pkg.a", "pkg.b"]) == []


def test_bench_records_and_placement_import_in_no_circle():
    graph = import_graph(PACKAGE)
    assert set(OPEN) <= set(graph)
    assert "gemm_course.measure.records" in graph["gemm_course.measure.bench"]  # bench writes through records
    assert "gemm_course.measure.records" in graph["gemm_course.rules.placement"]
    assert not {"gemm_course.measure.bench", "gemm_course.rules.placement"} & graph["gemm_course.measure.records"]
    assert cycles_through(graph, OPEN) == []

