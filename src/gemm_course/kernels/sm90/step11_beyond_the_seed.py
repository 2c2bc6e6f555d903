"""Step 11 (Hopper) - beyond the seed: what the measured final kernel needs besides the ladder.

Parent: step 10. The seed's ladder ends at step 10; measured against cuBLAS on the H200 it
leaves a few percent on three kinds of shapes. Each difference below was measured against the
kernel without it (``scripts/gpu_tune.py``, NOTES.md), and chapter 11 shows the measurements:

* *Tile coordinates through shared memory.* The producer warp is the scheduler: it computes each
  unit's tile once, before the unit's first load, and hands it to the consumers through a small
  ring in shared memory (``tile_ring``, ``stages + 2`` slots). The stage's *full* barrier orders
  the write before the consumers' read, so the consumers never run the Gilbert descent between a
  tile's last wgmma and its epilogue (step 10 does, and the tensor cores wait: 2-4%).
* *A shorter epilogue.* The staging area holds a whole 128 x 256 tile (two 128 x 128 buffers,
  64 KiB, where steps 7-10 had two 128 x 32): two TMA stores per tile instead of eight, and the
  first waits for a store issued a whole main loop earlier. Shared memory pays with one mainloop
  stage (3 x 48 KiB instead of 4); 1-3% faster at 4096^3 and 8192^3 on the H200.
* *Stream-K tail.* When the tiles do not fill the last wave (8192^3: 1024 cluster-tiles for 66
  clusters, 15 full waves + 34), the last wave's K loops are split over *all* clusters, about
  ``34 * 128 / 66`` K tiles each (``gemm_course.rules.schedule``): contiguous runs over the tail's K
  tiles laid end to end, so a run may hold pieces of two tiles. The piece with a tile's K tile 0
  finishes it: it waits for the other pieces (partial sums in fp32 written to a global
  workspace, each announced by a flag written with release semantics), adds them, and runs the
  epilogue. The finishing piece is the last of its run, so a cluster writes all it owes before
  it waits. With long K loops the tail runs in *lockstep*: one main part per tail tile starts at
  K tile 0 on every tail tile at once, so neighbouring tiles share their panels in L2, and the
  other clusters' runs take the rest. Skipped when the fix-up would cost more than the idle
  clusters it saves. A problem with fewer cluster-tiles than clusters is all tail: the host then
  launches every cluster anyway, up to ``schedule.MAX_PARTS`` per tile, or a whole number per
  tile when that idles at most one in ``schedule.IDLE_SHARE`` (``schedule.grid_clusters``), so a
  few tiles' K loops fill the GPU in equal parts.
* *GPC-aware places* (``gpc_order``): neighbours on the curve share panels only if they also
  share a GPC: Hopper's L2 request coalescer merges two SMs' loads of the same sector only within
  one GPC (measured, NOTES.md), and the hardware deals a grid's clusters out to the GPCs in turn,
  so clusters c and c + 1 sit in different GPCs. The host probes once where the clusters land
  (``gemm_course.rules.placement``) and the kernel permutes each full wave's indices so that each
  GPC's clusters take consecutive places on the curve. A permutation of the cluster indices, so
  every tile is still computed once wherever the GPU happens to place the clusters.
* *A tile per shape* (``config_for``): when the 128 x 256 tiles make only a few waves and fill
  the last one badly, the host picks 128 x 192 or 128 x 128 tiles, whichever fills its waves
  best, with the stages that fit and, for 128 x 128, CTA pairs along N (``gemm_course.rules.tile_rule``);
  with long K the 128 x 256 tile runs four stages. The kernel is the same code for every choice; each is compiled once.

Expected: the course's fastest Hopper kernel, level with cuBLAS (NOTES.md has the sweep).

Accepts: any M; N and K multiples of 8.
"""

import dataclasses
from typing import Any, NamedTuple

import cutlass
import cutlass.cute as cute
import cutlass.pipeline as pipeline

from ...rules import placement, schedule, tile_rule
from ...runtime import watchdog
from . import step10_gilbert as parent
from .step02_wgmma_tma import AB_DTYPE, C_DTYPE
from .step04_tma_store import EPI_BARRIER_ID, can_implement  # noqa: F401  (same shapes as step 4)
from .step05_cluster_multicast import WARPGROUP
from .step08_persistent import max_clusters


@dataclasses.dataclass(frozen=True)
class Config(parent.Config):
    stages: int = 3  # one stage less than step 6 pays for ...
    epi_n: int = 128  # ... a 64 KiB staging area: half a tile per TMA store, two per tile
    stream_k: bool = True  # split the last partial wave's K loops over every cluster
    gpc_order: bool = True  # full waves: each GPC's clusters take neighbouring tiles (``placement``)


check_config = parent.check_config


def config_for(problem, config: Config = Config()) -> Config:
    """``config`` with the tile and pipeline ``tile_rule.choose`` picks for ``problem`` on this GPU
    (what the course runs when no config is given)."""
    clusters = max_clusters(tile_rule.CLUSTER_SIZE)
    return dataclasses.replace(config, **tile_rule.choose(problem.m, problem.n, problem.k, clusters).fields())


class Plan(NamedTuple):
    """One cluster's schedule: its index, the cluster count, its rounds of whole tiles, its run of
    the tail's K tiles [start, end), the launch's constants, and the fast divider by ``piece``."""

    cluster: Any
    clusters: Any
    whole_units: Any
    start: Any
    end: Any
    launch: schedule.LaunchConstants
    piece_div: Any


class Gemm(parent.Gemm):
    def __init__(self, config: Config):
        super().__init__(config)
        # the producer runs at most `stages` K tiles ahead, so at most stages + 1 units' slots are live
        self.ring_depth = self.stages + 2
        self.max_parts = schedule.MAX_PARTS  # clusters per tile when there are fewer tiles than clusters
        self.lockstep_from = schedule.LOCKSTEP_K_TILES  # K tiles per tile from which the split tail runs in lockstep

    # ---- host side ----------------------------------------------------------------------------

    @staticmethod
    def workspace_shapes(config: Config) -> tuple:
        """The stream-K scratch (one fp32 partial tile and one int32 flag per CTA of the grid) and
        each cluster's place in a wave (``fill_workspace``)."""
        clusters = max_clusters(config.cluster_m * config.cluster_n)
        ctas = clusters * config.cluster_m * config.cluster_n
        return (("float32", (ctas * config.tile_m * config.tile_n,)), ("int32", (ctas,)), ("int32", (clusters,)))

    @staticmethod
    def fill_workspace(config: Config, workspace: tuple):
        """Each cluster's place in a wave: its own index, or one that follows the GPCs (GPU probes)."""
        import torch

        places = workspace[2]
        if config.gpc_order:
            order = placement.cluster_order(config.cluster_m * config.cluster_n, places.numel())
            places.copy_(torch.tensor(order, dtype=places.dtype))
        else:
            places.copy_(torch.arange(places.numel(), dtype=places.dtype))

    @cute.jit
    def __call__(self, mA: cute.Tensor, mB: cute.Tensor, mC: cute.Tensor, stream, mPartials: cute.Tensor, mFlags: cute.Tensor,
                 mPlaces: cute.Tensor):
        self.launch_kernel(mA, mB, mC, stream, mPartials, mFlags, mPlaces, self.schedule_constants(mA, mC))

    def make_shared_storage(self, a_smem_layout, b_smem_layout, epi_smem_layout):
        stages, ring_depth = self.stages, self.ring_depth

        @cute.struct
        class SharedStorage:
            mainloop_barriers: cute.struct.MemRange[cutlass.Int64, 2 * stages]  # full + empty per stage
            tile_ring: cute.struct.MemRange[cutlass.Int32, 2 * ring_depth]  # (m, n) of upcoming units
            sA: cute.struct.Align[cute.struct.MemRange[AB_DTYPE, cute.cosize(a_smem_layout)], 1024]
            sB: cute.struct.Align[cute.struct.MemRange[AB_DTYPE, cute.cosize(b_smem_layout)], 1024]
            sC: cute.struct.Align[cute.struct.MemRange[C_DTYPE, cute.cosize(epi_smem_layout)], 1024]

        return SharedStorage

    def launched_clusters(self, mA: cute.Tensor, mC: cute.Tensor):
        clusters_m, clusters_n = self.cluster_grid(mC)
        tiles, k_tiles = clusters_m * clusters_n, cute.ceil_div(mA.shape[1], self.tile_mnk[2])
        clusters = cutlass.min(tiles, self.max_clusters)
        if self.config.stream_k:  # every cluster when the tail is split: even fewer tiles than clusters fill the GPU
            select, minimum, _ = schedule.operations(tiles, k_tiles)
            clusters = schedule.grid_clusters(tiles, self.max_clusters, k_tiles, True, select, minimum, self.max_parts)
        return clusters

    def grid(self, mA: cute.Tensor, mC: cute.Tensor):
        clusters = self.launched_clusters(mA, mC)
        clusters = clusters if isinstance(clusters, int) else cutlass.Int32(clusters)  # a launch dimension
        cm, cn, _ = self.cluster_shape_mnk
        return (clusters * cm, cn, 1)

    def schedule_constants(self, mA: cute.Tensor, mC: cute.Tensor):
        """``schedule.launch_constants`` for this launch, on the host, plus fast dividers by
        ``piece`` and ``share``, the two divisions each cluster makes before its first load."""
        clusters_m, clusters_n = self.cluster_grid(mC)
        tiles, clusters = clusters_m * clusters_n, self.launched_clusters(mA, mC)
        k_tiles = cute.ceil_div(mA.shape[1], self.tile_mnk[2])
        # k_tiles > 0 always holds: `enabled` is a runtime value whenever the shapes are (a constant
        # False next to runtime values trips the compiler), and Python's bool for static shapes
        enabled = (k_tiles > 0) == self.config.stream_k
        c = schedule.launch_constants(tiles, clusters, k_tiles, enabled, *schedule.operations(tiles, clusters, k_tiles),
                                      lockstep_from=self.lockstep_from)
        dividers = tuple(cute.fast_divmod_create_divisor_v2(cutlass.Int32(v)) for v in (c.piece, c.share))
        return tuple(cutlass.Int32(v) for v in c) + dividers  # a plain tuple crosses into the kernel

    # ---- device side: the schedule ------------------------------------------------------------

    @cute.jit
    def place_shift(self, p: Plan, mPlaces: cute.Tensor):
        """Producer: how far this cluster's full-wave tiles move when the clusters of a GPC take
        neighbouring places in each wave (0 without ``gpc_order``, without a full wave, or on a
        smaller grid than the table's; then nothing is loaded)."""
        shift = cutlass.Int32(0)
        if cutlass.const_expr(self.config.gpc_order):
            if (p.clusters == self.max_clusters) & (p.launch.full_waves > 0):
                shift = mPlaces[p.cluster] - p.cluster
        return shift

    def placed_index(self, index, u, p: Plan, shift):
        """Cluster-tile index of unit u, with full waves permuted by ``place_shift`` (a permutation
        of each full wave's indices, so every tile is still computed once)."""
        return index + cutlass.select_(u < p.launch.full_waves, shift, 0)

    def cluster_tile_coord(self, index, mC: cute.Tensor):
        """This CTA's tile of cluster-tile ``index``."""
        bidx, bidy, _ = cute.arch.block_idx()
        cm, cn, _ = self.cluster_shape_mnk
        clusters_m, clusters_n = self.cluster_grid(mC)
        tile_m, tile_n = self.cluster_tile(index, clusters_m, clusters_n)
        return (tile_m * cm + bidx % cm, tile_n * cn + bidy, None)

    def make_plan(self, constants) -> Plan:
        """This cluster's ``Plan``; no division by a runtime value (see ``schedule_constants``)."""
        bidx, _, _ = cute.arch.block_idx()
        gdimx, _, _ = cute.arch.grid_dim()
        cm = self.cluster_shape_mnk[0]
        cluster, clusters = bidx // cm, gdimx // cm
        c, (piece_div, share_div) = schedule.LaunchConstants(*constants[:-2]), constants[-2:]
        start, end = schedule.helper_run(cluster, c.mains, c.helpers, c.rest_k, share_div, cutlass.select_)
        count = schedule.whole_units(cluster, c.full_waves, c.leftover, cutlass.select_)
        return Plan(cluster, clusters, count, start, end, c, piece_div)

    def num_units(self, p: Plan):
        return schedule.num_units(p.cluster, p.whole_units, p.launch.mains, p.start, p.end, p.piece_div, cutlass.select_)

    def work_unit(self, u, p: Plan, num_k_tiles):
        """Unit u of this cluster: (cluster-tile index, first K tile, end K tile)."""
        c = p.launch
        return schedule.work_unit(
            u, p.cluster, p.clusters, p.whole_units, c.whole_tiles, c.main_k, p.start, p.end, num_k_tiles, c.piece,
            p.piece_div, cutlass.select_, cutlass.min, cutlass.max,
        )

    def piece_slot(self, index, p: Plan):
        return schedule.piece_slot(p.cluster, index, p.launch.whole_tiles, p.launch.mains, cutlass.select_)

    def helper_slots(self, index, p: Plan):
        c = p.launch
        return schedule.helper_slots(
            index, c.whole_tiles, c.main_k, c.helpers, c.rest_k, c.piece, cutlass.select_, cutlass.min, cutlass.max
        )

    # ---- device side: the kernels launched before and after this one ---------------------------

    def kernel_started(self):
        """Every thread, at the kernel's start: nothing here (step 12 can let the next kernel launch)."""

    def before_first_load(self, tma_atom_a, mA, tma_atom_b, mB, sA, sB, tile_coord, k_begin, k_end):
        """The producer warp, before its first load (of K tiles k_begin .. k_end - 1 of ``tile_coord``):
        nothing here (step 12 can wait for the kernel before, and warm L2 with its first tiles of W)."""

    def after_last_load(self):
        """The producer warp, once its last load is issued: nothing here (step 12 can let the next kernel
        launch then)."""

    # ---- device side: handing tiles and partial sums over --------------------------------------

    def publish_tile(self, u, tile_coord, storage):
        """Producer: ring slot u % ring_depth <- (m, n), before the unit's first load."""
        ring = storage.tile_ring.get_tensor(cute.make_layout((2, self.ring_depth)))
        with cute.arch.elect_one():
            ring[0, u % self.ring_depth] = tile_coord[0]
            ring[1, u % self.ring_depth] = tile_coord[1]
        cute.arch.sync_warp()  # the write precedes whichever lane arrives on the next full barrier

    def published_tile(self, u, storage):
        ring = storage.tile_ring.get_tensor(cute.make_layout((2, self.ring_depth)))
        return (ring[0, u % self.ring_depth], ring[1, u % self.ring_depth], None)

    def partial_slot(self, piece):
        """Workspace slot of this CTA's share of helper piece ``piece`` (a ``schedule.piece_slot``)."""
        bidx, bidy, _ = cute.arch.block_idx()
        cm, cn, _ = self.cluster_shape_mnk
        return (piece * cm + bidx % cm) * cn + bidy

    def partial_view(self, mPartials: cute.Tensor, slot, accumulators):
        """This thread's accumulator values in a slot, value-major so each warp access is 128 contiguous bytes."""
        tidx, _, _ = cute.arch.thread_idx()
        n, threads = cute.size(accumulators), self.consumer_threads
        start = mPartials.iterator + slot * (n * threads) + (tidx - WARPGROUP)
        return cute.make_tensor(start, cute.make_layout(n, stride=threads))

    @cute.jit
    def store_partial(self, accumulators, mPartials: cute.Tensor, mFlags: cute.Tensor, slot):
        """A part that started mid-tile: write the partial sum, then raise its flag (release)."""
        tidx, _, _ = cute.arch.thread_idx()
        part = self.partial_view(mPartials, slot, accumulators)
        for v in cutlass.range(cute.size(accumulators), unroll_full=True):  # unrolled by the compiler: v indexes registers
            part[v] = accumulators[v]
        cute.arch.barrier(barrier_id=EPI_BARRIER_ID, number_of_threads=self.consumer_threads)
        if tidx == WARPGROUP:
            cute.arch.store(mFlags.iterator + slot, cutlass.Int32(1), sem="release", scope="gpu")

    @cute.jit
    def take_flag(self, mFlags: cute.Tensor, slot):
        """Spin until the flag of ``slot`` is raised (acquire: its partial sum is visible), then lower it
        for the next launch."""
        flag = cute.arch.load(mFlags.iterator + slot, cutlass.Int32, sem="acquire", scope="gpu")
        start = watchdog.clock()  # debug builds only: the spin is bounded
        while flag == 0:
            watchdog.check(start, "the stream-K flag of a slot", slot)
            flag = cute.arch.load(mFlags.iterator + slot, cutlass.Int32, sem="acquire", scope="gpu")
        cute.arch.store(mFlags.iterator + slot, cutlass.Int32(0))

    @cute.jit
    def add_partials(self, accumulators, mPartials: cute.Tensor, mFlags: cute.Tensor, first_piece, last_piece):
        """The finisher: wait for each helper piece's flag (acquire), reset it, add its partial sum."""
        tidx, _, _ = cute.arch.thread_idx()
        for piece in cutlass.range(first_piece, last_piece + 1, unroll=1):
            slot = self.partial_slot(piece)
            if tidx == WARPGROUP:
                self.take_flag(mFlags, slot)
            cute.arch.barrier(barrier_id=EPI_BARRIER_ID, number_of_threads=self.consumer_threads)
            part = self.partial_view(mPartials, slot, accumulators)
            for v in cutlass.range(cute.size(accumulators), unroll_full=True):
                accumulators[v] = accumulators[v] + part[v]

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
        mFlags: cute.Tensor,
        mPlaces: cute.Tensor,
        constants: tuple,
    ):
        tidx, warp_idx, warpgroup_idx = self.roles(tma_atom_a, tma_atom_b)
        self.kernel_started()
        storage, mainloop_pipeline, sA, sB, sC = self.shared_memory(
            a_smem_layout, b_smem_layout, epi_smem_layout, wait_for_cluster=False
        )
        # the schedule and the first unit's tile, worked out while the cluster's barrier set-up completes;
        # the tile only by the producer warp (the consumers read it from the ring): twelve warps
        # running an order's arithmetic side by side take turns on the SM's integer pipes
        num_k_tiles = cute.ceil_div(mA.shape[1], self.tile_mnk[2])
        plan = self.make_plan(constants)
        num_units = self.num_units(plan)
        first_index, next_begin, next_end = self.work_unit(0, plan, num_k_tiles)
        next_m, next_n, shift = cutlass.Int32(0), cutlass.Int32(0), cutlass.Int32(0)
        if warp_idx == 0:
            shift = self.place_shift(plan, mPlaces)
            next_m, next_n, _ = self.cluster_tile_coord(self.placed_index(first_index, 0, plan, shift), mC)
        pipeline.pipeline_init_wait(cluster_shape_mn=self.cluster_shape_mnk[:2])

        if warpgroup_idx == 0:
            # producer warpgroup: one warp runs the schedule, publishes each unit's tile, loads its K tiles
            cute.arch.setmaxregister_decrease(self.config.producer_registers)
            if warp_idx == 0:
                self.before_first_load(tma_atom_a, mA, tma_atom_b, mB, sA, sB, (next_m, next_n, None), next_begin, next_end)
                load_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, self.stages)
                for u in cutlass.range(num_units, unroll=1):
                    k_begin, k_end = next_begin, next_end  # worked out one unit ahead, each unit once
                    tile_coord = (next_m, next_n, None)
                    self.publish_tile(u, tile_coord, storage)
                    load_state = self.produce_tile(
                        mainloop_pipeline, load_state, tma_atom_a, mA, tma_atom_b, mB, sA, sB, tile_coord, k_begin, k_end
                    )
                    if u + 1 < num_units:  # the next unit's tile, while this unit's last loads are in flight
                        next_index, next_begin, next_end = self.work_unit(u + 1, plan, num_k_tiles)
                        next_m, next_n, _ = self.cluster_tile_coord(self.placed_index(next_index, u + 1, plan, shift), mC)
                self.after_last_load()
                mainloop_pipeline.producer_tail(load_state)
        else:
            # consumer warpgroups: wgmma over the unit's K tiles, then hand over or finish the tile
            cute.arch.setmaxregister_increase(self.config.consumer_registers)
            tCrA, tCrB, accumulators, read_state, release_state, store_pipeline = self.consumer_setup(tiled_mma, sA, sB, sC)
            for u in cutlass.range(num_units, unroll=1):
                index, k_begin, k_end = self.work_unit(u, plan, num_k_tiles)
                read_state, release_state = self.consume_tile(
                    mainloop_pipeline, read_state, release_state, tiled_mma, accumulators, tCrA, tCrB, k_end - k_begin
                )
                if k_begin > 0:  # (never with stream_k off: no hand-over code is compiled then)
                    if cutlass.const_expr(self.config.stream_k):
                        self.store_partial(accumulators, mPartials, mFlags, self.partial_slot(self.piece_slot(index, plan)))
                else:
                    if cutlass.const_expr(self.config.stream_k):
                        if k_end < num_k_tiles:
                            first_piece, last_piece = self.helper_slots(index, plan)
                            self.add_partials(accumulators, mPartials, mFlags, first_piece, last_piece)
                    self.epilogue_tma(
                        tiled_mma, accumulators, tma_atom_c, mC, sC, self.published_tile(u, storage), store_pipeline,
                        self.consumer_threads, WARPGROUP,
                    )
            if tidx == WARPGROUP:
                store_pipeline.producer_tail()
        cute.arch.cluster_arrive_relaxed()
        cute.arch.cluster_wait()
