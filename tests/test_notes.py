"""NOTES.md's measured block is generated from the committed records, never typed."""


from gemm_course import notes


def test_notes_block_matches_records():
    with open(notes.NOTES) as f:
        text = f.read()
    assert notes.BEGIN in text and notes.END in text
    assert notes.render(text, notes.measured_block()) == text, "run: python -m gemm_course.notes"


def test_block_lists_every_hopper_step():
    block = notes.measured_block()
    for n in range(1, 11):
        assert f"| sm90/{n} " in block
