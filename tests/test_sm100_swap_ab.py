"""Blackwell step 12: swap A and B for decode-sized GEMMs (chapter 12), which cannot run here.

The rule (pure Python): which single-CTA tile a problem gets (tile_m rows of W by the busiest CTA's
bytes, tile_n the tokens rounded up to 16, the stages that fit, clusters of one), what the config
check refuses. The kernel, compiled for sm_100a on fake operands and checked by what it compiles
to: tcgen05.mma cta_group::1 whose instruction descriptor has W's rows in M and the tokens in N,
expect_tx of the two TMA boxes, the epilogue's M-major stores (stmatrix.trans after 16x256b, 16-bit
st.shared after 32x32b) with every element landing where the TMA store of C^T expects it; with
``swap_ab`` off it is step 11's kernel, instruction for instruction.
"""

from __future__ import annotations

import dataclasses
import math
import re

import pytest

from gemm_course.rules import decode_rule, schedule
from gemm_course.runtime import arch, ladder
from gemm_course.runtime.problem import GemmProblem
from gemm_course.teaching import inspect

STEP = ladder.get("sm100/12")
ELEVEN = ladder.get("sm100/11")
MS = (1, 8, 16, 64, 128, 200, 256, 300)
NK = ((4096, 4096), (14336, 4096), (4096, 14336))
SHAPES = [(m, n, k) for m in MS for n, k in NK]
SMS = 148


def _module():
    return STEP.load()


def chosen(shape):
    return STEP.config_for(GemmProblem(*shape))


# ---- the rule, in Python ---------------------------------------------------------------------------


@pytest.mark.fast
def test_the_ladder_knows_the_memory_step():
    assert STEP.roofline == "memory" and ladder.decode("sm100") is STEP
    assert ladder.final("sm100") is ELEVEN  # the sweeps' compute-bound kernel stays step 11


@pytest.mark.fast
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_the_picks(shape):
    """M <= 256: swapped single-CTA tiles, tile_n = M rounded up to 16, tile_m the rows of W whose
    busiest CTA receives the fewest bytes (128 on a tie), clusters of one, the stages that fit
    (one more would not); M > 256: step 11's own choice with the swap off."""
    m, n, k = shape
    mod = _module()
    config = chosen(shape)
    assert STEP.check_config(config) == (True, "")
    assert STEP.can_implement(GemmProblem(*shape)) == (True, "")
    if m > mod.SWAP_MAX_M:
        eleven = ELEVEN.config_for(GemmProblem(*shape))
        assert not config.swap_ab
        assert {f: getattr(config, f) for f in dataclasses.asdict(eleven)} == dataclasses.asdict(eleven)
        return
    assert config.swap_ab and config.cta_group == 1 and (config.cluster_m, config.cluster_n) == (1, 1)
    assert config.tile_n == max(16, math.ceil(m / 16) * 16) and config.tile_n >= m
    wide, narrow = mod.busiest_bytes(m, n, k, 128), mod.busiest_bytes(m, n, k, 64)
    assert config.tile_m == (64 if narrow * (1 + decode_rule.COST_TIE) < wide else 128)
    assert (config.epi_n, config.epi_stages) == decode_rule.epilogue(config.tile_n)
    assert config.stages == decode_rule.max_stages(config.tile_m, config.tile_n, config.epi_n, config.epi_stages)
    assert not STEP.check_config(dataclasses.replace(config, stages=config.stages + 1))[0], "one stage more would not fit"


@pytest.mark.fast
def test_picks_hand_computed():
    """16 x 4096 x 4096: 64-row tiles are 64 tiles, cut in halves along K (128 units on 128 SMs),
    the busiest CTA's span 32 + a hand-over of 16 K tiles, (64 rows of W + 16 tokens) x 128 B each;
    128-row tiles are 32 cut in halves too (64 SMs): 48 x 144 x 128 B. 22 stages of (64 + 16) x 128 B
    fit beside the 2 KiB staging buffer. 16 x 14336 x 4096: 112 whole 128-row tiles beat 224 tiles
    of 64 (two rounds on 148 SMs)."""
    mod = _module()
    assert mod.busiest_bytes(16, 4096, 4096, 64) == 48 * (64 + 16) * 128
    assert mod.busiest_bytes(16, 4096, 4096, 128) == 48 * (128 + 16) * 128
    small = chosen((16, 4096, 4096))
    assert (small.tile_m, small.tile_n, small.stages, small.epi_n, small.epi_stages) == (64, 16, 22, 16, 1)
    assert (232448 - 64 * 16 * 2 - 1024 - 3072) // ((64 + 16) * 128) == 22
    assert mod.busiest_bytes(16, 14336, 4096, 128) == 64 * (128 + 16) * 128
    assert mod.busiest_bytes(16, 14336, 4096, 64) == 128 * (64 + 16) * 128
    assert chosen((16, 14336, 4096)).tile_m == 128
    # the kernel's own tail schedule agrees with the model's split
    tiles, k_tiles = 4096 // 64, 4096 // 64
    assert schedule.tail_parts(tiles, SMS, k_tiles) == 2
    assert chosen((1, 4096, 4096)) == small == chosen((8, 4096, 4096))  # M = 1 is a first-class shape
    assert chosen((200, 4096, 4096)).tile_n == 208 and chosen((256, 4096, 4096)).tile_n == 256


@pytest.mark.fast
def test_the_threshold_is_one_tcgen05_n():
    mod = _module()
    assert mod.SWAP_MAX_M == 256  # tcgen05's largest N: the tokens fit one instruction
    assert chosen((256, 1024, 1024)).swap_ab and not chosen((257, 1024, 1024)).swap_ab


@pytest.mark.fast
@pytest.mark.parametrize("tile_m, tile_n, ok", [(128, 8, False), (64, 8, False), (128, 16, True), (64, 16, True),
                                                 (128, 24, False), (128, 48, True), (64, 256, True), (128, 272, False)])
def test_swapped_widths(tile_m, tile_n, ok):
    """Tokens per tile: multiples of 16 from 16 to 256 (step 11's single-CTA tiles start at 32)."""
    config = dataclasses.replace(_module().Config(), tile_m=tile_m, tile_n=tile_n, epi_n=16, epi_stages=1, stages=4)
    assert STEP.check_config(config)[0] is ok
    if tile_n == 16:
        assert not ELEVEN.check_config(ELEVEN.config(**{f: getattr(config, f) for f in dataclasses.asdict(ELEVEN.default)}))[0]


@pytest.mark.fast
def test_refusals_say_why():
    base = _module().Config()
    bad = {"cta_group": dict(cta_group=2), "tile_m": dict(tile_m=96), "tile_k": dict(tile_k=32),
           "shared memory": dict(stages=13), "epi_n": dict(epi_n=32), "cluster": dict(cluster_n=4),
           "clc_stages": dict(clc_stages=2), "stages": dict(stages=1)}
    for word, change in bad.items():
        ok, why = STEP.check_config(dataclasses.replace(base, **change))
        assert not ok and word in why, (change, why)
    assert "at most 12 stages" in STEP.check_config(dataclasses.replace(base, stages=13))[1]
    # without the swap, step 11's own rules, its 32-column minimum for single-CTA tiles among them
    assert not STEP.check_config(dataclasses.replace(base, swap_ab=False))[0]


# ---- compiled for sm_100a ---------------------------------------------------------------------------


SWAPPED = sorted({chosen(s) for s in SHAPES if s[0] <= 256}, key=lambda c: (c.tile_m, c.tile_n))
# both row counts at the narrowest and a wide odd width, and a whole-tile run without the split
EXTRA = [dict(tile_m=128, tile_n=16), dict(tile_m=64, tile_n=16), dict(tile_m=128, tile_n=112),
         dict(tile_m=64, tile_n=16, stream_k=False)]


def _extra(change):
    tile_n = change["tile_n"]
    epi_n, epi_stages = decode_rule.epilogue(tile_n)
    stages = decode_rule.max_stages(change["tile_m"], tile_n, epi_n, epi_stages)
    return STEP.config(**change, epi_n=epi_n, epi_stages=epi_stages, stages=stages)


ALL = list(dict.fromkeys(SWAPPED + [_extra(c) for c in EXTRA]))


def _id(config):
    return f"{config.tile_m}x{config.tile_n}_s{config.stages}_sk{int(config.stream_k)}"


@pytest.fixture(scope="module", params=ALL, ids=_id)
def compiled(request):
    return arch.compile_step(STEP, request.param, target="sm_100a")


@pytest.mark.fast
def test_the_shapes_pick_both_row_counts():
    assert {c.tile_m for c in SWAPPED} == {64, 128}
    assert {c.tile_n for c in SWAPPED} >= {16, 64, 128, 208, 256}


def _idescs(ptx: str) -> set:
    """Every value the instruction-descriptor operand of each tcgen05.mma can take
    (tests/test_sm100_decode.py's reading, with scripts/compare_cutlass_tutorial.py's evaluator)."""
    from test_sm100_decode import _idescs as read

    return read(ptx)


@pytest.mark.compile
def test_the_mma_has_w_in_m_and_the_tokens_in_n(compiled):
    """tcgen05.mma.cta_group::1 only (4 per K tile), MMA, commit, alloc and dealloc, nothing of the
    pair; every idesc value is 0x490 | (tile_m >> 4) << 24 | (tile_n >> 3) << 17 (f32 accumulator,
    bf16 A and B, both K-major: W's rows in M, the tokens in N) with only the negate bits varying."""
    ptx, config = compiled.ptx, compiled.config
    assert inspect.ptx_count(ptx, "tcgen05.mma.cta_group::1") == config.tile_k // 16
    for op in ("tcgen05.mma", "tcgen05.commit", "tcgen05.alloc", "tcgen05.dealloc"):
        assert inspect.ptx_count(ptx, f"{op}.cta_group::1") >= 1, op
    assert "cta_group::2" not in ptx
    base = 0x490 | (config.tile_m >> 4) << 24 | (config.tile_n >> 3) << 17
    assert _idescs(ptx) == {base | negate for negate in (0, 1 << 13, 1 << 14, 3 << 13)}


@pytest.mark.compile
def test_each_stage_expects_its_two_boxes(compiled):
    """Per stage tile_m rows of W and tile_n rows of x, 64 bf16 each, by two plain TMA loads (no
    multicast: clusters of one); 16 B for each cluster-launch-control answer."""
    ptx, config = compiled.ptx, compiled.config
    assert [b for b in inspect.expect_tx_bytes(ptx) if b != 16] == [(config.tile_m + config.tile_n) * config.tile_k * 2]
    assert 16 in inspect.expect_tx_bytes(ptx)
    loads = [line for line in ptx.splitlines() if "cp.async.bulk.tensor.2d.shared::" in line and ".global." in line]
    assert len(loads) == 2 and not any("multicast::cluster" in line for line in loads)


@pytest.mark.compile
def test_the_epilogue_writes_c_transposed(compiled):
    """M-major staging: after 16x256b loads (64 rows) one stmatrix.x4.trans per 16 tokens and no
    untransposed stmatrix; after 32x32b loads (128 rows) one 16-bit st.shared per token and no vector
    store. The TMA store writes each staged sub-tile to C^T in boxes of 64 rows of W (one 128-byte
    swizzle row of the M-major buffer): two per sub-tile with 128 rows, where step 11's row-major
    sub-tiles take one."""
    ptx, config = compiled.ptx, compiled.config
    stores = set(re.findall(r"^\s*(?:@%?!?\w+\s+)?(st\.shared\S*|stmatrix\S*)", ptx, flags=re.M))
    if config.tile_m == 64:
        assert inspect.ptx_count(ptx, f"tcgen05.ld.sync.aligned.16x256b.x{config.epi_n // 8}") >= 1
        assert inspect.ptx_count(ptx, "stmatrix.sync.aligned.m8n8.x4.trans.shared") == config.tile_n // 16
        assert not {s for s in stores if s.startswith("stmatrix") and ".trans" not in s}
        assert inspect.ptx_count(ptx, "st.shared.b16") == 0
    else:
        assert inspect.ptx_count(ptx, f"tcgen05.ld.sync.aligned.32x32b.x{config.epi_n}") >= 1
        assert inspect.ptx_count(ptx, "st.shared.b16") == config.tile_n
        assert not {s for s in stores if s.startswith("stmatrix") or ".v" in s}
    boxes = (config.tile_m // 64) * (config.tile_n // config.epi_n)
    assert inspect.ptx_count(ptx, "cp.async.bulk.tensor.2d.global.shared::cta") == boxes
    assert inspect.ptx_count(ptx, "fence.proxy.async.shared::cta") >= 1


@pytest.mark.compile
def test_the_hand_over_is_compiled_with_the_split(compiled):
    """The tail's counter, flags and fold-back into tensor memory (the store mirrors the load)."""
    ptx, config = compiled.ptx, compiled.config
    shape = "16x256b" if config.tile_m == 64 else "32x32b"
    assert ("st.release.gpu" in ptx) is config.stream_k
    if config.stream_k:
        for marker in ("atom.global.acq_rel.add", "ld.acquire.gpu", "tcgen05.wait::st"):
            assert marker in ptx, marker
        assert inspect.ptx_count(ptx, f"tcgen05.st.sync.aligned.{shape}") == config.tile_n // config.epi_n


@pytest.mark.compile
def test_resources(compiled):
    """No local arrays, at most a few spilled words (as step 11's decode tiles), shared memory within
    the 232448 B of a CTA and at most the rule's estimate; tensor memory a power of two >= 32."""
    (res,) = inspect.resources(compiled.cubin)
    assert res.local == 0 and res.stack <= 64, res
    config = compiled.config
    estimate = decode_rule.smem_estimate(config.tile_m, config.tile_n, config.stages, config.epi_n, config.epi_stages)
    assert inspect.smem_request(compiled) <= decode_rule.SMEM_CAPACITY
    assert compiled.storage_smem <= estimate <= compiled.storage_smem + 8192
    (cols,) = inspect.tmem_alloc_columns(compiled.ptx)
    assert cols >= 32 and cols & (cols - 1) == 0


def _m_major_c(real):
    """``arch.fake_operands`` with C (N, M) M-major: what ``__call__`` hands the kernel after the swap."""

    def fake(shape_class="dynamic"):
        import cutlass
        import cutlass.cute as cute
        from cutlass.cute.runtime import make_fake_tensor

        a, b, _ = real(shape_class)
        n, m, ld = cute.sym_int32(divisibility=8), cute.sym_int32(), cute.sym_int64(divisibility=8)
        return a, b, make_fake_tensor(cutlass.BFloat16, (n, m), stride=(1, ld), assumed_align=16)

    return fake


@pytest.mark.compile
@pytest.mark.parametrize("tile_m, tile_n, store", [(64, 16, None), (64, 48, None), (128, 16, None), (128, 32, None),
                                                   (64, 32, "stmatrix"), (128, 32, "st.shared")])
def test_every_element_lands_at_its_place_in_the_m_major_buffer(monkeypatch, tile_m, tile_n, store):
    """Step 4's epilogue paths (``layouts.epilogue_paths``: each register's element by the tcgen05.ld
    it came from, each store by the instruction's definition) with C M-major, as the swap makes it:
    the store atoms step 4 picks from C's layout put every element where the staging layout, and so
    the TMA store, expects it; the row-major atoms (untransposed stmatrix, 128-bit st.shared) do not."""
    from gemm_course.kernels.sm100 import layouts

    config = _extra(dict(tile_m=tile_m, tile_n=tile_n))
    monkeypatch.setattr(arch, "fake_operands", _m_major_c(arch.fake_operands))
    paths = layouts.epilogue_paths(STEP.key, config, store)
    wrong = layouts.epilogue_mismatches(paths, config.epi_n, config.epi_stages)
    assert sorted(p.loaded for p in paths) == [(r, c) for r in range(tile_m) for c in range(tile_n)]
    if store is None:
        assert wrong == []
    else:
        assert len(wrong) > len(paths) // 2  # the check is not vacuous


@pytest.mark.fast
def test_programmatic_dependent_launch_is_an_option_off_by_default():
    """pdl (as on Hopper's step 12): off by default on Blackwell, where no B200 has run it; on, the
    launch asks for programmatic stream serialization. Above 256 tokens step 11's kernel, pdl off."""
    mod = _module()
    off = chosen((16, 4096, 4096))
    assert not off.pdl and not mod.Config().pdl
    on = dataclasses.replace(off, pdl=True)
    assert "use_pdl" not in mod.Gemm(off).launch_options()
    assert mod.Gemm(on).launch_options() == {**mod.Gemm(off).launch_options(), "use_pdl": True}
    assert not mod.config_for(GemmProblem(300, 4096, 4096), on).pdl


@pytest.mark.compile
@pytest.mark.parametrize("m", [16, 128])
def test_programmatic_dependent_launch_waits_before_the_first_load(m):
    """pdl on: every CTA lets the next kernel launch (once, at the start), and the TMA warp's wait for
    the kernel before precedes every TMA load. Off (the default): no griddepcontrol at all."""
    off = chosen((m, 4096, 4096))
    ptx = arch.compile_step(STEP, dataclasses.replace(off, pdl=True), target="sm_100a").ptx
    assert ptx.count("griddepcontrol.wait") == 1 and ptx.count("griddepcontrol.launch_dependents") == 1
    assert ptx.index("griddepcontrol.launch_dependents") < ptx.index("griddepcontrol.wait") < ptx.index("cp.async.bulk.tensor")
    assert "griddepcontrol" not in arch.compile_step(STEP, off, target="sm_100a").ptx


@pytest.mark.compile
def test_the_next_kernel_may_launch_after_the_loads():
    """launch_after_loads (as on Hopper): with pdl, the TMA warp lets the next kernel launch once its last
    load is issued, after every TMA load in the PTX; refused without pdl."""
    late = dataclasses.replace(chosen((16, 4096, 4096)), pdl=True, launch_after_loads=True)
    assert STEP.check_config(late) == (True, "")
    assert not STEP.check_config(dataclasses.replace(late, pdl=False))[0]
    ptx = arch.compile_step(STEP, late, target="sm_100a").ptx
    assert ptx.count("griddepcontrol.launch_dependents") == 1
    loads = [m.start() for m in re.finditer(r"cp\.async\.bulk\.tensor\.\dd\.shared", ptx)]
    assert ptx.index("griddepcontrol.wait") < loads[0] and loads[-1] < ptx.index("griddepcontrol.launch_dependents")


@pytest.mark.compile
@pytest.mark.parametrize("m", [1, 128])
def test_w_may_be_loaded_into_the_stages_before_the_wait(m):
    """w_before_wait (as on Hopper): with pdl, the TMA warp loads its first unit's first K tiles of W into
    the stages before its one wait for the kernel before, and x after it; every stage still expects its two
    boxes; refused without pdl or below 0."""
    config = chosen((m, 4096, 4096))
    early = dataclasses.replace(config, pdl=True, w_before_wait=64)
    assert STEP.check_config(early) == (True, "")
    for bad in (dict(pdl=False), dict(w_before_wait=-1)):
        assert not STEP.check_config(dataclasses.replace(early, **bad))[0], bad
    ptx = arch.compile_step(STEP, early, target="sm_100a").ptx
    assert ptx.count("griddepcontrol.wait") == 1
    loads = [m.start() for m in re.finditer(r"cp\.async\.bulk\.tensor\.\dd\.shared", ptx)]
    assert loads[0] < ptx.index("griddepcontrol.wait") < loads[-1]
    plain = arch.compile_step(STEP, dataclasses.replace(config, pdl=True), target="sm_100a").ptx
    assert set(inspect.expect_tx_bytes(ptx)) == set(inspect.expect_tx_bytes(plain))


def _without_names(ptx: str) -> str:
    for name in set(re.findall(r"\.entry\s+(\w+)", ptx)):
        ptx = ptx.replace(name, "KERNEL")
    return "\n".join(line for line in ptx.splitlines() if not line.startswith("//"))


@pytest.mark.compile
@pytest.mark.parametrize("m", [300, 64])
def test_without_the_swap_it_is_step_11(m):
    """swap_ab off: step 11's PTX but for the kernel's name, for its pair tiles (what config_for
    picks above 256 tokens) and for its own single-CTA decode tiles."""
    problem = GemmProblem(m, 4096, 4096)
    eleven = ELEVEN.config_for(problem)
    config = STEP.config(**dataclasses.asdict(eleven), swap_ab=False)
    if m > _module().SWAP_MAX_M:
        assert config == STEP.config_for(problem)
    twelve = arch.compile_step(STEP, config, target="sm_100a").ptx
    reference = arch.compile_step(ELEVEN, eleven, target="sm_100a").ptx
    assert twelve != reference  # the names differ
    assert _without_names(twelve) == _without_names(reference)
