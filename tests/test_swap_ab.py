"""Hopper step 12: swap A and B for decode-sized GEMMs (chapter 12).

The rule (pure Python): which tile a problem gets, what the config check refuses. The kernel (on
the CPU, from its PTX): wgmma's N is the tokens' tile, the epilogue's stmatrix is transposed for
the M-major C^T, every stage expects the bytes of its two TMA boxes, no multicast in clusters of
one; with ``swap_ab`` off it is step 11's kernel, instruction for instruction.
"""

from __future__ import annotations

import dataclasses
import re

import pytest
import torch

from gemm_course.kernels.sm90 import step05_cluster_multicast as step05
from gemm_course.kernels.sm90 import step11_beyond_the_seed as step11
from gemm_course.kernels.sm90 import step12_swap_ab as step12
from gemm_course.rules import schedule
from gemm_course.runtime import arch, ladder, run
from gemm_course.runtime.problem import GemmInputError, GemmProblem
from gemm_course.teaching import inspect

STEP = ladder.get("sm90/12")
DECODE_MS = (1, 8, 16, 33, 64, 100, 128)  # up to SWAP_MAX_M


@pytest.mark.fast
def test_the_ladder_knows_the_memory_step():
    assert STEP.roofline == "memory" and ladder.decode("sm90") is STEP
    assert ladder.final("sm90").number == 11  # the sweeps' compute-bound kernel stays step 11


@pytest.mark.fast
@pytest.mark.parametrize("m", DECODE_MS)
def test_small_m_swaps_with_the_tokens_in_wgmma_n(m):
    config = STEP.config_for(GemmProblem(m, 4096, 4096))
    assert config.swap_ab
    pairs = m > step12.PAIR_FROM_M  # 64 tiles of W, one per pair of SMs: two token tiles share each
    assert config.tile_n == max(16, -(-m // (32 if pairs else 16)) * 16)  # rounded up to stmatrix's 16 columns
    assert config.tile_n % config.epi_n == 0 and (config.cluster_m, config.cluster_n) == (1, 2 if pairs else 1)
    assert config.tile_n * config.cluster_n >= m
    assert STEP.check_config(config) == (True, "")
    # as many stages as fit: one more would not, unless the cap is reached
    assert step05.smem_estimate(config) <= step05.SMEM_CAPACITY
    more = dataclasses.replace(config, stages=config.stages + 1)
    assert config.stages == step12.MAX_STAGES or step05.smem_estimate(more) > step05.SMEM_CAPACITY


@pytest.mark.fast
@pytest.mark.parametrize("m, n", [(129, 1024), (200, 1024), (256, 1024), (257, 4096), (512, 4096), (4096, 4096)])
def test_large_m_is_step_11(m, n):
    """Above SWAP_MAX_M, and above SWAP_ALONE_MAX_M where the token tiles do not pair (16 tiles of W)."""
    problem = GemmProblem(m, n, 4096)
    config = STEP.config_for(problem)
    eleven = ladder.get("sm90/11").config_for(problem)
    assert not config.swap_ab and config.lockstep  # step 11's split tail: lockstep from its K
    assert step12.Gemm(config).lockstep_from == step11.Gemm(eleven).lockstep_from == schedule.LOCKSTEP_K_TILES
    assert {f: getattr(config, f) for f in dataclasses.asdict(eleven)} == dataclasses.asdict(eleven)


@pytest.mark.fast
def test_the_threshold_fits_one_wgmma_n():
    assert 16 <= step12.SWAP_MAX_M <= 256  # wgmma's largest N: the tokens fit one instruction
    assert STEP.config_for(GemmProblem(step12.SWAP_MAX_M, 4096, 1024)).swap_ab  # in pairs of token tiles
    assert not STEP.config_for(GemmProblem(step12.SWAP_MAX_M + 1, 4096, 1024)).swap_ab
    assert STEP.config_for(GemmProblem(step12.SWAP_ALONE_MAX_M, 1024, 1024)).swap_ab  # one token tile
    assert not STEP.config_for(GemmProblem(step12.SWAP_ALONE_MAX_M + 1, 1024, 1024)).swap_ab


@pytest.mark.fast
@pytest.mark.parametrize("tile_n, ok", [(8, False), (16, True), (24, False), (48, True), (256, True), (272, False)])
def test_swapped_widths(tile_n, ok):
    config = dataclasses.replace(step12.Config(), tile_n=tile_n, epi_n=16, stages=4)
    assert STEP.check_config(config)[0] is ok


@pytest.mark.fast
def test_refusals_say_why():
    base = step12.Config()
    assert "shared memory" in STEP.check_config(dataclasses.replace(base, stages=40))[1]
    assert "tile_m" in STEP.check_config(dataclasses.replace(base, tile_m=192))[1]
    assert "epi_n" in STEP.check_config(dataclasses.replace(base, tile_n=48, epi_n=32))[1]
    # without the swap, step 11's own rules, its 64-column minimum among them
    assert not STEP.check_config(dataclasses.replace(base, swap_ab=False))[0]


@pytest.mark.fast
@pytest.mark.parametrize("m", (1, 7, 16, 300))
def test_one_token_rows_pass_the_operand_checks(m):
    x = torch.randn(m, 1024, dtype=torch.bfloat16)
    w = torch.randn(2048, 1024, dtype=torch.bfloat16)
    c = torch.empty(m, 2048, dtype=torch.bfloat16)
    problem, config = run.validate_operands(STEP, x, w, c, device_type="cpu")
    assert (problem.m, config.swap_ab) == (m, m <= step12.SWAP_MAX_M)


@pytest.mark.fast
def test_n_not_a_multiple_of_8_is_refused():
    x, w = torch.randn(4, 64, dtype=torch.bfloat16), torch.randn(100, 64, dtype=torch.bfloat16)
    with pytest.raises(GemmInputError):
        run.validate_operands(STEP, x, w, torch.empty(4, 100, dtype=torch.bfloat16), device_type="cpu")


@pytest.mark.fast
@pytest.mark.parametrize("n", [1024, 2048, 3072, 4096, 6144, 14336, 28672])
def test_split_for_busies_most_sms(n):
    """128-row tiles where FEW_PARTS parts each busy 90% of the clusters, else 64-row tiles; parts from
    step 11's four up to MAX_PARTS."""
    tile_m, parts = step12.split_for(n, 132)
    tiles = -(-n // tile_m)
    assert schedule.MAX_PARTS <= parts <= step12.MAX_PARTS
    assert (tile_m == 128) == (-(-n // 128) * step12.FEW_PARTS >= step12.BUSY_SHARE * 132)
    assert tile_m == 128 or tiles * parts >= step12.BUSY_SHARE * 132 or parts == step12.MAX_PARTS
    launched = schedule.grid_clusters(tiles, 132, 64, max_parts=parts)
    assert launched >= 112


@pytest.mark.fast
def test_split_for_makes_the_measured_choices():
    """The H100 tune's winners (NOTES.md, "Step 12 measured"): 64-row tiles at N = 4096, 128 at 14336."""
    assert step12.split_for(4096, 132)[0] == 64 and step12.split_for(14336, 132)[0] == 128
    whole = {(m, n, k): not STEP.config_for(GemmProblem(m, n, k)).stream_k
             for m in (1, 16, 64, 128) for n, k in ((4096, 4096), (6144, 4096), (2048, 8192), (4096, 14336))}
    assert all(whole[m, n, 4096] for m in (1, 16, 64, 128) for n in (4096, 6144))  # 64-96 tiles: K whole
    assert not any(whole[m, 2048, 8192] for m in (1, 16))  # 32 tiles: K split
    assert whole[64, 2048, 8192] and whole[128, 2048, 8192]  # in pairs of token tiles
    assert whole[16, 4096, 14336] and whole[128, 4096, 14336]  # the latter in pairs of token tiles
    # one 128-token tile x 14336: the MMAs need more SMs (the rule before the pairs lost there whole)
    assert not step12.splits_k(64, 16, 14336, 132) and step12.splits_k(64, 128, 14336, 132)


@pytest.mark.fast
@pytest.mark.parametrize("m", (33, 64, 65, 100, 128, 200, 256))
def test_token_tiles_pair_where_w_tiles_fill_about_half_to_all_of_the_sm_pairs(m):
    """The H100 tune's winners (NOTES.md): two token tiles in a 1 x 2 cluster over 64-row tiles of W at
    2048 and 4096 rows (32 and 64 tiles for 66 pairs); from 65 to 128 tokens over 128-row tiles at 6144
    and 14336 rows up to 255 tokens, and at 256 tokens there step 11's kernel with 96 or 112 W rows per
    CTA (the widths whose clusters fill their waves); nowhere at 1024 rows (K split instead, or step 11
    above 128 tokens)."""
    tiles = {n: STEP.config_for(GemmProblem(m, n, 4096)) for n in (1024, 2048, 4096, 6144, 14336)}
    paired = {n: c.tile_m if c.swap_ab and c.cluster_n == 2 else 0 for n, c in tiles.items()}
    wide = 128 if 64 < m < 2 * step12.ROWS_IN_N_TOKENS else 0
    assert paired == {1024: 0, 2048: 64, 4096: 64, 6144: wide, 14336: wide}
    if m == 2 * step12.ROWS_IN_N_TOKENS:  # the tokens in M: two 128-row tiles in a 2 x 1 cluster, W's rows in N
        rows_in_n = {n: (c.swap_ab, c.tile_m, c.cluster_m, c.tile_n) for n, c in tiles.items() if n in (6144, 14336)}
        assert rows_in_n == {6144: (False, 128, 2, 96), 14336: (False, 128, 2, 112)}
    assert all(not c.stream_k and c.tile_n * 2 >= m for n, c in tiles.items() if paired[n])  # K = 4096: whole
    # 32 tiles of W for 66 pairs and 128 tokens x 8192: split (H100 tune at 256 tokens: 0.86 against 0.74)
    long_k = STEP.config_for(GemmProblem(m, 2048, 8192))
    assert long_k.cluster_n == 2 and long_k.stream_k is (long_k.tile_n * 8192 > step12.WHOLE_WORK)
    assert STEP.config_for(GemmProblem(m, 4096, 14336)).stream_k is False  # 64 tiles: whole at any K
    assert not tiles[1024].swap_ab or tiles[1024].cluster_n == 1
    assert tiles[1024].swap_ab is (m <= step12.SWAP_ALONE_MAX_M)
    assert all(STEP.check_config(c) == (True, "") for c in tiles.values())


@pytest.mark.fast
@pytest.mark.parametrize("m", [129, 160, 200, 255])
@pytest.mark.parametrize("n", [6144, 14336])
def test_partly_empty_token_tiles_pair_over_128_row_w_tiles(m, n):
    """Between 128 and 256 tokens step 11's kernel (W's rows in N) would run partly empty 128-token
    tiles; the rule pairs two token tiles of half the tokens over 128-row W tiles instead, and takes
    step 11's kernel only at 256 tokens."""
    config = STEP.config_for(GemmProblem(m, n, 4096))
    assert config.swap_ab and config.tile_m == 128 and config.cluster_n == 2
    assert config.tile_n == -(-m // 32) * 16
    assert not STEP.config_for(GemmProblem(256, n, 4096)).swap_ab


@pytest.mark.compile
@pytest.mark.parametrize("n, width", [(6144, 96), (14336, 112)])
def test_above_128_tokens_over_128_row_w_tiles_step_11s_kernel_compiles_the_chosen_width(n, width):
    """rows_in_n_width's tile (tokens in M, 128 x 2 rows of them; W's rows in N) is step 11's kernel:
    wgmma N is the width, both 128-row tiles of the 2 x 1 cluster are real tokens, no spills."""
    config = STEP.config_for(GemmProblem(256, n, 4096))
    assert not config.swap_ab and config.tile_n == width == step12.rows_in_n_width(n, 66)
    art = arch.compile_step(STEP, config, target="sm_90a")
    assert set(re.findall(r"wgmma\.mma_async\.sync\.aligned\.m64n(\d+)k16", art.ptx)) == {str(width)}
    assert "griddepcontrol" not in art.ptx  # step 11's kernel: no early launch
    assert not any(r.spills for r in inspect.resources(art.cubin))

@pytest.mark.fast
@pytest.mark.parametrize("n, k", [(4096, 4096), (14336, 4096), (4096, 14336), (6144, 4096), (2048, 8192)])
def test_w_is_spread_over_most_sms(n, k):
    """The stream-K schedule on the swapped grid (W's rows in tiles of 128): at least 112 of an
    H100's 132 SMs stream W, each about its share (the schedule's busy fraction)."""
    config = STEP.config_for(GemmProblem(16, n, k))
    tiles, k_tiles = -(-n // config.tile_m), -(-k // config.tile_k)
    clusters = schedule.grid_clusters(tiles, 132, k_tiles, max_parts=config.max_parts)
    assert clusters >= 112
    lockstep_from = step12.Gemm(config).lockstep_from
    assert schedule.busy_fraction(tiles, clusters, k_tiles, lockstep_from=lockstep_from) > 0.95


@pytest.mark.fast
@pytest.mark.parametrize("m", DECODE_MS)
@pytest.mark.parametrize("n, k", [(4096, 4096), (4096, 14336), (2048, 8192), (8192, 28672), (1024, 14336)])
def test_no_tile_waits_for_a_cta_launched_after_every_main_part(m, n, k):
    """Swapped tiles share no panel, so the split tail keeps the classic layout at every K (no
    lockstep): two CTAs running at once let the launch finish, where lockstep would need all the
    main parts and a helper (a serving process may leave the kernel fewer SMs than it launched)."""
    config = STEP.config_for(GemmProblem(m, n, k))
    gemm = step12.Gemm(config)
    assert not config.lockstep and gemm.lockstep_from == schedule.NO_LOCKSTEP
    tiles, k_tiles = -(-n // config.tile_m), -(-k // config.tile_k)
    clusters = schedule.grid_clusters(tiles, 132, k_tiles, max_parts=config.max_parts)
    assert schedule.clusters_at_once(tiles, clusters, k_tiles, lockstep_from=gemm.lockstep_from) <= 2
    if k_tiles >= schedule.LOCKSTEP_K_TILES and tiles < clusters:  # what step 11's layout would need here
        assert schedule.clusters_at_once(tiles, clusters, k_tiles) == tiles + 1


# ---- the kernel, compiled for sm_90a on the CPU ------------------------------------------------

CONFIGS = [STEP.config_for(GemmProblem(m, 4096, 4096)) for m in (1, 48, 100, 128)]  # 64-row tiles at N = 4096
CONFIGS += [dataclasses.replace(CONFIGS[0], tile_m=128, stages=step12.stages_for(128, 16, 16, 1)),
            dataclasses.replace(CONFIGS[0], stream_k=False),
            dataclasses.replace(CONFIGS[3], tile_n=256, epi_n=64, stages=step12.stages_for(64, 256, 64, 1))]  # wgmma's widest N


@pytest.fixture(scope="module", params=CONFIGS, ids=lambda c: f"{c.tile_m}x{c.tile_n}_sk{int(c.stream_k)}")
def compiled(request):
    return request.param, arch.compile_step(STEP, request.param, target="sm_90a")


@pytest.mark.compile
def test_wgmma_n_is_the_token_tile(compiled):
    config, art = compiled
    shapes = set(re.findall(r"wgmma\.mma_async\.sync\.aligned\.m64n(\d+)k16", art.ptx))
    assert shapes == {str(config.tile_n)}


@pytest.mark.compile
def test_the_epilogue_writes_c_transposed(compiled):
    config, art = compiled
    assert inspect.ptx_count(art.ptx, "stmatrix.sync.aligned.m8n8.x4.trans") >= 1
    assert inspect.ptx_count(art.ptx, "stmatrix.sync.aligned.m8n8.x4.shared") == 0  # no untransposed stmatrix
    assert inspect.ptx_count(art.ptx, "cp.async.bulk.tensor.2d.global.shared::cta") >= 1


@pytest.mark.compile
def test_each_stage_expects_its_two_boxes(compiled):
    config, art = compiled
    assert set(inspect.expect_tx_bytes(art.ptx)) == {(config.tile_m + config.tile_n) * config.tile_k * 2}
    # W's tile multicast to both CTAs of a token-tile pair (each still expects the whole box); alone, nothing to share
    assert ("multicast::cluster" in art.ptx) is (config.cluster_n == 2)


@pytest.mark.compile
def test_the_hand_over_is_compiled_with_the_split(compiled):
    config, art = compiled
    assert ("st.release.gpu" in art.ptx) is config.stream_k


def _without_names(ptx: str) -> str:
    names = set(re.findall(r"\.entry\s+(\w+)", ptx))
    for name in names:
        ptx = ptx.replace(name, "KERNEL")
    return "\n".join(line for line in ptx.splitlines() if not line.startswith("//"))


@pytest.mark.compile
def test_without_the_swap_it_is_step_11():
    problem = GemmProblem(2048, 4096, 4096)
    config = STEP.config_for(problem)
    eleven = ladder.get("sm90/11")
    twelve = arch.compile_step(STEP, config, target="sm_90a").ptx
    fields = {f: getattr(config, f) for f in dataclasses.asdict(eleven.default)}
    reference = arch.compile_step(eleven, type(eleven.default)(**fields), target="sm_90a").ptx
    assert _without_names(twelve) == _without_names(reference)


@pytest.mark.compile
def test_token_tiles_in_a_pair_multicast_w():
    """The rule's tile at 128 tokens (two token tiles sharing W's tile, as cuBLAS): in its 1 x 2 cluster
    each W tile is loaded once and multicast to both CTAs; alone, no multicast."""
    pair = STEP.config_for(GemmProblem(128, 4096, 4096))
    assert (pair.tile_n, pair.cluster_n) == (64, 2) and STEP.check_config(pair) == (True, "")
    assert "multicast::cluster" in arch.compile_step(STEP, pair, target="sm_90a").ptx
    assert "multicast::cluster" not in arch.compile_step(STEP, dataclasses.replace(pair, cluster_n=1),
                                                         target="sm_90a").ptx


@pytest.mark.compile
def test_programmatic_dependent_launch_is_an_option_and_waits_before_the_first_load():
    """pdl: launched with programmatic stream serialization; every CTA lets the next kernel launch,
    and the producer's wait for the kernel before precedes every TMA load. On by default. Off: none
    of it in the PTX or the launch. (Without ``w_before_wait``, which loads some of W first: its test below.)"""
    on = dataclasses.replace(STEP.config_for(GemmProblem(16, 2048, 8192)), w_before_wait=0)
    assert on.pdl  # the default
    config = dataclasses.replace(on, pdl=False)
    assert "use_pdl" not in step12.Gemm(config).launch_options()
    assert step12.Gemm(on).launch_options() == {**step12.Gemm(config).launch_options(), "use_pdl": True}
    ptx = arch.compile_step(STEP, on, target="sm_90a").ptx
    assert ptx.count("griddepcontrol.wait") == 1 and ptx.count("griddepcontrol.launch_dependents") == 1
    assert ptx.index("griddepcontrol.launch_dependents") < ptx.index("griddepcontrol.wait") < ptx.index("cp.async.bulk.tensor")
    assert "griddepcontrol" not in arch.compile_step(STEP, config, target="sm_90a").ptx


@pytest.mark.compile
def test_the_finisher_waits_for_every_part_at_once():
    """gather_parts: the flag spin sits behind a per-thread predicate (any consumer thread may wait on
    one part), and the partial sums of up to GATHER parts are loaded per pass; off, step 11's loop."""
    config = STEP.config_for(GemmProblem(16, 2048, 8192))  # 32 tiles: K split
    assert config.stream_k
    on = arch.compile_step(STEP, config, target="sm_90a").ptx
    off = arch.compile_step(STEP, dataclasses.replace(config, gather_parts=False), target="sm_90a").ptx
    assert on != off
    assert inspect.ptx_count(on, "ld.acquire.gpu") >= 1 and inspect.ptx_count(off, "ld.acquire.gpu") >= 1
    per_thread = config.tile_m * config.tile_n // step11.Gemm(config).consumer_threads  # fp32 values of a partial sum
    assert inspect.ptx_count(off, "ld.global.b32") == per_thread  # one part per pass
    assert inspect.ptx_count(on, "ld.global.b32") == step12.GATHER * per_thread  # GATHER parts per pass
    pairs = STEP.config_for(GemmProblem(256, 2048, 8192))  # token pairs: one helper per split tile
    assert pairs.cluster_n == 2 and pairs.stream_k and not pairs.gather_parts


# ---- on a Hopper GPU -------------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.skipif(arch.machine().target != "sm_90a", reason="sm90/12 runs on Hopper")
@pytest.mark.parametrize("gather", [True, False], ids=["gathered", "one_by_one"])
def test_split_decode_tiles_are_correct_launch_after_launch(gather):
    """Decode shapes whose few tiles are split along K over the GPU (classic runs; lockstep from 144 K
    tiles on), launched three times on one workspace: each launch leaves every flag reset."""
    from gemm_course.kernels.sm90.step08_persistent import max_clusters
    from gemm_course.runtime.problem import make_inputs, reference, relative_error

    for m, n, k in [(1, 2048, 8192), (16, 1024, 4096), (128, 4096, 14336), (100, 2048, 10000), (64, 512, 16384)]:
        config = dataclasses.replace(STEP.config_for(GemmProblem(m, n, k)), gather_parts=gather)
        tiles, k_tiles = -(-n // config.tile_m), -(-k // config.tile_k)
        launched = schedule.grid_clusters(tiles, max_clusters(1), k_tiles)
        assert schedule.split_tail(tiles, launched, k_tiles)[1] > 0, (m, n, k)  # the tiles are split
        a, b, c = make_inputs(GemmProblem(m, n, k), "cuda", seed=m + n + k)
        ref = reference(a, b)
        launch = run.prepare(STEP, a, b, c, config)
        for _ in range(3):
            c.fill_(float("nan"))
            launch()
            torch.cuda.synchronize()
            assert relative_error(c, ref) < run.TOLERANCE, (m, n, k)
        assert int(launch.workspace[1].abs().sum()) == 0


@pytest.mark.compile
def test_w_prefetched_into_l2_before_the_wait_is_an_option():
    """prefetch_w: with pdl, the producer requests its first K tiles of W into L2 (a TMA prefetch of
    operand A, W once swapped) before it waits for the kernel before, and loads after; the rule takes it
    for token tiles in pairs (their CTAs start as the kernel before leaves) and for single tiles that
    leave half the SMs idle, launched after their loads; never without pdl; refused without pdl."""
    config = STEP.config_for(GemmProblem(16, 6144, 4096))  # 96 tiles: more than half the SMs busy
    assert config.prefetch_w == 0 and config.cluster_n == 1 and not config.launch_after_loads
    half = STEP.config_for(GemmProblem(16, 4096, 4096))  # 64 tiles of 132 SMs, K whole
    assert half.prefetch_w == step12.PREFETCH_W > 0 and half.launch_after_loads and not half.stream_k
    assert not STEP.config_for(GemmProblem(16, 2048, 8192)).launch_after_loads  # K split: every SM busy
    one = STEP.config_for(GemmProblem(1, 4096, 4096))  # one token: the launch at the start, no prefetch
    assert not one.launch_after_loads and one.prefetch_w == 0 and step12.LATE_FROM_M == 2
    paired = STEP.config_for(GemmProblem(64, 4096, 4096))
    assert paired.cluster_n == 2 and paired.prefetch_w == step12.PREFETCH_W and not paired.launch_after_loads
    assert step12.config_for(GemmProblem(64, 4096, 4096), step12.Config(pdl=False)).prefetch_w == 0
    assert STEP.config_for(GemmProblem(128, 4096, 4096)).cluster_n == 2  # pairs above PREFETCH_MAX_M ...
    assert STEP.config_for(GemmProblem(step12.PREFETCH_MAX_M + 1, 4096, 4096)).prefetch_w == 0  # ... load only
    assert STEP.config_for(GemmProblem(300, 4096, 4096)).prefetch_w == 0  # step 11's kernel
    assert not STEP.check_config(dataclasses.replace(config, pdl=False, prefetch_w=8))[0]
    config = dataclasses.replace(config, w_before_wait=0)  # (the rule's here: W's loads before the wait as well)
    on = dataclasses.replace(config, prefetch_w=8)
    assert STEP.check_config(on) == (True, "")
    ptx = arch.compile_step(STEP, on, target="sm_90a").ptx
    prefetch = ptx.index("cp.async.bulk.prefetch.tensor.2d.L2.global")
    assert prefetch < ptx.index("griddepcontrol.wait") < ptx.index("cp.async.bulk.tensor.2d.shared")
    assert "cp.async.bulk.prefetch.tensor" not in arch.compile_step(STEP, config, target="sm_90a").ptx


@pytest.mark.compile
def test_the_next_kernel_may_launch_after_the_loads_instead_of_at_the_start():
    """launch_after_loads: with pdl, the CTA lets the next kernel launch from the producer once its last
    load is issued (after every TMA load in the PTX), not at its start; refused without pdl."""
    config = dataclasses.replace(STEP.config_for(GemmProblem(1, 4096, 4096)), prefetch_w=8)
    late = dataclasses.replace(config, launch_after_loads=True)
    config = dataclasses.replace(config, launch_after_loads=False)
    assert STEP.check_config(late) == (True, "")
    assert not STEP.check_config(dataclasses.replace(late, pdl=False, prefetch_w=0))[0]
    ptx = arch.compile_step(STEP, late, target="sm_90a").ptx
    assert ptx.count("griddepcontrol.launch_dependents") == 1
    launch = ptx.index("griddepcontrol.launch_dependents")
    assert ptx.index("griddepcontrol.wait") < ptx.rindex("cp.async.bulk.tensor.2d.shared") < launch
    early = arch.compile_step(STEP, config, target="sm_90a").ptx
    assert early.index("griddepcontrol.launch_dependents") < early.index("cp.async.bulk.tensor.2d.shared")


@pytest.mark.compile
@pytest.mark.parametrize("shape", [(1, 4096, 4096), (64, 4096, 4096), (16, 2048, 8192), (1, 1024, 4096)],
                         ids=["one_token", "pairs", "split_k", "first_unit_shorter_than_the_stages"])
def test_w_may_be_loaded_into_the_stages_before_the_wait(shape):
    """w_before_wait: with pdl and swap_ab, the producer loads the first unit's first K tiles of W (a weight no
    kernel writes) into its stages before it waits for the kernel before, and x (that kernel's output) only
    after; every stage still expects its two boxes; refused without pdl, without swap_ab, or below 0. Alone,
    in pairs that multicast W, with K split, and where the first unit has fewer K tiles than the stages."""
    config = dataclasses.replace(STEP.config_for(GemmProblem(*shape)), w_before_wait=0)
    early = dataclasses.replace(config, w_before_wait=64)  # more than the stages: as many as they hold
    assert STEP.check_config(early) == (True, "")
    for bad in (dict(pdl=False), dict(w_before_wait=-1), dict(swap_ab=False)):
        assert not STEP.check_config(dataclasses.replace(early, **bad))[0], bad
    loads = "cp.async.bulk.tensor.2d.shared"
    ptx = arch.compile_step(STEP, early, target="sm_90a").ptx
    wait = ptx.index("griddepcontrol.wait")
    assert ptx.index(loads) < wait and loads in ptx[wait:]
    assert set(inspect.expect_tx_bytes(ptx)) == {(config.tile_m + config.tile_n) * config.tile_k * 2}
    assert ptx.count("griddepcontrol.wait") == 1
    plain = arch.compile_step(STEP, config, target="sm_90a").ptx
    assert plain.index("griddepcontrol.wait") < plain.index(loads)


@pytest.mark.gpu
@pytest.mark.skipif(arch.machine().target != "sm_90a", reason="sm90/12 runs on Hopper")
@pytest.mark.parametrize("prefetch_w,late,w_before_wait",
                         [(0, False, 0), (8, False, 0), (8, True, 0), (0, False, 64), (8, True, 64)],
                         ids=["loads", "w_prefetched", "launched_after_loads", "w_before_wait", "w_before_wait_late"])
@pytest.mark.parametrize("d", [4096, 2048], ids=["whole_k", "split_k"])
@pytest.mark.parametrize("m", [16, 64], ids=["alone", "pairs"])
def test_layers_launched_with_pdl_read_each_output_after_it_is_written(m, d, prefetch_w, late, w_before_wait):
    """pdl on: four layers back to back on one stream and one workspace, each reading the output of
    the one before (all NaN-poisoned first): each against float32 of the input it read; with and
    without W's first K tiles prefetched into L2 or loaded into the stages before the wait, the next
    kernel launched at the start or after the loads."""
    from gemm_course.runtime.problem import reference, relative_error

    torch.manual_seed(d + m)
    config = dataclasses.replace(STEP.config_for(GemmProblem(m, d, d)), pdl=True, prefetch_w=prefetch_w,
                                 launch_after_loads=late, w_before_wait=w_before_wait)
    assert (config.cluster_n == 2) == (m == 64)
    assert config.stream_k == (d == 2048 and m == 16)
    x = torch.randn(m, d, device="cuda").to(torch.bfloat16)
    weights = [(torch.randn(d, d, device="cuda") / d ** 0.5).to(torch.bfloat16) for _ in range(4)]
    outs = [torch.full((m, d), float("nan"), dtype=torch.bfloat16, device="cuda") for _ in weights]
    inputs = [x] + outs[:-1]
    workspace = run.allocate_workspace(STEP, config, "cuda")
    launches = [run.prepare(STEP, a, w, c, config, workspace=workspace) for a, w, c in zip(inputs, weights, outs)]
    torch.cuda.synchronize()
    for launch in launches:
        launch()
    torch.cuda.synchronize()
    for i, (a, w, c) in enumerate(zip(inputs, weights, outs)):
        assert relative_error(c, reference(a, w)) < run.TOLERANCE, i
    assert int(workspace.tensors[1].abs().sum()) == 0  # every flag reset


# ---- where each accumulator element lands in the staging buffer (no GPU needed) -----------------


def epilogue_paths(config, c_m_major: bool, transpose_store=None) -> list:
    """Step 4's epilogue as step 12 runs it, element by element: each consumer thread's accumulator
    registers (the wgmma fragment's (row, col), from the step's own tiled MMA), in the order
    ``epilogue_tma`` moves them into each sub-tile's fragment, through the stmatrix it issues (by
    the instruction's definition: ``layouts._written``) into the staging buffer's swizzled bytes
    (``make_epilogue_operands`` on C, or on C^T when ``c_m_major``). ``transpose_store``: force the
    stmatrix's transposition, to show a wrong pairing fail. The same bookkeeping as
    ``kernels/sm100/layouts.epilogue_paths``."""
    import cutlass.cute as cute
    from cutlass.cute.nvgpu import warp

    from gemm_course.kernels.sm90.step02_wgmma_tma import C_DTYPE
    from gemm_course.kernels.sm100 import layouts

    gemm = step12.Gemm(config)
    found = {}

    def probe(mC):
        epi_layout, _, _ = gemm.make_epilogue_operands(step12.transposed(mC) if c_m_major else mC)
        tiled_mma = gemm.make_tiled_mma()
        tile = cute.make_identity_tensor(gemm.tile_mnk[:2])
        staging = cute.make_identity_tensor((config.tile_m, config.epi_n, config.epi_stages))
        trans = gemm.c_layout.is_m_major_c() if transpose_store is None else transpose_store
        atom = cute.make_copy_atom(warp.StMatrix8x8x16bOp(trans, 4), C_DTYPE)
        r2s = cute.make_tiled_copy_S(atom, cute.make_tiled_copy_C_atom(atom, tiled_mma))
        found.update(loaded={}, dest={}, op=atom.op, vals=cute.size(atom.layout_src_tv, mode=[1]),
                     dst_vals=cute.size(atom.layout_dst_tv, mode=[1]), staging=layouts._offsets(epi_layout.outer),
                     swizzle=(epi_layout.inner.num_bits, epi_layout.inner.num_base, epi_layout.inner.num_shift))
        for t in range(gemm.consumer_threads):
            thr = r2s.get_slice(t)
            found["loaded"][t] = layouts._coords(r2s.retile(tiled_mma.get_slice(t).partition_C(tile)))
            found["dest"][t] = layouts._coords(thr.partition_D(staging))  # (R2S, R2S_M, R2S_N, stages)
            if t == 0:
                frag = cute.make_layout(cute.shape(thr.partition_S(staging))[:3])
                found.update(frag=layouts._offsets(frag), store_shape=frag.shape, dst_shape=thr.partition_D(staging).shape)

    probe.__annotations__ = {"mC": cute.Tensor}
    arch.trace(cute.jit(probe), arch.fake_operands()[2], target="sm_90a")
    # register v of sub-tile i's fragment holds element i * size + v of the retiled accumulator, and
    # the copy reads the fragment in its own order
    found["load_registers"] = found["store_registers"] = found["frag"]
    return layouts._paths(found, config.tile_m, config.epi_n, config.epi_stages, gemm.consumer_threads)


PLACED = [STEP.config_for(GemmProblem(m, n, 4096)) for m, n in ((16, 4096), (100, 4096), (40, 1024))]


@pytest.mark.compile
@pytest.mark.parametrize("config", PLACED, ids=lambda c: f"{c.tile_m}x{c.tile_n}_epi{c.epi_n}")
def test_every_element_lands_where_the_transposed_store_expects_it(config):
    from gemm_course.kernels.sm100 import layouts

    paths = epilogue_paths(config, c_m_major=True)
    assert len(paths) == config.tile_m * config.tile_n
    assert layouts.epilogue_mismatches(paths, config.epi_n, config.epi_stages) == []
    # not vacuous: the untransposed stmatrix of step 11's row-major C misplaces most elements here
    wrong = layouts.epilogue_mismatches(epilogue_paths(config, True, transpose_store=False), config.epi_n,
                                        config.epi_stages)
    assert len(wrong) > len(paths) // 2


@pytest.mark.compile
def test_the_row_major_epilogue_is_unchanged():
    from gemm_course.kernels.sm100 import layouts

    config = STEP.config_for(GemmProblem(4096, 4096, 4096))  # swap off: step 11's tile and C
    paths = epilogue_paths(config, c_m_major=False)
    assert len(paths) == config.tile_m * config.tile_n
    assert layouts.epilogue_mismatches(paths, config.epi_n, config.epi_stages) == []
