"""gemm_course: the package behind the course "From a naive GEMM to speed of light in CuTeDSL".

Its layers are folders (ARCHITECTURE.md): ``hardware`` (the facts), ``runtime/``, ``rules/`` (the
host rules), ``kernels/``, ``teaching/``, ``measure/`` and ``viz/`` (the figures). Data flows
``runtime.problem -> runtime.ladder step + config -> runtime.plan -> runtime.arch.compile_plan ->
teaching.inspect | runtime.run / measure.bench -> measure.records -> viz / teaching.widgets``.
Import the pieces you need; nothing here imports CuTeDSL or torch at package import time, so
``import gemm_course`` is cheap.

The modules' earlier flat names still work and give the same module objects: ``gemm_course.run``
is ``gemm_course.runtime.run``, ``import gemm_course.bench`` imports ``gemm_course.measure.bench``,
``python -m gemm_course.stepwise`` runs ``gemm_course.measure.stepwise`` (:data:`MOVED`).
"""

import importlib
import importlib.abc
import importlib.util
import sys

__version__ = "0.1.0"

# each module's (or subpackage's) flat name before the layers became folders -> its layer's folder
MOVED = {
    **dict.fromkeys(("problem", "ladder", "plan", "arch", "run", "linear", "watchdog"), "runtime"),
    **dict.fromkeys(("tile_rule", "decode_rule", "schedule", "tile_order", "placement"), "rules"),
    **dict.fromkeys(("sim", "cute_basics", "inspect", "source", "exercises", "widgets", "chapter", "instructions"),
                    "teaching"),
    **dict.fromkeys(("bench", "records", "notes", "tuning_history", "stepwise", "b200", "triton_peer"), "measure"),
}


def new_name(fullname: str):
    """The module's name at its new home (``gemm_course.sim.banks`` -> ``gemm_course.teaching.sim.banks``),
    or None where ``fullname`` is no flat name."""
    parts = fullname.split(".")
    if len(parts) > 1 and parts[0] == __name__ and parts[1] in MOVED:
        return ".".join([__name__, MOVED[parts[1]], *parts[1:]])
    return None


class _FlatNames(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports a flat name as its new home's module object itself, never a second copy (so that
    monkeypatching ``gemm_course.bench`` patches ``gemm_course.measure.bench``)."""

    def find_spec(self, fullname, path=None, target=None):
        new = new_name(fullname)
        real = importlib.util.find_spec(new) if new else None
        if real is None:
            return None
        return importlib.util.spec_from_loader(fullname, self, origin=real.origin,
                                               is_package=real.submodule_search_locations is not None)

    def create_module(self, spec):
        module = importlib.import_module(new_name(spec.name))
        spec.loader_state = module.__spec__  # the import system sets the alias's spec on it next
        return module

    def exec_module(self, module):
        module.__spec__ = module.__spec__.loader_state  # its own spec back: it is already executed

    def get_code(self, fullname):
        """For ``python -m gemm_course.<flat name>``: run the new home as ``__main__``, so that its
        relative imports resolve from its own package."""
        return compile(f"import runpy\nrunpy.run_module({new_name(fullname)!r}, run_name='__main__', alter_sys=True)\n",
                       f"<{fullname}: {new_name(fullname)}>", "exec")


if not any(type(f).__name__ == "_FlatNames" for f in sys.meta_path):
    sys.meta_path.insert(0, _FlatNames())


def __getattr__(name):
    """``gemm_course.run`` and ``from gemm_course import run`` without importing it first, as before."""
    if name in MOVED:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
