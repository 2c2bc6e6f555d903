"""Step 12 (Blackwell) - the memory roofline: swap A and B for decode-sized GEMMs.

Parent: step 11. Key differences (chapter 12):

* *Swap A and B.* A linear layer with few tokens, y = x W^T with x (M, K), M <= 256, and W (N, K)
  of thousands by thousands, is bound by streaming W once: about M FLOP per byte, under a B200's
  ridge (~2.25 PFLOP/s / ~8 TB/s = ~280 FLOP per byte, datasheet). Step 11's decode path already
  runs single-CTA tiles for M <= 128 (``decode_rule``), but with x in tcgen05's M: 64 or 128 rows,
  of which M = 16 fills a quarter (the rest are zeros in every MMA, every accumulator and every
  partial sum handed over). Here the kernel computes C^T = W x^T instead: W is the MMA's A operand
  (its rows fill ``tile_m`` = 64 or 128, all real) and x is its B operand (the tokens sit in N,
  ``tile_n`` = M rounded up to 16). tcgen05 ``cta_group::1`` takes N from 16 to 256 in steps of 16
  with M = 128 (of 8 from 8 with M = 64); 16 is also the epilogue's narrowest sub-tile. Both
  operands stay K-major, so nothing is copied: only the roles change in ``__call__``.
* *C written transposed.* C (M, N) row-major is C^T (N, M) M-major: the same bytes. The staging
  buffer is then M-major too, and step 4's register -> shared-memory store follows C's layout:
  ``stmatrix`` with its 8 x 8 matrices transposed after a 64-row accumulator's ``16x256b`` loads;
  after a 128-row accumulator's ``32x32b`` loads (lane i holds row i of C^T, a column of C) 16-bit
  ``st.shared``, consecutive lanes at consecutive addresses. One TMA store writes each sub-tile.
* *Every SM streams its share of W.* Tiles are (W rows) x (tokens): at N = 4096, 32 tiles of 128
  rows or 64 of 64 for 148 SMs. Step 11's stream-K tail already cuts a grid with fewer tiles than
  clusters along K (``schedule.tail_parts``); ``config_for`` takes the tile_m whose busiest CTA
  receives fewer bytes under that schedule (``busiest_bytes``: decode_rule's model, W and x rows
  per K tile), 128 on a tie. Clusters of one CTA: x is a few KiB per K tile, nothing worth
  multicasting.
* *Enough bytes in flight.* A stage holds (tile_m + tile_n) x 64 bf16, 10 KiB at 64 x 16: as many
  stages as fit (``decode_rule.max_stages``: 22 at 64 x 16, 12 at 128 x 16) keep ~200 KiB of W in
  flight per SM, far above Little's law's ~54 KB (8 TB/s / 148 SMs x ~1 us of DRAM latency).
* *The next layer may launch early* (``pdl``, programmatic dependent launch, as on Hopper): every
  CTA lets the next kernel launch at once, and the TMA warp waits for the kernel before to finish
  only where it first loads (with ``w_before_wait``, only where it first loads x). Off by default:
  compiled and checked here, never run on a B200 (on an
  H100 it won 1.00-1.3x back to back and lifted a 32 MB layer in CUDA graphs to 83-85% of copy bandwidth).
  With ``launch_after_loads`` each CTA lets the next kernel launch only once its TMA warp issued its
  last load (on Hopper, for single tiles leaving half the SMs idle: 88% against 85% at 16 tokens).
  W is a weight no kernel writes, so its loads need not wait: with ``w_before_wait`` the TMA warp
  loads its own unit's first K tiles of W into the stages, then waits, then adds x (``load_range``).
  An option on both cards, measured on neither yet.

With more than ``SWAP_MAX_M`` tokens ``config_for`` returns step 11's own choice with ``swap_ab``
and ``pdl`` off: the same kernel as step 11.

Expected (a model, not measured: no B200 here): W streamed once at close to the card's copy
bandwidth; against step 11's decode tiles the MMAs carry no padding rows and the hand-over's
partial sums are tile_m x tile_n of real values. By bytes per busiest CTA the model does not favour
the swap everywhere (NOTES.md, "Blackwell step 12"): the first B200 run decides.

Accepts: any M (M = 1 included); N and K multiples of 8.
"""

import dataclasses
import math
from fractions import Fraction

import cutlass
import cutlass.cute as cute

from ... import hardware
from ...rules import decode_rule
from ..common import DependentLaunch
from . import step11_beyond_the_seed as parent
from .step04_tma_store import can_implement, check_epilogue  # noqa: F401  (same shapes as step 4)
from .step07_tmem_double_buffer import check_accumulators

SWAP_MAX_M = 256  # tokens up to which C^T = W x^T is computed (the tokens fit one tcgen05 N)
TILE_MS = (128, 64)  # rows of W per tile: the M of a single-CTA tcgen05.mma
TOKEN_STEP = 16  # tile_n granularity: a tcgen05 N for M = 128 and 64, and the epilogue's sub-tile


@dataclasses.dataclass(frozen=True)
class Config(parent.Config):
    swap_ab: bool = True  # compute C^T = W x^T: W's rows in tcgen05's M, the tokens in its N
    cta_group: int = 1  # single-CTA tiles
    tile_m: int = 128  # rows of W per tile (``config_for``: 64 or 128)
    tile_n: int = 16  # tokens per tile: M rounded up to 16 (``config_for``)
    cluster_m: int = 1
    cluster_n: int = 1
    stages: int = decode_rule.max_stages(128, 16, 16, 1)  # 12 = (232448 - 8192 fixed) // ((128 + 16) x 128 B)
    epi_n: int = 16
    epi_stages: int = 1
    # programmatic dependent launch (``Gemm.before_first_load``): the next layer starts early. Off on
    # Blackwell: no B200 has run it (on by default on Hopper, where an H100 measured it)
    pdl: bool = False
    launch_after_loads: bool = False  # with pdl, the next kernel launches once the loads are issued (as on Hopper)
    # with pdl, K tiles of W loaded into the stages before the wait (``stages`` at most; as on Hopper): only where
    # the kernel before cannot have written W (a layer's weight, not another kernel's output such as a KV cache)
    w_before_wait: int = 0


def check_config(config: Config):
    if config.w_before_wait < 0 or (config.w_before_wait and not (config.pdl and config.swap_ab)):
        return False, "w_before_wait (K tiles of W loaded before waiting for the kernel before) needs pdl and swap_ab, and >= 0"
    if not config.swap_ab:
        return parent.check_config(config)
    if config.cta_group != 1:
        return False, "with swap_ab, cta_group must be 1 (single-CTA tiles: W's rows fill tcgen05's M, 64 or 128)"
    if config.tile_n % TOKEN_STEP or not TOKEN_STEP <= config.tile_n <= 256:
        return False, "with swap_ab, tile_n (tokens per tile) must be a multiple of 16 from 16 to 256"
    # step 11's single-CTA rules on everything but the width (its widths start at 32) and what depends on it
    ok, why = parent.check_config(dataclasses.replace(config, tile_n=32, epi_n=16, epi_stages=1, stages=2))
    if not ok:
        return ok, why
    for ok, why in (check_epilogue(config), check_accumulators(config)):
        if not ok:
            return ok, why
    if config.launch_after_loads and not config.pdl:
        return False, "launch_after_loads (when the next kernel may launch) needs pdl"
    if not 2 <= config.stages <= decode_rule.MAX_STAGES:
        return False, f"stages must be from 2 to {decode_rule.MAX_STAGES}"
    return parent.check_single_cta_smem(config)


def tile_n_for(m: int) -> int:
    """Tokens per tile: M rounded up to 16 (at least 16, at most 256)."""
    return min(256, max(TOKEN_STEP, -(-m // TOKEN_STEP) * TOKEN_STEP))


def busiest_bytes(m: int, n: int, k: int, tile_m: int, sms: int = hardware.B200.sms) -> Fraction:
    """Bytes of W and x the busiest CTA receives with tile_m x tile_n_for(m) swapped tiles in clusters
    of one, under the kernel's tail schedule (``decode_rule.busiest_span``, hand-overs priced in):
    span x (real rows of W + real tokens) x 128 per K tile (TMA reads no zero-filled row)."""
    tile_n = tile_n_for(m)
    tiles = math.ceil(n / tile_m) * math.ceil(m / tile_n)
    _, _, span = decode_rule.busiest_span(tiles, sms, math.ceil(k / decode_rule.TILE_K))
    return span * (min(n, tile_m) + min(m, tile_n)) * decode_rule.K_TILE_ROW_BYTES


def tile_m_for(m: int, n: int, k: int) -> int:
    """128 rows of W, unless 64 cost the busiest CTA fewer bytes by more than ``decode_rule.COST_TIE``. The bytes
    count the real tokens only, so the choice may change inside one tile_n (at 6144 x 4096: 64 rows up to 113
    tokens, 128 from 114, both with tile_n 128)."""
    wide, narrow = (busiest_bytes(m, n, k, tile_m) for tile_m in TILE_MS)
    return 64 if narrow * (1 + decode_rule.COST_TIE) < wide else 128


def config_for(problem, config: Config = Config()) -> Config:
    """The swapped single-CTA tile for ``problem.m`` <= ``SWAP_MAX_M`` tokens (tile_m by
    ``tile_m_for``, tile_n: M rounded up to 16, the stages that fit, clusters of one), else step 11's
    choice with ``swap_ab`` and ``pdl`` off (step 11's kernel)."""
    if problem.m > SWAP_MAX_M:
        return parent.config_for(problem, dataclasses.replace(config, swap_ab=False, pdl=False, **_STEP11_FIELDS))
    tile_m, tile_n = tile_m_for(problem.m, problem.n, problem.k), tile_n_for(problem.m)
    epi_n, epi_stages = decode_rule.epilogue(tile_n)
    stages = decode_rule.max_stages(tile_m, tile_n, epi_n, epi_stages)
    return dataclasses.replace(config, swap_ab=True, cta_group=1, tile_m=tile_m, tile_n=tile_n, cluster_m=1, cluster_n=1,
                               stages=stages, epi_n=epi_n, epi_stages=epi_stages)


# step 11's defaults for the fields this step's Config changes (its choice for large M starts there)
_STEP11_FIELDS = {f: getattr(parent.Config(), f) for f in
                  ("cta_group", "tile_m", "tile_n", "cluster_m", "cluster_n", "stages", "epi_n", "epi_stages")}


def transposed(t: cute.Tensor) -> cute.Tensor:
    """The same memory seen with its two modes exchanged: C (M, N) row-major as C^T (N, M) M-major
    (as on Hopper, ``sm90.step12_swap_ab``)."""
    return cute.make_tensor(t.iterator, cute.select(t.layout, mode=[1, 0]))


class Gemm(DependentLaunch, parent.Gemm):
    @cute.jit
    def __call__(self, mA: cute.Tensor, mB: cute.Tensor, mC: cute.Tensor, stream, mPartials: cute.Tensor,
                 mCounters: cute.Tensor, mFlags: cute.Tensor):
        if cutlass.const_expr(self.config.swap_ab):
            mA, mB, mC = mB, mA, transposed(mC)  # C^T = W x^T: W fills tcgen05's M, the tokens its N
        self.launch_kernel(mA, mB, mC, stream, mPartials, mCounters, mFlags, self.tail_constants(mA, mC))

    # ---- the kernels before and after: programmatic dependent launch (``pdl``, ``DependentLaunch``)

    def before_first_load(self):
        """With ``pdl``, the TMA warp waits for the kernel before to finish, and its writes to be visible,
        before it loads x (with ``w_before_wait``, in ``load_range``, after W's first loads). Every other
        global access of the kernel (the tail's counters, flags and partial sums, C) comes after an
        accumulator that those loads filled, so it waits too; the workspace is shared with that kernel."""
        if cutlass.const_expr(not self.loads_w_before_wait()):
            self.wait_for_kernel_before()

    @cute.jit
    def load_range(
        self, mainloop_pipeline, load_state, tiled_mma, tma_atom_a, mA, tma_atom_b, mB, sA, sB, pair_tile, cta_in_cluster,
        k_begin, k_end,
    ):
        """Step 11's loads; with ``w_before_wait``, each unit starts with ``load_w_then_x`` (at the first unit,
        the cluster's own, always valid under cluster launch control: W's first K tiles into the stages, the
        wait, x into those stages)."""
        if cutlass.const_expr(not self.loads_w_before_wait()):
            return parent.Gemm.load_range(self, mainloop_pipeline, load_state, tiled_mma, tma_atom_a, mA, tma_atom_b, mB, sA,
                                          sB, pair_tile, cta_in_cluster, k_begin, k_end)
        tAsA, tAgA, tBsB, tBgB, a_mask, b_mask = self.load_partitions(
            tiled_mma, tma_atom_a, mA, tma_atom_b, mB, sA, sB, pair_tile, cta_in_cluster
        )
        load_state, k_next = self.load_w_then_x(mainloop_pipeline, load_state, tma_atom_a, tAgA, tAsA, a_mask, tma_atom_b, tBgB,
                                                tBsB, b_mask, k_begin, k_end)
        for k_tile in cutlass.range(k_next, k_end, unroll=1):
            self.load_k_tile(
                mainloop_pipeline, load_state, k_tile, tma_atom_a, tAgA, tAsA, a_mask, tma_atom_b, tBgB, tBsB, b_mask
            )
            load_state.advance()
        return load_state
