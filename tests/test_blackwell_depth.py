"""The Blackwell half as deep as the Hopper half (issue 33), for chapters 6-11.

* Annotated hunks: a chapter's Blackwell section shows excerpts of its step's code, cut from the
  kernel source (:func:`gemm_course.teaching.source.region`, :func:`~gemm_course.teaching.source.method_source`,
  through ``chapter.show_hunk``), with the PTX they compile to found by pattern
  (:func:`~gemm_course.teaching.source.ptx_lines`), before the full diff; a "Why" subsection computes its
  number in a code cell.
* Figures that agree with tables and with the step they draw.
* Exercise solutions behind a toggle labelled "Solution".

Chapters are read as text from their MyST Markdown sources (notebooks/NN_*.md).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gemm_course import viz
from gemm_course.teaching import chapter, sim, source
from gemm_course.viz.pipelines import format_duration

ROOT = Path(__file__).resolve().parents[1]
MY_CHAPTERS = (6, 7, 8, 9, 10, 11)
HUNK_CHAPTERS = (2, 3, 4, 6, 7, 8, 9, 10, 11)  # chapters whose Blackwell section is annotated hunk by hunk (issue 33), so far


def chapter_text(number: int) -> str:
    (path,) = ROOT.glob(f"notebooks/{number:02d}_*.md")
    return path.read_text()


def blackwell_section(text: str) -> str:
    """From the first ``##`` section (Blackwell's: tests/test_chapter_order.py) to the Hopper one."""
    start = text.index("\n## ")
    hopper = re.search(r"\n## .*(Hopper|sm90)", text[start:])
    return text[start:start + hopper.start()] if hopper else text[start:]


PTX = """\
.visible .entry kernel(
{
\t// begin inline asm
\tmbarrier.try_wait.parity.shared.b64 P1, [%r1], %r2, 10000000;
\tcp.async.bulk.tensor.2d.shared::cluster.global [%r3], [%rd1, {%r4, %r5}], [%r6];
$L__BB0_1:
\tmbarrier.try_wait.parity.shared.b64 P1, [%r7], %r8, 10000000;
\ttcgen05.mma.cta_group::2.kind::f16 [%r9], %rd2, %rd3, %r10, {%r11, %r12, %r13, %r14, %r15, %r16, %r17, %r18}, %p1;
\ttcgen05.mma.cta_group::2.kind::f16 [%r9], %rd4, %rd5, %r10, {%r11, %r12, %r13, %r14, %r15, %r16, %r17, %r18}, %p2;
\ttcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64 [%r19], %rs1;
\ttcgen05.alloc.cta_group::2.sync.aligned.shared::cta.b32 [%r20], %r21;
}
"""


@pytest.mark.fast
def test_ptx_lines_finds_each_pattern_in_program_order_and_shortens_register_lists():
    lines = source.ptx_lines(PTX, [r"tcgen05\.commit", r"tcgen05\.mma"])
    assert lines[0].startswith("tcgen05.mma") and lines[1].startswith("tcgen05.commit")
    assert "{%r11, ..., %r18}" in lines[0]
    assert len(source.ptx_lines(PTX, [(r"tcgen05\.mma", 2)])) == 2


@pytest.mark.fast
def test_ptx_lines_windows_and_last_matches():
    # the MMA warp's wait: the last try_wait before the first MMA, past the loads
    (wait,) = source.ptx_lines(PTX, [(r"mbarrier\.try_wait", -1)], after=r"cp\.async", before=r"tcgen05\.mma")
    assert "[%r7]" in wait
    assert source.ptx_lines(PTX, r"mbarrier\.try_wait")[0].endswith("[%r1], %r2, 10000000;")
    assert source.ptx_lines(PTX, r"tcgen05\.alloc", after=r"tcgen05\.alloc")  # the window starts at its anchor
    (second,) = source.ptx_lines(PTX, r"tcgen05\.mma", after=(r"tcgen05\.mma", 2))  # the n-th match as the anchor
    assert "%rd4" in second
    with pytest.raises(ValueError, match="3 times"):
        source.ptx_lines(PTX, r"tcgen05\.mma", after=(r"tcgen05\.mma", 3))
    with pytest.raises(ValueError, match="no PTX instruction matches"):
        source.ptx_lines(PTX, [r"tcgen05\.ld"])
    with pytest.raises(ValueError, match="no PTX instruction matches"):  # none after the alloc
        source.ptx_lines(PTX, [r"tcgen05\.mma"], after=r"tcgen05\.alloc")


@pytest.mark.fast
def test_region_cuts_one_banner_block_of_the_resolved_method():
    text = source.region("sm100/6", "2b")
    assert text.startswith("# 2b. MMAs") and "consumer_wait" in text and "producer_commit" in text
    assert "2c." not in text and "take_tensor_memory" not in text
    assert not text.startswith(" ")  # dedented
    assert source.region("sm100/6", "3").splitlines()[-1].strip() == "tmem.free(tCtAcc.iterator)"
    with pytest.raises(ValueError, match="no banner"):
        source.region("sm100/6", "9z")


@pytest.mark.fast
def test_method_source_names_the_step_that_defines_it():
    where, text = source.method_source("sm100/6", "load_k_tile")
    assert where == "sm100/5" and "producer_acquire" in text
    with pytest.raises(ValueError):
        source.method_source("sm100/6", "no_such_method")


@pytest.mark.fast
def test_hunk_markdown_is_the_excerpt_then_its_ptx():
    text = chapter.hunk_markdown("sm100/6", "2b", ptx=PTX, patterns=[r"tcgen05\.mma"])
    code, _, ptx = text.partition("compiles to")
    assert "`sm100/6`" in code and "phase 2b" in code and source.region("sm100/6", "2b").strip() in code
    assert ptx.count("tcgen05.mma") == 1
    assert "compiles to" not in chapter.hunk_markdown("sm100/6", method="mma_k_tile")


@pytest.mark.fast
def test_blackwell_pipeline_schematic_names_tcgen05_and_one_mma_warp():
    models = {"sm100/6": viz.pipeline_model(6, 8)}
    fig = viz.pipeline_timeline(models, arch="sm100")
    texts = " ".join(t.get_text() for ax in fig.axes for t in ax.get_yticklabels() + ax.texts + [ax.title])
    assert "tcgen05.mma" in texts and "MMA warp" in texts and "tcgen05.mma" in fig.caption
    assert "wgmma" not in texts + fig.caption
    hopper = viz.pipeline_timeline(models)
    assert "wgmma" in hopper.caption and "tcgen05" not in hopper.caption


@pytest.mark.fast
@pytest.mark.parametrize("number", HUNK_CHAPTERS)
def test_blackwell_section_shows_hunks_with_ptx_before_the_full_diff(number):
    section = blackwell_section(chapter_text(number))
    hunk = section.find("chapter.show_hunk(")
    assert hunk != -1, f"chapter {number}'s Blackwell section shows no excerpt (chapter.show_hunk)"
    assert re.search(r"chapter\.show_hunk\([^)]*ptx=", section, re.S), "no excerpt with its PTX"
    diff = section.find("chapter.show_diff(")
    assert diff == -1 or hunk < diff, "the full diff comes before the excerpts"


@pytest.mark.fast
@pytest.mark.parametrize("number", HUNK_CHAPTERS)
def test_blackwell_section_has_a_why_computed_in_code(number):
    section = blackwell_section(chapter_text(number))
    why = re.search(r"^### Why.*$", section, re.M)
    assert why, f"chapter {number}'s Blackwell section has no 'Why' subsection"
    body = section[why.end():]
    body = body[:body.find("\n### ")] if "\n### " in body else body
    assert "```{code-cell}" in body, "the Why's number is typed, not computed"


@pytest.mark.fast
@pytest.mark.parametrize("number", MY_CHAPTERS)
def test_solutions_are_behind_a_toggle_labelled_solution(number):
    text = chapter_text(number)
    cells = re.findall(r"```\{code-cell\} ipython3\n(.*?)\n```", text, re.S)
    solutions = [c for c in cells if re.search(r"^# Solution", c, re.M)]
    assert solutions, f"chapter {number} has no solution cell"
    for cell in solutions:
        assert 'code_prompt_show: "Solution"' in cell and "hide-cell" in cell, cell[:200]


@pytest.mark.fast
def test_format_duration_rounds_as_the_chapters_print():
    assert format_duration(39.3142) == "39.3" and format_duration(412.7) == "413" and format_duration(2.0) == "2.0"


@pytest.mark.fast
def test_tmem_timeline_titles_print_the_span_as_the_chapter_does():
    """Chapter 7's titles: the span rounded by format_duration, with its unit, never ``39.3142``."""
    plans = {f"{n}": sim.tmem_plan([17.6571] * 2, [2.0] * 2, n, 256) for n in (1, 2)}
    fig = viz.tmem_timeline(plans, unit="us")
    for ax, plan in zip(fig.axes, plans.values()):
        title = ax.get_title(loc="left")
        assert title.endswith(f"take {format_duration(plan.span)} us"), title
        assert not re.search(r"\d\.\d{2,}", title), title
    assert "us" in fig.axes[-1].get_xlabel()


@pytest.mark.fast
def test_excerpt_cuts_a_compound_statement_or_a_run_of_siblings():
    branch = source.excerpt("sm100/11", "hand_over", r"^\s*else:")
    assert branch.startswith("else:") and 'sem="release"' in branch and "return last" not in branch
    flags = source.excerpt("sm100/11", "hand_over", r"if tidx == 0:  # every other")
    assert 'sem="acquire"' in flags and "make_tmem_store" not in flags  # the if's body only, not its siblings
    loop = source.excerpt("sm100/11", "kernel", r"u, valid = own_unit")
    assert loop.splitlines()[-1] == "mainloop_pipeline.producer_tail(load_state)"  # siblings to the block's end
    with pytest.raises(ValueError, match="not 2"):
        source.excerpt("sm100/11", "hand_over", r"^\s*else:", occurrence=2)


@pytest.mark.fast
def test_chapter_11_states_its_objectives_before_the_banner():
    text = chapter_text(11)
    assert text.index("**Learning objectives.**") < text.index("```{admonition}") < text.index("```{code-cell}")


@pytest.mark.fast
def test_a_bars_ratio_is_its_tables_rounding_of_the_same_record(tmp_path):
    """Chapter 8's bar said 102% where its table said 1.00: a bar's label and the table's cell come
    from the same record (its own run's cuBLAS) with the same rounding."""
    import sys

    sys.path.insert(0, str(ROOT / "tests"))
    from synthetic import bench_record, write_runs

    from gemm_course.measure import records as rec

    recs = write_runs(tmp_path, {"a": [bench_record("sm90/7", 610.0, 640.0, "2030-01-01T00:00:00")],
                                 "b": [bench_record("sm90/8", 655.0, 642.0, "2030-01-02T00:00:00")]})
    table = rec.step_table(recs, ("sm90/7", "sm90/8"), sizes=(4096,))
    fig = chapter.step_bars(recs, (7, 8))
    labels = [t.get_text() for t in fig.axes[0].texts if "of cuBLAS" in t.get_text()]
    for key, (tflops, cublas) in {"sm90/7": (610.0, 640.0), "sm90/8": (655.0, 642.0)}.items():
        cell = re.search(rf"\| {key} \| [^|]*?, (\d\.\d\d) of cuBLAS", table).group(1)
        assert any(f"{tflops:.0f} TFLOP/s\n{cell} of cuBLAS" == label for label in labels), (key, cell, labels)
        assert cell == f"{tflops / cublas:.2f}"
    assert not any("%" in label for label in labels)


@pytest.mark.fast
def test_no_quoted_seed_panel_in_a_chapters_view(tmp_path):
    """Chapters 4-11 draw steps 3-11: the seed's quoted B200 panel (steps 1-3) is not theirs to show,
    on either architecture's chart."""
    import sys

    sys.path.insert(0, str(ROOT / "tests"))
    from synthetic import bench_record, write_runs

    recs = write_runs(tmp_path, {"a": [bench_record("sm90/3", 500.0, 640.0, "2030-01-01T00:00:00"),
                                       bench_record("sm100/3", 900.0, 1400.0, "2030-01-01T00:00:00", gpu="B")]})
    views = (viz.ladder_bars(recs, arch="sm90", seed=False), chapter.step_bars(recs, (3, 4)),
             chapter.step_bars(recs, (3, 4), arch="sm100"))
    for fig in views:
        assert len(fig.axes) == 1 and "quoted" not in fig.caption
        assert not any(p.get_hatch() for p in fig.axes[0].patches)
    assert "quoted" in viz.ladder_bars(recs, arch="sm100").caption  # the whole ladder keeps the seed's figures


@pytest.mark.fast
def test_chapter_11s_tail_figures_show_the_numbers_their_captions_name():
    from gemm_course.rules import schedule

    fig = viz.dynamic_tail(19, 8, 64)  # as chapter 11 draws it
    for ax, split in zip(fig.axes, (False, True)):
        drawn = sorted(int(t.get_text()) for t in ax.texts if t.get_gid() == "tile-number")
        assert drawn == sorted(r.tile for r in sim.dynamic_tail(19, 8, 64, split))
    assert "Numbers" in fig.caption
    fig = viz.stream_k_tail(1024, 66, 128)
    whole = schedule.split_tail(1024, 66, 128, True)[0]
    named = " ".join(t.get_text() for t in fig.axes[1].texts if t.get_gid() == "tail-tiles")
    plans = schedule.plan(1024, 66, 128, True)
    shown_rows = [int(t.get_text().split()[1]) for t in fig.axes[1].get_yticklabels()]
    for c in shown_rows:
        for index in {i for i, _, _ in plans[c] if i >= whole}:
            assert str(index) in named, (c, index, named)
    assert "tail tiles (cluster-tile numbers)" in fig.caption


@pytest.mark.fast
def test_chapter_8s_late_start_figure_shows_what_it_claims():
    """Late clusters against a static schedule: each panel draws every tile once, the titles' spans
    are the models', and cluster launch control finishes first."""
    from gemm_course.viz.schedules import late_start_timeline

    fig = late_start_timeline(24, 6, 1.0)
    static_title, clc_title = (ax.get_title(loc="left") for ax in fig.axes[:2])
    clc = sim.clc_schedule(24, 6, policy="lowest", seed=0, launch_gap=1.0)
    static_end = max((c + 1) * 1.0 + len(range(c, 24, 6)) for c in range(6))
    assert f"done at {static_end:.1f}" in static_title and f"done at {clc.span:.1f}" in clc_title
    assert clc.span < static_end
    for ax in fig.axes[:2]:
        assert sorted(int(t.get_text()) for t in ax.texts if t.get_gid() == "tile-number") == list(range(24))
    assert "taken over" in " ".join(t.get_text() for t in fig.legends[0].get_texts())


@pytest.mark.slow
def test_late_start_figure_is_legible_at_page_width():
    from gemm_course.viz import _style
    from gemm_course.viz.schedules import late_start_timeline

    fig = late_start_timeline(24, 6, 1.0)
    r = _style.render(fig, dpi=72)
    assert fig.get_size_inches()[0] <= viz.PAGE_WIDTH + 1e-9
    assert r.min_pt() >= viz.TEXT_PT and not r.cut() and not r.overlaps()


@pytest.mark.fast
def test_headline_reads_the_steps_effect_from_the_records(tmp_path):
    import sys

    sys.path.insert(0, str(ROOT / "tests"))
    from synthetic import bench_record, write_runs

    recs = write_runs(tmp_path, {"a": [bench_record("sm90/5", 300.0, 700.0, "2030-01-01T00:00:00"),
                                       bench_record("sm90/6", 690.0, 690.0, "2030-01-01T00:00:01")]})
    text = chapter.headline_markdown(recs, 6)
    assert "`sm100/6` has no record yet (compiled and checked on the CPU, not yet run)" in text
    assert "`sm90/6` against `sm90/5` on the Synthetic GPU: x2.30 at 4096^3 (690 TFLOP/s, 1.00 of cuBLAS" in text
    assert "8192" not in text  # no record at that size: nothing said about it


@pytest.mark.fast
@pytest.mark.parametrize("number", (6, 7, 8, 9, 10))
def test_the_first_screen_gives_the_headline_number(number):
    text = chapter_text(number)
    assert f"chapter.headline(records, {number})" in text[:text.index("\n## ")]
