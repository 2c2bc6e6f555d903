"""The chapters' exercise checks accept the right answer, reject wrong ones with a hint, and read
their truth from the kernels (CuTe layouts, compiled PTX/SASS, the bank model); and the chapter-0
demos they rely on (gemm_course.teaching.cute_basics) say what CuTe says."""

import pytest

from gemm_course.teaching import cute_basics, exercises, sim


def _wrong(check, *args, match=None):
    with pytest.raises(AssertionError, match=match):
        check(*args)


# ---- chapter 0 ----------------------------------------------------------------------------------


@pytest.mark.compile
def test_layout_table_is_cutes_evaluation():
    t = cute_basics.layout_table(((2, 2), (2, 4)), ((1, 4), (2, 8)))
    assert t["text"] == "((2,2),(2,4)):((1,4),(2,8))" and t["size"] == 32 and t["cosize"] == 32
    for i in range(4):
        for j in range(8):
            assert t["offsets"][i][j] == (i % 2) + 4 * (i // 2) + 2 * (j % 2) + 8 * (j // 2)


@pytest.mark.compile
def test_tiling_views_and_static_values():
    v = cute_basics.tiling_views(8, 12, (4, 4), (1, 2))
    assert v["local_tile_coords"][0][0] == (4, 8)
    assert v["local_tile_none_shape"] == (4, 4, 3) and v["flat_divide_shape"] == (4, 4, 2, 3)
    f = cute_basics.static_vs_dynamic(8)
    assert f["is_static((tile, 4))"] and not f["is_static((tile, n))"]


@pytest.mark.compile
def test_compile_tiny_for_both_targets():
    for target in ("sm_90a", "sm_100a"):
        ptx = cute_basics.compile_tiny(target)
        assert f".target {target}" in ptx and "fma.rn.f32" in ptx


@pytest.mark.compile
def test_atoms_describe_the_course_wgmma():
    a = cute_basics.atoms()
    assert "(64,256,16)" in a["wgmma_64x256x16"] and "bf16" in a["copy_128b"]


@pytest.mark.compile
def test_column_major_and_offset_checks():
    assert "right" in exercises.check_column_major_stride((1, 4))
    _wrong(exercises.check_column_major_stride, (8, 1), match="column-major")
    _wrong(exercises.check_column_major_stride, (1,), match="two ints")
    assert "23" in exercises.check_offset(((2, 2), (2, 4)), ((1, 4), (2, 8)), (3, 5), 23)
    _wrong(exercises.check_offset, ((2, 2), (2, 4)), ((1, 4), (2, 8)), (3, 5), 29)
    _wrong(exercises.check_column_major_stride, 4, match="two ints")  # an int, not a tuple: said so, no TypeError
    _wrong(exercises.check_offset, ((2, 2), (2, 4)), ((1, 4), (2, 8)), (3, 5), "23", match="one int")


@pytest.mark.compile
def test_attempt_handles_unanswered_right_and_wrong(capsys):
    assert exercises.attempt(exercises.check_column_major_stride, ...) is None
    assert exercises.attempt(exercises.check_column_major_stride, (1, 4)) is True
    assert exercises.attempt(exercises.check_column_major_stride, (8, 1)) is False
    out = capsys.readouterr().out
    assert "not answered yet" in out and "Hint" in out


@pytest.mark.fast
def test_attempt_reports_code_that_raises(capsys):
    def broken(index, tiles_m, tiles_n, group):
        return index // 0

    assert exercises.attempt(exercises.check_grouped_order, broken) is False
    assert "your code raised ZeroDivisionError" in capsys.readouterr().out
    # code that runs but returns an int where a pair is asked: said so, not a TypeError blamed on the code
    assert exercises.attempt(exercises.check_grouped_order, lambda index, tiles_m, tiles_n, group: index) is False
    assert exercises.attempt(exercises.check_wave_footprint, lambda order, wave: len(order[:wave])) is False
    out = capsys.readouterr().out
    assert out.count("return a pair") == 2 and "TypeError" not in out
    # a value of the wrong kind (an int where a tile (m, n) is asked): no "your code" where there is none
    assert exercises.attempt(exercises.check_gilbert_tile, 16, 16, 5, 5) is False
    out = capsys.readouterr().out
    assert "your answer could not be checked (TypeError" in out and "your code" not in out


@pytest.mark.fast
def test_a_function_still_to_write_is_not_answered_yet(capsys):
    """The chapters hand out functions whose body is ``...``: they render as "not answered yet",
    never as a wrong answer (False) or the TypeError their None would raise in the check."""

    def unwritten(index, tiles_m, tiles_n, group):
        ...

    def with_comment(gpc_of):
        return ...  # your code

    def documented(fn):
        """What to write."""
        ...  # your code

    def written(index, tiles_m, tiles_n, group):
        return None if index < 0 else (0, 0)

    for stub in (unwritten, with_comment, documented):
        assert exercises.unanswered(stub), stub.__name__
    assert not exercises.unanswered(written) and not exercises.unanswered(lambda x: x) and not exercises.unanswered(0)
    assert exercises.attempt(exercises.check_grouped_order, unwritten) is None
    out = capsys.readouterr().out
    assert out.startswith("check_grouped_order: not answered yet") and "False" not in out and "TypeError" not in out
    assert exercises.attempt(exercises.check_grouped_order, written) is False  # written, and wrong


# ---- chapter 1 ----------------------------------------------------------------------------------


@pytest.mark.compile
@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_naive_loop_has_two_loads_per_fma(target):
    loop = exercises.naive_hot_loop(target)
    assert loop["opcodes"]  # found in the SASS
    assert "right" in exercises.check_naive_loads_per_fma(2, target)
    _wrong(exercises.check_naive_loads_per_fma, 1, target)


@pytest.mark.fast
def test_gemm_intensity_check():
    m, n, k = 8192, 8192, 1024
    assert "right" in exercises.check_gemm_intensity(m, n, k, 2 * m * n * k / (2 * (m * k + n * k + m * n)))
    _wrong(exercises.check_gemm_intensity, m, n, k, 0.5)


# ---- chapter 2 ----------------------------------------------------------------------------------


@pytest.mark.compile
@pytest.mark.parametrize("tile_k", [32, 64])
def test_mma_per_k_tile_is_read_from_the_ptx(tile_k):
    assert "right" in exercises.check_mma_per_k_tile(tile_k, tile_k // 16)
    with pytest.raises(AssertionError) as wrong:
        exercises.check_mma_per_k_tile(tile_k, tile_k // 8)
    assert f"has {tile_k // 16} " not in str(wrong.value)  # a wrong answer gets a hint, not the count


@pytest.mark.compile
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


@pytest.mark.compile
def test_accumulator_owner_check():
    assert "thread 38" in exercises.check_accumulator_owner(25, 13, 38)
    _wrong(exercises.check_accumulator_owner, 25, 13, 5, match="Hint")


@pytest.mark.compile
def test_stage_bytes_from_the_kernels_layouts():
    for step in ("sm90/2", "sm100/2"):
        assert cute_basics.stage_bytes(step) == 2 * (64 + 256) * 64


# ---- chapter 3 ----------------------------------------------------------------------------------


@pytest.mark.compile
def test_swizzled_chunk_check():
    for row in range(16):
        for chunk in range(8):
            assert "right" in exercises.check_swizzled_chunk(row, chunk, (row % 8) ^ chunk)
    _wrong(exercises.check_swizzled_chunk, 13, 3, 3, match="XOR")


@pytest.mark.compile
def test_wavefronts_check_agrees_with_the_bank_model():
    for layout in ("row-major", "sm90/2", "sm90/3"):
        for pattern in sim.PATTERNS:
            n = sim.conflicts(sim.offsets(layout), pattern).wavefronts
            assert "right" in exercises.check_wavefronts(layout, pattern, n)
            _wrong(exercises.check_wavefronts, layout, pattern, n + 1)


@pytest.mark.compile
def test_attempt_passes_options_to_the_check(capsys):
    assert exercises.attempt(exercises.check_ctas_per_sm, "sm90/5", ..., tile_m=64) is None
    assert exercises.attempt(exercises.check_ctas_per_sm, "sm90/5", 3, tile_m=64) is True


# ---- chapters 4-10: facts from the Hopper steps' own objects ------------------------------------


@pytest.mark.compile
def test_kernel_objects_read_the_traced_host_objects():
    four = exercises.kernel_objects("sm90/4")
    assert four["tile"] == (64, 256, 64) and four["threads"] == 128 and four["cluster"] == (1, 1)
    assert four["epi_smem_shape"] == (64, 32, 2) and four["tma_c_elements"] == 64 * 32
    assert four["tma_c_op"] == "CopyBulkTensorTileS2GOp"
    five = exercises.kernel_objects("sm90/5")
    assert five["cluster"] == (2, 1) and five["threads"] == 256 and five["a_smem_shape"] == (128, 64, 1)
    assert five["tma_b_op"].endswith("MulticastOp") and not five["tma_a_op"].endswith("MulticastOp")
    assert exercises.kernel_objects("sm90/6")["a_smem_shape"] == (128, 64, 4)


# ---- chapter 4 ----------------------------------------------------------------------------------


@pytest.mark.compile
def test_tma_stores_and_staging_bytes_checks():
    assert "4 TMA stores" in exercises.check_tma_stores(64, 4)
    _wrong(exercises.check_tma_stores, 64, 8, match="Hint")
    with pytest.raises(AssertionError) as wrong:
        exercises.check_tma_stores(64, 2)
    assert "has 4 " not in str(wrong.value)  # a wrong answer gets a hint, not the count
    _wrong(exercises.check_tma_stores, 48, 5, match="not a valid choice")
    assert "4096 B" in exercises.check_staging_bytes(64 * 32 * 2)
    _wrong(exercises.check_staging_bytes, 64 * 32 * 2 * 2, match="Hint")


# ---- chapter 5 ----------------------------------------------------------------------------------


@pytest.mark.compile
def test_ctas_per_sm_check_compiles_and_counts():
    assert "limited by registers" in exercises.check_ctas_per_sm("sm90/4", 3)
    assert "1 CTA(s)" in exercises.check_ctas_per_sm("sm90/5", 1)
    assert exercises.occupancy_of("sm90/5")["k_tiles_in_flight"] == 1
    assert exercises.occupancy_of("sm90/6")["k_tiles_in_flight"] == 4
    _wrong(exercises.check_ctas_per_sm, "sm90/5", 2, match="65536")


@pytest.mark.compile
def test_b_bytes_per_cta_check():
    assert "16384 B" in exercises.check_b_bytes_per_cta(2, 256 * 64 * 2 // 2)
    assert "no multicast" in exercises.check_b_bytes_per_cta(1, 256 * 64 * 2)
    _wrong(exercises.check_b_bytes_per_cta, 2, 256 * 64 * 2, match="slice")


# ---- chapter 6 ----------------------------------------------------------------------------------


@pytest.mark.fast
def test_max_stages_and_register_split_checks():
    assert "4 stages" in exercises.check_max_stages(256, 4)
    assert "6 stages" in exercises.check_max_stages(128, 6)
    _wrong(exercises.check_max_stages, 256, 5, match="227 KiB")
    _wrong(exercises.check_max_stages, 256, 5, match="too many")
    _wrong(exercises.check_max_stages, 256, 3, match="too few")
    assert "64512" in exercises.check_consumer_registers(40, 232)
    assert "right" in exercises.check_consumer_registers(24, 240)
    _wrong(exercises.check_consumer_registers, 40, 224, match="so does 232")
    _wrong(exercises.check_consumer_registers, 40, 236, match="not a valid split")


# ---- chapter 7 ----------------------------------------------------------------------------------


@pytest.mark.fast
def test_grid_ctas_check_uses_the_steps_grid():
    assert "256 CTAs" in exercises.check_grid_ctas(2, 4096, 256)
    assert "128 CTAs" in exercises.check_grid_ctas(4, 4096, 128)
    _wrong(exercises.check_grid_ctas, 4, 4096, 512, match="Hint")


# ---- chapter 8 ----------------------------------------------------------------------------------


@pytest.mark.fast
def test_persistent_schedule_checks():
    sched = exercises.step_schedule("sm90/8", 4096, 4096)
    assert sched["tiles"] == 256 and sched["clusters"] == 66 and sched["waves"] == 4
    assert "4 of the 256" in exercises.check_persistent_tiles(4096, 0, 4)
    assert "right" in exercises.check_persistent_tiles(4096, 65, 3)
    _wrong(exercises.check_persistent_tiles, 4096, 65, 4, match="Hint")
    assert "8 clusters idle" in exercises.check_idle_clusters(4096, 8)
    assert "32 clusters idle" in exercises.check_idle_clusters(8192, 32)
    _wrong(exercises.check_idle_clusters, 4096, 0, match="remainder")


@pytest.mark.fast
def test_later_steps_schedule_every_tile_once_in_their_order():
    from gemm_course.rules import tile_order

    grouped = exercises.step_schedule("sm90/9", 8192, 4096)
    assert (grouped["owner"] >= 0).all() and grouped["tiles"] == 32 * 16
    gilbert = exercises.step_schedule("sm90/10", 4096, 8192, cluster_tile=tile_order.gilbert_tile)
    first = [tuple(int(v) for v in pos) for pos in zip(*((gilbert["wave"] == 0) & (gilbert["owner"] == 0)).nonzero())]
    assert first == [tile_order.gilbert(16, 32)[0]]


# ---- chapter 9 ----------------------------------------------------------------------------------


@pytest.mark.fast
def test_wave_panels_check():
    assert "3 A panels and 32 B panels" in exercises.check_wave_panels("row", 32, 32, 3, 32)
    assert "8 A panels and 9 B panels" in exercises.check_wave_panels("grouped", 32, 32, 8, 9)
    _wrong(exercises.check_wave_panels, "grouped", 32, 32, 3, 32, match="Hint")


# ---- chapter 10 ---------------------------------------------------------------------------------


@pytest.mark.fast
def test_gilbert_tile_check():
    from gemm_course.rules import tile_order

    for i in (0, 5, 100, 255):
        assert "right" in exercises.check_gilbert_tile(16, 16, i, tile_order.gilbert(16, 16)[i])
    _wrong(exercises.check_gilbert_tile, 16, 16, 5, (0, 5), match="Hint")


@pytest.mark.fast
def test_sweep_geomean_check_reads_the_newest_sweep(tmp_path):
    import dataclasses
    import math

    from gemm_course.measure import bench
    from gemm_course.measure.records import load_records
    from gemm_course.runtime import ladder

    def rec(ratio, date):
        return {"schema": 1, "kind": "bench", "step": "sm90/11", "config": dataclasses.asdict(ladder.get("sm90/11").default),
                "shape": {"m": 4096, "n": 4096, "k": 4096}, "date": date, "ratio_to_cublas": ratio}

    bench.write_records([rec(0.5, "2030-01-01")], "sweep", out_dir=str(tmp_path / "results" / "g" / "a"))
    bench.write_records([rec(0.8, "2030-02-01"), rec(1.25, "2030-02-01")], "sweep", out_dir=str(tmp_path / "results" / "g" / "b"))
    records = load_records(str(tmp_path / "results"))
    assert "over 2 shapes" in exercises.check_sweep_geomean(math.sqrt(0.8 * 1.25), records=records)
    _wrong(exercises.check_sweep_geomean, (0.8 + 1.25) / 2, "sm90/11", records, match="exp")
    # ratios near 1, as the real sweep's: the arithmetic mean lies within 2e-3 of the geometric one, and is refused
    bench.write_records([rec(0.95, "2030-03-01"), rec(1.05, "2030-03-01")], "sweep",
                        out_dir=str(tmp_path / "results" / "g" / "c"))
    records = load_records(str(tmp_path / "results"))
    assert "right" in exercises.check_sweep_geomean(math.sqrt(0.95 * 1.05), records=records)
    _wrong(exercises.check_sweep_geomean, 1.0, "sm90/11", records, match="arithmetic mean")
    _wrong(exercises.check_sweep_geomean, 1.0, "sm90/11", [], match="no sweep")


# ---- the Blackwell halves: right code passes, wrong code fails with a hint ------------------------


@pytest.mark.compile
def test_blackwell_code_exercises_accept_right_code_and_refuse_wrong_code():
    from cutlass.cute.nvgpu import tcgen05

    assert "right" in exercises.check_tmem_alloc_columns(128, 128)
    _wrong(exercises.check_tmem_alloc_columns, 128, 64, match="power")

    def load(rows, epi_n):
        if rows == 64:
            return tcgen05.Ld16x256bOp(tcgen05.Repetition(epi_n // 8))
        return tcgen05.Ld32x32bOp(tcgen05.Repetition(epi_n))

    assert "right" in exercises.check_tmem_load_op(load)
    _wrong(exercises.check_tmem_load_op, lambda rows, n: tcgen05.Ld32x32bOp(tcgen05.Repetition(n)), match="16 lanes")

    assert "65536" in exercises.check_pair_tx_bytes(lambda tm, tn, tk, cm, cn: (2 * tm + tn) * tk * 2)
    _wrong(exercises.check_pair_tx_bytes, lambda tm, tn, tk, cm, cn: (2 * tm + tn) * tk * cm * cn, match="leader")

    def stages(tile_n, epi_n, epi_stages):
        per_stage = (128 + tile_n // 2) * 64 * 2
        return 1 + (232448 - (per_stage + 128 * epi_n * 2 * epi_stages + 4096)) // per_stage

    assert "232448" in exercises.check_sm100_max_stages(stages)
    _wrong(exercises.check_sm100_max_stages, lambda tn, en, es: 232448 // ((128 + tn) * 128), match="tile_n / 2 rows of B")

    assert "power of two" in exercises.check_tmem_columns(lambda a, t: max(32, 1 << (a * t - 1).bit_length()))
    _wrong(exercises.check_tmem_columns, lambda a, t: a * t, match="power")

    assert "//" in exercises.check_clc_decode(lambda x, cm: x // cm)
    _wrong(exercises.check_clc_decode, lambda x, cm: x // 2, match="cluster_m")


# ---- chapter 11 ---------------------------------------------------------------------------------


@pytest.mark.fast
def test_tail_share_check_uses_the_final_steps_schedule():
    assert "34 tail tiles" in exercises.check_tail_share(8192, 34, 66)
    _wrong(exercises.check_tail_share, 8192, 33, 66, match="remainder")
    _wrong(exercises.check_tail_share, 8192, 34, 65, match="rounded-up")
    _wrong(exercises.check_tail_share, 4096, 58, 8, match="not split")


@pytest.mark.fast
def test_gpc_places_check_takes_a_function():
    from gemm_course.rules import placement

    def by_gpc(gpc_of):
        order = sorted(range(len(gpc_of)), key=lambda c: (gpc_of[c], c))
        return [order.index(c) for c in range(len(gpc_of))]

    assert "right" in exercises.check_gpc_places(by_gpc)
    # the course's own rule (GPCs in order of first appearance) passes too
    assert "right" in exercises.check_gpc_places(
        lambda g: placement.order_from_placement(list(range(len(g))), dict(enumerate(g))))
    _wrong(exercises.check_gpc_places, lambda g: list(range(len(g))), match="consecutive")
    _wrong(exercises.check_gpc_places, lambda g: [0] * len(g), match="each once")
    _wrong(exercises.check_gpc_places, lambda g: ..., match="nothing yet")
    probe = {"sms": 8, "runs": [{"cluster": 2, "ctas": 8, "smid": [0, 1, 4, 5, 2, 3, 6, 7]},
                                {"cluster": 8, "ctas": 8, "smid": [0, 1, 2, 3, 4, 5, 6, 7]}]}
    assert "the recorded probe among them" in exercises.check_gpc_places(by_gpc, probe)


@pytest.mark.compile
def test_code_exercises_of_chapters_2_3_9_10():
    from gemm_course.rules import tile_order

    assert "right" in exercises.check_stage_bytes(lambda m, n, k: (m + n) * k * 2)
    _wrong(exercises.check_stage_bytes, lambda m, n, k: (m + n) * k, match="2 bytes per bf16")
    assert "right" in exercises.check_swizzle(lambda r, c: c ^ (r % 8))
    _wrong(exercises.check_swizzle, lambda r, c: c ^ r, match="XORs")
    assert "right" in exercises.check_grouped_order(tile_order.grouped_tile)
    _wrong(exercises.check_grouped_order, lambda i, tm, tn, g: divmod(i, tn), match="column by column")
    assert "right" in exercises.check_wave_footprint(lambda o, w: (len({m for m, _ in o[:w]}), len({n for _, n in o[:w]})))
    _wrong(exercises.check_wave_footprint, lambda o, w: (w, w), match="distinct")


@pytest.mark.fast
def test_check_tail_parts():
    from fractions import Fraction

    from gemm_course.rules import schedule

    def mine(tiles, clusters, k_tiles):
        tail, best, best_time = tiles % clusters, 1, Fraction(k_tiles)
        for p in range(2, schedule.MAX_PARTS + 1):
            if tail and k_tiles >= p and Fraction(schedule.tail_span(tail, clusters, p, k_tiles), p) < best_time:
                best, best_time = p, Fraction(schedule.tail_span(tail, clusters, p, k_tiles), p)
        return best

    assert "right" in exercises.check_tail_parts(mine)
    _wrong(exercises.check_tail_parts, lambda t, c, k: 2, match="the rule cuts")
    _wrong(exercises.check_tail_parts, lambda t, c, k: 1, match="the rule cuts")
    _wrong(exercises.check_tail_parts, lambda t, c, k: min(  # the hand-overs forgotten
        range(1, 5), key=lambda p: Fraction(-(-(t % c) * p // c) * k, p) if t % c and k >= p else k), match="the rule cuts")
    _wrong(exercises.check_tail_parts, lambda t, c, k: ..., match="nothing yet")


@pytest.mark.fast
def test_check_tile_width():
    from gemm_course.rules import tile_rule

    def mine(m, n, clusters):
        if tile_rule.waves(m, n, 256, clusters) >= 4:
            return 256
        fills = {w: tile_rule.wave_fill(tile_rule.waves(m, n, w, clusters)) for w in (256, 192, 128)}
        return next(w for w in (256, 192, 128) if fills[w] >= max(fills.values()) - 0.02)

    assert "right" in exercises.check_tile_width(mine)
    _wrong(exercises.check_tile_width, lambda m, n, c: 256, match="the rule picks")
    _wrong(exercises.check_tile_width, lambda m, n, c: max((256, 192, 128),  # no tie: the best fill, even if narrower
           key=lambda w: (tile_rule.wave_fill(tile_rule.waves(m, n, w, c)), w)) if tile_rule.waves(m, n, 256, c) < 4
           else 256, match="the rule picks")
    _wrong(exercises.check_tile_width, lambda m, n, c: ..., match="nothing yet")


@pytest.mark.fast
def test_score_tile_rule_scores_picks_against_the_measured_widths():
    """An oracle that picks each shape's fastest measured width scores 1.000; step 11's rule scores
    below that but above any single fixed width; a pick no run timed is counted, not scored; an
    inadmissible width or no answer is refused."""
    import re

    from gemm_course.rules import tile_rule

    cases = exercises.tile_width_cases()
    assert len(cases) >= 90 and all(len(w) >= 2 for *_, w in cases)

    def score(text):
        return float(re.match(r"your rule: ([0-9.]+)", text).group(1))

    oracle_calls = iter([max(w, key=w.get) for *_, w in cases])  # called once per case, in order
    assert score(exercises.score_tile_rule(lambda m, n, k, c: next(oracle_calls))) == 1.0
    rule = score(exercises.score_tile_rule(lambda m, n, k, c: tile_rule.choose_tile_n(m, n, c)))
    assert 0.97 < rule < 1.0
    for width in (256, 192, 128):
        assert score(exercises.score_tile_rule(lambda m, n, k, c, w=width: w)) < rule
    timed_240 = sum(240 in w for *_, w in cases)  # run 45 timed 240 wide on two shapes, in both orders
    assert timed_240 == 4
    assert f"over the 4 of {len(cases)} shape-runs" in exercises.score_tile_rule(lambda m, n, k, c: 240)
    _wrong(exercises.score_tile_rule, lambda m, n, k, c: 168, match="not a tile width")
    _wrong(exercises.score_tile_rule, lambda m, n, k, c: 256.0, match="an int")
    _wrong(exercises.score_tile_rule, lambda m, n, k, c: ..., match="nothing yet")


@pytest.mark.fast
def test_the_package_docstring_lists_every_check():
    """help(exercises) is the index a reader finds the checks by: every check_*/score_* is listed, and
    every listed name exists."""
    import re

    listed = set(re.findall(r":func:`(\w+)`", exercises.__doc__))
    checks = {name for name in dir(exercises) if name.startswith(("check_", "score_"))}
    assert checks <= listed, sorted(checks - listed)
    assert all(hasattr(exercises, name) for name in listed), sorted(n for n in listed if not hasattr(exercises, n))
