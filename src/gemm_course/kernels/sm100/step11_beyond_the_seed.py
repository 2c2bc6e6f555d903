"""Step 11 (Blackwell) - beyond the seed: a stream-K tail for the last wave, under cluster launch control.

Parent: step 10. The seed's ladder ends at step 10. A grid of T cluster-tiles runs in waves of G
clusters (74 on a B200: 148 SMs, pairs of CTAs), and the last wave has only r = T mod G tiles:
at 4096^3, 256 tiles of 256 x 256 are 3 waves and 34 tiles, so 40 of 74 clusters idle through the
fourth tile time. Key differences:

* *The tail's tiles are cut along K.* The host picks the parts per tail tile that shorten the
  tail most, counting the hand-overs (``schedule.tail_parts``, ``schedule.tail_span``; 2 at
  4096^3: the tail takes half a tile time, not a whole one). It launches one cluster per *unit*: the whole
  tiles first, then every tail tile's parts (``schedule.tail_units``). Cluster launch control
  hands the units out as in step 8; each warp decodes a unit into its tile and K range
  (``schedule.tail_unit``), the TMA warp loads only that range and the MMA warp accumulates it.
* *Whoever comes last finishes.* No cluster may wait for a unit that has not started, and with a
  dynamic scheduler no plan says which unit starts when. So each part first adds one to its
  tile's counter (one per CTA of the tile, ``atom.add.acq_rel.gpu``); the epilogue warps read
  the old value from shared memory. Parts that are not last write their fp32 partial sums to a
  global workspace and raise a flag per slot (release); the last part waits for the other parts'
  flags (acquire: they counted themselves before writing, so they are running and never wait),
  adds their partial sums into its accumulator in tensor memory (``tcgen05.ld``, add,
  ``tcgen05.st``), resets the counter and flags for the next launch, and runs step 4's unchanged
  epilogue. The sum's order depends on arrival, so tail tiles may differ in the last bits from run
  to run.
* Each thread's partial sums are laid out value-major (value v of thread t at v x 128 + t), so a
  warp's 32 stores of one value are 128 contiguous bytes.

* *Single-CTA tiles for decode-sized M* (``cta_group`` = 1, ``config_for``): with M <= 128 rows a
  256-row pair's second CTA holds only padding, and the 128 x 256 tiles are too few to keep every
  SM streaming W (16 pair tiles at N = 4096). For such shapes the host picks single-CTA tiles
  (``tcgen05.mma.cta_group::1``, 64 or 128 rows), a width from 32 to 256 columns and clusters of one
  or two CTAs along N (x multicast) by the bytes the busiest SM must receive under the kernel's own
  tail schedule, and as many stages as fit (``gemm_course.rules.decode_rule``). The same kernel runs
  them: the MMA, the TMA atoms, the accumulator pipeline and the tensor-memory allocator take the
  single-CTA forms; every CTA leads itself; the stream-K hand-over reads a 64-row accumulator with
  the 16x256b shape its epilogue uses.

Expected (a model, not measured: no B200 here): at 4096^3 the tail's tile time halves, so the
run takes 3.5 tile times + a hand-over (``FIXUP_K_TILES``, a quarter tile at K = 4096) instead of
4, about 6% faster than step 10; on grids whose tail nearly fills the wave (8192^3: r = 62 of 74)
the rule keeps the tail whole and the kernel runs step 10's schedule. The B200 kit
(``scripts/b200_validate.sh``) times it.

Accepts: any M; N and K multiples of 8.
"""

import dataclasses

import cutlass
import cutlass.cute as cute
import cutlass.pipeline as pipeline
from cutlass.cute.nvgpu import OperandMajorMode, cpasync, tcgen05
from cutlass.memory import TmemAllocator

from ... import hardware
from ...rules import decode_rule, schedule
from ...runtime import watchdog
from . import step10_gilbert as parent
from .step02_tcgen05_tma import AB_DTYPE, ACC_DTYPE, Barrier
from .step04_tma_store import C_DTYPE, EPI_BARRIER_ID, can_implement, check_epilogue  # noqa: F401  (same shapes as step 4)
from .step06_warp_specialized import MMA_WARP, TMA_WARP, TMEM_FREE_BARRIER_ID, tmem_fence_after_sync, tmem_fence_before_sync
from .step07_tmem_double_buffer import check_accumulators
from .step08_persistent_clc import CLC_RESPONSE_BYTES, SCHEDULER_WARP


@dataclasses.dataclass(frozen=True)
class Config(parent.Config):
    stream_k: bool = True  # cut the last partial wave's tiles along K
    cta_group: int = 2  # CTAs per tcgen05.mma: 2 = the pair of steps 5-10, 1 = single-CTA tiles (small M)


def check_config(config: Config):
    if config.cta_group == 1:
        return check_single_cta(config)
    if config.cta_group != 2:
        return False, "cta_group must be 2 (CTA pairs, as in steps 5-10) or 1 (single-CTA tiles, for small M)"
    if config.stream_k and config.tile_m != 128:
        return False, "the stream-K hand-over reads tensor memory 32 lanes x 32 bits: tile_m must be 128 (or stream_k=False)"
    return parent.check_config(config)


def check_single_cta(config: Config):
    """What the single-CTA tiles need: a tcgen05.mma cta_group::1 shape, clusters of whole CTAs
    (no pair), and the rules of steps 4-9 that do not depend on the pair."""
    if config.tile_m not in (64, 128):
        return False, "with cta_group 1, tile_m must be 64 or 128 (the rows of a single-CTA tcgen05.mma)"
    if config.tile_n % 16 or not 32 <= config.tile_n <= 256:
        return False, "with cta_group 1, tile_n must be a multiple of 16 from 32 to 256 (a tcgen05 N for M = 128)"
    if config.tile_k != decode_rule.TILE_K:
        return False, "tile_k must be 64: one 128-byte swizzle row of bf16"
    if config.cluster_m not in (1, 2) or config.cluster_n not in (1, 2):
        return False, "with cta_group 1, cluster_m and cluster_n must be 1 or 2 (CTAs that share B or x by multicast)"
    if not 2 <= config.stages <= decode_rule.MAX_STAGES:
        return False, f"stages must be from 2 to {decode_rule.MAX_STAGES}"
    for ok, why in (check_epilogue(config), check_accumulators(config)):
        if not ok:
            return ok, why
    if config.clc_stages != 1:
        return False, f"clc_stages = {config.clc_stages}: only 1 is supported (one scheduler answer in flight)"
    if config.group < 1:
        return False, "group must be at least 1"
    return check_single_cta_smem(config)


def check_single_cta_smem(config: Config):
    """Whether a single-CTA tile's stages and staging fit a CTA's shared memory (``decode_rule``'s estimate)."""
    smem = decode_rule.smem_estimate(config.tile_m, config.tile_n, config.stages, config.epi_n, config.epi_stages)
    if smem > decode_rule.SMEM_CAPACITY:
        most = decode_rule.max_stages(config.tile_m, config.tile_n, config.epi_n, config.epi_stages)
        return False, f"needs about {smem} B of shared memory, more than the {decode_rule.SMEM_CAPACITY} B a CTA can have " \
                      f"(at most {most} stages with this tile)"
    return True, ""


def tmem_columns(config: Config) -> int:
    """Columns to allocate: what the accumulator stages span, as a power of two >= 32. A single-CTA
    M = 64 accumulator fills lanes 0-15 of each warp's 32 (rows 16w..16w+15 in lanes 32w..32w+15),
    and CuTe puts the next stage in lanes 16-31 at the same columns, so two stages take tile_n
    columns, not 2 x tile_n (NVIDIA's example allocates the same)."""
    stages = config.acc_stages
    if config.cta_group == 1 and config.tile_m == 64:
        stages = -(-stages // 2)
    return max(32, 1 << (stages * config.tile_n - 1).bit_length())


def config_for(problem, config: Config = Config()) -> Config:
    """``config`` with the single-CTA tile ``decode_rule.choose`` picks for a decode-sized ``problem``
    (M <= 128) on a full B200, or unchanged (what the course runs when no config is given)."""
    choice = decode_rule.choose(problem.m, problem.n, problem.k, hardware.B200.sms)
    return config if choice is None else dataclasses.replace(config, **choice.fields())


def resident_clusters(config) -> int:
    """Clusters a B200 runs at once (one CTA per SM): the waves the tail rule counts."""
    return hardware.B200.sms // (config.cluster_m * config.cluster_n)


def model_speedup(m: int, n: int, k: int, config: Config = Config()) -> tuple:
    """(parts per tail tile, step 10's time over step 11's) for an m x n x k problem by the tail
    rule's model (``schedule.tail_span``): every K tile equally long, the hand-over its price."""
    from fractions import Fraction

    clusters = resident_clusters(config)
    tiles = -(-m // (config.tile_m * config.cluster_m)) * -(-n // (config.tile_n * config.cluster_n))
    k_tiles = -(-k // config.tile_k)
    parts = schedule.tail_parts(tiles, clusters, k_tiles) if config.stream_k else 1
    waves, tail = divmod(tiles, clusters)
    whole = waves * k_tiles + (k_tiles if tail else 0)
    split = waves * k_tiles + (Fraction(schedule.tail_span(tail, clusters, parts, k_tiles), parts) if parts > 1
                               else k_tiles if tail else 0)
    return parts, Fraction(whole) / split


class Gemm(parent.Gemm):
    def __init__(self, config: Config):
        super().__init__(config)
        self.cta_group = config.cta_group
        self.mma_tiler = (config.cta_group * config.tile_m, config.tile_n, config.tile_k)  # the MMA's tile
        self.tmem_cols = tmem_columns(config)

    # ---- single-CTA tiles (cta_group 1): what the pair's code of steps 5-8 changes ---------------

    def make_tiled_mma(self):
        if self.cta_group == 2:
            return super().make_tiled_mma()
        op = tcgen05.MmaF16BF16Op(
            AB_DTYPE, ACC_DTYPE, self.mma_tiler[:2] + (16,), tcgen05.CtaGroup.ONE, tcgen05.OperandSource.SMEM,
            OperandMajorMode.K, OperandMajorMode.K,
        )
        return cute.make_tiled_mma(op)

    def make_mainloop_operands(self, mA: cute.Tensor, mB: cute.Tensor):
        """Single-CTA tiles: each CTA loads its whole A and B tiles into its own shared memory; an
        operand is multicast only where the cluster has more than one CTA to share it (x along N)."""
        if self.cta_group == 2:
            return super().make_mainloop_operands(mA, mB)
        tiled_mma = self.make_tiled_mma()
        a_smem_layout, b_smem_layout = self.make_smem_layouts(tiled_mma)
        cluster = self.cta_layout_vmnk(tiled_mma)
        cm, cn, _ = self.cluster_shape_mnk

        def op(shared_by: int):
            return (cpasync.CopyBulkTensorTileG2SMulticastOp(tcgen05.CtaGroup.ONE) if shared_by > 1
                    else cpasync.CopyBulkTensorTileG2SOp(tcgen05.CtaGroup.ONE))

        one_stage = (None, None, None, 0)
        tma_atom_a, tma_a = cute.nvgpu.make_tiled_tma_atom_A(
            op(cn), mA, cute.slice_(a_smem_layout, one_stage), self.mma_tiler, tiled_mma, cluster.shape
        )
        tma_atom_b, tma_b = cute.nvgpu.make_tiled_tma_atom_B(
            op(cm), mB, cute.slice_(b_smem_layout, one_stage), self.mma_tiler, tiled_mma, cluster.shape
        )
        return tiled_mma, a_smem_layout, b_smem_layout, tma_atom_a, tma_a, tma_atom_b, tma_b

    def make_accumulator_pipeline(self, storage, tiled_mma, epi_threads: int):
        """As step 5's, with the epilogue threads of the CTAs that share the MMA: two, or one."""
        return pipeline.PipelineUmmaAsync.create(
            barrier_storage=storage.accumulator_barriers.data_ptr(),
            num_stages=self.acc_stages,
            producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread),
            consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, self.cta_group * epi_threads),
            cta_layout_vmnk=self.cta_layout_vmnk(tiled_mma),
            defer_sync=True,
        )

    def make_tmem_allocator(self, storage, threads: int, allocator_warp: int = 0):
        if self.cta_group == 2:
            return super().make_tmem_allocator(storage, threads, allocator_warp)
        return TmemAllocator(  # tcgen05.alloc.cta_group::1: this CTA's columns only, no peer to wait for
            storage.tmem_address.ptr,
            barrier_for_retrieve=pipeline.NamedBarrier(barrier_id=int(Barrier.TMEM), num_threads=threads),
            allocator_warp_id=allocator_warp,
        )

    @cute.jit
    def pair_coords(self, tiled_mma):
        """(the CTA's place in the cluster as VMNK, the MMA's tile (m, n), whether it issues the MMAs):
        with single-CTA tiles every CTA leads itself."""
        bidx, bidy, _ = cute.arch.block_idx()
        cluster = self.cta_layout_vmnk(tiled_mma)
        cta_in_cluster = cluster.get_flat_coord(cute.arch.make_warp_uniform(cute.arch.block_idx_in_cluster()))
        return cta_in_cluster, (bidx // self.cta_group, bidy, None), bidx % self.cta_group == 0

    # ---- host side ----------------------------------------------------------------------------

    @staticmethod
    def workspace_shapes(config: Config) -> tuple:
        """fp32 partial sums (one tile per CTA per part: fewer than G tail tiles, at most MAX_PARTS
        parts each), and int32 counters (one per CTA of a tail tile) and flags (one per slot)."""
        ctas = config.cluster_m * config.cluster_n
        tail_ctas = resident_clusters(config) * ctas
        slots = tail_ctas * schedule.MAX_PARTS
        return (("float32", (slots * config.tile_m * config.tile_n,)), ("int32", (tail_ctas,)), ("int32", (slots,)))

    @cute.jit
    def __call__(self, mA: cute.Tensor, mB: cute.Tensor, mC: cute.Tensor, stream, mPartials: cute.Tensor,
                 mCounters: cute.Tensor, mFlags: cute.Tensor):
        self.launch_kernel(mA, mB, mC, stream, mPartials, mCounters, mFlags, self.tail_constants(mA, mC))

    def tail_split(self, mA: cute.Tensor, mC: cute.Tensor):
        """(cluster-tiles, K tiles, parts per tail tile, units, whole tiles), on the host."""
        clusters_m, clusters_n = self.cluster_grid(mC)
        tiles, k_tiles = clusters_m * clusters_n, cute.ceil_div(mA.shape[1], self.tile_mnk[2])
        if not self.config.stream_k:
            return tiles, k_tiles, 1, tiles, tiles
        select, _, _ = schedule.operations(tiles, k_tiles)
        parts = schedule.tail_parts(tiles, resident_clusters(self.config), k_tiles, select)
        units, whole = schedule.tail_units(tiles, resident_clusters(self.config), parts, select)
        return tiles, k_tiles, parts, units, whole

    def tail_constants(self, mA: cute.Tensor, mC: cute.Tensor):
        """(whole tiles, parts, a fast divider by parts) for the kernel: no division by a runtime
        value on the way to a unit's first load."""
        _, _, parts, _, whole = self.tail_split(mA, mC)
        return cutlass.Int32(whole), cutlass.Int32(parts), cute.fast_divmod_create_divisor_v2(cutlass.Int32(parts))

    def grid(self, mA: cute.Tensor, mC: cute.Tensor):
        """One cluster per unit, numbered along x (cluster launch control hands out the rest)."""
        units = self.tail_split(mA, mC)[3]
        units = units if isinstance(units, int) else cutlass.Int32(units)  # a launch dimension
        cm, cn, _ = self.cluster_shape_mnk
        return (units * cm, cn, 1)

    def make_shared_storage(self, a_smem_layout, b_smem_layout, epi_smem_layout):
        stages, acc_stages, clc_stages = self.stages, self.acc_stages, self.clc_stages

        @cute.struct
        class SharedStorage:
            mainloop_barriers: cute.struct.MemRange[cutlass.Int64, 2 * stages]
            accumulator_barriers: cute.struct.MemRange[cutlass.Int64, 2 * acc_stages]
            clc_barriers: cute.struct.MemRange[cutlass.Int64, 2 * clc_stages]
            clc_responses: cute.struct.Align[cute.struct.MemRange[cutlass.Int128, clc_stages], CLC_RESPONSE_BYTES]
            tmem_dealloc_barrier: cutlass.Int64
            tmem_address: cutlass.Int32
            arrivals: cute.struct.MemRange[cutlass.Int32, 1]  # a tail part's place among its tile's parts
            sA: cute.struct.Align[cute.struct.MemRange[AB_DTYPE, cute.cosize(a_smem_layout)], 1024]
            sB: cute.struct.Align[cute.struct.MemRange[AB_DTYPE, cute.cosize(b_smem_layout)], 1024]
            sC: cute.struct.Align[cute.struct.MemRange[C_DTYPE, cute.cosize(epi_smem_layout)], 1024]

        return SharedStorage

    # ---- device side: units -------------------------------------------------------------------

    def unit(self, index, constants, num_k_tiles):
        """Unit ``index``: (cluster-tile index, part, first K tile, end K tile)."""
        whole, parts, parts_div = constants
        return schedule.tail_unit(index, whole, parts, num_k_tiles, parts_div, cutlass.select_)

    @cute.jit
    def load_range(
        self, mainloop_pipeline, load_state, tiled_mma, tma_atom_a, mA, tma_atom_b, mB, sA, sB, pair_tile, cta_in_cluster,
        k_begin, k_end,
    ):
        """TMA warp: this CTA's share of K tiles [k_begin, k_end) of one tile."""
        tAsA, tAgA, tBsB, tBgB, a_mask, b_mask = self.load_partitions(
            tiled_mma, tma_atom_a, mA, tma_atom_b, mB, sA, sB, pair_tile, cta_in_cluster
        )
        for k_tile in cutlass.range(k_begin, k_end, unroll=1):
            self.load_k_tile(
                mainloop_pipeline, load_state, k_tile, tma_atom_a, tAgA, tAsA, a_mask, tma_atom_b, tBgB, tBsB, b_mask
            )
            load_state.advance()
        return load_state

    # ---- device side: handing partial sums over ------------------------------------------------

    def tail_slot(self, index, part, whole):
        """(counter, partial-sum slot) of this CTA in tail tile ``index``'s part ``part``."""
        cta = cute.arch.make_warp_uniform(cute.arch.block_idx_in_cluster())
        return schedule.tail_slot(index, part, whole, cta, self.cluster_shape_mnk[0] * self.cluster_shape_mnk[1])

    def partial_view(self, mPartials: cute.Tensor, slot, sub, values):
        """Thread ``tidx``'s ``values`` fp32 values of sub-tile ``sub`` in a slot, value-major (a slot
        holds a tile: tile_m x tile_n / threads values per thread, tile_n with 128 rows)."""
        tidx, _, _ = cute.arch.thread_idx()
        threads = self.epilogue_threads
        per_thread = self.config.tile_m * self.config.tile_n // threads
        start = mPartials.iterator + (slot * per_thread + sub * values) * threads + tidx
        return cute.make_tensor(start, cute.make_layout(values, stride=threads))

    @cute.jit
    def arrive(self, mCounters: cute.Tensor, counter, storage):
        """Add one to the tile's counter; every epilogue thread gets the old value (the parts before this one)."""
        tidx, _, _ = cute.arch.thread_idx()
        arrivals = storage.arrivals.get_tensor(cute.make_layout(1))
        if tidx == 0:
            arrivals[0] = cute.arch.atomic_add(mCounters.iterator + counter, cutlass.Int32(1), sem="acq_rel", scope="gpu")
        cute.arch.barrier(barrier_id=EPI_BARRIER_ID, number_of_threads=self.epilogue_threads)
        return arrivals[0]

    @cute.jit
    def hand_over(self, accumulator, mC: cute.Tensor, mPartials, mCounters, mFlags, storage, index, part, constants):
        """A tail part's epilogue warps: count in; if not last, write the partial sum and raise its
        flag; if last, add every other part's partial sum into the accumulator. True if last."""
        tidx, _, _ = cute.arch.thread_idx()
        whole, parts, _ = constants
        counter, slot = self.tail_slot(index, part, whole)
        last = self.arrive(mCounters, counter, storage) == parts - 1
        gC = cute.local_tile(mC, self.tile_mnk, (0, 0, None), proj=(1, 1, None))  # only its shape is used
        tmem_load, tDtAcc, tDgC = self.make_epilogue_copy(accumulator, gC, tidx)  # (T2R, T2R_M, T2R_N, 1, subtiles)
        registers = cute.make_rmem_tensor(tDgC[(None, None, None, 0, 0)].shape, ACC_DTYPE)
        values = cute.size(registers)
        if last:
            if tidx == 0:  # every other part's flag (they counted themselves in, so they are writing)
                for other in cutlass.range(parts, unroll=1):
                    if other != part:
                        other_slot = slot - part + other
                        flag = cute.arch.load(mFlags.iterator + other_slot, cutlass.Int32, sem="acquire", scope="gpu")
                        start = watchdog.clock()  # debug builds only: the spin is bounded
                        while flag == 0:
                            watchdog.check(start, "the stream-K flag of a slot", other_slot)
                            flag = cute.arch.load(mFlags.iterator + other_slot, cutlass.Int32, sem="acquire", scope="gpu")
                        cute.arch.store(mFlags.iterator + other_slot, cutlass.Int32(0))  # ready for the next launch
                cute.arch.store(mCounters.iterator + counter, cutlass.Int32(0))
            cute.arch.barrier(barrier_id=EPI_BARRIER_ID, number_of_threads=self.epilogue_threads)
            tmem_store = self.make_tmem_store(accumulator)
            tDtAcc_st = tmem_store.get_slice(tidx).partition_D(self.accumulator_subtiles(accumulator))
            for sub in cutlass.range_constexpr(cute.size(tDtAcc, mode=[4])):
                cute.copy(tmem_load, tDtAcc[(None, None, None, 0, sub)], registers)
                for other in cutlass.range(parts, unroll=1):
                    if other != part:
                        partial = self.partial_view(mPartials, slot - part + other, sub, values)
                        for v in cutlass.range(values, unroll_full=True):
                            registers[v] = registers[v] + partial[v]
                cute.copy(tmem_store, registers, tDtAcc_st[(None, None, None, 0, sub)])
            cute.arch.fence_view_async_tmem_store()  # the sums are in tensor memory before the epilogue reads them
        else:
            for sub in cutlass.range_constexpr(cute.size(tDtAcc, mode=[4])):
                cute.copy(tmem_load, tDtAcc[(None, None, None, 0, sub)], registers)
                partial = self.partial_view(mPartials, slot, sub, values)
                for v in cutlass.range(values, unroll_full=True):
                    partial[v] = registers[v]
            cute.arch.barrier(barrier_id=EPI_BARRIER_ID, number_of_threads=self.epilogue_threads)
            if tidx == 0:
                cute.arch.store(mFlags.iterator + slot, cutlass.Int32(1), sem="release", scope="gpu")
        return last

    def accumulator_subtiles(self, accumulator):
        """The accumulator as (tile_m, epi_n, 1, subtiles), as ``make_epilogue_copy`` divides it."""
        return cute.flat_divide(accumulator[((None, None), 0, 0)], self.epi_tile())

    def make_tmem_store(self, accumulator):
        """Registers -> tensor memory, the mirror of the epilogue's ``tcgen05.ld``: 32 lanes x 32 bits
        for a 128-row accumulator (lane = row), 16 lanes x 256 bits for 64 rows (M = 64 puts rows
        16w..16w+15 in lanes 32w..32w+15, the 16 lanes a warp reads with the 16x256b shape)."""
        if self.accumulator_rows() == 64:
            op = tcgen05.St16x256bOp(tcgen05.Repetition(self.config.epi_n // 8))
        else:
            op = tcgen05.St32x32bOp(tcgen05.Repetition(self.config.epi_n))
        atom = cute.make_copy_atom(op, ACC_DTYPE)
        return tcgen05.make_tmem_copy(atom, self.accumulator_subtiles(accumulator)[(None, None, 0, 0)])

    @cute.jit
    def store_unit(
        self, accumulator_pipeline, acc_state, tCtAcc, tma_atom_c, mC, sC, cta_tile, store_pipeline,
        index, part, k_begin, k_end, num_k_tiles, mPartials, mCounters, mFlags, storage, constants,
    ):
        """Epilogue warps: wait for the accumulator; a tail part hands over; a whole tile or the
        tail tile's last part stores C; release the accumulator."""
        accumulator_pipeline.consumer_wait(acc_state)
        tmem_fence_after_sync()
        accumulator = tCtAcc[(None, None, None, acc_state.index)]
        finish = cutlass.Boolean(True)
        if cutlass.const_expr(self.config.stream_k):
            if k_end - k_begin < num_k_tiles:
                finish = self.hand_over(accumulator, mC, mPartials, mCounters, mFlags, storage, index, part, constants)
        if finish:
            self.epilogue_tma(accumulator, tma_atom_c, mC, sC, cta_tile, store_pipeline, 0)
        cute.arch.fence_view_async_tmem_load()  # this thread's reads of the accumulator are complete
        tmem_fence_before_sync()  # and its fold-back stores, before the MMA warp may refill it
        accumulator_pipeline.consumer_release(acc_state)
        acc_state.advance()
        return acc_state

    # ---- device side: the kernels launched before and after this one ---------------------------

    def kernel_started(self):
        """Every thread, at the kernel's start: nothing here (step 12 can let the next kernel launch)."""

    def before_first_load(self):
        """The TMA warp, before its first load: nothing here (step 12 can wait for the kernel before)."""

    def after_last_load(self):
        """The TMA warp, once its last load is issued: nothing here (step 12 can let the next kernel launch
        then)."""

    # ---- the kernel ---------------------------------------------------------------------------

    @cute.kernel
    def kernel(
        self,
        tiled_mma: cute.TiledMma,
        tma_atom_a: cute.CopyAtom,
        mA: cute.Tensor,
        tma_atom_b: cute.CopyAtom,
        mB: cute.Tensor,
        tma_atom_c: cute.CopyAtom,
        mC: cute.Tensor,
        a_smem_layout: cute.ComposedLayout,
        b_smem_layout: cute.ComposedLayout,
        epi_smem_layout: cute.ComposedLayout,
        mPartials: cute.Tensor,
        mCounters: cute.Tensor,
        mFlags: cute.Tensor,
        constants: tuple,
    ):
        tidx, _, _ = cute.arch.thread_idx()
        bidx, _, _ = cute.arch.block_idx()
        warp_idx = cute.arch.make_warp_uniform(cute.arch.warp_idx())
        cta_in_cluster, _, is_leader = self.pair_coords(tiled_mma)
        first_in_cluster = cute.arch.make_warp_uniform(cute.arch.block_idx_in_cluster()) == 0
        if warp_idx == TMA_WARP:
            cpasync.prefetch_descriptor(tma_atom_a)
            cpasync.prefetch_descriptor(tma_atom_b)
            cpasync.prefetch_descriptor(tma_atom_c)
        self.kernel_started()

        storage, sA, sB, sC = self.allocate_shared_storage(a_smem_layout, b_smem_layout, epi_smem_layout)
        mainloop_pipeline = self.make_mainloop_pipeline(storage, tiled_mma)
        accumulator_pipeline = self.make_accumulator_pipeline(storage, tiled_mma, self.epilogue_threads)
        clc_pipeline = self.make_clc_pipeline(storage, tiled_mma)
        tmem = self.make_tmem_allocator(storage, self.epilogue_threads + 32, allocator_warp=0)
        pipeline.pipeline_init_arrive(cluster_shape_mn=self.cluster_shape_mnk[:2], is_relaxed=True)
        pipeline.pipeline_init_wait(cluster_shape_mn=self.cluster_shape_mnk[:2])
        num_k_tiles = cute.ceil_div(mA.shape[1], self.tile_mnk[2])
        own_unit = bidx // self.cluster_shape_mnk[0]  # the cluster's own unit comes first

        if warp_idx == SCHEDULER_WARP:
            if first_in_cluster:
                self.schedule(clc_pipeline, storage)

        if warp_idx == TMA_WARP:
            self.before_first_load()
            load_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, self.stages)
            clc_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, self.clc_stages)
            u, valid = own_unit, cutlass.Boolean(True)
            while valid:
                index, _, k_begin, k_end = self.unit(u, constants, num_k_tiles)
                pair_tile, _ = self.tile_coords(index, mC)
                load_state = self.load_range(
                    mainloop_pipeline, load_state, tiled_mma, tma_atom_a, mA, tma_atom_b, mB, sA, sB, pair_tile,
                    cta_in_cluster, k_begin, k_end,
                )
                u, valid, clc_state = self.next_tile(clc_pipeline, clc_state, storage)
            self.after_last_load()
            mainloop_pipeline.producer_tail(load_state)

        if warp_idx == MMA_WARP:
            tmem.wait_for_alloc()
            tCtAcc = self.accumulator_in(tmem, tiled_mma)
            tCrA = tiled_mma.make_fragment_A(sA)
            tCrB = tiled_mma.make_fragment_B(sB)
            read_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, self.stages)
            acc_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, self.acc_stages)
            clc_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, self.clc_stages)
            u, valid = own_unit, cutlass.Boolean(True)
            while valid:
                if is_leader:  # the peer's MMA warp only follows the schedule
                    _, _, k_begin, k_end = self.unit(u, constants, num_k_tiles)
                    read_state, acc_state = self.mma_tile(
                        mainloop_pipeline, read_state, accumulator_pipeline, acc_state, tiled_mma, tCtAcc, tCrA, tCrB,
                        k_end - k_begin,
                    )
                u, valid, clc_state = self.next_tile(clc_pipeline, clc_state, storage)
            if is_leader:
                accumulator_pipeline.producer_tail(acc_state)

        if warp_idx < MMA_WARP:
            tCtAcc = self.take_tensor_memory(tmem, tiled_mma)
            acc_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, self.acc_stages)
            clc_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, self.clc_stages)
            store_pipeline = self.make_store_pipeline(self.epilogue_threads)
            u, valid = own_unit, cutlass.Boolean(True)
            while valid:
                index, part, k_begin, k_end = self.unit(u, constants, num_k_tiles)
                _, cta_tile = self.tile_coords(index, mC)
                acc_state = self.store_unit(
                    accumulator_pipeline, acc_state, tCtAcc, tma_atom_c, mC, sC, cta_tile, store_pipeline,
                    index, part, k_begin, k_end, num_k_tiles, mPartials, mCounters, mFlags, storage, constants,
                )
                u, valid, clc_state = self.next_tile(clc_pipeline, clc_state, storage)
            if tidx == 0:
                store_pipeline.producer_tail()
            pipeline.NamedBarrier(barrier_id=TMEM_FREE_BARRIER_ID, num_threads=self.epilogue_threads).arrive_and_wait()
            tmem.free(tCtAcc.iterator)

        cute.arch.cluster_arrive_relaxed()
        cute.arch.cluster_wait()
