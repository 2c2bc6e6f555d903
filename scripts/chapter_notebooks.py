#!/usr/bin/env python3
"""The chapters as Jupyter notebooks: ``notebooks/*.md`` (MyST Markdown, the one source a chapter
has) -> ``notebooks/*.ipynb`` (git-ignored), and the nbval plugin that hands nbval's executions to
the book build.

    .venv/bin/python scripts/chapter_notebooks.py          # `make notebooks`: each .ipynb older than its .md
    .venv/bin/python scripts/chapter_notebooks.py --force  # every .ipynb

Reading. A chapter is read with myst-nb's own reader and the book's MyST settings (``_config.yml``),
so the .ipynb that nbval runs and a reader opens has exactly the cells, sources and tags of the
page the book renders. The .ipynb carries no outputs.

Running once. ``make test`` runs every chapter once, under nbval (``pytest notebooks --nbval-lax
--nb-cache DIR``). With ``--nb-cache``, the plugin below collects each cell's outputs as nbval
receives them and, when every cell of a notebook passed, stores the executed notebook (and the
state of the widgets it built, read from its kernel) in the jupyter-cache at DIR. The book builds
with ``execute_notebooks: cache`` and finds each chapter there by jupyter-cache's hash of its code
cells, so it shows what nbval ran instead of running the chapter again. The plugin checks that
the hash of the chapter as the book will read it (from the .md) matches, and fails the run if
not: a chapter that the book would have to run a second time is an error, not a slowdown.
A notebook with a failing cell is not stored (and the failing cell fails pytest, so `make test`).
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import sys
import time
from pathlib import Path

import pytest
from nbval.plugin import IPyNbCell

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = ROOT / "notebooks"


# ---------------------------------------------------------------------------------------------
# .md -> .ipynb
# ---------------------------------------------------------------------------------------------


def md_config():
    """The MyST parser settings of the book (``parse.myst_enable_extensions`` in ``_config.yml``)."""
    import yaml
    from myst_parser.config.main import MdParserConfig

    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    return MdParserConfig(enable_extensions=set(config["parse"]["myst_enable_extensions"]))


def read(md_path: Path):
    """A chapter as a notebook, as the book reads it (myst-nb's reader, the book's MyST settings)."""
    from myst_nb.core.read import read_myst_markdown_notebook

    return read_myst_markdown_notebook(Path(md_path).read_text(), config=md_config(), path=md_path)


def to_ipynb(md_path: Path) -> str:
    """The .ipynb text for a chapter: its cells with stable ids, the kernelspec, no outputs."""
    import nbformat

    nb = read(md_path)
    nb.metadata = nbformat.from_dict({"kernelspec": nb.metadata["kernelspec"], "language_info": {"name": "python"}})
    for i, cell in enumerate(nb.cells):
        cell["id"] = f"{Path(md_path).stem[:2]}-{i:02d}"
    nbformat.validate(nb)
    return nbformat.writes(nb) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sources", nargs="*", type=Path, help="chapter sources (default: notebooks/NN_*.md)")
    parser.add_argument("--force", action="store_true", help="rewrite every .ipynb, not only those older than their source")
    args = parser.parse_args(argv)
    newest_tool = max(Path(__file__).stat().st_mtime, (ROOT / "_config.yml").stat().st_mtime)
    for md in args.sources or sorted(CHAPTERS.glob("[0-9][0-9]_*.md")):
        ipynb = md.with_suffix(".ipynb")
        # Like make: an .ipynb newer than its source (say, saved from Jupyter with outputs) stays.
        if args.force or not ipynb.exists() or ipynb.stat().st_mtime < max(md.stat().st_mtime, newest_tool):
            ipynb.write_text(to_ipynb(md))
            print(f"{os.path.relpath(md)} -> {os.path.relpath(ipynb)}")
    return 0


# ---------------------------------------------------------------------------------------------
# the nbval plugin: nbval's executions into the book's jupyter-cache (notebooks/conftest.py loads it)
# ---------------------------------------------------------------------------------------------

# Evaluated in the notebook's kernel after its last cell, as a silent user expression: the state of
# every widget the notebook built, in the form a notebook stores it (what nbclient records while it
# executes, and what the book's html-manager renders).
_WIDGET_STATE = ("__import__('json').dumps(__import__('ipywidgets').Widget.get_manager_state()) "
                 "if 'ipywidgets' in __import__('sys').modules else ''")


def pytest_addoption(parser):
    parser.addoption("--nb-cache", metavar="DIR", default=None,
                     help="store each chapter notebook that nbval ran without error, with its outputs, in the "
                          "jupyter-cache at DIR (the book build's cache: `make test` passes _build/.jupyter_cache)")


def pytest_configure(config):
    """With ``--nb-cache DIR``, register the writer."""
    if config.getoption("--nb-cache", default=None):
        config.pluginmanager.register(_CacheWriter(Path(config.getoption("--nb-cache"))), "nb-cache-writer")


def _widget_state(kernel, timeout: float = 60):
    """Ask the notebook's kernel (nbval's) for its widgets' state; None when it built none."""
    kc = kernel.kc
    msg_id = kc.execute("", silent=True, store_history=False, user_expressions={"state": _WIDGET_STATE})
    deadline = time.monotonic() + timeout
    while True:
        msg = kc.get_shell_msg(timeout=max(1.0, deadline - time.monotonic()))
        if msg["parent_header"].get("msg_id") == msg_id:
            break
    result = msg["content"].get("user_expressions", {}).get("state", {})
    if result.get("status") != "ok":
        raise RuntimeError(f"could not read the widget state: {result}")
    text = ast.literal_eval(result["data"]["text/plain"])
    return json.loads(text) if text else None


class _CacheWriter:
    def __init__(self, cache_dir: Path):
        self.cache_dir = cache_dir
        self.files: dict = {}  # notebook path -> {"started", "ok", "outputs": {cell number: outputs}}

    def _entry(self, item) -> dict:
        return self.files.setdefault(item.parent.path, {"started": time.time(), "ok": True, "outputs": {}})

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        report = (yield).get_result()
        if isinstance(item, IPyNbCell) and (report.failed or report.skipped):
            self._entry(item)["ok"] = False

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_teardown(self, item, nextitem):
        """After a notebook's last cell, before nbval stops its kernel: store the executed notebook."""
        if not isinstance(item, IPyNbCell):
            return
        entry = self._entry(item)
        if item.test_outputs is not None:
            entry["outputs"][item.cell_num] = list(item.test_outputs)
        if nextitem is not None and nextitem.parent is item.parent:
            return
        kernel = item.parent.kernel
        if entry["ok"] and kernel is not None and kernel.is_alive():
            self._store(item.parent.path, entry, _widget_state(kernel))

    def _store(self, ipynb: Path, entry: dict, widgets):
        import nbformat
        from jupyter_cache import get_cache
        from jupyter_cache.base import CacheBundleIn

        nb = nbformat.read(ipynb, as_version=4)
        code = [c for c in nb.cells if c.cell_type == "code"]
        if sorted(entry["outputs"]) != list(range(len(code))):
            return  # only some cells ran (pytest -k ...): nothing to store
        for count, cell in enumerate(code, 1):
            cell.execution_count = count
            cell.outputs = [nbformat.from_dict(dict(o)) for o in entry["outputs"][count - 1]]
            for o in cell.outputs:
                if o.output_type == "execute_result":
                    o.execution_count = count
        if widgets and widgets.get("state"):
            nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": widgets}
        nbformat.validate(nb)
        md = ipynb.with_suffix(".md")
        cache = get_cache(str(self.cache_dir))
        seconds = time.time() - entry["started"]
        record = cache.cache_notebook_bundle(
            CacheBundleIn(nb, str(md), data={"execution_seconds": seconds, "executed_by": "nbval"}),
            check_validity=True, overwrite=True)
        # The book reads the .md: if its hash were another, the book would run the chapter a second time.
        try:
            found = cache.match_cache_notebook(read(md)).pk if md.exists() else record.pk
        except KeyError:
            found = None
        if found != record.pk:
            raise RuntimeError(f"{md.name}: the book would not find nbval's run of {ipynb.name} in {self.cache_dir}: "
                               f"their code cells differ (`make notebooks` rewrites an .ipynb older than its source; "
                               f"`scripts/chapter_notebooks.py --force` rewrites them all)")


if __name__ == "__main__":
    sys.exit(main())
