"""Issue 33 for chapters 1-4 and 11: the descriptor decoders the chapters read the PTX with, the
chapters' hunks, the Hopper charts without the seed's B200 panel, chapter 11's constants beside
their records.

Chapters are read as text from their MyST Markdown sources (notebooks/NN_*.md)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gemm_course.rules import schedule
from gemm_course.teaching import chapter, source

ROOT = Path(__file__).resolve().parents[1]


def chapter_text(number: int) -> str:
    (path,) = ROOT.glob(f"notebooks/{number:02d}_*.md")
    return path.read_text()


@pytest.mark.fast
def test_instruction_descriptor_decodes_its_ptx_isa_fields():
    # M = 64, N = 256, BF16 x BF16 -> F32, both K-major: bits 4, 7, 10, N >> 3 at 17, M >> 4 at 24
    value = (1 << 4) | (1 << 7) | (1 << 10) | ((256 >> 3) << 17) | ((64 >> 4) << 24)
    fields = source.instruction_descriptor_fields(value)
    assert (fields["M"], fields["N"], fields["A"], fields["B"], fields["D"]) == (64, 256, "BF16", "BF16", "F32")
    assert fields["A major"] == fields["B major"] == "K" and not fields["negate A"]
    ptx = f"\tselp.b32 \t%r72, {value | 1 << 13}, {value}, %p1;\n\tselp.b32 \t%r71, 16384, 0, %p2;\n"
    assert source.instruction_descriptor_constants(ptx) == [(ptx.splitlines()[0].strip(), value)]


@pytest.mark.fast
def test_smem_descriptor_decodes_offsets_in_bytes_and_the_swizzle():
    value = (2 << 61) | (1 << 46) | ((1024 >> 4) << 32) | ((16 >> 4) << 16) | (96 >> 4)
    assert source.smem_descriptor_fields(value) == {"start": 96, "LBO": 16, "SBO": 1024, "version": 1, "swizzle": "128B"}
    ptx = f"\tor.b64 \t%rd1, %rd17, {value};\n\tadd.s64 \t%rd5, %rd18, {value + 2};\n\tor.b64 \t%rd2, %rd3, 7;\n"
    assert [v for _, v in source.smem_descriptor_constants(ptx)] == [value, value + 2]


@pytest.mark.fast
@pytest.mark.parametrize("number", (2, 3, 4))
def test_hunks_come_before_the_full_listing(number):
    text = chapter_text(number)
    section = text[text.index("\n## "):text.index("-hopper)=")]
    hunk = section.find("chapter.show_hunk(")
    assert hunk != -1
    listing = [i for i in (section.find("chapter.show_diff("), section.find("chapter.show_source(")) if i != -1]
    assert all(hunk < i for i in listing), "the full listing comes before the hunks"


@pytest.mark.fast
def test_chapter_1s_blackwell_exercise_counts_in_the_sm100a_sass():
    text = chapter_text(1)
    blackwell = text[text.index("### Try it yourself (Blackwell)"):text.index("(ch1-hopper)=")]
    assert 'exercises.check_naive_loads_per_fma, your_loads_per_fma, "sm_100a"' in blackwell


@pytest.mark.fast
@pytest.mark.parametrize("number", (1, 2, 3, 4))
def test_hopper_charts_draw_no_seed_panel_and_label_bars_by_their_own_cublas(number):
    text = chapter_text(number)
    hopper = text[text.index(f"(ch{number}-hopper)="):]
    calls = re.findall(r"viz\.ladder_bars\((.*?)\)\n", hopper)
    for call in calls:
        assert "seed=False" in call or 'seed=GPU_ARCH == "sm100"' in call, call
        assert "own_ratios=True" in call, call
    assert calls or "chapter.step_bars(" in hopper


@pytest.mark.fast
def test_chapter_11s_constants_are_shown_beside_the_records_that_set_them():
    text = chapter_text(11)
    shown = set()
    for call in re.findall(r"chapter\.constants_table\(\((.*?)\)\)", text):
        shown |= set(re.findall(r'"(\w+)"', call))
    assert shown == {name for name, _, _ in chapter.CONSTANT_EVIDENCE}
    assert shown == {"FIXUP_K_TILES", "IDLE_SHARE", "LOCKSTEP_K_TILES", "MANY_WAVES", "FILL_TIE"}


@pytest.mark.fast
def test_each_constants_records_point_the_way_it_was_set():
    """The median of each comparison on the shapes the constant decides: the split loses where the
    idle share is under a hand-over's price; whole wins where few clusters idle and loses where many
    do; lockstep wins from its threshold on and loses below; narrower tiles lose from MANY_WAVES
    waves on; the narrowest loses where its fill ties the rule's wider pick."""
    medians = {(name, label): s["median"] for name, _, label, _, s in chapter.constant_evidence()}
    signs = [m > 0 for m in medians.values()]
    assert signs == [False, True, False, True, False, False, True, False], medians
    rows = chapter.constant_evidence()
    assert all(s is not None and s["n"] >= 3 and s["min"] <= s["median"] <= s["max"] for *_, s in rows)
    table = chapter.constants_table(("FIXUP_K_TILES",))
    assert f"`FIXUP_K_TILES` = {schedule.FIXUP_K_TILES}" in table and "min-max" in table and "A/B record" in table
    assert "tune_run" not in table  # a chapter does not cite runs by number
    assert "tune_run5" in chapter.constants_table(("FIXUP_K_TILES",), files=True)


@pytest.mark.fast
def test_spread_is_the_median_and_the_percentiles():
    s = chapter.spread([0.05, -0.01, 0.02, 0.0, 0.03])
    assert (s["n"], s["median"], s["min"], s["max"]) == (5, 0.02, -0.01, 0.05)
    assert s["p10"] == pytest.approx(-0.006) and s["p90"] == pytest.approx(0.042)


@pytest.mark.fast
@pytest.mark.parametrize("number", (2, 3, 4))
def test_the_first_screen_gives_the_headline_number(number):
    text = chapter_text(number)
    assert f"chapter.headline(records, {number})" in text[:text.index("\n## ")]
