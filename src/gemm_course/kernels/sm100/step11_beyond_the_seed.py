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
from cutlass.cute.nvgpu import cpasync, tcgen05

from ... import schedule, watchdog
from . import step10_gilbert as parent
from .step02_tcgen05_tma import AB_DTYPE, ACC_DTYPE
from .step04_tma_store import C_DTYPE, EPI_BARRIER_ID, can_implement  # noqa: F401  (same shapes as step 4)
from .step06_warp_specialized import MMA_WARP, TMA_WARP, TMEM_FREE_BARRIER_ID, tmem_fence_after_sync, tmem_fence_before_sync
from .step08_persistent_clc import CLC_RESPONSE_BYTES, SCHEDULER_WARP
from .step10_gilbert import B200_SMS


@dataclasses.dataclass(frozen=True)
class Config(parent.Config):
    stream_k: bool = True  # cut the last partial wave's tiles along K


def check_config(config: Config):
    if config.stream_k and config.tile_m != 128:
        return False, "the stream-K hand-over reads tensor memory 32 lanes x 32 bits: tile_m must be 128 (or stream_k=False)"
    return parent.check_config(config)


def resident_clusters(config) -> int:
    """Clusters a B200 runs at once (one CTA per SM): the waves the tail rule counts."""
    return B200_SMS // (config.cluster_m * config.cluster_n)


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
        """Thread ``tidx``'s ``values`` fp32 values of sub-tile ``sub`` in a slot, value-major."""
        tidx, _, _ = cute.arch.thread_idx()
        threads = self.epilogue_threads
        start = mPartials.iterator + (slot * self.config.tile_n + sub * values) * threads + tidx
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
        """Registers -> tensor memory, the mirror of the epilogue's ``tcgen05.ld`` (32 lanes x 32 bits)."""
        atom = cute.make_copy_atom(tcgen05.St32x32bOp(tcgen05.Repetition(self.config.epi_n)), ACC_DTYPE)
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
