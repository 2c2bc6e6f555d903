"""The Blackwell step 11's decode path (small M), which cannot run here: the host's rule
(``gemm_course.rules.decode_rule``, pure Python) and the single-CTA kernels it picks, compiled for
sm_100a on fake operands and checked by what they compile to.

Fast tests hold the rule to its arithmetic (every SM streaming W as far as whole tiles allow, no
CTA of padding rows at M <= 128, large M unchanged); compile tests read the PTX of every config it
picks for M in {16, 64, 128, 256} on three LLM-sized (N, K): the single-CTA MMA and its
instruction descriptor (M >> 4 and N >> 3 fields), the TMA boxes against expect_tx, the
multicast of x, tensor memory, barriers and resources.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import math
import pathlib
import subprocess
import sys
from fractions import Fraction

import pytest

from gemm_course.rules import decode_rule, schedule
from gemm_course.runtime import arch, ladder
from gemm_course.runtime.problem import GemmProblem
from gemm_course.teaching import inspect

SMS = 148  # the kernel's own count (step 10's B200_SMS), checked below
NK = ((4096, 4096), (14336, 4096), (4096, 14336))
MS = (16, 64, 128, 256)
SHAPES = [(m, n, k) for m in MS for n, k in NK]
SMALL = [s for s in SHAPES if s[0] <= 128]
SMEM_CAPACITY = 232448
TMEM_COLUMNS = 512
STEP = ladder.get("sm100/11")


def _module():
    return STEP.load()


def chosen(shape):
    return STEP.config_for(GemmProblem(*shape))


@functools.lru_cache(maxsize=1)
def _compare_script():
    """scripts/compare_cutlass_tutorial.py: its PTX evaluator decodes the instruction descriptor."""
    path = pathlib.Path(__file__).resolve().parent.parent / "scripts" / "compare_cutlass_tutorial.py"
    spec = importlib.util.spec_from_file_location("compare_cutlass_tutorial", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, mod)  # its dataclasses look their module up while they are built
    spec.loader.exec_module(sys.modules[spec.name])
    return sys.modules[spec.name]


# ---- the rule, in Python ---------------------------------------------------------------------------


@pytest.mark.fast
def test_the_rule_imports_without_cutedsl():
    """The rule is host arithmetic: it imports and answers with CuTeDSL made unimportable."""
    code = ("import sys; sys.modules['cutlass'] = None\n"
            "from gemm_course.rules import decode_rule\n"
            "c = decode_rule.choose(16, 4096, 4096, 148)\n"
            "assert 'cutlass' not in [m.split('.')[0] for m in sys.modules if sys.modules[m] is not None]\n"
            "print(c.tile_m, c.tile_n, c.cluster_n)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["64", "32", "2"]


@pytest.mark.fast
def test_the_rule_counts_the_kernels_sms():
    from gemm_course.kernels.sm100.step10_gilbert import B200_SMS

    assert B200_SMS == SMS
    mod = _module()
    for shape in SMALL:
        config = chosen(shape)
        assert mod.resident_clusters(config) == SMS // (config.cluster_m * config.cluster_n)


@pytest.mark.fast
def test_bytes_arithmetic_hand_computed():
    """4096 x 4096: 32 MiB of W, 226,719 bytes per SM; the default pair tiles are 16, cut in halves
    along K (32 units on 64 SMs); the rule's 128 x 64 tiles in pairs along N are 32 cluster-tiles,
    halves again, 64 units on all 128 SMs they can reach."""
    w = 2 * 4096 * 4096
    assert w == 32 * 2**20 and w // SMS == 226719
    default = decode_rule.evaluate_pair(128, 4096, 4096, SMS)
    assert (default.tiles, default.parts, default.units, default.busy_sms) == (16, 2, 32, 64)
    # the busiest CTA: half a tile's 64 K tiles + one hand-over of 16, x (128 rows of x + 128 of W) x 128 B
    assert default.span == 48 and default.sm_bytes == 48 * (128 + 128) * 128
    pick = decode_rule.choose(128, 4096, 4096, SMS)
    assert (pick.tile_m, pick.tile_n, pick.cluster_n) == (128, 64, 2)
    assert (pick.tiles, pick.parts, pick.units, pick.busy_sms) == (32, 2, 64, 128)
    assert pick.sm_bytes == 48 * (128 + 64) * 128
    assert pick.share(4096, 4096, SMS) == Fraction(48 * 192 * 128 * SMS, w)  # 5.2x the ideal, from 6.9x
    # M = 16: x is 16 real rows (TMA reads no padding); 32-wide tiles, 64 rows (tcgen05 M = 64)
    small = decode_rule.choose(16, 4096, 4096, SMS)
    assert (small.tile_m, small.tile_n, small.cluster_n, small.parts, small.busy_sms) == (64, 32, 2, 1, 128)
    assert small.sm_bytes == 64 * (32 + 16) * 128


@pytest.mark.fast
@pytest.mark.parametrize("shape", SMALL, ids=lambda s: "x".join(map(str, s)))
def test_small_m_runs_single_cta_tiles_with_no_padding_cta(shape):
    """M <= 128: no CTA pair (whose CTA 1, rows 128-255, would hold only padding); one tile row of
    64 rows when they hold x, else 128; as many stages as fit; the config passes check_config."""
    m, n, k = shape
    config = chosen(shape)
    assert config.cta_group == 1 and config.cluster_m == 1
    assert config.tile_m == (64 if m <= 64 else 128)
    first_rows = [cta * config.tile_m for cta in range(math.ceil(m / config.tile_m))]
    assert all(row < m for row in first_rows)  # every CTA holds real rows
    assert decode_rule.evaluate_pair(m, n, k, SMS).tiles * 2 > len(first_rows)  # the default: CTA 1 of each pair
    assert STEP.check_config(config) == (True, "")
    assert STEP.can_implement(GemmProblem(*shape)) == (True, "")
    more = dataclasses.replace(config, stages=config.stages + 1)
    assert not STEP.check_config(more)[0], "one stage more would not fit"


@pytest.mark.fast
@pytest.mark.parametrize("shape", SMALL, ids=lambda s: "x".join(map(str, s)))
def test_every_sm_streams_w_as_far_as_whole_tiles_allow(shape):
    """The kernel's own tail rule splits K exactly as the rule's model said; at least 128 of the 148
    SMs get a unit in the first round (N = 2^k in 16-column widths: 128 or 132; the tail rule's
    hand-over price forbids the split that would feed the rest), more than the default's, and the
    busiest CTA receives fewer bytes than with the default pair tiles."""
    m, n, k = shape
    config = chosen(shape)
    pick = decode_rule.choose(m, n, k, SMS)
    clusters = _module().resident_clusters(config)
    tiles = math.ceil(m / config.tile_m) * math.ceil(n / (config.tile_n * config.cluster_n))
    k_tiles = math.ceil(k / config.tile_k)
    assert pick.tiles == tiles and pick.parts == schedule.tail_parts(tiles, clusters, k_tiles)
    units, _ = schedule.tail_units(tiles, clusters, pick.parts)
    assert pick.units == units and pick.busy_sms == min(units, clusters) * config.cluster_n
    assert pick.busy_sms >= 128
    default = decode_rule.evaluate_pair(m, n, k, SMS)
    assert pick.busy_sms >= default.busy_sms and pick.sm_bytes < default.sm_bytes
    # no candidate of the menu is cheaper than the pick by more than the tie
    best = min(c.sm_bytes for c in decode_rule.candidates(m, n, k, SMS))
    assert pick.sm_bytes <= best * (1 + decode_rule.COST_TIE)


@pytest.mark.fast
def test_the_rule_prefers_less_l2_traffic_among_ties():
    """Within the tie, the candidate reading fewest bytes from L2 (x multicast along N)."""
    for m, n, k in SMALL:
        pick = decode_rule.choose(m, n, k, SMS)
        tied = [c for c in decode_rule.candidates(m, n, k, SMS)
                if c.sm_bytes <= min(x.sm_bytes for x in decode_rule.candidates(m, n, k, SMS)) * (1 + decode_rule.COST_TIE)]
        assert pick.l2_bytes == min(c.l2_bytes for c in tied)


@pytest.mark.fast
@pytest.mark.parametrize("m", [129, 200, 256, 512, 4096])
def test_large_m_keeps_the_default(m):
    default = STEP.default
    for n, k in NK:
        assert STEP.config_for(GemmProblem(m, n, k)) == default
        assert decode_rule.choose(m, n, k, SMS) is None
    mine = dataclasses.replace(default, stages=5)
    assert _module().config_for(GemmProblem(m, 4096, 4096), mine) == mine


@pytest.mark.fast
def test_the_threshold_is_half_a_pair():
    assert decode_rule.DECODE_MAX_M == decode_rule.PAIR_ROWS // 2 == 128
    assert decode_rule.is_decode(128) and not decode_rule.is_decode(129)
    assert chosen((128, 4096, 4096)).cta_group == 1 and chosen((129, 4096, 4096)).cta_group == 2


@pytest.mark.fast
def test_single_cta_configs_refused_with_reasons():
    base = chosen((64, 4096, 4096))
    bad = [dict(cta_group=3), dict(tile_m=96), dict(tile_n=40), dict(tile_n=16), dict(tile_n=272), dict(tile_k=32),
           dict(cluster_m=4), dict(cluster_n=4), dict(stages=1), dict(stages=40), dict(epi_n=48),
           dict(clc_stages=2), dict(group=0), dict(tile_m=128, tile_n=256, stages=12)]
    for change in bad:
        ok, why = STEP.check_config(dataclasses.replace(base, **change))
        assert not ok and why, change
    ok, why = STEP.check_config(dataclasses.replace(base, tile_m=128, tile_n=256, stages=12))
    assert "at most 4 stages" in why


@pytest.mark.fast
def test_smem_estimate_matches_the_stage_rule():
    for tile_m in (64, 128):
        for tile_n in decode_rule.TILE_NS:
            epi_n, epi_stages = decode_rule.epilogue(tile_n)
            stages = decode_rule.max_stages(tile_m, tile_n, epi_n, epi_stages)
            assert 2 <= stages <= decode_rule.MAX_STAGES
            assert decode_rule.smem_estimate(tile_m, tile_n, stages, epi_n, epi_stages) <= SMEM_CAPACITY
            assert decode_rule.smem_estimate(tile_m, tile_n, stages + 1, epi_n, epi_stages) > SMEM_CAPACITY


# ---- compiled for sm_100a ---------------------------------------------------------------------------


CONFIGS = sorted({chosen(s) for s in SHAPES}, key=lambda c: (c.cta_group, c.tile_m, c.tile_n, c.cluster_n))
# widths the test shapes do not pick, odd multiples of 16 among them, and a cluster of one
EXTRA = [dict(tile_m=128, tile_n=48, cluster_n=1), dict(tile_m=128, tile_n=208), dict(tile_m=64, tile_n=240),
         dict(tile_m=128, tile_n=256), dict(tile_m=64, tile_n=32, cluster_n=1),
         dict(tile_m=128, tile_n=80, cluster_m=2, cluster_n=1)]


def _extra(change):
    tile_m, tile_n = change["tile_m"], change["tile_n"]
    epi_n, epi_stages = decode_rule.epilogue(tile_n)
    return STEP.config(cta_group=1, cluster_m=change.get("cluster_m", 1), cluster_n=change.get("cluster_n", 2),
                       tile_m=tile_m, tile_n=tile_n, epi_n=epi_n, epi_stages=epi_stages,
                       stages=decode_rule.max_stages(tile_m, tile_n, epi_n, epi_stages))


ALL = CONFIGS + [_extra(c) for c in EXTRA]


def _id(config):
    return f"g{config.cta_group}_{config.tile_m}x{config.tile_n}_c{config.cluster_m}x{config.cluster_n}"


@pytest.fixture(scope="module", params=ALL, ids=_id)
def compiled(request):
    return arch.compile_step(STEP, request.param, target="sm_100a")


@pytest.mark.fast
def test_the_shapes_pick_both_paths_and_both_row_counts():
    assert {(c.cta_group, c.tile_m) for c in CONFIGS} == {(1, 64), (1, 128), (2, 128)}
    assert len(CONFIGS) >= 5


def _idescs(ptx: str) -> set:
    """Every value the instruction-descriptor operand of each tcgen05.mma can take."""
    cct = _compare_script()
    p = cct.Ptx(ptx)
    found = set()
    for ins in p.ins:
        if ins.op.startswith("tcgen05.mma"):
            values = p.values(ins.args[3])
            assert values, ins
            found |= set(values)
    return found


@pytest.mark.compile
def test_the_mma_form_and_its_instruction_descriptor(compiled):
    """cta_group::1 throughout for single-CTA tiles (MMA, commit, alloc, dealloc), none of ::2; the
    descriptor: f32 accumulator, bf16 A and B, K-major, M >> 4 at bits 24-28 and N >> 3 at bits
    17-22 equal to the MMA's tile (the pair's 256 rows with cta_group 2); only the negate bits vary."""
    ptx, config = compiled.ptx, compiled.config
    group = config.cta_group
    other = 3 - group
    mma_m = group * config.tile_m
    assert inspect.ptx_count(ptx, f"tcgen05.mma.cta_group::{group}") == config.tile_k // 16
    for op in ("tcgen05.mma", "tcgen05.commit", "tcgen05.alloc", "tcgen05.dealloc", "tcgen05.relinquish_alloc_permit"):
        assert inspect.ptx_count(ptx, f"{op}.cta_group::{group}") >= 1, op
        assert inspect.ptx_count(ptx, f"{op}.cta_group::{other}") == 0, op
    assert "cta_group::2" not in ptx if group == 1 else "cta_group::1" not in ptx
    idescs = _idescs(ptx)
    assert len(idescs) == 4  # negate A / B on or off
    for v in idescs:
        assert (v >> 24) & 0x1F == mma_m >> 4 and (v >> 17) & 0x3F == config.tile_n >> 3, hex(v)
        assert (v >> 4) & 3 == 1 and (v >> 7) & 7 == 1 and (v >> 10) & 7 == 1  # D f32, A bf16, B bf16
        assert (v >> 15) & 3 == 0 and v & 0xF == 0 and v >> 29 == 0  # K-major both, nothing else set
    base = (mma_m >> 4) << 24 | (config.tile_n >> 3) << 17 | 1 << 10 | 1 << 7 | 1 << 4
    assert idescs == {base | negate for negate in (0, 1 << 13, 1 << 14, 3 << 13)}
    cct = _compare_script()
    assert cct.decode_idesc(base) == f"D=f32 A=bf16 B=bf16 M={mma_m} N={config.tile_n} A,B K,K-major negA=0 negB=0"


@pytest.mark.compile
def test_expect_tx_is_the_tma_boxes_bytes(compiled):
    """Per stage a CTA's full barrier expects its own A box (tile_m rows of x; with x multicast
    along N each CTA loads tile_m / cluster_n rows into every CTA of the row) and its B box
    (tile_n rows of W), 64 bf16 each: what lands in its shared memory. A pair's leader expects both
    CTAs'. The other expect_tx is the 16-byte CLC answer."""
    ptx, config = compiled.ptx, compiled.config
    rows = config.cta_group * config.tile_m + config.tile_n
    assert [b for b in inspect.expect_tx_bytes(ptx) if b != 16] == [rows * config.tile_k * 2]
    assert 16 in inspect.expect_tx_bytes(ptx)
    loads = [line for line in ptx.splitlines() if "cp.async.bulk.tensor.2d.shared::" in line and ".global." in line]
    assert len(loads) == 2  # one A box, one B box per K tile
    if config.cta_group == 1:
        a_shared, b_shared = config.cluster_n > 1, config.cluster_m > 1
        multicast = [line for line in loads if "multicast::cluster" in line]
        assert len(multicast) == a_shared + b_shared
        assert not any(".cta_group::" in line for line in loads)  # signals its own barrier, not a leader's


@pytest.mark.compile
def test_tensor_memory_columns(compiled):
    """A power of two from 32, what the accumulator stages span (a 64-row accumulator's second
    stage sits in lanes 16-31 at the same columns), allocated and freed once; the CTAs that fit on
    an SM by registers, threads and shared memory never ask for more than 512 columns."""
    from gemm_course.kernels.sm100 import layouts
    from gemm_course.teaching import widgets

    art, config = compiled, compiled.config
    (cols,) = inspect.tmem_alloc_columns(art.ptx)
    assert inspect.tmem_dealloc_columns(art.ptx) == [cols]
    assert cols >= 32 and cols & (cols - 1) == 0
    spanned = max(max(c) for _, c in layouts.accumulator_stages(STEP, config).values()) + 1
    assert cols == max(32, 1 << (spanned - 1).bit_length())
    kernel = inspect.resources(art.cubin)[0]
    fit = widgets.ctas_per_sm(kernel.registers, inspect.threads_per_cta(art.ptx), inspect.smem_request(art), "sm_100a")
    assert fit["ctas"] >= 1 and fit["ctas"] * cols <= TMEM_COLUMNS, (fit, cols)


@pytest.mark.compile
def test_barriers_and_threads(compiled):
    """Full barriers: one arrival (+ bytes); empty: one commit per CTA that loaded into the stage
    (the CTA itself, and its neighbour along N when x is multicast); accumulator full 1, empty the
    epilogue threads of the CTAs that share the MMA; CLC answer 1 and every role warp of the
    cluster; two-CTA tensor-memory dealloc barrier only for pairs (32 arrivals)."""
    ptx, config = compiled.ptx, compiled.config
    s, ctas = config.stages, config.cluster_m * config.cluster_n
    if config.cta_group == 1:
        loaders = config.cluster_m + config.cluster_n - 1
        acc_empty = 128
    else:
        loaders = config.cluster_m // 2 + config.cluster_n - 1
        acc_empty = 256
    expected = [1] * s + [loaders] * s + [1, 1, acc_empty, acc_empty] + [1, 32 * (1 + ctas * 6)]
    counts = inspect.mbarrier_init_counts(ptx)
    assert counts[:len(expected)] == expected
    assert counts[len(expected):] == ([32] if config.cta_group == 2 else [])
    assert inspect.threads_per_cta(ptx) == 224


@pytest.mark.compile
def test_resources(compiled):
    """No local arrays; shared memory within sm_100's 232448 B and at most the rule's estimate. A
    few spilled words (ptxas keeps a barrier address or two on the stack around the wait loops at
    some widths, 72 registers or fewer used) are tolerated, none beyond 64 bytes."""
    art, config = compiled, compiled.config
    (res,) = inspect.resources(art.cubin)
    assert res.local == 0 and res.stack <= 64, res
    assert inspect.smem_request(art) <= SMEM_CAPACITY
    if config.cta_group == 1:
        estimate = decode_rule.smem_estimate(config.tile_m, config.tile_n, config.stages, config.epi_n, config.epi_stages)
        assert art.storage_smem <= estimate <= art.storage_smem + 8192


@pytest.mark.compile
def test_the_stream_k_hand_over_is_compiled_for_both_row_counts(compiled):
    """The tail's counter (acq_rel), flags (release / acquire) and fold-back into tensor memory with
    the store that mirrors the epilogue's load: 32x32b for 128 rows, 16x256b for 64."""
    ptx, config = compiled.ptx, compiled.config
    for marker in ("atom.global.acq_rel.add", "ld.acquire.gpu", "st.release.gpu", "tcgen05.wait::st"):
        assert marker in ptx, marker
    shape = "16x256b" if config.tile_m == 64 and config.cta_group == 1 else "32x32b"
    assert inspect.ptx_count(ptx, f"tcgen05.st.sync.aligned.{shape}") == config.tile_n // config.epi_n
    assert inspect.ptx_count(ptx, f"tcgen05.ld.sync.aligned.{shape}") == 3 * config.tile_n // config.epi_n


@pytest.mark.compile
@pytest.mark.parametrize("tile_m", [64, 128])
def test_the_fold_back_store_mirrors_the_epilogue_load(tile_m):
    """Thread t's register v comes from and goes back to the same accumulator element: the tensor
    memory store's (thread, value) layouts are the load's, and a thread's values fill a workspace
    slot of tile_m x tile_n exactly (partial_view)."""
    import cutlass.cute as cute

    from gemm_course.kernels.sm100 import layouts

    config = _extra(dict(tile_m=tile_m, tile_n=112, cluster_n=1))
    gemm = _module().Gemm(config)
    found = {}

    @cute.jit
    def probe():
        acc = gemm.make_accumulator(gemm.make_tiled_mma())[(None, None, None, 0)]
        gC = cute.make_identity_tensor((config.tile_m, config.tile_n))
        load, tDtAcc, tDgC = gemm.make_epilogue_copy(acc, gC, 0)
        store = gemm.make_tmem_store(acc)
        found["layouts"] = (str(load.layout_src_tv_tiled), str(store.layout_dst_tv_tiled),
                            str(load.layout_dst_tv_tiled), str(store.layout_src_tv_tiled))
        found["values"] = cute.size(tDgC[(None, None, None, 0, 0)]) * cute.size(tDtAcc, mode=[4])

    layouts.trace_static(probe)
    src, dst, regs_in, regs_out = found["layouts"]
    assert src == dst and regs_in == regs_out
    assert found["values"] * gemm.epilogue_threads == config.tile_m * config.tile_n
