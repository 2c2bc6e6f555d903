"""Copies of the Hopper kernels as stand-alone packages under ``.cache/kernels/`` (git-ignored),
for A/B runs and instrumented runs; never inside ``src/``.

A copy is a top-level package ``NAME`` whose relative imports of the course (``from ... import x``,
``from ..common import y``) become absolute, so it imports from anywhere on ``sys.path``.
:func:`step_from` turns ``NAME@sm90/N`` into a ladder step whose module is ``NAME.stepNN_...``.
"""

import dataclasses
import os
import re
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
COPIES = os.path.join(ROOT, ".cache", "kernels")


def absolute_imports(text: str) -> str:
    """``from ...x`` -> ``from gemm_course.x`` and ``from ..x`` -> ``from gemm_course.kernels.x``."""
    for dots, package in (("...", "gemm_course"), ("..", "gemm_course.kernels")):
        text = re.sub(r"^from " + re.escape(dots) + r"(\w*)",
                      lambda m, p=package: f"from {p}{'.' + m.group(1) if m.group(1) else ''}", text, flags=re.M)
    return text


def write_package(name: str, files: dict) -> str:
    """Write ``{file name: source}`` as package ``name`` under COPIES; returns its folder."""
    import shutil

    target = os.path.join(COPIES, name)
    shutil.rmtree(target, ignore_errors=True)
    os.makedirs(target)
    for file_name, text in files.items():
        with open(os.path.join(target, file_name), "w") as f:
            f.write(absolute_imports(text))
    if "__init__.py" not in files:
        open(os.path.join(target, "__init__.py"), "w").close()
    return target


def step_from(package: str, step):
    """``step`` with its module taken from the copy ``package`` (and a distinct number, so the compile
    cache never mixes the two versions)."""
    if COPIES not in sys.path:
        sys.path.insert(0, COPIES)
    module = f"{package}.{step.module_name.rpartition('.')[2]}"
    return dataclasses.replace(step, number=1000 + step.number, module_name=module)
