"""Issue 33 for chapters 1-4 and 11: the descriptor decoders the chapters read the PTX with, the
chapters' hunks, the Hopper charts without the seed's B200 panel, chapter 11's constants beside
their records.

Chapters are read as text from their MyST Markdown sources (notebooks/NN_*.md)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gemm_course import source

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
