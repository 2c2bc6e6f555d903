"""Blackwell first: every chapter of the ladder (1-10) leads with its Blackwell step and then
gives its Hopper twin. Read from the chapters' MyST Markdown sources (notebooks/NN_*.md), as text.

What the tests mean by

* a chapter's *headings*: its Markdown headings outside code cells (a line starting with ``#`` in
  a ```` ```{code-cell} ```` block is Python, not a heading); the title is its one ``#`` heading;
* its *sections*: its ``##`` headings, in order; its *first section* is the first ``##`` heading
  after the title (the learning objectives, the "Runs on" note and the setup cells come before
  it: the banner);
* *Blackwell's*: a heading that names Blackwell, ``sm100`` or ``sm_100a``; *Hopper's*: one that
  names Hopper, ``sm90`` or ``sm_90a``;
* its *first objective*: the first bullet after ``**Learning objectives.**``;
* an *exercise*: a code cell that calls ``exercises.attempt(``.

The rules: the first section is Blackwell's and names no Hopper; a later section is Hopper's (the
twin); the first objective names the Blackwell step (Blackwell, ``sm100``, ``sm_100a``,
``tcgen05``, tensor memory, B200 or cluster launch control); an exercise sits between the first
Blackwell section and the first Hopper one. Where the two steps differ, the title and the
takeaways name Blackwell's idea (``BLACKWELL_IDEA``).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.fast

ROOT = Path(__file__).resolve().parents[1]
LADDER_CHAPTERS = range(1, 11)  # chapter 0 is CuTe itself; chapter 11 goes beyond the seed

BLACKWELL = re.compile(r"Blackwell|sm100|sm_100a", re.I)
HOPPER = re.compile(r"Hopper|sm90|sm_90a", re.I)
BLACKWELL_TERMS = re.compile(r"Blackwell|sm100|sm_100a|tcgen05|tensor memory|TMEM|B200|cluster launch control", re.I)

# Where the Blackwell step's idea differs from Hopper's: (what the title must name, what the
# takeaways must name), each a regular expression.
BLACKWELL_IDEA = {
    2: (r"tcgen05|tensor memory", r"tcgen05.*tensor memory|tensor memory.*tcgen05"),
    3: (r"tcgen05", r"descriptor"),
    4: (r"tensor memory", r"tcgen05\.ld"),
    5: (r"CTA pair|cta_group::2", r"cta_group::2"),
    6: (r"MMA warp", r"MMA warp"),
    7: (r"tensor memory", r"TMEM double buffer"),
    8: (r"cluster launch control", r"cluster launch control"),
}


def chapter_source(number: int) -> Path:
    (path,) = ROOT.glob(f"notebooks/{number:02d}_*.md")
    return path


def prose_lines(text: str) -> list:
    """The lines outside code cells (``` fences), as (index, line)."""
    out, fence = [], None
    for i, line in enumerate(text.splitlines()):
        stripped = line.strip()
        if fence is None and stripped.startswith("```"):
            fence = stripped[: len(stripped) - len(stripped.lstrip("`"))]
            continue
        if fence is not None:
            if stripped == fence:
                fence = None
            continue
        out.append((i, line))
    return out


def headings(text: str, level: int) -> list:
    """(line index, heading text) of every Markdown heading of exactly ``level`` outside code cells."""
    mark = "#" * level + " "
    return [(i, line[len(mark):].strip()) for i, line in prose_lines(text) if line.startswith(mark)]


def sections(text: str) -> list:
    return headings(text, 2)


def title(text: str) -> str:
    (only,) = headings(text, 1)
    return only[1]


def first_objective(text: str) -> str:
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("**Learning objectives.**"))
    first = next(i for i in range(start, len(lines)) if lines[i].startswith("* "))
    bullet = [lines[first][2:]]
    for line in lines[first + 1:]:
        if not line.startswith("  "):
            break
        bullet.append(line.strip())
    return " ".join(bullet)


def takeaways(text: str) -> str:
    heads = sections(text)
    start = next(i for i, h in heads if h == "Takeaways")
    end = next((i for i, _ in heads if i > start), None)
    return " ".join(text.splitlines()[start:end])


def exercise_lines(text: str) -> list:
    """Line indices of code cells that call ``exercises.attempt(``."""
    found, cell = [], None
    for i, line in enumerate(text.splitlines()):
        if line.startswith("```{code-cell}"):
            cell = i
        elif line.startswith("```") and cell is not None:
            cell = None
        elif cell is not None and "exercises.attempt(" in line:
            found.append(cell)
    return sorted(set(found))


def check_order(text: str) -> list:
    """What breaks the Blackwell-first rules in a chapter's source (an empty list: nothing)."""
    problems = []
    heads = sections(text)
    if not heads:
        return ["no ## section at all"]
    first = heads[0][1]
    if not BLACKWELL.search(first) or HOPPER.search(first):
        problems.append(f"the first section is not Blackwell's: {first!r}")
    blackwell = [i for i, h in heads if BLACKWELL.search(h) and not HOPPER.search(h)]
    hopper = [i for i, h in heads if HOPPER.search(h)]
    if not hopper:
        problems.append("no Hopper section (the twin)")
    elif blackwell and hopper[0] < blackwell[0]:
        problems.append("a Hopper section comes before the first Blackwell one")
    if not BLACKWELL_TERMS.search(first_objective(text)):
        problems.append(f"the first learning objective names no Blackwell step: {first_objective(text)[:80]!r}")
    if blackwell and hopper and not any(blackwell[0] < i < hopper[0] for i in exercise_lines(text)):
        problems.append("no exercise in the Blackwell part (between its first section and the first Hopper one)")
    return problems


@pytest.mark.parametrize("number", LADDER_CHAPTERS)
def test_chapter_leads_with_blackwell(number):
    text = chapter_source(number).read_text()
    problems = check_order(text)
    assert not problems, f"{chapter_source(number).name}: " + "; ".join(problems)


@pytest.mark.parametrize("number", sorted(BLACKWELL_IDEA))
def test_title_and_takeaways_name_the_blackwell_idea(number):
    text = chapter_source(number).read_text()
    title_pattern, takeaway_pattern = BLACKWELL_IDEA[number]
    assert re.search(title_pattern, title(text), re.I), f"chapter {number}'s title {title(text)!r} lacks /{title_pattern}/"
    assert re.search(takeaway_pattern, takeaways(text), re.I | re.S), \
        f"chapter {number}'s takeaways do not name /{takeaway_pattern}/"


def test_the_rules_catch_a_hopper_first_chapter():
    """The check fails a chapter in the old order (Hopper's sections first, Blackwell's at the end),
    and ignores a '#' comment inside a code cell."""
    hopper_first = "\n".join([
        "# Chapter 9: an order", "", "**Learning objectives.** After this chapter you can", "",
        "* read step 9 as a one-method change;", "", "```{code-cell} ipython3", "## On Blackwell: a comment", "```", "",
        "## 1. What changed", "", "## 2. On Blackwell: `sm100/9`", "", "```{code-cell} ipython3",
        "exercises.attempt(check, ...)", "```", "", "## Takeaways",
    ])
    problems = check_order(hopper_first)
    assert any("first section is not Blackwell's" in p for p in problems)
    assert any("no Hopper section" in p for p in problems)
    assert any("first learning objective" in p for p in problems)
    blackwell_first = hopper_first.replace("## 1. What changed", "## 1. On Blackwell: what changed").replace(
        "## 2. On Blackwell: `sm100/9`", "## 2. The Hopper twin: `sm90/9`").replace("read step 9", "read `sm100/9`")
    assert check_order(blackwell_first) == [
        "no exercise in the Blackwell part (between its first section and the first Hopper one)"]
