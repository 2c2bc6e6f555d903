"""The Blackwell step 11's tile for decode-sized GEMMs (small M), chosen on the host before the launch.

A decode GEMM is y = x W^T with x (M, K) a few rows and W (N, K) thousands by thousands. Its
FLOPs are 2MNK and it must read at least the 2NK bytes of W, so its arithmetic intensity is
about M FLOP per byte of W; a B200's ridge point is ~2.25 PFLOP/s / ~8 TB/s (datasheet) = ~280,
so for M up to a few hundred the run is bound by streaming W once from HBM. At 4096 x 4096 that
is 32 MiB, 4.2 us at 8 TB/s; spread over the 148 SMs it is 227 KB per SM, 54 GB/s per SM for
those 4.2 us. The roofline needs *every* SM streaming its own share, not a few SMs streaming a
lot, and each SM must keep its share in flight: by Little's law, at ~1 us of DRAM latency under
load, ~54 KB of W per SM, so as many pipeline stages as shared memory holds.

**Why not the default tile.** Step 11's default runs 128 x 256 per CTA on 2-CTA pairs
(``tcgen05.mma.cta_group::2``, 256 rows x 256 columns per pair). With M <= 128 the pair's
second CTA holds only padding rows (TMA zero-fills them: no bytes, but a 128 x 256 accumulator,
its epilogue and, in the stream-K tail, its fp32 partial sums of zeros to hand over), and N /
256 pair tiles are few: at 4096 x 4096, 16 pair tiles, cut in halves along K by the tail rule,
are 32 units on 64 of the 148 SMs, and the busiest CTA receives 3.9x (M = 16) to 6.9x (M = 128)
the ideal share of bytes (:func:`evaluate_pair`). The pair's CTA 1 does stream half of B, so in
bytes a pair with a 2w-wide tile is a single CTA with a w-wide one; what the pair cannot do is
come in widths other than 64, 128 and 256 or in 64 rows. So up to :data:`DECODE_MAX_M` rows the
rule runs single-CTA tiles
(``cta_group::1``): tile_m 64 where M <= 64 (``tcgen05.mma`` M = 64, half the shared memory of A
per stage, so more stages), else 128; one CTA per tile column, or clusters
of two along N that share x by TMA multicast. Above 128 rows both CTAs of a pair hold real
rows and the pair's split of B pays; the rule keeps step 11's default there.

**The width.** Each CTA receives, per 64-wide K tile, ``rows`` x 128 bytes of x (the real rows,
min(M, tile_m): TMA does not read the zero-filled ones) and ``tile_n`` x 128 bytes of W. A
narrow tile makes more tiles (more SMs busy) but makes every SM read x again; a wide one reads
x less but leaves SMs idle. The host counts both with the kernel's own schedule: the tiles, the
parts per tail tile the kernel's ``schedule.tail_parts`` will pick (every tile is a tail tile
when there are fewer tiles than clusters) and the model's span of the busiest cluster in K tiles
(``schedule.tail_span``: rounds of 1 / parts of a tile's K loop, hand-overs included). The
cost of a candidate is the busiest CTA's bytes, span x (tile_n + rows) x 128; the ideal is
2NK / 148. The rule takes the cheapest over widths 32..256 in steps of 16 and clusters of 1 or 2
along N; candidates within :data:`COST_TIE` of it count as equal, and of those it takes the one
reading the fewest bytes from L2 (x once per cluster-tile column: multicast halves it), then the
wider, then the smaller cluster. The K split is the existing stream-K tail of the kernel: the
rule only picks the tile, ``tail_parts`` then cuts K exactly as the model said.

Every number here is a model (nothing has run on a B200): the hand-over price
(``schedule.FIXUP_K_TILES``) was measured on the H200 for 128 x 256 tiles, and whether the
busiest SM's bytes or HBM bound the run is what the first B200 run must measure (NOTES.md,
"Blackwell decode path").

Pure Python: importable without CuTeDSL (the kernel module imports it for ``check_config``).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import NamedTuple, Optional

from .. import hardware
from . import schedule

PAIR_ROWS = 256  # rows of a cta_group::2 MMA: a pair's two CTAs hold 128 each
DECODE_MAX_M = PAIR_ROWS // 2  # with M <= 128 a pair's second CTA would hold only padding rows
TILE_K = 64  # K per stage: one 128-byte swizzle row of bf16
K_TILE_ROW_BYTES = TILE_K * 2  # bytes of one row (of x or W) per K tile
TILE_NS = tuple(range(256, 31, -16))  # tcgen05 N for M = 128 (multiples of 16), widest first
CLUSTER_NS = (1, 2)  # CTAs along N per cluster (x multicast to both when 2)
COST_TIE = Fraction(1, 50)  # candidates within 2% of the cheapest count as equal
SMEM_CAPACITY = hardware.SM100A.smem_per_cta  # 232448 B of shared memory a CTA may have on sm_100
BARRIER_BYTES = 1024  # mbarriers, the CLC answer, the TMEM address, the tail's arrival slot
ALIGN_BYTES = 3 * 1024  # sA, sB, sC each aligned to 1 KiB
MAX_STAGES = 32  # the barrier block stays inside BARRIER_BYTES (2 x 8 bytes per stage)


def smem_estimate(tile_m: int, tile_n: int, stages: int, epi_n: int, epi_stages: int) -> int:
    """Bytes of shared memory of a single-CTA step-11 tile: A and B stages (the CTA holds all of B,
    not half as in a pair), the epilogue's staging buffers, barriers and alignment."""
    ab = (tile_m + tile_n) * TILE_K * 2 * stages
    epi = tile_m * epi_n * 2 * epi_stages
    return ab + epi + BARRIER_BYTES + ALIGN_BYTES


EPI_N = 16  # columns per epilogue sub-tile: divides every width of TILE_NS


def epilogue(tile_n: int) -> tuple:
    """(epi_n, epi_stages): 16-column sub-tiles, two staging buffers where the sub-tiles pair up,
    else one. The C tile of a decode GEMM is small, so the epilogue's width costs little; 16 columns
    keep the tensor-memory loads and the fold-back's stores narrow (x16 registers: 32x32b.x16, or
    16x256b.x2 with 64 rows), which ptxas allocates without the few spilled words that 32-column
    ones get at some widths (NOTES.md, "Blackwell decode path")."""
    return EPI_N, 2 if (tile_n // EPI_N) % 2 == 0 else 1


def max_stages(tile_m: int, tile_n: int, epi_n: int, epi_stages: int) -> int:
    """The most A/B stages that fit beside the staging buffers (at most :data:`MAX_STAGES`)."""
    fixed = smem_estimate(tile_m, tile_n, 0, epi_n, epi_stages)
    return min(MAX_STAGES, hardware.stages_that_fit((tile_m + tile_n) * TILE_K * 2, fixed, SMEM_CAPACITY))


class Choice(NamedTuple):
    """The fields of step 11's ``Config`` the rule sets, and the model's numbers behind them."""

    tile_m: int
    tile_n: int
    cluster_n: int
    stages: int
    epi_n: int
    epi_stages: int
    tiles: int  # cluster-tiles
    parts: int  # parts per tail tile (``schedule.tail_parts``): 1 = no K split
    units: int  # units cluster launch control hands out
    busy_sms: int  # SMs with a unit in the first round
    span: Fraction  # the busiest cluster's K tiles (hand-overs included), by ``schedule.tail_span``
    sm_bytes: Fraction  # the busiest CTA's bytes of x and W: span x (tile_n + rows) x 128
    l2_bytes: int  # bytes the CTAs read from L2: W once, x once per cluster-tile column

    def fields(self) -> dict:
        """Keyword arguments for ``dataclasses.replace(step11.Config(), ...)``."""
        return dict(cta_group=1, tile_m=self.tile_m, tile_n=self.tile_n, cluster_m=1, cluster_n=self.cluster_n,
                    stages=self.stages, epi_n=self.epi_n, epi_stages=self.epi_stages)

    def share(self, n: int, k: int, sms: int) -> Fraction:
        """The busiest CTA's bytes over the ideal share of W, 2NK / sms (1 = every SM its share, no x)."""
        return self.sm_bytes / Fraction(2 * n * k, sms)


def is_decode(m: int) -> bool:
    """Single-CTA tiles: a 256-row pair would leave its second CTA only padding rows."""
    return m <= DECODE_MAX_M


def tile_m_for(m: int) -> int:
    """64 rows (tcgen05 M = 64) when they hold every row of x, else 128."""
    return 64 if m <= 64 else 128


def busiest_span(tiles: int, clusters: int, k_tiles: int) -> tuple:
    """(parts per tail tile, units, the busiest cluster's K tiles) of ``tiles`` on ``clusters`` under
    the kernel's own tail schedule (``schedule.tail_parts``, ``tail_span``; hand-overs priced in)."""
    parts = schedule.tail_parts(tiles, clusters, k_tiles)
    units, _ = schedule.tail_units(tiles, clusters, parts)
    waves, tail = divmod(tiles, clusters)
    tail_k = Fraction(schedule.tail_span(tail, clusters, parts, k_tiles), parts) if parts > 1 else (k_tiles if tail else 0)
    return parts, units, waves * k_tiles + tail_k


def evaluate(m: int, n: int, k: int, tile_n: int, cluster_n: int, sms: int) -> Choice:
    """The model's numbers for single-CTA tiles tile_m_for(m) x ``tile_n`` in clusters of
    ``cluster_n`` along N, on a GPU of ``sms`` SMs running one CTA per SM."""
    tile_m = tile_m_for(m)
    clusters = sms // cluster_n
    tiles = math.ceil(m / tile_m) * math.ceil(n / (tile_n * cluster_n))
    k_tiles = math.ceil(k / TILE_K)
    parts, units, span = busiest_span(tiles, clusters, k_tiles)
    rows = min(m, tile_m)
    sm_bytes = span * (tile_n + rows) * K_TILE_ROW_BYTES
    tile_rows = math.ceil(m / tile_m)
    l2_bytes = (tile_rows * math.ceil(n / tile_n) * tile_n * k_tiles * K_TILE_ROW_BYTES
                + math.ceil(n / (tile_n * cluster_n)) * m * k_tiles * K_TILE_ROW_BYTES)
    epi_n, epi_stages = epilogue(tile_n)
    stages = max_stages(tile_m, tile_n, epi_n, epi_stages)
    return Choice(tile_m, tile_n, cluster_n, stages, epi_n, epi_stages, tiles, parts, units,
                  min(units, clusters) * cluster_n, span, sm_bytes, l2_bytes)


def evaluate_pair(m: int, n: int, k: int, sms: int, tile_n: int = 256, cluster_m: int = 2, cluster_n: int = 1) -> Choice:
    """The same numbers for step 11's CTA pairs (its default: 128 x 256 per CTA, 2 x 1 clusters): a
    pair's CTA 0 receives its 128 rows of x (min(M, 128) real ones) and half of B's tile_n columns,
    CTA 1 the other half and rows 128..255 (none of them real when M <= 128)."""
    clusters = sms // (cluster_m * cluster_n)
    tiles = math.ceil(m / (PAIR_ROWS * cluster_m // 2)) * math.ceil(n / (tile_n * cluster_n))
    k_tiles = math.ceil(k / TILE_K)
    parts, units, span = busiest_span(tiles, clusters, k_tiles)
    sm_bytes = span * (min(m, PAIR_ROWS // 2) + tile_n // 2) * K_TILE_ROW_BYTES
    l2_bytes = (math.ceil(m / PAIR_ROWS) * math.ceil(n / tile_n) * tile_n * k_tiles * K_TILE_ROW_BYTES
                + math.ceil(n / (tile_n * cluster_n)) * m * k_tiles * K_TILE_ROW_BYTES)
    return Choice(PAIR_ROWS // 2, tile_n, cluster_n, 0, 0, 0, tiles, parts, units,
                  min(units, clusters) * cluster_m * cluster_n, span, sm_bytes, l2_bytes)


def candidates(m: int, n: int, k: int, sms: int) -> list:
    """Every width and cluster the rule compares, cheapest first (the rule's order)."""
    found = [evaluate(m, n, k, tile_n, cluster_n, sms) for tile_n in TILE_NS for cluster_n in CLUSTER_NS]
    return sorted(found, key=lambda c: (c.sm_bytes, c.l2_bytes, -c.tile_n, c.cluster_n))


def choose(m: int, n: int, k: int, sms: int) -> Optional[Choice]:
    """The single-CTA tile for an m x n x k decode GEMM on ``sms`` SMs, or None (M > 128: keep the
    default pair tile)."""
    if not is_decode(m):
        return None
    found = candidates(m, n, k, sms)
    cheapest = found[0].sm_bytes
    tied = [c for c in found if c.sm_bytes <= cheapest * (1 + COST_TIE)]
    return min(tied, key=lambda c: (c.l2_bytes, -c.tile_n, c.cluster_n))
