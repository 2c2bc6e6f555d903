"""The reference table of instructions (gemm_course.teaching.instructions) matches the compiled kernels."""

import pytest

from gemm_course.runtime import arch, ladder
from gemm_course.teaching import inspect
from gemm_course.teaching.instructions import INSTRUCTIONS


@pytest.mark.compile
@pytest.mark.parametrize("row", INSTRUCTIONS, ids=lambda r: r.ptx[:40])
def test_row_is_in_the_named_steps_ptx_and_sass(row):
    step = ladder.get(row.step)
    art = arch.compile_step(step, target=step.target)
    assert row.ptx in art.ptx, f"{row.step}'s PTX lacks {row.ptx!r}"
    if row.sass:
        opcodes = inspect.opcodes(inspect.sass(art.cubin))
        assert any(op.startswith(row.sass) for op in opcodes), f"{row.step}'s SASS lacks {row.sass}"


@pytest.mark.fast
def test_every_row_names_a_taught_chapter():
    labels = {r.chapter for r in INSTRUCTIONS}
    assert labels and all(label.startswith("ch") for label in labels)
    assert len({r.ptx for r in INSTRUCTIONS}) == len(INSTRUCTIONS)
