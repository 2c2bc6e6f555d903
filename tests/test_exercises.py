"""The chapters' exercise checks accept the right answer, reject wrong ones with a hint, and read
their truth from the kernels (CuTe layouts, compiled PTX/SASS, the bank model); and the chapter-0
demos they rely on (gemm_course.cute_basics) say what CuTe says."""

import pytest

from gemm_course import cute_basics, exercises, sim


def _wrong(check, *args, match=None):
    with pytest.raises(AssertionError, match=match):
        check(*args)


# ---- chapter 0 ----------------------------------------------------------------------------------


def test_layout_table_is_cutes_evaluation():
    t = cute_basics.layout_table(((2, 2), (2, 4)), ((1, 4), (2, 8)))
    assert t["text"] == "((2,2),(2,4)):((1,4),(2,8))" and t["size"] == 32 and t["cosize"] == 32
    for i in range(4):
        for j in range(8):
            assert t["offsets"][i][j] == (i % 2) + 4 * (i // 2) + 2 * (j % 2) + 8 * (j // 2)


def test_tiling_views_and_static_values():
    v = cute_basics.tiling_views(8, 12, (4, 4), (1, 2))
    assert v["local_tile_coords"][0][0] == (4, 8)
    assert v["local_tile_none_shape"] == (4, 4, 3) and v["flat_divide_shape"] == (4, 4, 2, 3)
    f = cute_basics.static_vs_dynamic(8)
    assert f["is_static((tile, 4))"] and not f["is_static((tile, n))"]


def test_compile_tiny_for_both_targets():
    for target in ("sm_90a", "sm_100a"):
        ptx = cute_basics.compile_tiny(target)
        assert f".target {target}" in ptx and "fma.rn.f32" in ptx


def test_atoms_describe_the_course_wgmma():
    a = cute_basics.atoms()
    assert "(64,256,16)" in a["wgmma_64x256x16"] and "bf16" in a["copy_128b"]


def test_column_major_and_offset_checks():
    assert "right" in exercises.check_column_major_stride((1, 4))
    _wrong(exercises.check_column_major_stride, (8, 1), match="column-major")
    _wrong(exercises.check_column_major_stride, (1,), match="two ints")
    assert "23" in exercises.check_offset(((2, 2), (2, 4)), ((1, 4), (2, 8)), (3, 5), 23)
    _wrong(exercises.check_offset, ((2, 2), (2, 4)), ((1, 4), (2, 8)), (3, 5), 29)


def test_attempt_handles_unanswered_right_and_wrong(capsys):
    assert exercises.attempt(exercises.check_column_major_stride, ...) is None
    assert exercises.attempt(exercises.check_column_major_stride, (1, 4)) is True
    assert exercises.attempt(exercises.check_column_major_stride, (8, 1)) is False
    out = capsys.readouterr().out
    assert "replace each ..." in out and "Hint" in out


# ---- chapter 1 ----------------------------------------------------------------------------------


@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_naive_loop_has_two_loads_per_fma(target):
    loop = exercises.naive_hot_loop(target)
    assert loop["opcodes"]  # found in the SASS
    assert "right" in exercises.check_naive_loads_per_fma(2, target)
    _wrong(exercises.check_naive_loads_per_fma, 1, target)


def test_gemm_intensity_check():
    m, n, k = 8192, 8192, 1024
    assert "right" in exercises.check_gemm_intensity(m, n, k, 2 * m * n * k / (2 * (m * k + n * k + m * n)))
    _wrong(exercises.check_gemm_intensity, m, n, k, 0.5)


# ---- chapter 2 ----------------------------------------------------------------------------------


@pytest.mark.parametrize("tile_k", [32, 64])
def test_mma_per_k_tile_is_read_from_the_ptx(tile_k):
    assert "right" in exercises.check_mma_per_k_tile(tile_k, tile_k // 16)
    _wrong(exercises.check_mma_per_k_tile, tile_k, tile_k // 8)


def test_wgmma_accumulator_ownership_is_the_fragment_pattern():
    owners = cute_basics.wgmma_accumulator_owners("sm90/2")
    thread = owners["thread"]
    assert len(thread) == 64 and len(thread[0]) == 256
    counts = {}
    for r in range(64):
        for c in range(256):
            t = thread[r][c]
            counts[t] = counts.get(t, 0) + 1
            assert t == 32 * (r // 16) + 4 * (r % 8) + (c % 8) // 2
    assert sorted(counts) == list(range(128)) and set(counts.values()) == {128}


def test_accumulator_owner_check():
    assert "thread 38" in exercises.check_accumulator_owner(25, 13, 38)
    _wrong(exercises.check_accumulator_owner, 25, 13, 5, match="Hint")


def test_stage_bytes_from_the_kernels_layouts():
    for step in ("sm90/2", "sm100/2"):
        assert cute_basics.stage_bytes(step) == 2 * (64 + 256) * 64


# ---- chapter 3 ----------------------------------------------------------------------------------


def test_swizzled_chunk_check():
    for row in range(16):
        for chunk in range(8):
            assert "right" in exercises.check_swizzled_chunk(row, chunk, (row % 8) ^ chunk)
    _wrong(exercises.check_swizzled_chunk, 13, 3, 3, match="XOR")


def test_wavefronts_check_agrees_with_the_bank_model():
    for layout in ("row-major", "sm90/2", "sm90/3"):
        for pattern in sim.PATTERNS:
            n = sim.conflicts(sim.offsets(layout), pattern).wavefronts
            assert "right" in exercises.check_wavefronts(layout, pattern, n)
            _wrong(exercises.check_wavefronts, layout, pattern, n + 1)
