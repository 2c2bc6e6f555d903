"""Step 3 (Hopper) - 128-byte swizzled shared memory. Only the layouts change.

Parent: step 2. Key difference: the shared-memory layout atom of A and B is ``K_SW128`` instead
of ``K_INTER``. A tile row of 64 bf16 is 128 bytes; the swizzle XORs the 16-byte chunk index
(address bits 4-6) with the row index within each group of 8 rows (bits 7-9), so the 8 rows of
a column of chunks land in 8 different 16-byte bank groups.

What that buys:

* TMA writes whole 128-byte rows (box 64 x rows) instead of 16-byte slivers: one copy per tile
  per operand instead of one per 8-column slab, each moving full cache lines.
* The tensor core's reads of 8 x 16-byte core matrices stay conflict-free (8 distinct bank
  groups), as they already were in step 2's interleaved layout (``gemm_course.teaching.sim``): the
  gain is on the write side, whole rows instead of 16-byte pieces 1 KiB apart.

Expected: the seed measured 155 -> 285 TFLOP/s for this change on a B200; on Hopper the same
single-stage loop is still latency-bound, so expect a large but not complete gain.

Accepts: as step 2, and tile_k must be 64 (one 128-byte swizzle row of bf16).
"""

from __future__ import annotations

import dataclasses

from cutlass.cute.nvgpu import warpgroup

from . import step02_wgmma_tma as parent
from .step02_wgmma_tma import can_implement  # noqa: F401  (same shapes as step 2)


@dataclasses.dataclass(frozen=True)
class Config(parent.Config):
    pass


def check_config(config: Config):
    if config.tile_k != 64:
        return False, "tile_k must be 64: one 128-byte swizzle row of bf16"
    return parent.check_config(config)


class Gemm(parent.Gemm):
    def smem_layout_atom_kind(self):
        return warpgroup.SmemLayoutAtomKind.K_SW128
