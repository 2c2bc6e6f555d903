"""Step 12 (Hopper) - the memory roofline: swap A and B for decode-sized GEMMs.

Parent: step 11. Key differences (chapter 12):

* *Swap A and B.* A linear layer with few tokens, y = x W^T with x (M, K), M <= 256, and W (N, K)
  of thousands by thousands, is bound by streaming W once: about M FLOP per byte, under both
  Hopper ridges (~270 FLOP per byte on an H100, ~180 on an H200). wgmma's M is 64 rows per
  warpgroup and its N is 8 to 256 in steps of 8, so step 11's 128-row tile holds M <= 128 real
  rows of x and pads the rest. Here the kernel computes C^T = W x^T instead: W is the wgmma's
  A operand (its rows fill the 64-row instruction) and x is its B operand (the tokens sit in N,
  ``tile_n`` = M rounded up to 16). Both operands stay K-major, so nothing is copied: only the
  roles change in ``__call__``.
* *C written transposed.* C (M, N) row-major is C^T (N, M) column-major (M-major): the same
  bytes. The epilogue stages an M-major tile in shared memory (``stmatrix`` with its 8 x 8
  matrices transposed, which step 4 picks from C's layout) and one TMA store writes it to C.
* *Enough SMs stream W.* With 2048 rows of W in 64-row tiles there are only 32 tiles for 132
  SMs: step 11's stream-K schedule already splits a grid with fewer tiles than clusters along K,
  so each SM streams its K range of one tile. Here up to ``max_parts`` parts per tile
  (``split_for``: 64-row tiles unless two parts of 128-row ones fill the SMs; 8 parts at 1024
  rows), where step 11 stops at four; and no split at all (``splits_k``) where the tiles alone
  keep close to half the SMs streaming and each tile's MMA work is small: there the hand-over
  costs more than the idle SMs. x is a few KiB per K tile, nothing worth multicasting.
* *Token tiles in pairs.* A wide token tile's MMAs grow with the tokens (at 128, about as long as
  its bytes of W). Above 16 tokens, where W's tiles fill about half to all of the SMs' pairs
  (``pair_tile_m``), the tokens go in two tiles of a 1 x 2 cluster: each W tile is loaded once and
  multicast to both CTAs, and each CTA does half the MMAs (cuBLAS runs the same 64 x 64 tile at 128
  tokens). So up to 256 tokens; but at 256 tokens over 128-row W tiles, a pair's MMAs outlast its
  bytes, and step 11's kernel with 96, 112 or 128 W rows per CTA (``rows_in_n_width``) runs instead. Its
  two 128-token tiles must be full: at 160 and 200 tokens the pairs beat it by 1.2-1.5x (H100, tune).
* *The hand-over in one round trip.* A decode tile's K loop is short (4096 x 4096 streams in ~11 us
  on an H100), so step 11's finisher, which waits for each part's flag and then loads its partial
  sum, one part after the other, spends two L2 round trips (~1 us each) per part. Here one
  thread per part waits for its flag, all at once, and the finisher issues every part's loads
  before it adds any (``gather_parts``; off, it is step 11's hand-over). Each pass loads ``GATHER``
  slots, missing parts included: the token pairs, whose split tiles have one helper each, keep step
  11's hand-over (at 256 x 2048 x 8192 on an H100, 1.04x the gathered one, W cold and warm).
* *No lockstep.* Step 11 runs a long K loop's split tail in lockstep so that tiles sharing a
  panel read it together; swapped tiles are different rows of W and share nothing, and each
  lockstep main part would wait for helpers launched after all the mains. The classic layout at
  every K (``lockstep`` off) needs only two CTAs running at once (``schedule.clusters_at_once``).
* *Enough bytes in flight.* A stage holds (tile_m + tile_n) x 64 bf16, 10 KiB at 64 x 16: the
  stages that fit in shared memory (``config_for``: 16 at 64 x 16, 12 at 128 x 16) keep 128-192 KiB
  of W in flight per SM, far above Little's law's ~25 KiB (3.35 TB/s / 132 SMs x ~1 us of DRAM
  latency); 64 such CTAs hold more than the whole card needs.
* *The next layer launches early* (``pdl``, programmatic dependent launch). A decode GEMM lasts
  5-60 us, so the launch and set-up of the kernel after it are a real share of a layer: every
  CTA lets the next kernel launch at once, and the producer waits for the kernel before to
  finish only where it first loads (with ``w_before_wait``, only where it first loads x). Per
  launch nothing changes; back to back, on an H100, 1.00-1.3x
  at 16 tokens (tune). Where the pairs busy nearly every SM, a CTA starts only as one of the kernel
  before leaves: there it first requests its first K tiles of W into L2 (``prefetch_w``), while
  the last CTAs before it drain. Inside CUDA graphs on an H100 at 4096 x 4096, 88% of the copy
  bandwidth against 84% at 64 tokens (two runs); no gain at 1 or 16 tokens, where the next kernel's
  CTAs start on idle SMs at once. Up to ``PREFETCH_MAX_M`` tokens: at 128 and 256 it gained 2-3
  points in graphs but cost 2-4% per launch at 4096 x 4096 and 6144 x 4096. A grid of single tiles
  that leaves half the SMs idle would start the next kernel, and its prefetch, a whole layer early:
  there each CTA lets the next kernel launch only once its loads are issued (``launch_after_loads``),
  and the prefetch lands as this kernel drains: 89% against 85% at 16 tokens (H100, graphs). Not at
  one token (``LATE_FROM_M``): there, measured after 16 tokens, it gave 87% in one graph run and 83%
  in another, against the rule's 84-85%, and per launch 1.017 of cuBLAS against 1.030 (H100).
  W is a weight no kernel writes, so its loads need not wait at all: with ``w_before_wait`` the
  producer's first unit loads its first K tiles of W into the stages themselves, then waits, then
  adds x (``produce_tile``). In the rule where the next kernel launches at the start
  (``W_BEFORE_WAIT`` K tiles): inside CUDA graphs on an H100 at one token, 88% of the copy bandwidth
  against 84% at 4096 x 4096 and 95-100% against 93-98% at the 117 MB layers; per launch level. With
  as many K tiles as the stages hold it gained more in graphs but lost 1-3% per launch, where the wait
  has passed before the first load and x queues behind all of W's loads. Its contract: no kernel
  still running writes W, and with pdl a chain of kernels may run at once, each launched at its
  predecessor's start. ``linear`` takes it only for an ``nn.Parameter``; a direct ``run.gemm`` or
  ``run.prepare`` on another kernel's output passes ``w_before_wait=0``.

With more than ``SWAP_MAX_M`` (256) rows, more than ``SWAP_ALONE_MAX_M`` (128) where the token tiles do
not pair, or two full 128-token tiles over 128-row W tiles (``rows_in_n_width``'s tile), ``config_for``
returns step 11's choice with ``swap_ab`` off: the same kernel as step 11.

Expected: W streamed once at close to the card's copy bandwidth, where step 11 ran at about 60%
of an H100's HBM bandwidth at M = 128 (NOTES.md, "Decode-sized GEMMs on Hopper"). Measured on an
H100 with this rule, both orders: 1.000-1.019 of cuBLAS per M bucket from 1 to 128 and 1.03-1.04 at
256, no shape below 0.95, 1.07-1.84x step 11; inside CUDA graphs a 32 MB layer streams at 84-85% of
the copy bandwidth at one token, 89% at 16 and 88% at 64 (NOTES.md, "The prepared run, run at last").

Accepts: any M (M = 1 included); N and K multiples of 8.
"""

import dataclasses
from fractions import Fraction

import cutlass
import cutlass.cute as cute

from ... import hardware
from ...rules import schedule
from ..common import DependentLaunch
from . import step11_beyond_the_seed as parent
from .step04_tma_store import EPI_BARRIER_ID, can_implement, check_epilogue  # noqa: F401  (same shapes as step 4)
from .step05_cluster_multicast import SMEM_CAPACITY, WARPGROUP, smem_estimate
from .step08_persistent import max_clusters

# tokens up to which C^T = W x^T is computed (wgmma's N takes 256): above 128 one wide token tile lost
# to step 11 on four of the five decode weights measured, two in a pair won on four (H100, tune)
SWAP_MAX_M = 256
SWAP_ALONE_MAX_M = 128  # ... and above 128 only with the token tiles in pairs (``pair_tile_m``)
MAX_STAGES = 16  # enough bytes in flight many times over; more only lengthens the pipeline's fill
MAX_PARTS = 8  # parts per tile at most: two gathered passes (``GATHER``)
BUSY_SHARE = 0.9  # the share of the SMs a decode grid should keep streaming W
FEW_PARTS = 2  # parts per 128-row tile beyond which 64-row tiles (half the parts) are faster (H100, tune)
WHOLE_SHARE = 0.45  # the share of the SMs the tiles alone must keep streaming for K to stay whole ...
WHOLE_WORK = 128 * 4096  # ... with at most this MMA work per tile row (tokens x K) (H100, tune)
PAIR_FROM_M = 16  # tokens above which two token tiles may share each W tile by multicast (``pair_tile_m``)
PAIR_SPLIT_SHARE = 0.5  # pairs split K where W's tiles busy fewer of the SM pairs than this, with a long K (H100, tune)
GATHER = 4  # parts whose partial sums are loaded per pass before any is added (more parts, more passes)
ROWS_IN_N_WIDTHS = (128, 112, 96)  # W rows per tile where step 11's kernel takes 256 tokens in M (``rows_in_n_width``)
ROWS_IN_N_TOKENS = 128  # ... only in full 128-token tiles: at 160 and 200 tokens the pairs won (H100, tune)
PREFETCH_W = 8  # K tiles of W a CTA puts in L2 before pdl's wait (``config_for``; H100, graphs) ...
PREFETCH_MAX_M = 64  # ... up to this many tokens: above, it cost 2-4% per launch at 4096-6144 rows (H100)
LATE_FROM_M = 2  # single tiles launch the next kernel late from this many tokens (at one: -1 to +2 points in graphs)
W_BEFORE_WAIT = 4  # K tiles of W single tiles launching the next kernel at the start load before pdl's wait: +2 to
# +4 points in graphs at one token and level per launch; 64 gained more in graphs but lost 1-3% per launch (H100)


@dataclasses.dataclass(frozen=True)
class Config(parent.Config):
    swap_ab: bool = True  # compute C^T = W x^T: W's rows in wgmma's M, the tokens in its N
    tile_m: int = 128  # rows of W per tile (two consumer warpgroups)
    tile_n: int = 16  # tokens per tile: M rounded up to 16 (``config_for``)
    stages: int = 12  # as many as fit (``config_for``)
    epi_n: int = 16
    epi_stages: int = 1
    cluster_m: int = 1
    cluster_n: int = 1
    gpc_order: bool = False  # every tile is a tail tile: no full wave to place
    gather_parts: bool = True  # the finisher waits for all its parts at once, then loads them all
    max_parts: int = 4  # clusters per tile when the tiles are fewer than the clusters (schedule.MAX_PARTS)
    lockstep: bool = False  # the classic layout at every K: lockstep's shared panels buy nothing here (below)
    pdl: bool = True  # programmatic dependent launch (``Gemm.before_first_load``): the next layer starts early
    prefetch_w: int = 0  # with pdl, K tiles of W put in L2 before the wait (``config_for``: pairs, late single tiles)
    launch_after_loads: bool = False  # with pdl, the next kernel launches once the loads are issued, not at the start
    # with pdl, K tiles of W loaded into the stages before the wait (``stages`` at most): only where no kernel
    # still running (a pdl chain runs at once) writes W: a layer's weight, not another kernel's output
    w_before_wait: int = 0


def check_config(config: Config):
    if config.w_before_wait < 0 or (config.w_before_wait and not (config.pdl and config.swap_ab)):
        return False, "w_before_wait (K tiles of W loaded before waiting for the kernel before) needs pdl and swap_ab, and >= 0"
    if not config.swap_ab:
        return parent.check_config(config)
    if not (16 <= config.tile_n <= 256 and config.tile_n % 16 == 0):
        return False, "with swap_ab, tile_n (tokens per tile) must be a multiple of 16 from 16 to 256"
    # steps 5-11's rules on everything but the width and what depends on it (their widths start at 64)
    ok, why = parent.check_config(dataclasses.replace(config, tile_n=64, epi_n=16, epi_stages=1, stages=1))
    if not ok:
        return ok, why
    ok, why = check_epilogue(config)
    if not ok:
        return ok, why
    if config.stages < 1:
        return False, "stages must be at least 1"
    if config.launch_after_loads and not config.pdl:
        return False, "launch_after_loads (when the next kernel may launch) needs pdl"
    if config.prefetch_w < 0 or (config.prefetch_w and not config.pdl):
        return False, "prefetch_w (K tiles of W put in L2 before waiting for the kernel before) needs pdl, and >= 0"
    if not 1 <= config.max_parts <= 32:
        return False, "max_parts must be from 1 to 32"
    if smem_estimate(config) > SMEM_CAPACITY:
        return False, f"needs {smem_estimate(config)} B of shared memory, more than the {SMEM_CAPACITY} B a CTA can have"
    return True, ""


def stages_for(tile_m: int, tile_n: int, epi_n: int, epi_stages: int) -> int:
    """Mainloop stages that fit in a CTA's shared memory beside the staging buffers (``smem_estimate``)."""
    fixed = smem_estimate(Config(tile_m=tile_m, tile_n=tile_n, epi_n=epi_n, epi_stages=epi_stages, stages=0))
    return min(MAX_STAGES, hardware.stages_that_fit((tile_m + tile_n) * 64 * 2, fixed, SMEM_CAPACITY))


def split_for(n: int, clusters: int) -> tuple:
    """(tile_m, max_parts) that put W's ``n`` rows on most of ``clusters`` single-CTA clusters with
    few parts per tile: 128-row tiles when ``FEW_PARTS`` parts each busy ``BUSY_SHARE`` of them, else
    64-row tiles (twice the tiles, half the parts); parts up to ``MAX_PARTS``, at least step 11's
    ``schedule.MAX_PARTS``. Each part but the last writes a tile_m x tokens fp32 partial sum and the
    finisher reads it back: on an H100 (tune, weights rotated out of L2) 64-row tiles beat 128-row
    ones at N = 4096 for every M from 1 to 256 (4 -> 2 parts), and lost at N = 14336 (2 -> 1)."""
    tile_m = 128 if -(-n // 128) * FEW_PARTS >= BUSY_SHARE * clusters else 64
    tiles = -(-n // tile_m)
    return tile_m, max(schedule.MAX_PARTS, min(MAX_PARTS, -(-clusters // tiles)))


def splits_k(tiles: int, tile_n: int, k: int, clusters: int) -> bool:
    """Whether the stream-K schedule splits K (``stream_k``): unless the ``tiles`` alone keep
    ``WHOLE_SHARE`` of the ``clusters`` streaming W and a tile's MMA work (``tile_n`` tokens x ``k``) is
    at most ``WHOLE_WORK``. On an H100 (tune, weights rotated out of L2) whole tiles won at 4096 x
    4096 and 6144 x 4096 for every M from 1 to 128 (64-96 tiles: up to 1.1x), tied at 14336 x 4096,
    and lost with 32 tiles (2048 x 8192) or with 128 tokens x K = 14336 (the busy SMs' MMAs then take
    about as long as the bytes)."""
    return not (tiles >= WHOLE_SHARE * clusters and tile_n * k <= WHOLE_WORK)


def pair_tile_m(m: int, n: int, pairs: int) -> int:
    """Rows of W per tile where more than ``PAIR_FROM_M`` tokens go in two token tiles in 1 x 2
    clusters, each W tile loaded once and multicast to both CTAs; 0 where they do not.
    Each CTA does half the MMA work of one wide tile for the same bytes of W. 64 rows where those
    tiles keep between ``WHOLE_SHARE`` and all of the ``pairs`` of SMs streaming; above 64 tokens,
    else 128 rows where 128-row tiles keep at least ``WHOLE_SHARE`` of them streaming. On an H100
    (tune, weights rotated out of L2), 64-row pairs against the rule before them: at 64 tokens 1.00
    against 0.99 of cuBLAS at 4096 x 4096 and 1.04 against 0.96 at 2048 x 8192, lost at 6144 and
    14336 rows; at 128 tokens 1.01 against 0.92 at 4096 x 4096, 1.16 against 1.07 at 4096 x 14336.
    128-row pairs at 128 tokens: 0.97 against 0.94 at 6144 rows, 0.98 against 0.97 at 14336; at 256
    tokens, against step 11's kernel: 1.04 against 0.81 (64 rows, 4096 x 4096), 0.91 against 0.74
    and 0.94 against 0.85 (128 rows at 6144 and 14336 rows), 0.83 against 0.85 at 2048 x 8192, where
    the pair split along K ran 0.86 against 0.74 whole in a later A/B (``config_for`` splits there).
    cuBLAS runs 64 x 64 tiles at 128 tokens. At 32 tokens, pairs of 16-token tiles over 64-row W
    tiles: 1.01 against 0.94 at 4096 x 4096, 1.03 against 0.98 at 2048 x 8192, 1.05 against 1.00 at
    4096 x 14336; at 6144 rows, where 64-row tiles outnumber the pairs, 0.98 against 0.99."""
    if m <= PAIR_FROM_M:
        return 0
    if WHOLE_SHARE * pairs <= -(-n // 64) <= pairs:
        return 64
    if m > 64 and -(-n // 128) >= WHOLE_SHARE * pairs:
        return 128
    return 0


def rows_in_n_width(n: int, pairs: int) -> int:
    """W rows per tile (step 11's ``tile_n``) where two full 128-token tiles would pair over
    128-row W tiles: the width of ``ROWS_IN_N_WIDTHS`` whose 2-CTA clusters fill their waves best (ties:
    the wider). There step 11's kernel, the tokens in M (two 128-row tiles, x multicast), beat the pairs
    on an H100 (tune, weights rotated out of L2): at 256 x 6144 x 4096, 96 rows (64 clusters) 0.97 of
    cuBLAS against 0.90; at 256 x 14336 x 4096, 112 rows (128 clusters) 0.96 against 0.94. cuBLAS ran
    the same widths there. At 160 and 200 tokens (token tiles partly empty) the same kernel ran 0.66-0.81
    against the pairs' 0.95-0.97: ``config_for`` takes it only with full token tiles."""
    def fill(width):
        clusters = -(-n // width)
        return Fraction(clusters, -(-clusters // pairs) * pairs)
    return max(ROWS_IN_N_WIDTHS, key=lambda width: (fill(width), width))


def config_for(problem, config: Config = Config()) -> Config:
    """The swapped tile for ``problem.m`` <= ``SWAP_MAX_M`` tokens: where ``pair_tile_m`` names a
    height, two token tiles of half the tokens (rounded up to 16) in 1 x 2 clusters, K whole unless
    the tiles leave more than half the pairs idle and tile_n x K exceeds ``WHOLE_WORK``, step 11's
    hand-over, and up to ``PREFETCH_MAX_M`` tokens ``PREFETCH_W`` K tiles of W put in L2 before
    pdl's wait; else,
    up to ``SWAP_ALONE_MAX_M`` tokens, tile_n M rounded up to 16, tile_m and parts per tile from
    ``split_for``, K split or whole from ``splits_k``; the stages that fit; the classic layout at every K;
    where the tiles, K whole, busy at most half the clusters, from ``LATE_FROM_M`` tokens, the next kernel
    launched once the loads are issued and ``PREFETCH_W`` K tiles of W put in L2 before the wait, elsewhere
    ``W_BEFORE_WAIT`` K tiles of W loaded into the stages before it. Else
    step 11's choice with ``swap_ab``, ``gather_parts`` and ``pdl`` off and lockstep from step 11's K
    (step 11's kernel); where the pairs would take 128-row W tiles with every token tile full
    (``ROWS_IN_N_TOKENS``), its tile is two 128-token rows in a 2 x 1 cluster by ``rows_in_n_width`` W rows."""
    pair_m = pair_tile_m(problem.m, problem.n, max_clusters(2))
    rows_in_n = problem.m > SWAP_ALONE_MAX_M and pair_m == 128 and problem.m % ROWS_IN_N_TOKENS == 0
    if problem.m > SWAP_MAX_M or (problem.m > SWAP_ALONE_MAX_M and not pair_m) or rows_in_n:
        step11 = parent.config_for(problem, dataclasses.replace(config, swap_ab=False, gather_parts=False, lockstep=True,
                                                                pdl=False, **_STEP11_FIELDS))
        if not rows_in_n:
            return step11
        width = rows_in_n_width(problem.n, max_clusters(2))
        epi_n = next(w for w in (32, 16) if width % w == 0)
        return dataclasses.replace(step11, tile_m=128, tile_n=width, epi_n=epi_n, epi_stages=1, cluster_m=2, cluster_n=1,
                                   stages=stages_for(128, width, epi_n, 1))
    clusters = max_clusters(1)
    if pair_m:
        tile_n = -(-problem.m // 32) * 16  # half the tokens, rounded up to 16
        epi_n = next(w for w in (64, 48, 32, 16) if tile_n % w == 0)
        pairs, tiles = max_clusters(2), -(-problem.n // pair_m)
        split = tiles < PAIR_SPLIT_SHARE * pairs and tile_n * problem.k > WHOLE_WORK  # half the pairs idle, long K
        return dataclasses.replace(config, tile_m=pair_m, tile_n=tile_n, epi_n=epi_n, epi_stages=1, cluster_n=2,
                                   stages=stages_for(pair_m, tile_n, epi_n, 1), stream_k=split, gather_parts=False,
                                   prefetch_w=PREFETCH_W if config.pdl and problem.m <= PREFETCH_MAX_M else 0)
    tile_n = max(16, -(-problem.m // 16) * 16)
    epi_n = next(w for w in (64, 48, 32, 16) if tile_n % w == 0)
    tile_m, max_parts = split_for(problem.n, clusters)
    stages = stages_for(tile_m, tile_n, epi_n, 1)
    stream_k = splits_k(-(-problem.n // tile_m), tile_n, problem.k, clusters)
    late = (config.pdl and not stream_k and -(-problem.n // tile_m) <= clusters // 2  # half the SMs idle
            and LATE_FROM_M <= problem.m <= PREFETCH_MAX_M)
    return dataclasses.replace(config, tile_m=tile_m, tile_n=tile_n, epi_n=epi_n, epi_stages=1, stages=stages,
                               max_parts=max_parts, stream_k=stream_k, launch_after_loads=late,
                               prefetch_w=PREFETCH_W if late else 0,
                               w_before_wait=W_BEFORE_WAIT if config.pdl and not late else 0)


# step 11's defaults for the fields this step's Config changes (its choice for large M starts there)
_STEP11_FIELDS = {f: getattr(parent.Config(), f) for f in
                  ("tile_m", "tile_n", "stages", "epi_n", "epi_stages", "cluster_m", "cluster_n", "gpc_order")}


def transposed(t: cute.Tensor) -> cute.Tensor:
    """The same memory seen with its two modes exchanged: C (M, N) row-major as C^T (N, M) M-major."""
    return cute.make_tensor(t.iterator, cute.select(t.layout, mode=[1, 0]))


class Gemm(DependentLaunch, parent.Gemm):
    def __init__(self, config: Config):
        super().__init__(config)
        self.max_parts = config.max_parts
        # Lockstep main parts start every tile at K tile 0 together so that tiles sharing a panel read it
        # at once; swapped tiles are different rows of W, so there is nothing to share, and each main
        # part would wait for helpers launched after all the mains (schedule.clusters_at_once).
        self.lockstep_from = schedule.LOCKSTEP_K_TILES if config.lockstep else schedule.NO_LOCKSTEP

    @cute.jit
    def __call__(self, mA: cute.Tensor, mB: cute.Tensor, mC: cute.Tensor, stream, mPartials: cute.Tensor, mFlags: cute.Tensor,
                 mPlaces: cute.Tensor):
        if cutlass.const_expr(self.config.swap_ab):
            mA, mB, mC = mB, mA, transposed(mC)  # C^T = W x^T: W fills wgmma's M, the tokens its N
        self.launch_kernel(mA, mB, mC, stream, mPartials, mFlags, mPlaces, self.schedule_constants(mA, mC))

    # ---- the kernels before and after: programmatic dependent launch (``pdl``, ``DependentLaunch``)

    @cute.jit
    def before_first_load(self, tma_atom_a, mA, tma_atom_b, mB, sA, sB, tile_coord, k_begin, k_end):
        """With ``pdl``, the producer waits for the kernel before to finish, and its writes to be visible,
        before it loads x or W (with ``w_before_wait``, it waits in ``produce_tile`` instead, before x).
        Every other global access of the kernel (partial sums, flags, C) comes after a stage that load
        filled, so it waits too; the kept scratch is shared with that kernel. W is a weight no kernel
        writes: with ``prefetch_w``, its first K tiles of this CTA's first unit (A, once swapped) are
        requested into L2 before the wait, while the kernel before drains."""
        if cutlass.const_expr(not self.loads_w_before_wait()):
            if cutlass.const_expr(self.config.prefetch_w > 0 and self.config.swap_ab):  # (check_config: only with pdl)
                _, tAgA, _, _, _, _ = self.load_partitions(tma_atom_a, mA, tma_atom_b, mB, sA, sB, tile_coord)
                for k_tile in cutlass.range(k_begin, cutlass.min(k_end, k_begin + self.config.prefetch_w), unroll=1):
                    cute.prefetch(tma_atom_a, tAgA[(None, k_tile)])
            self.wait_for_kernel_before()

    @cute.jit
    def produce_tile(self, mainloop_pipeline, load_state, tma_atom_a, mA, tma_atom_b, mB, sA, sB, tile_coord, k_begin, k_end):
        """Step 11's loads; with ``w_before_wait``, each unit starts with ``load_w_then_x`` (at the first unit:
        W's first K tiles into the stages, the next ``prefetch_w`` into L2, the wait, x into those stages). A
        CTA with no unit never waits: it reads and writes nothing."""
        if cutlass.const_expr(not self.loads_w_before_wait()):
            return parent.Gemm.produce_tile(self, mainloop_pipeline, load_state, tma_atom_a, mA, tma_atom_b, mB, sA, sB,
                                            tile_coord, k_begin, k_end)
        tAsA, tAgA, tBsB, tBgB, a_mask, b_mask = self.load_partitions(tma_atom_a, mA, tma_atom_b, mB, sA, sB, tile_coord)
        load_state, k_next = self.load_w_then_x(mainloop_pipeline, load_state, tma_atom_a, tAgA, tAsA, a_mask, tma_atom_b, tBgB,
                                                tBsB, b_mask, k_begin, k_end, self.config.prefetch_w)
        for k_tile in cutlass.range(k_next, k_end, unroll=1):
            self.load_k_tile(mainloop_pipeline, load_state, k_tile, tma_atom_a, tAgA, tAsA, a_mask, tma_atom_b, tBgB, tBsB,
                             b_mask)
            load_state.advance()
        return load_state

    @cute.jit
    def add_partials(self, accumulators, mPartials: cute.Tensor, mFlags: cute.Tensor, first_piece, last_piece):
        """The finisher: thread j of the consumers waits for part j's flag (acquire) and resets it, all
        parts at once; after one barrier, each thread loads its values of up to ``GATHER`` parts
        before it adds any. A missing part (fewer than GATHER) loads the first part's slot again and
        adds zero, so no load waits on a branch."""
        if cutlass.const_expr(not self.config.gather_parts):
            parent.Gemm.add_partials(self, accumulators, mPartials, mFlags, first_piece, last_piece)
        else:
            tidx, _, _ = cute.arch.thread_idx()
            waiter = tidx - WARPGROUP
            if first_piece + waiter <= last_piece:
                self.take_flag(mFlags, self.partial_slot(first_piece + waiter))
            cute.arch.barrier(barrier_id=EPI_BARRIER_ID, number_of_threads=self.consumer_threads)
            for base in cutlass.range(first_piece, last_piece + 1, GATHER, unroll=1):
                parts = [self.partial_view(mPartials, self.partial_slot(cutlass.select_(base + p <= last_piece, base + p, base)),
                                           accumulators) for p in range(GATHER)]
                for v in cutlass.range(cute.size(accumulators), unroll_full=True):
                    values = [cutlass.select_(base + p <= last_piece, parts[p][v], cutlass.Float32(0.0)) for p in range(GATHER)]
                    accumulators[v] = accumulators[v] + ((values[0] + values[1]) + (values[2] + values[3]))
