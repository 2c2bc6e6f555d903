"""The Blackwell step 11's stream-K tail, which cannot run here: its units (``schedule.tail_*``,
the same functions the kernel traces), the rule that picks the parts, the last-arriver hand-over
played out in Python under any order cluster launch control may hand the units out in, and the
workspace bounds. A deliberately broken protocol shows the order test can fail."""

from __future__ import annotations

import dataclasses
import itertools
import random
from fractions import Fraction

import pytest

from gemm_course.kernels.sm100 import step11_beyond_the_seed as step11
from gemm_course.rules import schedule
from gemm_course.runtime import arch, ladder
from gemm_course.teaching import sim

G_B200 = step11.resident_clusters(step11.Config())
GRIDS = list(itertools.product((1, 2, 16, 33, 40, 74, 100, 256, 290, 1024, 2304), (8, 66, 74), (1, 2, 5, 16, 64, 128, 448)))


@pytest.mark.fast
def test_b200_holds_74_clusters_of_two():
    assert G_B200 == 74


@pytest.mark.fast
@pytest.mark.parametrize("tiles,clusters,k_tiles", GRIDS)
def test_units_cover_every_k_tile_of_every_tile_once(tiles, clusters, k_tiles):
    units = schedule.dynamic_plan(tiles, clusters, k_tiles)
    covered = {}
    for index, part, k_begin, k_end in units:
        assert 0 <= k_begin < k_end <= k_tiles, (index, part, k_begin, k_end)  # no empty part
        for k in range(k_begin, k_end):
            assert (index, k) not in covered
            covered[(index, k)] = part
    assert len(covered) == tiles * k_tiles
    parts = schedule.tail_parts(tiles, clusters, k_tiles)
    whole = [u for u in units if u[2] == 0 and u[3] == k_tiles]
    assert len(units) == len(whole) + (tiles - len(whole)) * parts  # whole tiles, then parts per tail tile
    assert [u[0] for u in units] == sorted(u[0] for u in units)  # launch order: whole tiles, then the tail's


def _tail_time(tiles, clusters, k_tiles, parts) -> Fraction:
    """The rule's model, restated: each round of units takes 1 / parts of a tile's K loop, then its
    last parts add the other parts' sums, a hand-over each."""
    tail = tiles % clusters
    rounds = -(-tail * parts // clusters)
    return rounds * (Fraction(k_tiles, parts) + (parts - 1) * schedule.FIXUP_K_TILES)


@pytest.mark.fast
@pytest.mark.parametrize("tiles,clusters,k_tiles", GRIDS)
def test_tail_parts_is_the_models_best(tiles, clusters, k_tiles):
    parts = schedule.tail_parts(tiles, clusters, k_tiles)
    if tiles % clusters == 0:
        assert parts == 1  # no tail
        return
    options = [1] + [p for p in range(2, schedule.MAX_PARTS + 1) if k_tiles >= p]
    best = min(_tail_time(tiles, clusters, k_tiles, p) if p > 1 else Fraction(k_tiles) for p in options)
    mine = _tail_time(tiles, clusters, k_tiles, parts) if parts > 1 else Fraction(k_tiles)
    assert mine == best and parts in options


@pytest.mark.fast
def test_tail_parts_hand_computed():
    # 4096^3 on a B200: 256 tiles of 256 x 256 = 3 waves + 34; halves take 32 + 16 K tiles < 64
    assert schedule.tail_parts(256, 74, 64) == 2
    assert schedule.tail_units(256, 74, 2) == (222 + 68, 222)
    # 8192^3: 13 waves + 62: two halves per tail tile need two rounds, no shorter than one whole tile
    assert schedule.tail_parts(1024, 74, 128) == 1
    # 16 tiles, long K: thirds (42.7 K tiles + 2 hand-overs) beat halves (64 + 1) and quarters (32 + 3)
    assert schedule.tail_parts(16, 74, 128) == 3
    # 40 tiles of 128 K tiles on 66 clusters: thirds need two rounds (85.3 + 4 hand-overs = 149.3 > 128)
    assert schedule.tail_parts(40, 66, 128) == 1
    # a whole number of waves has no tail
    assert schedule.tail_parts(148, 74, 64) == 1


@pytest.mark.fast
@pytest.mark.parametrize("tiles,clusters,k_tiles", GRIDS)
def test_the_rules_split_is_faster_when_played_out(tiles, clusters, k_tiles):
    """On the event model (units in launch order to the first free cluster, sim.dynamic_tail) the
    split the rule picks finishes before the whole tail, and no later than the rule's model says."""
    parts = schedule.tail_parts(tiles, clusters, k_tiles)
    whole = max(r.end for r in sim.dynamic_tail(tiles, clusters, k_tiles, split=False))
    split = max(r.end for r in sim.dynamic_tail(tiles, clusters, k_tiles, split=True))
    if parts == 1:
        assert split == whole  # nothing is cut
        return
    model = tiles // clusters * k_tiles + _tail_time(tiles, clusters, k_tiles, parts)
    rounds = -(-(tiles % clusters) * parts // clusters)
    # (+ a K tile per round: the parts' K ranges are whole K tiles, the model's thirds are not)
    assert split < whole and split <= model + rounds, (parts, whole, split, float(model))


@pytest.mark.fast
def test_played_out_tail_covers_every_k_tile_and_charges_the_last_part():
    runs = sim.dynamic_tail(19, 8, 64)
    assert sum(r.loop_end - r.start for r in runs) == 19 * 64
    lasts = [r for r in runs if r.kind == "last"]
    assert len(lasts) == 3 and all(r.end - r.loop_end == schedule.FIXUP_K_TILES for r in lasts)
    assert max(r.end for r in runs) == 2 * 64 + 32 + 16  # two waves, half a tile, one hand-over


# ---- the hand-over, played out ------------------------------------------------------------------


def play_tail(tiles, clusters, k_tiles, resident, seed, last_arriver=True):
    """Play a launch: ``resident`` clusters take units in launch order (cluster launch control),
    each taking a random time per K tile. Returns ({tile: value}, None) or (None, 'deadlock').

    With ``last_arriver`` a part counts itself in when its K loop ends and the part that finds
    parts - 1 there adds the others' partial sums (each written after its writer counted itself,
    so the last waits only for running parts); without it part 0 always finishes and waits for the
    others, whoever runs them (the broken protocol)."""
    rng = random.Random(seed)
    units = schedule.dynamic_plan(tiles, clusters, k_tiles)
    parts = schedule.tail_parts(tiles, clusters, k_tiles)
    value = {(t, k): rng.randint(1, 9) for t in range(tiles) for k in range(k_tiles)}  # a K tile's product
    counters, flags, partials, result = {}, {}, {}, {}
    queue = list(range(len(units)))
    running = {}  # cluster -> (unit, finish time, waiting for (tile, parts) or None)
    clock = 0.0
    for cluster in range(min(resident, len(queue))):
        u = queue.pop(0)
        running[cluster] = (u, clock + rng.uniform(0.5, 1.5) * (units[u][3] - units[u][2]), None)
    while running:
        # the next event: a cluster whose K loop is done and is not blocked
        ready = [(fin, c) for c, (u, fin, wait) in running.items() if wait is None or all(
            (wait[0], q) in flags for q in range(parts) if q != wait[1])]
        if not ready:
            return None, "deadlock"
        fin, cluster = min(ready)
        clock = max(clock, fin)
        u, _, wait = running.pop(cluster)
        index, part, k_begin, k_end = units[u]
        mine = sum(value[(index, k)] for k in range(k_begin, k_end))
        if k_end - k_begin == k_tiles:
            result[index] = mine
        elif last_arriver:
            arrived = counters.get(index, 0)
            counters[index] = arrived + 1
            if arrived == parts - 1:
                others = [q for q in range(parts) if q != part]
                assert all(counters[index] > 0 for q in others)
                missing = [q for q in others if (index, q) not in flags]
                if missing:  # they counted themselves in, so they are past their K loop: they write next
                    running[cluster] = (u, clock, (index, part))
                    continue
                result[index] = mine + sum(partials[(index, q)] for q in others)
                counters[index] = 0
            else:
                partials[(index, part)], flags[(index, part)] = mine, True
        else:  # broken: part 0 finishes, the others hand over
            if part == 0:
                if wait is None and not all((index, q) in flags for q in range(1, parts)):
                    running[cluster] = (u, clock, (index, 0))
                    continue
                result[index] = mine + sum(partials[(index, q)] for q in range(1, parts))
            else:
                partials[(index, part)], flags[(index, part)] = mine, True
        if queue:
            nxt = queue.pop(0)
            running[cluster] = (nxt, clock + rng.uniform(0.5, 1.5) * (units[nxt][3] - units[nxt][2]), None)
    expect = {t: sum(value[(t, k)] for k in range(k_tiles)) for t in range(tiles)}
    assert result == expect
    assert not any(counters.values())  # every counter back at zero for the next launch
    return result, None


@pytest.mark.fast
@pytest.mark.parametrize("tiles,clusters,k_tiles", [(256, 74, 64), (16, 74, 128), (100, 74, 64), (3, 8, 64), (1, 8, 128)])
def test_last_arriver_sums_every_tile_in_any_order(tiles, clusters, k_tiles):
    assert schedule.tail_parts(tiles, clusters, k_tiles) > 1  # these grids have a split tail
    for resident, seed in itertools.product((1, 2, clusters), range(5)):
        result, why = play_tail(tiles, clusters, k_tiles, resident, seed)
        assert why is None, (resident, seed)


@pytest.mark.fast
def test_a_fixed_finisher_can_deadlock():
    # one resident cluster takes the units in launch order: part 0 of the first tail tile comes
    # before its other parts and waits for them forever (the reason the last arriver finishes)
    _, why = play_tail(3, 8, 64, resident=1, seed=0, last_arriver=False)
    assert why == "deadlock"
    assert play_tail(3, 8, 64, resident=1, seed=0)[1] is None


# ---- the workspace and the compiled kernel ---------------------------------------------------------


@pytest.mark.fast
@pytest.mark.parametrize("cluster_m", [2, 4])
def test_workspace_holds_every_slot(cluster_m):
    config = dataclasses.replace(step11.Config(), cluster_m=cluster_m)
    (_, partials), (_, counters), (_, flags) = step11.Gemm.workspace_shapes(config)
    clusters, ctas = step11.resident_clusters(config), cluster_m
    for tiles, k_tiles in itertools.product(range(1, 4 * clusters), (1, 4, 64, 448)):
        parts = schedule.tail_parts(tiles, clusters, k_tiles)
        _, whole = schedule.tail_units(tiles, clusters, parts)
        slots = set()
        for index, part, cta in itertools.product(range(whole, tiles), range(parts), range(ctas)):
            counter, slot = schedule.tail_slot(index, part, whole, cta, ctas)
            assert 0 <= counter < counters[0] and 0 <= slot < flags[0]
            assert (slot + 1) * config.tile_m * config.tile_n <= partials[0]
            slots.add(slot)
        assert len(slots) == (tiles - whole) * parts * ctas  # no two CTAs or parts share a slot


@pytest.mark.fast
def test_stream_k_refuses_a_64_row_tile():
    ok, why = step11.check_config(dataclasses.replace(step11.Config(), tile_m=64))
    assert not ok and "tile_m" in why


@pytest.mark.compile
def test_without_stream_k_no_hand_over_is_compiled():
    step = ladder.get("sm100/11")
    on = arch.compile_step(step, step.default, target="sm_100a").ptx
    off = arch.compile_step(step, dataclasses.replace(step.default, stream_k=False), target="sm_100a").ptx
    for marker in ("atom.global.acq_rel.add", "ld.acquire.gpu", "st.release.gpu", "tcgen05.st", "tcgen05.wait::st"):
        assert marker in on and marker not in off, marker


TRACED = '''
import sys
import cutlass, cutlass.cute as cute
from gemm_course.rules import schedule

@cute.jit
def units(tiles: cutlass.Int32, clusters: cutlass.Constexpr, k_tiles: cutlass.Int32):
    # the kernel's arithmetic on traced values: cutlass.select_, a fast divider made as the host makes it
    cute.printf("case %d %d", tiles, k_tiles)
    parts = schedule.tail_parts(tiles, clusters, k_tiles, cutlass.select_)
    count, whole = schedule.tail_units(tiles, clusters, parts, cutlass.select_)
    div = cute.fast_divmod_create_divisor_v2(cutlass.Int32(parts))
    cute.printf("grid %d %d %d", parts, count, whole)
    for u in cutlass.range(count, unroll=1):
        index, part, k_begin, k_end = schedule.tail_unit(u, whole, parts, k_tiles, div, cutlass.select_)
        cute.printf("unit %d %d %d %d", index, part, k_begin, k_end)

clusters = int(sys.argv[1])
run = cute.compile(units, cutlass.Int32(1), clusters, cutlass.Int32(1))
for arg in sys.argv[2:]:
    tiles, k_tiles = map(int, arg.split(","))
    run(cutlass.Int32(tiles), cutlass.Int32(k_tiles))
'''


@pytest.mark.compile
@pytest.mark.parametrize("clusters", [74, 37])
def test_traced_units_are_the_twins(clusters, tmp_path):
    """The same schedule functions on traced Int32 values (as the kernel's host code and warps run
    them, compiled and executed by CuTeDSL on this CPU) give the Python twin's units, unit by unit."""
    from host_jit import printed_words

    cases = [(256, 64), (1024, 128), (16, 128), (4, 128), (1, 448), (3, 5), (100, 64), (2 * clusters + 7, 200), (clusters, 64)]
    words = printed_words(TRACED, [clusters] + [f"{t},{k}" for t, k in cases], tmp_path)
    got, case, i = {}, None, 0
    while i < len(words):
        tag = words[i]
        if tag == "case":
            case = (int(words[i + 1]), int(words[i + 2]))
            got[case] = {"units": []}
            i += 3
        elif tag == "grid":
            got[case]["grid"] = tuple(int(w) for w in words[i + 1:i + 4])
            i += 4
        else:
            assert tag == "unit", tag
            got[case]["units"].append(tuple(int(w) for w in words[i + 1:i + 5]))
            i += 5
    assert set(got) == set(cases)
    for tiles, k_tiles in cases:
        parts = schedule.tail_parts(tiles, clusters, k_tiles)
        assert got[(tiles, k_tiles)]["grid"] == (parts, *schedule.tail_units(tiles, clusters, parts))
        assert got[(tiles, k_tiles)]["units"] == schedule.dynamic_plan(tiles, clusters, k_tiles)
    assert {got[c]["grid"][0] for c in cases} >= {1, 2, 3, 4}  # every part count was traced


@pytest.mark.fast
def test_model_speedup_is_the_played_out_tail():
    """The B200 kit prints step 11 over step 10 beside this model: it must be the event model's ratio
    where every unit of a round starts together (one round of tail parts: 4096^3, 1024x1024x8192)."""
    assert step11.model_speedup(4096, 4096, 4096) == (2, Fraction(256, 240))
    assert step11.model_speedup(8192, 8192, 8192) == (1, 1)  # the tail stays whole
    assert step11.model_speedup(4096, 4096, 4096, dataclasses.replace(step11.Config(), stream_k=False)) == (1, 1)
    for m, n, k in ((4096, 4096, 4096), (1024, 1024, 8192), (12288, 12288, 12288)):
        tiles, k_tiles = -(-m // 256) * -(-n // 256), k // 64
        parts, ratio = step11.model_speedup(m, n, k)
        whole = max(r.end for r in sim.dynamic_tail(tiles, G_B200, k_tiles, split=False))
        split = max(r.end for r in sim.dynamic_tail(tiles, G_B200, k_tiles, split=True))
        assert parts > 1 and ratio == pytest.approx(whole / split, rel=0.02), (m, n, k)
