"""results/logs keeps only what a page, a chapter, NOTES.md or the package cites."""

import pathlib
import re

import pytest

pytestmark = pytest.mark.fast

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _corpus() -> str:
    paths = [ROOT / "NOTES.md", ROOT / "README.md", *ROOT.glob("book/*.md"), *ROOT.glob("notebooks/*.md"),
             *ROOT.glob("src/gemm_course/**/*.py")]
    return "\n".join(p.read_text() for p in paths)


def _cited(name: str, corpus: str) -> bool:
    if name in corpus:
        return True
    patterns = re.findall(r"results/logs/([\w*.\-]+)", corpus) + re.findall(r'"logs", "([\w*.\-]+)"', corpus)
    return any(pathlib.PurePath(name).match(p) for p in patterns if "*" in p)


def test_every_log_is_cited():
    corpus = _corpus()
    logs = sorted(p.name for p in (ROOT / "results" / "logs").iterdir())
    assert logs, "results/logs is empty: the pages cite logs that must exist"
    uncited = [name for name in logs if not _cited(name, corpus)]
    assert not uncited, f"results/logs holds files nothing cites (delete them or cite them): {uncited}"


def test_the_check_can_fail():
    assert not _cited("20990101T0000_doctor.log", _corpus())
