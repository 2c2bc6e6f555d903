"""Chapters 4-11: facts read from the Hopper steps' own objects.

Part of ``gemm_course.teaching.exercises`` (its docstring says how the checks work)."""

from __future__ import annotations

import functools
import math
from typing import Optional

from .common import NOT_ANSWERED, attempt, unanswered  # noqa: F401

# ---------------------------------------------------------------------------------------------
# chapters 4-11: facts read from the Hopper steps' own objects
# ---------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=None)
def _kernel_objects(step_key: str, config) -> dict:
    import cutlass.cute as cute

    from ..cute_basics import trace_kernel

    def read(objs):
        out = {"tile": tuple(objs["gemm"].tile_mnk), "threads": objs["gemm"].threads,
               "cluster": tuple(getattr(objs["gemm"], "cluster_shape_mnk", (1, 1, 1))[:2])}
        for name in ("a", "b"):
            layout = objs[f"{name}_smem_layout"]
            out[f"{name}_smem_shape"] = tuple(cute.size(layout, mode=[i]) for i in range(cute.rank(layout)))
        if "epi_smem_layout" in objs:
            layout = objs["epi_smem_layout"]
            out["epi_smem_shape"] = tuple(cute.size(layout, mode=[i]) for i in range(cute.rank(layout)))
        for name in ("a", "b", "c"):
            atom = objs.get(f"tma_atom_{name}")
            if atom is not None:
                out[f"tma_{name}_elements"] = cute.size(atom.layout_src_tv, mode=[1])
                out[f"tma_{name}_op"] = type(atom.op).__name__
        return out

    return trace_kernel(step_key, read, config)


def kernel_objects(step, config=None) -> dict:
    """Facts about a Hopper step read from the objects its host code builds (traced on the CPU):

    ``tile`` (bM, bN, bK), ``threads``, ``cluster`` (cluster_m, cluster_n), the shared-memory
    shapes of A and B (rows, K, stages) and of the epilogue's staging buffers (rows, cols,
    buffers), and for each TMA atom its operation (``tma_b_op``: ``CopyBulkTensorTileG2SMulticastOp``
    when it multicasts) and the elements of the tile it covers (``tma_b_elements``: for a multicast
    atom, the whole tile the cluster shares; each CTA's partition issues a slice of it).
    """
    from ...runtime import ladder

    s = ladder.get(step)
    return dict(_kernel_objects(s.key, s.default if config is None else config))


def occupancy_of(step, config=None) -> dict:
    """CTAs per SM of a compiled step (:func:`gemm_course.teaching.sim.occupancy` of its registers, threads,
    shared memory and stages)."""
    from ...runtime import arch, ladder
    from .. import inspect, sim

    s = ladder.get(step)
    config = s.default if config is None else config
    rep = inspect.report(arch.compile_step(s, config, "sm_90a"))
    facts = kernel_objects(s, config)
    stages = facts["a_smem_shape"][2] if len(facts["a_smem_shape"]) > 2 else 1
    return sim.occupancy(rep.resources.registers, facts["threads"], rep.smem_bytes, stages)


def problem_shape(m: int, n: int):
    """A stand-in for C with only a shape, so that a step's host-side index math (``grid``,
    ``cluster_grid``) can be evaluated with Python ints."""
    import types

    return types.SimpleNamespace(shape=(m, n))


def step_schedule(step, m: int, n: int, cluster_tile=None) -> dict:
    """The static schedule of a persistent step at an m x n output (:func:`gemm_course.teaching.sim.persistent_schedule`),
    from the step's own ``cluster_grid``, ``max_clusters`` (the grid size) and ``cluster_tile``.

    ``cluster_tile``: override the step's mapping. Step 10's kernel calls a ``cute.jit`` copy of
    :func:`gemm_course.rules.tile_order.gilbert_tile` (it only runs traced), so pass the plain function for it.
    """
    from ...runtime import ladder
    from .. import sim

    s = ladder.get(step)
    gemm = s.load().Gemm(s.default)
    clusters_m, clusters_n = gemm.cluster_grid(problem_shape(m, n))
    return sim.persistent_schedule(clusters_m, clusters_n, gemm.max_clusters, cluster_tile or gemm.cluster_tile)


# ---- chapter 4 ----------------------------------------------------------------------------------


def check_tma_stores(epi_n: int, stores: int) -> str:
    """How many TMA stores does step 4 issue per output tile with sub-tiles ``epi_n`` columns wide?
    Compiled and counted in the PTX."""
    from ...runtime import arch, ladder
    from .. import inspect

    s = ladder.get("sm90/4")
    config = s.config(epi_n=epi_n)
    ok, why = s.check_config(config)
    assert ok, f"epi_n={epi_n} is not a valid choice: {why}"
    actual = inspect.ptx_count(arch.compile_step(s, config, "sm_90a").ptx, "cp.async.bulk.tensor.2d.global.shared")
    assert stores == actual, (
        f"not {stores}: the compiled PTX with epi_n={epi_n} has another count of TMA stores per tile. Hint: one store "
        f"per sub-tile, and the tile is {config.tile_n} columns wide."
    )
    return f"right: {config.tile_n} / {epi_n} = {actual} TMA stores per tile"


def check_staging_bytes(nbytes: int, step: str = "sm90/4") -> str:
    """How many bytes of shared memory does one epilogue staging buffer of the step take?"""
    facts = kernel_objects(step)
    rows, cols, _ = facts["epi_smem_shape"]
    actual = rows * cols * 2
    assert nbytes == actual, (
        f"not {nbytes} B. Hint: a buffer holds one sub-tile of bf16 (2 bytes each); the kernel's staging layout "
        f"has {facts['epi_smem_shape'][2]} buffers."
    )
    return f"right: {rows} x {cols} bf16 = {actual} B per staging buffer"


# ---- chapter 5 ----------------------------------------------------------------------------------


def check_ctas_per_sm(step, ctas: int, **config_changes) -> str:
    """How many CTAs of ``step`` (with ``config_changes``) fit on one SM? Compiled, then counted
    against the SM's registers, shared memory and warps (:func:`gemm_course.teaching.sim.occupancy`)."""
    from ...runtime import ladder

    s = ladder.get(step)
    config = s.config(**config_changes)
    occ = occupancy_of(s, config)
    assert ctas == occ["ctas"], (
        f"not {ctas}. The compiled kernel uses {occ['registers']} registers per thread for {occ['threads']} threads and "
        f"{occ['smem_bytes']} B of shared memory. Hint: a warp's registers are allocated in units of 256, an SM has "
        "65536 registers and 228 KiB of shared memory (1 KiB reserved per CTA)."
    )
    return f"right: {occ['ctas']} CTA(s) per SM, limited by {' and '.join(occ['limiter'])}"


def check_b_bytes_per_cta(cluster_m: int, nbytes: int) -> str:
    """With clusters of ``cluster_m`` x 1, how many bytes of B does each CTA's TMA copy per K tile?"""
    from ...runtime import ladder

    s = ladder.get("sm90/5")
    facts = kernel_objects(s, s.config(cluster_m=cluster_m))
    _, bn, bk = facts["tile"]
    cm = facts["cluster"][0]
    actual = bn * bk * 2 // cm
    assert nbytes == actual, (
        f"not {nbytes} B. Hint: the B tile is {bn} x {bk} bf16 (2 bytes each), and the {cm} CTA(s) of a cluster "
        "column each load an equal slice of it."
    )
    how = f"multicast ({facts['tma_b_op']})" if cm > 1 else f"no multicast ({facts['tma_b_op']})"
    return f"right: {bn} x {bk} x 2 B / {cm} = {actual} B of B per CTA per K tile, {how}"


# ---- chapter 6 ----------------------------------------------------------------------------------


def check_max_stages(tile_n: int, stages: int) -> str:
    """The most shared-memory stages step 6 accepts with ``tile_n`` (its ``check_config``)."""
    from ...runtime import ladder

    s = ladder.get("sm90/6")
    valid = [n for n in range(1, 33) if s.check_config(s.config(tile_n=tile_n, stages=n))[0]]
    assert valid, f"no stage count is valid with tile_n={tile_n}"
    actual = max(valid)
    if stages > actual:
        verdict = "too many: " + s.check_config(s.config(tile_n=tile_n, stages=stages))[1]
    else:
        verdict = f"too few: {stages} stages fit, and so does one more"
    assert stages == actual, (
        f"not {stages} ({verdict}). Hint: a stage holds (tile_m + tile_n) x 64 bf16; the epilogue's staging "
        "buffers and 3 KiB of barriers and alignment come on top, within 227 KiB."
    )
    return f"right: {actual} stages with tile_n={tile_n}; {actual + 1} would not fit"


def check_consumer_registers(producer_registers: int, consumer_registers: int) -> str:
    """If the producer keeps ``producer_registers`` per thread, what is the most each consumer thread
    can take? Step 6's ``check_config`` decides (multiples of 8, within the CTA's launch allocation)."""
    from ...runtime import ladder

    s = ladder.get("sm90/6")

    def ok(c):
        return s.check_config(s.config(producer_registers=producer_registers, consumer_registers=c))[0]

    assert ok(consumer_registers), (
        f"{producer_registers} / {consumer_registers} is not a valid split: "
        + s.check_config(s.config(producer_registers=producer_registers, consumer_registers=consumer_registers))[1]
    )
    assert not ok(consumer_registers + 8), (
        f"{consumer_registers} fits, but so does {consumer_registers + 8}. Hint: 128 producer threads and 256 consumer "
        "threads share the CTA's launch allocation (384 x 168 = 64512 of the SM's 65536 registers); setmaxnreg "
        "takes multiples of 8."
    )
    return (f"right: 128 x {producer_registers} + 256 x {consumer_registers} = "
            f"{128 * producer_registers + 256 * consumer_registers} <= 64512, the CTA's launch allocation")


# ---- chapter 7 ----------------------------------------------------------------------------------


def check_grid_ctas(tiles_per_cta: int, size: int, ctas: int) -> str:
    """How many CTAs does step 7 launch for a size^3 GEMM with ``tiles_per_cta``? Its own ``grid``."""
    from ...runtime import ladder

    s = ladder.get("sm90/7")
    gemm = s.load().Gemm(s.config(tiles_per_cta=tiles_per_cta))
    gx, gy, gz = gemm.grid(problem_shape(size, size), problem_shape(size, size))
    actual = gx * gy * gz
    assert ctas == actual, (
        f"not {ctas}. Hint: {size}/{gemm.tile_mnk[0]} tile rows, {size}/{gemm.tile_mnk[1]} tile columns, and each CTA "
        f"now computes {tiles_per_cta} neighbouring tiles along N."
    )
    return f"right: grid {gx} x {gy} = {actual} CTAs, each computing {tiles_per_cta} tile(s)"


# ---- chapter 8 ----------------------------------------------------------------------------------


def check_persistent_tiles(size: int, cluster: int, tiles: int, step: str = "sm90/8") -> str:
    """How many cluster-tiles does cluster ``cluster`` compute in a size^3 GEMM (step 8's scheduler)?"""
    sched = step_schedule(step, size, size)
    actual = sched["tiles_per_cluster"][cluster]
    assert tiles == actual, (
        f"not {tiles}. Hint: {sched['tiles']} cluster-tiles, {sched['clusters']} clusters; cluster c takes "
        "c, c + G, c + 2G, ... while the index is below the number of tiles."
    )
    return f"right: cluster {cluster} computes {actual} of the {sched['tiles']} cluster-tiles"


def check_idle_clusters(size: int, idle: int, step: str = "sm90/8") -> str:
    """How many clusters sit idle during the last wave of a size^3 GEMM?"""
    sched = step_schedule(step, size, size)
    actual = sched["idle_in_last_wave"]
    assert idle == actual, (
        f"not {idle}. Hint: {sched['tiles']} cluster-tiles mod {sched['clusters']} clusters is the size of the last wave "
        "(a remainder of 0 means a full last wave)."
    )
    return f"right: the last wave has {sched['last_wave_tiles']} cluster-tiles, so {actual} clusters idle"


# ---- chapter 9 ----------------------------------------------------------------------------------


def check_wave_panels(kind: str, tiles_m: int, tiles_n: int, a_panels: int, b_panels: int, wave: int = 66,
                      group: int = 8) -> str:
    """How many distinct A row panels and B column panels does the first wave of ``wave`` tiles touch
    in order ``kind`` on a tiles_m x tiles_n grid? The L2 model (:func:`gemm_course.teaching.sim.l2_traffic`) counts."""
    from ...rules import tile_order
    from .. import sim

    t = sim.l2_traffic(tile_order.order(kind, tiles_m, tiles_n, group), sms=wave)
    actual = (t.a_per_wave[0], t.b_per_wave[0])
    assert (a_panels, b_panels) == actual, (
        f"not ({a_panels}, {b_panels}). Hint: list the first {wave} tiles of the order; count the distinct rows m "
        "(A panels) and the distinct columns n (B panels)."
    )
    return f"right: the first wave of {wave} tiles touches {actual[0]} A panels and {actual[1]} B panels"


# ---- chapter 10 ---------------------------------------------------------------------------------


def check_gilbert_tile(tiles_m: int, tiles_n: int, index: int, tile) -> str:
    """Which (m, n) does the Gilbert order visit at ``index`` on a tiles_m x tiles_n grid?"""
    from ...rules import tile_order

    actual = tile_order.gilbert(tiles_m, tiles_n)[index]
    assert tile_order.gilbert_tile(index, tiles_m, tiles_n) == actual  # the kernel's descent agrees
    assert tuple(tile) == actual, (
        f"not {tuple(tile)}. Hint: the curve starts at (0, 0) and heads along the longer side (n on a tie), "
        "but it first fills a small block near the corner, so it turns early: draw it with "
        "viz.tile_orders(tiles_m, tiles_n, kinds=('gilbert',)) and follow the white line from the dot."
    )
    return f"right: index {index} of the {tiles_m} x {tiles_n} Gilbert order is tile {actual}"


# ---- chapter 11 ---------------------------------------------------------------------------------


def check_tail_share(size: int, tail_tiles: int, k_tiles: int, step: str = "sm90/11") -> str:
    """In a size^3 GEMM, how many cluster-tiles does the last partial wave hold, and how many of
    their K tiles does the busiest cluster run once the tail is split? The step's own grid and
    :func:`gemm_course.rules.schedule.plan` decide."""
    from ...rules import schedule
    from ...runtime import ladder

    s = ladder.get(step)
    gemm = s.load().Gemm(s.default)
    shape = problem_shape(size, size)
    clusters_m, clusters_n = gemm.cluster_grid(shape)
    tiles, k = clusters_m * clusters_n, size // gemm.tile_mnk[2]
    clusters = gemm.launched_clusters(shape, shape)  # A is size x size too: shape[1] is K
    whole, tail, _, _, _ = schedule.split_tail(tiles, clusters, k)
    assert tail > 0, f"at {size}^3 the tail is not split ({tiles} cluster-tiles over {clusters} clusters); try 8192"
    busiest = max(sum(e - b for index, b, e in units if index >= whole) for units in schedule.plan(tiles, clusters, k))
    assert tail_tiles == tail, (
        f"not {tail_tiles} tail tiles. Hint: {tiles} cluster-tiles over {clusters} clusters; the tail is what the "
        "full waves leave over (a remainder)."
    )
    assert k_tiles == busiest, (
        f"{tail_tiles} tail tiles is right, but not {k_tiles} K tiles. Hint: the tail's {tail} x {k} K tiles are cut "
        f"into {clusters} nearly equal runs; the busiest gets the rounded-up share."
    )
    return (f"right: {tail} tail tiles; split over {clusters} clusters, the busiest runs {busiest} of their "
            f"{tail * k} K tiles instead of a whole tile's {k}")


def _placements(record: Optional[dict]) -> list:
    """Made-up placements of a grid's clusters (cluster index -> GPC), and the recorded one if any."""
    import random

    rng = random.Random(0)
    cases = [[c % 8 for c in range(66)],  # dealt out to 8 GPCs in turn, as on the H200
             [0] * 12,  # one GPC
             list(range(10)),  # every cluster its own GPC
             [7, 3, 7, 3, 5, 7, 3, 5],  # ids that are neither 0.. nor in order
             [rng.randrange(6) for _ in range(40)]]
    if record is not None:
        from ...rules import placement

        p = placement.from_probe_record(record)
        cases.insert(0, [p["groups"][sm] for sm in p["cluster_sms"]])
    return cases


def check_gpc_places(fn, record: Optional[dict] = None) -> str:
    """Write ``fn(gpc_of)``: ``gpc_of[c]`` is the GPC that cluster ``c`` of the grid landed in; return
    ``places``, where ``places[c]`` is cluster c's place in a wave, so that the places are a
    permutation of ``range(len(gpc_of))`` and each GPC's clusters take consecutive places (step
    11's host code does it with ``placement.order_from_placement``). Checked on made-up placements
    and on ``record``, a placement probe record (``python -m gemm_course.rules.placement``), if given."""
    for gpc_of in _placements(record):
        places = fn(list(gpc_of))
        assert places is not ... and places is not None, "your function returns nothing yet: write its body"
        places, n = list(places), len(gpc_of)
        assert sorted(places) == list(range(n)), (
            f"for {n} clusters the places must be 0 .. {n - 1}, each once; got {places[:12]}"
            f"{' ...' if n > 12 else ''}. Hint: sort the cluster indices by GPC and number them in that order."
        )
        for g in set(gpc_of):
            mine = sorted(places[c] for c, h in enumerate(gpc_of) if h == g)
            assert mine == list(range(mine[0], mine[0] + len(mine))), (
                f"the clusters of GPC {g} take places {mine[:10]}{' ...' if len(mine) > 10 else ''}, not consecutive "
                f"ones (gpc_of = {gpc_of[:12]}{' ...' if n > 12 else ''}). Hint: a place is a rank in the order "
                "(GPC, cluster index)."
            )
    return (f"right: on {len(_placements(record))} placements{' (the recorded probe among them)' if record else ''} "
            "each GPC's clusters take consecutive places, and every cluster one place")


def check_tile_width(fn) -> str:
    """Write ``fn(m, n, clusters)``: the tile width (256, 192 or 128) step 11's host picks for an
    m x n output on a GPU running ``clusters`` clusters at once (``tile_rule.choose_tile_n``).
    Compared with the rule on a grid of shapes and two GPU sizes."""
    from ...rules import tile_rule

    for clusters in (66, 57):  # an H200 / H100 SXM (132 SMs) and an H100 PCIe (114 SMs), in clusters of two
        for m in range(512, 8193, 512):
            for n in range(512, 8193, 512):
                want = tile_rule.choose_tile_n(m, n, clusters)
                got = fn(m, n, clusters)
                assert got is not ... and got is not None, "your function returns nothing yet: write its body"
                assert got == want, (
                    f"{m} x {n} on {clusters} clusters: the rule picks 128 x {want}, you say {got}. Hint: "
                    "tile_rule.waves(m, n, width, clusters) counts the waves (their cluster shape included); keep 256 "
                    f"from {tile_rule.MANY_WAVES} waves of it on, else the best wave_fill, the wider of any within "
                    f"{tile_rule.FILL_TIE}."
                )
    return "right: the width step 11's config_for picks, on 256 shapes for each of two GPU sizes"


def check_tail_parts(fn) -> str:
    """Write ``fn(tiles, clusters, k_tiles)``: the parts per tail tile the Blackwell step 11's host
    picks (``schedule.tail_parts``), from ``schedule.tail_span``. Compared with the rule on every
    grid of 1-300 cluster-tiles, six K lengths and two cluster counts."""
    from ...rules import schedule

    for clusters in (74, 37):  # a B200's pairs (148 SMs), and its clusters of four
        for k_tiles in (1, 3, 16, 64, 128, 448):
            for tiles in range(1, 301):
                want = schedule.tail_parts(tiles, clusters, k_tiles)
                got = fn(tiles, clusters, k_tiles)
                assert got is not ... and got is not None, "your function returns nothing yet: write its body"
                assert got == want, (
                    f"{tiles} cluster-tiles of {k_tiles} K tiles on {clusters} clusters: the rule cuts each tail "
                    f"tile into {want}, you say {got}. Hint: the tail is tiles % clusters tiles; for p in 2 .. "
                    f"{schedule.MAX_PARTS} (and p <= k_tiles), schedule.tail_span(tail, clusters, p, k_tiles) / p "
                    "is its length in K tiles; keep the shortest, and 1 unless it is shorter than k_tiles."
                )
    return "right: the parts sm100/11's host picks, on 3600 grids"


# The A/B runs that timed several tile widths on the same shapes, in the same process (results/tuning).
WIDTH_RUNS = ("tune_run36_tile_192", "tune_run37_few_wave_clusters", "tune_run40_few_wave_widths",
              "tune_run42_fill_ties", "tune_run45_tile_widths")


@functools.lru_cache(maxsize=1)
def tile_width_cases() -> tuple:
    """Every (run, shape, repetition, {tile width: ratio to cuBLAS}) of :data:`WIDTH_RUNS` that timed
    two widths or more side by side: for each width the best ratio among the configurations of that
    width the run timed (its variants' recorded or named configs, ``records.row_config``)."""
    import collections

    from ...measure import records as rec
    from ...runtime import ladder

    step = ladder.get("sm90/11")
    cases = []
    for name in WIDTH_RUNS:
        tune = rec.load_tuning(name)
        if tune is None:
            continue
        seen, table = collections.Counter(), collections.defaultdict(dict)
        for row in tune["rows"]:
            config = rec.row_config(step, row) if row["variant"] != "cublas" else None
            if config is None:
                continue
            repetition = seen[row["shape"], row["variant"]]  # a run that timed a shape twice (both orders)
            seen[row["shape"], row["variant"]] += 1
            widths = table[row["shape"], repetition]
            widths[config.tile_n] = max(widths.get(config.tile_n, 0.0), row["ratio_to_cublas"])
        cases += [(name, shape, rep, dict(widths)) for (shape, rep), widths in table.items() if len(widths) > 1]
    return tuple(cases)


def score_tile_rule(fn, clusters: int = 66) -> str:
    """An open problem, scored rather than checked: ``fn(m, n, k, clusters)`` picks a tile width (a
    multiple of 16 from 64 to 256) for an m x n x k problem on ``clusters`` clusters of two (66 on
    an H200). On every shape the tuning runs timed with several widths (:func:`tile_width_cases`),
    your pick's measured speed is divided by the fastest measured width's; the score is the
    geometric mean of that over the shapes where your pick was measured, beside step 11's rule on
    the same shapes. A pick no run measured is counted, not scored."""
    from ...rules import tile_rule

    cases = tile_width_cases()
    assert cases, "no tuning runs with several widths under results/tuning/"
    yours, rule, unmeasured = [], [], 0
    for _, shape, _, widths in cases:
        m, n, k = map(int, shape.split("x"))
        got = fn(m, n, k, clusters)
        assert got is not ... and got is not None, "your function returns nothing yet: write its body"
        assert isinstance(got, int) and 64 <= got <= 256 and got % 16 == 0, (
            f"{shape}: {got!r} is not a tile width step 11 admits (an int, a multiple of 16 from 64 to 256)")
        if got not in widths:
            unmeasured += 1
            continue
        best = max(widths.values())
        yours.append(widths[got] / best)
        rule.append(widths[tile_rule.choose_tile_n(m, n, clusters)] / best)
    assert yours, "none of your picks was measured: the runs timed widths 128-256 on these shapes (see tile_width_cases)"
    geo = lambda values: math.exp(sum(map(math.log, values)) / len(values))  # noqa: E731
    return (f"your rule: {geo(yours):.3f} of the fastest measured width, over the {len(yours)} of {len(cases)} "
            f"shape-runs where your pick was timed ({unmeasured} picks not timed by any run); step 11's rule on "
            f"the same {len(yours)}: {geo(rule):.3f}")


def check_sweep_geomean(value: float, step: Optional[str] = None, records=None) -> str:
    """The geometric mean over the sweep the book shows of ``step`` (``records.latest_sweep``; the
    final Hopper step by default) of its ratio to cuBLAS (``ratio_to_cublas``)."""
    from ...measure import records as rec
    from ...runtime import ladder

    step = step or ladder.final("sm90").key
    sweep = rec.latest_sweep(rec.load_records() if records is None else records, step)
    assert sweep, f"no sweep record of {step} under results/"
    ratios = [r["ratio_to_cublas"] for r in sweep]
    actual, arithmetic = rec.geomean(ratios), sum(ratios) / len(ratios)
    # the ratios lie near 1, so the arithmetic mean is within a few 1e-4 of the geometric one: compare closely
    assert not (math.isclose(value, arithmetic, rel_tol=1e-5) and not math.isclose(value, actual, rel_tol=1e-5)), (
        f"{value:.5f} is the arithmetic mean of the {len(ratios)} ratios. Hint: the geometric mean of x_1..x_n is "
        "exp(mean(log x_i))."
    )
    assert math.isclose(value, actual, rel_tol=1e-4), (
        f"not {value:.5f}. Hint: the geometric mean of x_1..x_n is exp(mean(log x_i)); use every record of the "
        "sweep the book shows (records.latest_sweep), and compute it rather than round it."
    )
    return f"right: geometric mean {actual:.3f} over {len(sweep)} shapes"
