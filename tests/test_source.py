"""`gemm-course source` and `diff`: a step flattened, and its change against its parent."""

import ast

import pytest

from gemm_course import cli
from gemm_course.runtime import ladder
from gemm_course.teaching import source

pytestmark = pytest.mark.fast


@pytest.mark.parametrize("key", ["sm90/3", "sm90/8", "sm90/11", "sm100/5", "sm100/10"])
def test_flattened_listing_is_python_with_every_member(key):
    step = ladder.get(key)
    text = source.flatten(step)
    ast.parse(text)  # a listing a reader can also paste into an editor
    gemm = step.load().Gemm
    for name in ("kernel", "__call__"):
        assert f"    # ---- {name}, from" in text
    for field in step.default.__dataclass_fields__:
        assert f"    {field} = " in text
    assert f"from {key}" in text or key in text
    assert gemm.__name__ == "Gemm"


def test_diff_of_an_order_step_is_its_order_only():
    """Step 9 changes the tile order and adds its knob; nothing else."""
    text = source.diff("sm90/9", context=0)
    changed = [line for line in text.splitlines() if line[:1] in "+-" and line[:3] not in ("+++", "---")]
    assert any("grouped_tile" in line for line in changed) and any("group = 8" in line for line in changed)
    assert all("group" in line or "raster" in line.lower() or "index" in line or not line[1:].strip()
               for line in changed), changed


def test_diff_sizes_follow_the_chapters():
    """A layout-only step changes a handful of lines; the pipeline steps change many."""
    added3, removed3 = source.changed_lines("sm100/3")
    assert added3 + removed3 <= 10
    assert sum(source.changed_lines("sm100/5")) > 100
    assert source.parent("sm100/2") is None and source.parent("sm100/5").key == "sm100/4"


def test_cli_source_and_diff(capsys):
    assert cli.main(["source", "sm100/7"]) == 0
    assert "def mma_tile" in capsys.readouterr().out
    assert cli.main(["diff", "sm100/7"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# sm100/7 against sm100/6: +") and "+    acc_stages = 2" in out


def test_phase_source_cuts_one_numbered_phase():
    text = source.phase_source("sm90/2", 3)
    assert text.startswith("# 3.") and "mbarrier_wait" in text and "# 4." not in text
    assert text == "\n".join(line.rstrip() for line in text.splitlines()) + "\n"  # dedented, one final newline
    with pytest.raises(ValueError):
        source.phase_source("sm90/2", 42)


def test_a_per_shape_choice_is_part_of_the_listing_and_the_diff():
    assert "# ---- config_for, from sm90/11" in source.flatten("sm90/11")
    assert "config_for" not in source.flatten("sm90/10")
    added = [line for line in source.diff("sm90/11", context=0).splitlines() if line.startswith("+")]
    assert "+def config_for(problem, config: Config = Config()) -> Config:" in added


STEP2_SINGLE_CTA = ("mainloop", "epilogue", "allocate_accumulator", "free_accumulator")  # sm100/2's own kernel's helpers


def test_a_listing_holds_only_what_the_launch_reaches():
    """From step 5 on the CTA pair replaces step 2's single-CTA kernel: its helpers are inherited
    but never called, so ``source sm100/6`` leaves them out; ``source sm100/2`` still shows them."""
    six, two = source.flatten("sm100/6"), source.flatten("sm100/2")
    for name in STEP2_SINGLE_CTA:
        assert f"# ---- {name}, from sm100/2" in two
        assert f"# ---- {name}, from" not in six and f"def {name}(" not in six
        assert name not in source.reachable("sm100/6")
    assert "# ---- make_epilogue_copy, from sm100/2" in six  # epilogue_tma still calls this one
    assert {"mainloop", "epilogue"}.isdisjoint(source.reachable("sm90/6"))  # the Hopper ladder alike
    assert "workspace_shapes" in source.reachable("sm100/11")  # a static method: the host calls it


def test_cli_source_of_step_6_leaves_out_step_2s_kernel(capsys):
    assert cli.main(["source", "sm100/6"]) == 0
    out = capsys.readouterr().out
    assert "def mma_k_tile" in out and not any(f"def {name}(" in out for name in STEP2_SINGLE_CTA)
