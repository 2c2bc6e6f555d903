"""The chapters' "try it yourself" checks. Each takes your answer and compares it with what the
kernels' own objects, the compiler or the bank model say; a wrong answer raises AssertionError
with a hint, a right one returns a short confirmation.

Chapter 0: :func:`check_column_major_stride`, :func:`check_offset`
Chapter 1: :func:`check_naive_loads_per_fma`, :func:`check_gemm_intensity`
Chapter 2: :func:`check_tmem_alloc_columns`, :func:`check_stage_bytes` (write the function),
:func:`check_mma_per_k_tile`, :func:`check_accumulator_owner`
Chapter 3: :func:`check_swizzle` (write the function), :func:`check_swizzled_chunk`, :func:`check_wavefronts`
Chapter 4: :func:`check_tmem_load_op` (write the function), :func:`check_tma_stores`, :func:`check_staging_bytes`
Chapter 5: :func:`check_pair_tx_bytes` (write the function), :func:`check_ctas_per_sm`, :func:`check_b_bytes_per_cta`
Chapter 6: :func:`check_sm100_max_stages` (write the function), :func:`check_max_stages`, :func:`check_consumer_registers`
Chapter 7: :func:`check_tmem_columns` (write the function), :func:`check_grid_ctas`
Chapter 8: :func:`check_clc_decode` (write the function), :func:`check_persistent_tiles`, :func:`check_idle_clusters`
Chapter 9: :func:`check_grouped_order` (write the function), :func:`check_wave_panels`
Chapter 10: :func:`check_wave_footprint` (write the function), :func:`check_gilbert_tile`
Chapter 11: :func:`check_tail_parts` (write the function), :func:`check_tail_share`, :func:`check_tile_width` (write the
function), :func:`check_gpc_places` (write the function), :func:`check_sweep_geomean`, :func:`score_tile_rule` (an open
problem: a score, not a check); the chapter defines ``check_ring_slots`` itself
Chapter 12: its four checks are defined in the chapter (they compile its own configurations)

Helpers the chapters share with their checks: :func:`kernel_objects` (facts read from a step's
traced host objects), :func:`occupancy_of` (CTAs per SM of a compiled step), :func:`problem_shape`,
:func:`step_schedule` (a persistent step's static schedule, from its own scheduler functions).
"""

from .blackwell import *  # noqa: F401,F403
from .common import NOT_ANSWERED, attempt, unanswered  # noqa: F401
from .hopper import *  # noqa: F401,F403
from .layouts_to_swizzle import *  # noqa: F401,F403
from .your_functions import *  # noqa: F401,F403
