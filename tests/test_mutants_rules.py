"""Choices that hand-made mutants of rules/schedule.py, tile_rule.py, decode_rule.py and step 12's rule
functions got past the other tests: each test pins a boundary or a named shape with its docstring's reason."""

from fractions import Fraction

import pytest

from gemm_course.rules import decode_rule, schedule, tile_rule
from gemm_course.runtime.problem import GemmProblem

# ---- schedule.py ----


@pytest.mark.fast
def test_the_split_needs_more_than_one_eighth_of_the_clusters_idle():
    """IDLE_SHARE: the split needs G - r > G / IDLE_SHARE; 8 idle of 64 is not more (K long enough)."""
    assert schedule.split_tail(120, 64, 192)[1] == 0  # r = 56, 8 idle: whole
    assert schedule.split_tail(119, 64, 192)[1] == 55  # 9 idle: split


@pytest.mark.fast
def test_lockstep_starts_at_lockstep_k_tiles():
    """Lockstep for long K loops, k_tiles >= LOCKSTEP_K_TILES (144); classic below."""
    assert schedule.LOCKSTEP_K_TILES == 144
    assert schedule.split_tail(100, 66, 144)[2] == 75  # main_k = ceil(34 * 144 / 66)
    assert schedule.split_tail(100, 66, 143)[2] == 0


@pytest.mark.fast
def test_equal_parts_per_tile_when_they_idle_at_most_one_eighth():
    """grid_clusters: 7 tiles on 16 clusters, 2 parts each (14 clusters) idle 2 of 16 = 1/8, no more: 14."""
    assert schedule.grid_clusters(7, 16, 64) == 14


# ---- tile_rule.py ----


@pytest.mark.fast
def test_the_widest_tile_runs_four_stages_from_long_k_on():
    """LONG_K: K from which the widest tile runs four stages with a 32-column epilogue."""
    assert tile_rule.choose(8192, 8192, tile_rule.LONG_K, 66)[:4] == (256, 4, 32, 2)
    assert tile_rule.choose(8192, 8192, tile_rule.LONG_K - 64, 66)[:4] == (256, 3, 128, 2)


# ---- decode_rule.py ----


@pytest.mark.fast
def test_whole_waves_take_one_k_loop_per_wave():
    """busiest_span: tiles a multiple of the clusters have no tail: waves x k_tiles, one part."""
    assert decode_rule.busiest_span(148, 148, 64) == (1, 148, 64)
    assert decode_rule.busiest_span(296, 148, 64) == (1, 296, 128)


def _tied(m, n, k, sms=148):
    found = decode_rule.candidates(m, n, k, sms)
    return [c for c in found if c.sm_bytes <= found[0].sm_bytes * Fraction(51, 50)], found[0]


@pytest.mark.fast
@pytest.mark.parametrize("shape,pick", [((64, 5120, 14336), (112, 2)), ((1, 8192, 14336), (64, 2))])
def test_within_two_percent_the_fewest_l2_bytes_win(shape, pick):
    """Candidates within COST_TIE (2%) of the cheapest count as equal; of those the one reading the
    fewest bytes from L2, then the wider. At 64 x 5120 x 14336 the pick is not the cheapest; at
    1 x 8192 x 14336 a wider tile ties but reads more of L2."""
    choice = decode_rule.choose(*shape, 148)
    tied, cheapest = _tied(*shape)
    assert (choice.tile_n, choice.cluster_n) == pick
    assert choice.l2_bytes == min(c.l2_bytes for c in tied)
    if shape[0] == 64:
        assert choice.sm_bytes > cheapest.sm_bytes  # inside the 2% window, not at its bottom
    else:
        assert any(c.tile_n > choice.tile_n for c in tied)  # wider candidates tied and lost on L2 bytes


# ---- step 12's rule functions ----


@pytest.fixture(scope="module")
def step12():
    from gemm_course.kernels.sm90 import step12_swap_ab

    return step12_swap_ab


@pytest.mark.fast
def test_split_for_takes_128_rows_when_two_parts_busy_nine_tenths(step12):
    """128-row tiles when FEW_PARTS (2) parts each busy BUSY_SHARE (0.9) of the clusters: at 120
    clusters 54 tiles x 2 = 108 = 0.9 x 120 is enough, 53 tiles are not."""
    assert step12.split_for(54 * 128, 120)[0] == 128
    assert step12.split_for(53 * 128, 120)[0] == 64


@pytest.mark.fast
def test_splits_k_keeps_k_whole_at_its_bounds(step12):
    """K stays whole where the tiles keep WHOLE_SHARE of the clusters streaming and tile_n x K is at
    most WHOLE_WORK: at 4096 x 4096 (64 tiles of 64 rows, 132 clusters) for every M up to 128."""
    assert not step12.splits_k(64, 128, 4096, 132)  # 128 tokens x 4096 = WHOLE_WORK exactly
    assert step12.splits_k(64, 128, 4104, 132)
    assert not step12.splits_k(9, 16, 4096, 20)  # 9 tiles = 0.45 x 20 exactly
    assert step12.splits_k(8, 16, 4096, 20)


@pytest.mark.fast
def test_rows_in_n_width_ties_go_to_the_wider(step12):
    """At N = 25344 on 66 pairs, 128 rows (198 clusters) and 96 rows (264) both fill whole waves."""
    assert step12.rows_in_n_width(25344, 66) == 128


@pytest.mark.fast
def test_a_negative_prefetch_is_refused(step12):
    ok, why = step12.check_config(step12.Config(prefetch_w=-1))
    assert not ok and ">= 0" in why


@pytest.mark.fast
def test_late_launch_from_two_tokens_not_at_one(step12):
    """Single whole tiles on at most half the SMs launch the next kernel after the loads from
    LATE_FROM_M (2) tokens; not at one token, where it gained nothing (8192 x 4096: 64 tiles)."""
    one, two = (step12.config_for(GemmProblem(m, 8192, 4096)) for m in (1, 2))
    assert (one.launch_after_loads, one.prefetch_w) == (False, 0)
    assert (two.launch_after_loads, two.prefetch_w) == (True, step12.PREFETCH_W)


@pytest.mark.fast
def test_w_before_the_wait_where_the_next_kernel_launches_at_the_start(step12):
    """W_BEFORE_WAIT (4) K tiles of W load before pdl's wait where single tiles launch the next kernel at
    the start (one token; the K split; tiles on more than half the SMs); not with the late launch, the
    pairs or without pdl (H100: per launch level, in graphs +2 to +4 points at one token)."""
    assert step12.W_BEFORE_WAIT == 4
    for m, n, k in ((1, 8192, 4096), (1, 4096, 4096), (16, 2048, 8192), (16, 6144, 4096)):
        assert step12.config_for(GemmProblem(m, n, k)).w_before_wait == 4, (m, n, k)
    for m, n, k in ((2, 8192, 4096), (16, 4096, 4096), (64, 4096, 4096), (128, 4096, 4096), (300, 4096, 4096)):
        assert step12.config_for(GemmProblem(m, n, k)).w_before_wait == 0, (m, n, k)
    assert step12.config_for(GemmProblem(1, 4096, 4096), step12.Config(pdl=False)).w_before_wait == 0


@pytest.mark.fast
def test_pairs_split_k_only_with_more_than_half_the_pairs_idle(step12):
    """Pairs keep K whole unless the tiles leave more than half the pairs idle (and tile_n x K >
    WHOLE_WORK): 33 W tiles of 64 rows on 66 pairs leave exactly half idle: whole; 32 split."""
    half = step12.config_for(GemmProblem(128, 33 * 64, 16384))
    fewer = step12.config_for(GemmProblem(128, 32 * 64, 16384))
    assert (half.tile_m, half.cluster_n, half.stream_k) == (64, 2, False)
    assert (fewer.tile_m, fewer.cluster_n, fewer.stream_k) == (64, 2, True)
