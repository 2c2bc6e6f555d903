"""Blackwell steps 2 and 3 on the CPU: they compile for sm_100a, their PTX has the chapter's
instructions, their shared-memory layouts are (un)swizzled as taught, and the epilogue's
tcgen05.ld gives each thread the accumulator elements the chapter draws."""

from __future__ import annotations

import pytest

from gemm_course.kernels.sm100 import layouts
from gemm_course.runtime import arch, ladder
from gemm_course.runtime.problem import GemmProblem
from gemm_course.teaching import inspect

STEPS = ("sm100/2", "sm100/3")


@pytest.fixture(scope="module", params=STEPS)
def compiled(request):
    return arch.compile_step(ladder.get(request.param), target="sm_100a")


@pytest.mark.fast
def test_registered():
    assert [s.key for s in ladder.steps("sm100") if s.number in (2, 3)] == list(STEPS)


@pytest.mark.compile
def test_ptx_has_the_chapter_instructions(compiled):
    ptx = compiled.ptx
    for marker in (
        "tcgen05.mma.cta_group::1",
        "tcgen05.alloc",
        "tcgen05.dealloc",
        "tcgen05.ld.sync.aligned.16x256b",
        "tcgen05.commit",
        "cp.async.bulk.tensor",
        "mbarrier.try_wait",
    ):
        assert marker in ptx, marker
    for marker in ladder.get(compiled.step_key).ptx_markers:
        assert marker in ptx, marker
    cfg = compiled.config
    assert inspect.ptx_count(ptx, "tcgen05.mma") == cfg.tile_k // 16  # one per k16 step of a K tile
    assert inspect.ptx_count(ptx, "tcgen05.ld") == cfg.tile_n // 64  # one x8 load per 64-column sub-tile
    assert inspect.ptx_count(ptx, "tcgen05.ld.sync.aligned.32x32b") == 0


@pytest.mark.compile
def test_tma_copies_per_k_tile():
    """Interleaved: TMA writes 16 bytes (8 bf16) of a row per box; swizzled: one box per operand."""
    step2 = arch.compile_step(ladder.get("sm100/2"), target="sm_100a")
    step3 = arch.compile_step(ladder.get("sm100/3"), target="sm_100a")
    assert inspect.ptx_count(step2.ptx, "cp.async.bulk.tensor") == 2 * step2.config.tile_k // 8
    assert inspect.ptx_count(step3.ptx, "cp.async.bulk.tensor") == 2


@pytest.mark.compile
def test_resources(compiled):
    (res,) = inspect.resources(compiled.cubin)
    assert not res.spills
    cfg = compiled.config
    tiles = 2 * (cfg.tile_m + cfg.tile_n) * cfg.tile_k  # bf16 A and B tiles, one stage
    assert tiles <= compiled.storage_smem <= tiles + 2048
    from gemm_course.kernels.sm100.step02_tcgen05_tma import smem_to_fit_tmem

    assert compiled.dynamic_smem == smem_to_fit_tmem(compiled.storage_smem, cfg.tile_n)  # padded to fit TMEM


@pytest.mark.compile
@pytest.mark.parametrize("key", STEPS)
@pytest.mark.parametrize("tile_n,tile_k", [(64, 64), (128, 64)])
def test_other_tiles_compile(key, tile_n, tile_k):
    step = ladder.get(key)
    art = arch.compile_step(step, step.config(tile_n=tile_n, tile_k=tile_k), target="sm_100a")
    assert inspect.ptx_count(art.ptx, "tcgen05.ld") == tile_n // 64


@pytest.mark.compile
def test_step2_accepts_other_k_tiles():
    step = ladder.get("sm100/2")
    art = arch.compile_step(step, step.config(tile_k=32), target="sm_100a")
    assert inspect.ptx_count(art.ptx, "tcgen05.mma") == 2


@pytest.mark.compile
@pytest.mark.parametrize("key", STEPS)
def test_invalid_configs_refused(key):
    step = ladder.get(key)
    for bad in (dict(tile_m=128), dict(tile_n=96), dict(tile_k=24)):
        ok, why = step.check_config(step.config(**bad))
        assert not ok and why
    if key == "sm100/3":
        assert not step.check_config(step.config(tile_k=32))[0]
    with pytest.raises(ValueError):
        arch.compile_step(step, step.config(tile_m=128), target="sm_100a")


@pytest.mark.fast
@pytest.mark.parametrize("key", STEPS)
def test_shapes(key):
    step = ladder.get(key)
    assert step.can_implement(GemmProblem(4096, 4096, 4096)) == (True, "")
    assert step.can_implement(GemmProblem(64, 256, 8))[0]
    for m, n in ((100, 256), (64, 200)):
        ok, why = step.can_implement(GemmProblem(m, n, 64))
        assert not ok and "step 4" in why
    assert step.can_implement(GemmProblem(64, 128, 64), step.config(tile_n=128))[0]


# ---- shared-memory layouts, from the kernels' own layout objects --------------------------------


@pytest.mark.compile
def test_step2_layouts_are_interleaved():
    for op in layouts.smem_layouts("sm100/2").values():
        assert op.swizzle_bits == 0 and op.swizzle_bytes == 0


@pytest.mark.compile
def test_step3_layouts_are_128b_swizzled():
    found = layouts.smem_layouts("sm100/3")
    assert set(found) == {"A", "B"}
    for op in found.values():
        assert (op.swizzle_bits, op.swizzle_base, op.swizzle_shift) == (3, 4, 3)
        assert op.swizzle_bytes == 128


@pytest.mark.compile
def test_layouts_follow_the_config():
    b = layouts.smem_layouts("sm100/3", ladder.get("sm100/3").config(tile_n=128))["B"]
    assert b.layout.startswith("((128,")


# ---- who owns which accumulator element ---------------------------------------------------------


@pytest.fixture(scope="module")
def ownership():
    return layouts.accumulator_ownership("sm100/2")


def taught(thread, tile_n=256):
    """The chapter's rule: lane t of warp w gets rows t//4 and t//4+8 of band w, columns
    2*(t%4) and 2*(t%4)+1 of each 8-column group, in register order."""
    warp, lane = divmod(thread, 32)
    row = 16 * warp + lane // 4
    col = 2 * (lane % 4)
    return [
        (row + 8 * half, group + col + j)
        for group in range(0, tile_n, 8)
        for half in (0, 1)
        for j in (0, 1)
    ]


@pytest.mark.compile
def test_ownership_matches_the_chapter(ownership):
    assert sorted(ownership) == list(range(128))
    for t, owned in ownership.items():
        assert sorted(owned) == sorted(taught(t)), t
        assert owned[:4] == taught(t)[:4], t  # a register quad: two columns of two rows


@pytest.mark.compile
def test_ownership_covers_the_tile_once(ownership):
    every = [rc for owned in ownership.values() for rc in owned]
    assert len(every) == len(set(every)) == 64 * 256


@pytest.mark.compile
def test_each_warp_reads_only_its_tmem_lanes(ownership):
    """tcgen05.ld lets warp w touch lanes 32w..32w+31 only; M = 64 puts row 16g+i in lane 32g+i."""
    where = layouts.accumulator_tmem_addresses("sm100/2")
    for (row, col), (lane, column) in where.items():
        assert lane == 32 * (row // 16) + row % 16 and column == col
    for t, owned in ownership.items():
        assert {where[rc][0] // 32 for rc in owned} == {t // 32}


@pytest.mark.compile
def test_step3_keeps_step2s_epilogue():
    assert layouts.accumulator_ownership("sm100/3", threads=range(0, 128, 37)) == {
        t: taught(t) for t in range(0, 128, 37)
    }
