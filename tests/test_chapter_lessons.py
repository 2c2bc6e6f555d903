"""The chapters read as lessons, not lab notebooks: chapter 11 is a lesson's length and leads with
Blackwell, its tuning history lives in an appendix page the chapter links to, and no chapter cites
tuning runs by number (the appendix does)."""

from __future__ import annotations

import functools
import re
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.fast

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = sorted(ROOT.glob("notebooks/[0-9][0-9]_*.md"))
CHAPTER_11 = ROOT / "notebooks" / "11_beyond_the_seed.md"
APPENDIX = "book/tuning_history"
MAX_PROSE_WORDS = 3000  # a lesson's length; chapters 11 and 12 come closest

# A tuning run cited by number: "run 43", "run43", "Run 32b", "tune_run45", "clocks_run2", "runs 36-45",
# "runs 33 and 33b". Not "runs 64 K tiles" (a count, no range).
RUN_NUMBER = re.compile(r"_run\d+|\brun ?\d+[a-z]?\b|\bruns \d+[a-z]?(?: ?(?:-|\u2013|to|and|,) ?\d+[a-z]?)+", re.I)
FENCE = re.compile(r"^(`{3,}|~{3,})(?!\{)[^\n]*\n.*?^\1[ \t]*$", re.S | re.M)  # a code block, not a {directive}
MARKUP = re.compile(r"^[ \t]*(?:`{3,}|~{3,}|:{3,}|:[\w-]+:|\([\w-]+\)=).*$", re.M)  # fences, directive options, labels
LABEL = re.compile(r"^\(([\w-]+)\)=\s*$", re.M)
REF = re.compile(r"\{ref\}`(?:[^`<]*<([\w-]+)>|([\w-]+))`")


@functools.lru_cache(maxsize=None)
def _cells(md: Path) -> list:
    """The notebook's cells as the book reads them (myst-nb's reader, the book's MyST settings)."""
    sys.path.insert(0, str(ROOT / "scripts"))
    import chapter_notebooks

    return chapter_notebooks.read(md).cells  # read once per test session: myst-nb's reader is slow


def prose_words(md: Path) -> int:
    """Words of the markdown cells: code blocks inside them, directive fences and options, and labels
    left out (code cells are not prose)."""
    text = "\n".join(c.source for c in _cells(md) if c.cell_type == "markdown")
    return len(MARKUP.sub("", FENCE.sub("", text)).split())


def _headings(md: Path) -> list:
    return [line for c in _cells(md) if c.cell_type == "markdown" for line in c.source.splitlines()
            if re.match(r"#{1,6} ", line)]


def test_the_prose_counter_counts_prose_only(tmp_path):
    md = tmp_path / "x.md"
    md.write_text("---\nkernelspec:\n  name: python3\n  display_name: Python 3\n---\n\n(a-label)=\n# Title words\n\n"
                  "One two three.\n\n```python\nnot = prose + at_all\n```\n\n```{note}\n:class: tip\nfour five\n```\n\n"
                  "```{code-cell} ipython3\nalso = not_prose\n```\n")
    assert prose_words(md) == 3 + 3 + 2  # "# Title words", "One two three.", the note's "four five"


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem)
def test_every_chapter_is_a_lesson_length(chapter):
    words = prose_words(chapter)
    assert words <= MAX_PROSE_WORDS, (
        f"{chapter.name} has {words} words of prose, more than {MAX_PROSE_WORDS}: move history and detail to "
        f"{APPENDIX}.md or NOTES.md")


def test_the_run_number_pattern():
    for cited in ("run 43", "run43", "Run 32b", "tune_run45", "`tune_run3`", "clocks_run2_wave", "runs 36-45",
                  "runs 33 and 33b", "Runs 18, 19"):
        assert RUN_NUMBER.search(cited), cited
    for plain in ("each CTA runs 64 K tiles", "a run of three", "run-to-run noise", "the runs that decided it",
                  "runs on a B200", "truncation 12"):
        assert not RUN_NUMBER.search(plain), plain


@pytest.mark.parametrize("md", CHAPTERS, ids=lambda p: p.name)
def test_no_chapter_cites_a_tuning_run_by_number(md):
    hits = [f"line {i}: {line.strip()[:100]}" for i, line in enumerate(md.read_text().splitlines(), 1)
            if RUN_NUMBER.search(line)]
    assert not hits, f"{md.name} cites tuning runs by number (they belong in {APPENDIX}.md):\n" + "\n".join(hits)


def test_chapter_11_leads_with_blackwell():
    cells = _cells(CHAPTER_11)
    first = next(c.source for c in cells if c.cell_type == "markdown")
    banner = first.split("```{admonition}", 1)
    assert len(banner) == 2, "chapter 11 opens with a banner (an admonition) under its title"
    assert banner[1].index("sm100/11") < banner[1].index("sm90/11"), "the banner names Blackwell's step first"
    assert "not yet run on a B200" in " ".join(banner[1].split()), "the banner says sm100/11 has not run on a B200"
    sections = [h for h in _headings(CHAPTER_11) if h.startswith("## ")]
    assert sections and "Blackwell" in sections[0] and "sm100/11" in sections[0], (
        f"chapter 11's first section is {sections[:1]}, not Blackwell's")
    assert "Hopper" in sections[1] and "sm90/11" in sections[1]


def test_chapter_11_shows_its_effects_before_its_first_section():
    """The first screen: the banner, then the table of effects computed from the records."""
    cells = _cells(CHAPTER_11)
    first_section = next(i for i, c in enumerate(cells) if c.cell_type == "markdown" and "\n## " in "\n" + c.source)
    before = "\n".join(c.source for c in cells[:first_section] if c.cell_type == "code")
    assert "tuning_history.effects_table" in before and "model_speedup" in before


def _toc_parts() -> dict:
    import yaml

    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    return {part["caption"]: [c["file"] for c in part["chapters"]] for part in toc["parts"]}


def test_the_tuning_history_is_an_appendix_the_chapter_links_to():
    assert APPENDIX in _toc_parts()["Reference"], f"{APPENDIX} is not listed under Reference in _toc.yml"
    page = (ROOT / f"{APPENDIX}.md").read_text()
    assert "(tuning-history)=" in page and "file_format: mystnb" in page
    refs = {a or b for a, b in REF.findall(CHAPTER_11.read_text())}
    assert "tuning-history" in refs, "chapter 11 does not link to the tuning history"
    # The appendix reads the records (the package's functions), it does not type them.
    assert "tuning_history.index_table()" in page and "viz.ab_table(" in page


@pytest.mark.parametrize("md", [CHAPTER_11, ROOT / f"{APPENDIX}.md"], ids=lambda p: p.name)
def test_every_reference_has_a_target(md):
    """A {ref} to a label no page defines would fail the book's -W build."""
    labels = {m for page in [*ROOT.glob("book/*.md"), *ROOT.glob("notebooks/*.md")] for m in LABEL.findall(page.read_text())}
    missing = sorted({a or b for a, b in REF.findall(md.read_text())} - labels)
    assert not missing, f"{md.name} refers to labels no page defines: {missing}"


def test_labels_other_pages_use_are_still_in_chapter_11():
    defined = set(LABEL.findall(CHAPTER_11.read_text()))
    used = {a or b for page in [*ROOT.glob("book/*.md"), *ROOT.glob("notebooks/*.md")] if page != CHAPTER_11
            for a, b in REF.findall(page.read_text())}
    missing = sorted(label for label in used if label.startswith("ch11") and label not in defined)
    assert not missing, f"other pages refer to chapter 11's labels it no longer defines: {missing}"
