"""Blackwell steps 4-10 on the CPU: what their compiled PTX and cubin prove without a B200.

No CPU emulator runs tcgen05, so these tests are the kernels' safety net here: the chapter's
instructions are present and the wrong ones absent, the constants read from the PTX (bytes each
stage's barrier expects, tensor-memory columns, barrier arrival counts, threads) are what the
design says, resources fit sm_100, and the orderings that keep a CTA pair or a cluster from
hanging or corrupting memory hold in program order.
"""

from __future__ import annotations

import dataclasses

import pytest

from gemm_course.kernels.sm100 import step05_cta_pair_multicast as step5
from gemm_course.kernels.sm100 import step06_warp_specialized as step6
from gemm_course.kernels.sm100 import step07_tmem_double_buffer as step7
from gemm_course.runtime import arch, ladder
from gemm_course.runtime.problem import GemmProblem
from gemm_course.teaching import inspect

SMEM_CAPACITY = 232448  # bytes per CTA on sm_100
TMEM_COLUMNS = 512
PAIR_STEPS = [f"sm100/{n}" for n in range(5, 12)]
THREADS = {4: 128, 5: 128, 6: 192, 7: 192, 8: 224, 9: 224, 10: 224, 11: 224}


def compiled(key, **changes):
    step = ladder.get(key)
    return arch.compile_step(step, step.config(**changes), target="sm_100a")


@pytest.fixture(scope="module", params=[f"sm100/{n}" for n in range(4, 11)] + ["sm100/11:stream_k=False"])
def default(request):
    key, _, knob = request.param.partition(":")
    return compiled(key, stream_k=False) if knob else compiled(key)


# ---- instructions --------------------------------------------------------------------------------


@pytest.mark.compile
def test_epilogue_goes_through_shared_memory(default):
    """Step 4 on: the accumulator leaves through a staging buffer and TMA stores, never st.global."""
    ptx, cfg = default.ptx, default.config
    assert inspect.ptx_count(ptx, "st.global") == 0
    assert inspect.ptx_count(ptx, "cp.async.bulk.tensor.2d.global.shared::cta") == cfg.tile_n // cfg.epi_n
    assert inspect.ptx_count(ptx, "cp.async.bulk.commit_group") == cfg.tile_n // cfg.epi_n
    # each staging buffer is written by the threads and read by the copy engine: a proxy fence between
    assert inspect.ptx_count(ptx, "fence.proxy.async.shared::cta") >= cfg.tile_n // cfg.epi_n
    assert inspect.ptx_count(ptx, "cp.async.bulk.wait_group.read") >= 1  # a buffer is reused only once read


@pytest.mark.compile
def test_step11_writes_to_global_memory_only_to_hand_partial_sums_over():
    """With the split tail, step 11's st.global are the hand-over's: each thread's row of fp32
    partial sums (tile_n values), a flag raised with release, and the resets of flags and counter."""
    art = compiled("sm100/11")
    cfg = art.config
    # a row of partial sums written (one 32-bit store per value), a consumed flag and the counter reset
    assert inspect.ptx_count(art.ptx, "st.global.b32") == cfg.tile_n + 2
    assert inspect.ptx_count(art.ptx, "ld.global.b32") == cfg.tile_n  # the last part reads a row per other part
    assert inspect.ptx_count(art.ptx, "st.release.gpu.global.b32") == 1
    assert inspect.ptx_count(art.ptx, "cp.async.bulk.tensor.2d.global.shared::cta") == cfg.tile_n // cfg.epi_n


@pytest.mark.compile
def test_step4_pairs_16x256b_loads_with_stmatrix():
    art = compiled("sm100/4")
    cfg = art.config
    assert inspect.ptx_count(art.ptx, "tcgen05.ld.sync.aligned.16x256b") == cfg.tile_n // cfg.epi_n
    # stmatrix .x4 stores 4 x 64 bf16 per warp; 4 warps share a 64 x epi_n sub-tile
    assert inspect.ptx_count(art.ptx, "stmatrix.sync.aligned.m8n8.x4") == cfg.tile_m * cfg.tile_n // (4 * 256)
    assert inspect.ptx_count(art.ptx, "st.shared") == 0


@pytest.mark.compile
def test_step4_with_128_rows_uses_32x32b_and_vector_stores():
    art = compiled("sm100/4", tile_m=128)
    cfg = art.config
    assert inspect.ptx_count(art.ptx, "tcgen05.ld.sync.aligned.32x32b") == cfg.tile_n // cfg.epi_n
    assert inspect.ptx_count(art.ptx, "stmatrix") == 0
    # each thread owns one row: epi_n bf16 = 2 * epi_n bytes in 16-byte vectors per sub-tile
    assert inspect.ptx_count(art.ptx, "st.shared.v4") == (cfg.tile_n // cfg.epi_n) * (2 * cfg.epi_n // 16)


@pytest.mark.compile
@pytest.mark.parametrize("key", PAIR_STEPS)
def test_the_pair_shares_one_mma(key):
    ptx = compiled(key).ptx
    assert inspect.ptx_count(ptx, "tcgen05.mma.cta_group::2") == 64 // 16  # four k16 MMAs per K tile
    assert inspect.ptx_count(ptx, "tcgen05.mma.cta_group::1") == 0
    # each CTA's two TMA loads (A, B) signal the leader's barrier and may multicast
    g2s = [line for line in ptx.splitlines() if "cp.async.bulk.tensor.2d.shared::cluster.global" in line]
    assert len(g2s) == 2 and all(".cta_group::2" in line and "multicast::cluster" in line for line in g2s)
    # the leader's commit arrives on the barriers of every CTA that loaded into the stage
    assert inspect.ptx_count(ptx, "tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster.multicast::cluster") >= 1
    assert inspect.ptx_count(ptx, "tcgen05.alloc.cta_group::2") == 1
    assert inspect.ptx_count(ptx, "tcgen05.dealloc.cta_group::2") == 1
    assert inspect.ptx_count(ptx, "tcgen05.relinquish_alloc_permit.cta_group::2") == 1


@pytest.mark.compile
def test_the_leader_clears_the_barrier_address_bit_of_the_peer():
    """TMA loads of either CTA signal the *leader's* full barrier: the address is masked to CTA 0 of the pair."""
    ptx = compiled("sm100/5").ptx
    assert "-16777217" in ptx  # and.b32 addr, addr, ~(1 << 24): the peer bit of a shared::cluster address


@pytest.mark.compile
@pytest.mark.parametrize("key", ["sm100/5", "sm100/6", "sm100/7"])
def test_no_scheduler_before_step_8(key):
    ptx = compiled(key).ptx
    assert inspect.ptx_count(ptx, "clusterlaunchcontrol") == 0


@pytest.mark.compile
@pytest.mark.parametrize("key", ["sm100/8", "sm100/9", "sm100/10", "sm100/11"])
def test_cluster_launch_control(key):
    ptx = compiled(key).ptx
    tries = [line for line in ptx.splitlines() if "clusterlaunchcontrol.try_cancel" in line]
    assert len(tries) == 1 and "multicast::cluster::all" in tries[0]  # one scheduler warp; every CTA gets the answer
    assert inspect.ptx_count(ptx, "clusterlaunchcontrol.query_cancel.is_canceled") >= 3  # scheduler, TMA, MMA, epilogue
    assert inspect.ptx_count(ptx, "clusterlaunchcontrol.query_cancel.get_first_ctaid::x") >= 2  # TMA and epilogue need the tile


@pytest.mark.compile
@pytest.mark.parametrize("key", ["sm100/8", "sm100/10", "sm100/11"])
def test_clc_answer_is_read_before_the_proxy_fence_and_released_after(key):
    """Each decode: query_cancel (generic proxy read), then fence.proxy.async, then the release arrive."""
    ptx = compiled(key).ptx
    lines = ptx.splitlines()
    fences = inspect.instruction_positions(ptx, "fence.proxy.async.shared::cta")
    arrives = inspect.instruction_positions(ptx, "mbarrier.arrive")
    queries = inspect.instruction_positions(ptx, "clusterlaunchcontrol.query_cancel.is_canceled")
    assert len(queries) >= 3
    for q in queries:
        fence = next(f for f in fences if f > q)
        release = next(a for a in arrives if a > q)
        assert fence < release, lines[q:release + 1]


@pytest.mark.compile
@pytest.mark.parametrize("key", PAIR_STEPS)
def test_the_pair_allocates_tensor_memory_after_the_cluster_wait(key):
    """tcgen05.alloc.cta_group::2 needs the peer CTA running: the first cluster wait comes first."""
    ptx = compiled(key).ptx
    waits = inspect.instruction_positions(ptx, "barrier.cluster.wait")
    allocs = inspect.instruction_positions(ptx, "tcgen05.alloc.cta_group::2")
    assert waits and allocs and waits[0] < allocs[0]


@pytest.mark.compile
@pytest.mark.parametrize("key,after,before", [("sm100/2", 1, 0), ("sm100/3", 1, 0), ("sm100/4", 1, 0),
                                               ("sm100/5", 1, 0), ("sm100/6", 1, 0), ("sm100/7", 2, 1),
                                               ("sm100/8", 2, 1), ("sm100/10", 2, 1), ("sm100/11", 2, 1)])
def test_accumulator_hand_offs_are_fenced(key, after, before):
    """The PTX memory model's pattern for tensor memory handed over through an mbarrier: a
    tcgen05.fence::after_thread_sync after the wait (epilogue: accumulator full, from step 2 on;
    MMA warp from step 7: accumulator empty), before the epilogue's first tcgen05.ld, and a
    ::before_thread_sync before the epilogue's release."""
    ptx = compiled(key).ptx
    assert ptx.count("tcgen05.fence::after_thread_sync") == after
    assert ptx.count("tcgen05.fence::before_thread_sync") == before
    first_load = inspect.instruction_positions(ptx, "tcgen05.ld")[0]
    assert any(p < first_load for p in inspect.instruction_positions(ptx, "tcgen05.fence::after_thread_sync"))
    if before:  # the release fence follows the epilogue's last tcgen05.wait::ld
        last_wait = inspect.instruction_positions(ptx, "tcgen05.wait::ld")[-1]
        assert inspect.instruction_positions(ptx, "tcgen05.fence::before_thread_sync")[0] > last_wait


@pytest.mark.compile
def test_no_setmaxnreg_on_blackwell():
    """The accumulator lives in tensor memory: no warp needs registers moved to it (Hopper's step 6 does)."""
    for key in PAIR_STEPS:
        assert inspect.ptx_count(compiled(key).ptx, "setmaxnreg") == 0, key


@pytest.mark.compile
def test_first_mma_of_a_tile_overwrites_the_accumulator():
    """Each K tile's first MMA takes a predicate worked out at run time (k_tile != 0); the other three
    accumulate. Steps 2-4 carry the flag through the loop (false on entry)."""
    for key in ("sm100/2", "sm100/3", "sm100/4"):
        assert inspect.mma_accumulate_predicates(compiled(key).ptx) == ["carried", True, True, True], key
    for key in PAIR_STEPS:
        assert inspect.mma_accumulate_predicates(compiled(key).ptx) == ["runtime", True, True, True], key


# ---- constants read from the PTX ---------------------------------------------------------------


@pytest.mark.compile
@pytest.mark.parametrize("key", [f"sm100/{n}" for n in range(4, 12)])
def test_threads_per_cta(key):
    assert inspect.threads_per_cta(compiled(key).ptx) == THREADS[int(key.split("/")[1])]


@pytest.mark.compile
def test_expect_tx_step4_counts_the_ctas_own_tiles():
    cfg = ladder.get("sm100/4").default
    assert inspect.expect_tx_bytes(compiled("sm100/4").ptx) == [(cfg.tile_m + cfg.tile_n) * cfg.tile_k * 2]


@pytest.mark.compile
@pytest.mark.parametrize("cluster", [(2, 1), (4, 1), (2, 2)])
@pytest.mark.parametrize("key", ["sm100/5", "sm100/6", "sm100/8", "sm100/11"])
def test_expect_tx_counts_the_pair_not_the_cluster(key, cluster):
    """The leader expects the A and B bytes of both CTAs of its pair per stage, whatever the cluster."""
    art = compiled(key, cluster_m=cluster[0], cluster_n=cluster[1])
    cfg = art.config
    pair_bytes = (2 * cfg.tile_m + cfg.tile_n) * cfg.tile_k * 2
    tx = [b for b in inspect.expect_tx_bytes(art.ptx) if b != 16]  # 16: the CLC answer
    assert tx == [pair_bytes]


@pytest.mark.compile
@pytest.mark.parametrize("cluster", [(2, 1), (4, 1), (2, 2), (4, 2)])
def test_barrier_arrival_counts(cluster):
    """full: one arrival (+ bytes); empty: one commit per loader that multicast into the stage;
    accumulator empty: every epilogue thread of both CTAs; tensor-memory dealloc: one warp."""
    art = compiled("sm100/6", cluster_m=cluster[0], cluster_n=cluster[1])
    stages = art.config.stages
    loaders = cluster[0] // 2 + cluster[1] - 1
    assert inspect.mbarrier_init_counts(art.ptx) == [1] * stages + [loaders] * stages + [1, 2 * 128, 32]


@pytest.mark.compile
def test_barrier_arrival_counts_with_two_accumulators_and_the_scheduler():
    art7 = compiled("sm100/7")
    s = art7.config.stages
    assert inspect.mbarrier_init_counts(art7.ptx) == [1] * s + [1] * s + [1, 1, 256, 256, 32]
    art8 = compiled("sm100/8")
    # CLC empty barrier: the scheduler warp and the six role warps of both CTAs
    assert inspect.mbarrier_init_counts(art8.ptx) == [1] * s + [1] * s + [1, 1, 256, 256] + [1, 32 * (1 + 2 * 6), 32]
    # step 11 adds no barrier: the tail's hand-over synchronises through global counters and flags
    assert inspect.mbarrier_init_counts(compiled("sm100/11").ptx) == inspect.mbarrier_init_counts(art8.ptx)


@pytest.mark.compile
@pytest.mark.parametrize("key", [f"sm100/{n}" for n in range(4, 12)])
def test_tmem_columns(key):
    """A power of two from 32 to 512, all the accumulator stages need, allocated and freed once."""
    art = compiled(key)
    (cols,) = inspect.tmem_alloc_columns(art.ptx)
    assert inspect.tmem_dealloc_columns(art.ptx) == [cols]
    assert 32 <= cols <= TMEM_COLUMNS and cols & (cols - 1) == 0
    stages = getattr(art.config, "acc_stages", 1)
    assert cols >= stages * art.config.tile_n
    assert cols == (step7.tmem_columns(art.config) if hasattr(art.config, "acc_stages") else art.config.tile_n)


@pytest.mark.compile
def test_two_accumulators_take_all_512_columns():
    assert inspect.tmem_alloc_columns(compiled("sm100/7").ptx) == [512]
    assert inspect.tmem_alloc_columns(compiled("sm100/7", acc_stages=1).ptx) == [256]
    assert not ladder.get("sm100/7").check_config(ladder.get("sm100/7").config(acc_stages=3))[0]


# ---- resources -----------------------------------------------------------------------------------


@pytest.mark.compile
@pytest.mark.parametrize("key", [f"sm100/{n}" for n in range(4, 12)])
def test_resources_fit_sm100(key):
    art = compiled(key)
    (res,) = inspect.resources(art.cubin)
    assert res.local == 0 and res.stack == 0, res
    smem = inspect.smem_request(art)
    assert smem <= SMEM_CAPACITY
    cols = inspect.tmem_alloc_columns(art.ptx)[0]
    if smem > SMEM_CAPACITY // 2:  # one CTA per SM: its tensor memory must fit alone
        assert cols <= TMEM_COLUMNS


@pytest.mark.compile
@pytest.mark.parametrize("key", ["sm100/5", "sm100/6", "sm100/7", "sm100/8", "sm100/11"])
def test_smem_estimate_is_an_upper_bound(key):
    """check_config refuses configs by the estimate, so it must never be below what the kernel takes."""
    step = ladder.get(key)
    for cfg in step.knob_grid():
        art = arch.compile_step(step, cfg, target="sm_100a")
        got = art.storage_smem  # the launch may ask for more (smem_to_fit_tmem), never less
        assert got <= step5.smem_estimate(cfg) <= got + 8192, (cfg, got)
        assert art.dynamic_smem >= got


@pytest.mark.compile
def test_stages_fill_shared_memory():
    step = ladder.get("sm100/6")
    cfg = step.default
    assert cfg.stages == step6.max_stages(cfg)
    assert compiled("sm100/6").dynamic_smem <= SMEM_CAPACITY
    ok, why = step.check_config(dataclasses.replace(cfg, stages=cfg.stages + 1))
    assert not ok and f"at most {cfg.stages}" in why


# ---- program order that keeps a pair or a cluster safe ---------------------------------------------


@pytest.mark.compile
@pytest.mark.parametrize("key", PAIR_STEPS)
def test_cluster_leaves_together_after_freeing_tensor_memory(key):
    """A peer may still arrive on our barriers or read our shared memory: the kernel's last act is a
    cluster barrier, after tensor memory is freed."""
    ptx = compiled(key).ptx
    dealloc = inspect.instruction_positions(ptx, "tcgen05.dealloc")[-1]
    waits = inspect.instruction_positions(ptx, "barrier.cluster.wait")
    arrives = inspect.instruction_positions(ptx, "barrier.cluster.arrive")
    assert waits and waits[-1] > dealloc and arrives[-1] > dealloc


@pytest.mark.compile
@pytest.mark.parametrize("key", PAIR_STEPS)
def test_pair_frees_tensor_memory_only_after_its_peer(key):
    """Before tcgen05.dealloc.cta_group::2 each CTA arrives on its peer's dealloc barrier and waits on its own."""
    ptx = compiled(key).ptx
    lines = ptx.splitlines()
    dealloc = inspect.instruction_positions(ptx, "tcgen05.dealloc")[-1]
    before = "\n".join(lines[max(0, dealloc - 60):dealloc])
    assert "mbarrier.arrive" in before and "shared::cluster" in before
    assert "mbarrier.try_wait" in before


@pytest.mark.compile
@pytest.mark.parametrize("key", PAIR_STEPS)
def test_allocation_permit_is_relinquished_after_allocating(key):
    ptx = compiled(key).ptx
    alloc = inspect.instruction_positions(ptx, "tcgen05.alloc")
    relinquish = inspect.instruction_positions(ptx, "tcgen05.relinquish_alloc_permit")
    assert len(alloc) == len(relinquish) == 1 and relinquish[0] > alloc[0]


# ---- configs and shapes ----------------------------------------------------------------------------


@pytest.mark.fast
@pytest.mark.parametrize("key", [f"sm100/{n}" for n in range(4, 12)])
def test_any_m_and_ragged_n(key):
    step = ladder.get(key)
    for shape in ((1, 8, 8), (100, 200, 72), (4096, 4096, 4096), (129, 264, 200)):
        assert step.can_implement(GemmProblem(*shape)) == (True, ""), shape


@pytest.mark.compile
def test_invalid_configs_refused_with_reasons():
    bad = {
        "sm100/4": [dict(tile_m=96), dict(epi_n=48), dict(epi_stages=3)],
        "sm100/5": [dict(tile_m=64), dict(cluster_m=1), dict(cluster_m=3), dict(cluster_n=4), dict(tile_k=32)],
        "sm100/6": [dict(stages=1), dict(stages=9)],
        "sm100/7": [dict(tiles_per_cta=0), dict(acc_stages=0), dict(acc_stages=4)],
        "sm100/8": [dict(clc_stages=0), dict(clc_stages=2), dict(acc_stages=3)],
        "sm100/9": [dict(group=0)],
    }
    for key, changes in bad.items():
        step = ladder.get(key)
        for change in changes:
            ok, why = step.check_config(step.config(**change))
            assert not ok and why, (key, change)
    with pytest.raises(ValueError):
        arch.compile_step(ladder.get("sm100/5"), ladder.get("sm100/5").config(cluster_m=1), target="sm_100a")


@pytest.mark.fast
def test_each_step_is_its_parent_plus_one_idea():
    """The class of step n subclasses step n-1's (the chapter's diff is against its parent)."""
    for n in range(4, 12):
        child, parent = ladder.get(f"sm100/{n}").load().Gemm, ladder.get(f"sm100/{n - 1}").load().Gemm
        assert issubclass(child, parent) and child is not parent, n


def _tmem_columns(ptx: str) -> int:
    found = []
    for v in inspect.tmem_alloc_columns(ptx):
        found += list(v) if isinstance(v, tuple) else [] if v is None else [v]
    return max(found)


@pytest.mark.compile
@pytest.mark.parametrize("key", [f"sm100/{n}" for n in range(2, 12)])
def test_resident_ctas_never_oversubscribe_tensor_memory(key):
    """Every config a step admits: the CTAs that fit on an SM by the compiled kernel's registers, threads
    and the shared memory its launch asks for, times the TMEM columns each allocates, stay within 512.
    (A CTA beyond that waits in tcgen05.alloc; in CTA pairs two halves could wait on each other.)"""
    from gemm_course.teaching import widgets

    step = ladder.get(key)
    for config in list(step.knob_grid()) or [step.default]:
        art = arch.compile_step(step, config, target="sm_100a")
        kernel = inspect.resources(art.cubin)[0]
        smem = inspect.smem_request(art)
        threads = inspect.threads_per_cta(art.ptx)
        columns = _tmem_columns(art.ptx)
        fit = widgets.ctas_per_sm(kernel.registers, threads, smem, "sm_100a")  # without tensor memory
        assert fit["ctas"] >= 1, (key, config)
        assert fit["ctas"] * columns <= 512, (key, config, fit, columns)
