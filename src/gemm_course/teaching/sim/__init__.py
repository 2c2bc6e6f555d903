"""CPU models that teach: shared-memory bank conflicts (chapter 3) and L2 reuse of tile orders
(chapters 9 and 10).

Shared-memory banks (chapter 3)
-------------------------------
Hopper and Blackwell shared memory has 32 banks of 4 bytes. A warp's request is served in
*wavefronts*; one wavefront delivers at most one distinct 4-byte word per bank (128 bytes),
and threads asking for the same word share it. A request therefore needs as many wavefronts
as the busiest bank has distinct words; the *conflicts* are the wavefronts beyond the
``ceil(words / 32)`` that the bytes alone require.

The byte addresses come from the kernels' own layouts, not from restated formulas:
:func:`offsets` traces a tiny ``@cute.jit`` function that calls the step's
``Gemm(config).make_smem_layouts()`` and evaluates the layout at every (row, k) while tracing,
where static layouts give Python ints. One subtlety, checked against the compiler's PTX in
tests/test_sim.py: the kernel hands the layout's swizzle to the shared-memory *pointer*
(``get_tensor(layout.outer, swizzle=layout.inner)``), and a swizzled pointer XORs *byte*
address bits (``Swizzle<3,4,3>``: bits 4-6, the 16-byte chunk, with bits 7-9, the row within
8 rows of 128 bytes). Calling the ComposedLayout itself applies the same swizzle to *element*
offsets, which for bf16 is a different permutation. So :func:`offsets` recasts the element
layout to bytes (``cute.recast_layout``) and composes the real swizzle object with that.
Offsets are from the start of the buffer; the steps' ``SharedStorage`` aligns it to 1024 bytes,
so swizzling the offset is the same as swizzling the address.

L2 reuse of a tile order (chapters 9-10)
----------------------------------------
:func:`l2_traffic` cuts an order (:mod:`gemm_course.rules.tile_order`) into waves of ``sms``
concurrently running tiles and counts the distinct A row panels (``tile_m x K``) and B column
panels (``K x tile_n``) each wave touches: the DRAM traffic if L2 holds exactly one wave's working
set and nothing survives from one wave to the next. A coarse proxy: real waves drift apart and
L2 keeps some panels longer, so compare its ranking with measured DRAM bytes (ncu) before
leaning on its absolute numbers.

Shared-memory traffic of the main loop (chapters 5 and 11)
----------------------------------------------------------
:func:`smem_traffic` counts, for one K tile of one CTA, the operand bytes the ``wgmma``
instructions read from shared memory and the bytes TMA writes into it, and divides by the
clocks the tensor cores need for the K tile's FLOPs. Each ``wgmma`` is 64 rows x ``mma_n``
columns x 16 deep and reads its own A (64 x 16) and B (``mma_n`` x 16), so a B slice is read
once per 64 rows of the tile. Where the sum reaches :data:`SMEM_BYTES_PER_CLOCK`, shared memory,
not the tensor cores, sets the pace. A model: whether ``wgmma``'s operand reads share the banks'
bandwidth is not documented; the measurements in ``NOTES.md`` are consistent with it.

Blackwell's scheduler and tensor memory (steps 7-10)
----------------------------------------------------
The Blackwell steps cannot run without a B200, so these twins of their rules are their safety
net (tests/test_sm100_twins.py compares them with the kernels' own objects):
:func:`clc_schedule` is an event model of step 8's cluster launch control (clusters that run
take over the tiles of launches they cancel) and :func:`check_clc_schedule` what it must
guarantee; :func:`cluster_cta_tiles` is the tile each CTA of a cluster computes for a
cluster-tile index; :func:`tmem_plan` shows step 7's accumulator stages in tensor memory over time;
:func:`dynamic_tail` plays step 11's units (``schedule.dynamic_plan``) on the resident clusters.

Hopper's SM, stages and schedule (chapters 5-11)
------------------------------------------------
:func:`occupancy` counts the CTAs of a compiled kernel that fit on one SM (limits quoted in
:data:`HOPPER_SM`); :func:`pipeline_model` is an event model of the producer, the shared-memory
stages and the consumers, with made-up durations; :func:`persistent_schedule` replays the static
scheduler of the persistent steps with the step's own ``cluster_tile``.

The models live in submodules (``banks``, ``l2``, ``blackwell``, ``hopper``, and ``constants``);
every public name is importable from ``gemm_course.teaching.sim`` as well.
"""

from .banks import *  # noqa: F401,F403
from .blackwell import *  # noqa: F401,F403
from .constants import *  # noqa: F401,F403
from .hopper import *  # noqa: F401,F403
from .l2 import *  # noqa: F401,F403
