"""Figures of the course. Pure functions: data in, a :class:`matplotlib.figure.Figure` out.

Every number drawn comes from a result record (:mod:`gemm_course.measure.records`), from a problem's own
arithmetic, from a model (:mod:`gemm_course.teaching.sim`), or from the kernels' own CuTe objects (layouts,
atoms) traced on the CPU. The one exception is labelled as such wherever it appears: the seed
series' B200 figures, quoted (not measured here) in :data:`SEED_B200_TFLOPS`. Datasheet peaks for
the roofline are in :data:`DATASHEET`, also quoted, never measured.

Figures are built with :class:`matplotlib.figure.Figure` (not ``pyplot``), so a notebook shows
each one exactly once, when it is the value of a cell, and tests leak no windows. Each is drawn for
the book's content column (at most :data:`PAGE_WIDTH` inches wide, no text under :data:`TEXT_PT`
points) and shows itself as HTML: the image with an alt text, and under it, as ``<figcaption>``,
its caption (what was drawn, where it was measured), which is its ``caption`` attribute and is not
drawn into the image (:mod:`._style`).

One module per family of figures:

* :mod:`.ladder`: measured bars, a step's sweep over shapes, the roofline, shared-memory bandwidth;
* :mod:`.resources`: instruction mix, registers and shared memory, occupancy, register split;
* :mod:`.layouts`: layouts, banks and the swizzle, accumulator owners, TMEM, CTA pairs, multicast;
* :mod:`.pipelines`: the K loop, the epilogue's path, stages and TMEM over time, a launch's timeline;
* :mod:`.schedules`: tile orders, L2 panels, persistent schedules, cluster launch control, GPCs;
* :mod:`.power`: clocks, power and energy at the power limit.

The chapters call everything as ``viz.<name>``, so this package also re-exports the few analysis
functions they reach through it (their homes: :mod:`gemm_course.measure.records`, :mod:`gemm_course.teaching.sim`,
:mod:`gemm_course.teaching.inspect`, :mod:`gemm_course.teaching.source`).
"""

from ..teaching.inspect import opcode_family_counts
from ..measure.records import ab_table, config_changes, geomean, latest_sweep, power_limit_split, spread_verdict, step_table
from ..teaching.sim import HOPPER_SM, pipeline_model
from ..teaching.source import phase_source
from .ladder import (DATASHEET, SEED_B200_TFLOPS, SEED_LABEL, SEED_SHAPE, bandwidth_bars, ladder_bars, ladder_data, roofline,
                     smem_traffic_bars, sweep_ratios)
from .layouts import (bank_maps, cluster_multicast, cta_pair_split, layout_grid, multicast_mask_grid,
                      owners_from_lists, ownership, tmem_map, xor_pattern)
from ._style import PAGE_WIDTH, TEXT_PT
from .pipelines import (TIMELINE_PHASES, epilogue_path, k_loop_schedule, launch_timeline, pipeline_timeline,
                        tmem_timeline)
from .power import order_energy, power_limit_bars
from .resources import instruction_mix, mix_changes, occupancy_bars, opcode_families, register_split, sweep
from .schedules import (clc_timeline, cluster_placement, dynamic_tail, l2_panels, persistent_grid, stream_k_tail, tile_choice_map,
                        tile_orders)

__all__ = [
    # figures
    "bandwidth_bars", "bank_maps", "clc_timeline", "cluster_multicast", "cluster_placement", "cta_pair_split", "epilogue_path",
    "instruction_mix", "k_loop_schedule", "l2_panels", "ladder_bars", "launch_timeline", "layout_grid",
    "multicast_mask_grid", "occupancy_bars", "opcode_families", "order_energy", "ownership", "persistent_grid",
    "pipeline_timeline", "power_limit_bars", "register_split", "roofline", "smem_traffic_bars", "stream_k_tail",
    "dynamic_tail",
    "sweep", "sweep_ratios", "tile_choice_map", "tile_orders", "tmem_map", "tmem_timeline", "xor_pattern",
    # what the figures draw from
    "DATASHEET", "SEED_B200_TFLOPS", "SEED_LABEL", "SEED_SHAPE", "TIMELINE_PHASES", "ladder_data", "owners_from_lists",
    "PAGE_WIDTH", "TEXT_PT",
    # re-exported for the chapters
    "HOPPER_SM", "ab_table", "config_changes", "geomean", "latest_sweep", "opcode_family_counts", "phase_source",
    "pipeline_model", "power_limit_split", "spread_verdict", "step_table",
    # text, where a chapter does not need the figure
    "mix_changes",
]
