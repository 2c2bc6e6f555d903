"""The Blackwell steps' layouts, evaluated on the CPU from the kernels' own objects.

The book draws its swizzle and accumulator-ownership figures from these functions, and the tests
check them, so a figure can never disagree with the kernel it illustrates:

* :func:`smem_layouts` - the shared-memory layouts of A and B that a step's ``Gemm`` builds
  (its swizzle and its layout), taught in chapter 2 (interleaved) and chapter 3 (128-byte swizzle).
* :func:`accumulator_ownership` - which accumulator element (row, column) each thread receives
  from the epilogue's ``tcgen05.ld`` copy, and :func:`accumulator_tmem_addresses` - where in
  tensor memory (lane, column) the MMA keeps each element; both taught in chapter 2.
* :func:`epilogue_paths` - where each accumulator element goes through a thread's registers into
  the epilogue's staging buffer (steps 4, 5), checked by :func:`epilogue_mismatches`.
* :func:`pair_split` - which rows of A, B and C each CTA of a ``cta_group::2`` pair holds (step 5);
  :func:`tma_multicast_masks` - the TMA multicast masks of a cluster, and
  :func:`multicast_masks` their Python twin.
* :func:`accumulator_stages` - the TMEM lanes and columns of each accumulator stage (step 7).
* :func:`clc_decode_table` and :func:`kernel_cta_tiles` - step 8's decoding of a ``try_cancel``
  answer and the tile each CTA computes for a cluster-tile index (steps 8-10), evaluated from the
  kernels' own methods.

Each traces a small ``@cute.jit`` function for ``sm_100a`` (but :func:`kernel_cta_tiles`, which
runs the kernel's index arithmetic as plain Python): static layouts evaluate to Python ints while
CuTeDSL traces, so nothing runs and no GPU is needed. The loops that read them live
in plain functions, which CuTeDSL leaves as Python (it rewrites only the jit function's own loops).

The probes live in ``memory``, ``pairs``, ``epilogue`` and ``schedule``; what they share in
``_common``. Every name is importable from here.
"""

from ._common import (  # noqa: F401
    _ARCH_NAMES,
    _TARGET,
    _config,
    _coords,
    _gemm,
    _layout_values,
    _leaves,
    _offsets,
    _patched,
    _spot_check,
    _stage0,
    _static_int,
    _step_module,
    trace_static,
)
from .epilogue import (  # noqa: F401
    RegisterPath,
    _atom_mode,
    _paths,
    _store_atom,
    _swizzled,
    _written,
    epilogue_mismatches,
    epilogue_paths,
)
from .memory import (  # noqa: F401
    SmemLayout,
    _addresses,
    _describe,
    _owned,
    accumulator_ownership,
    accumulator_stages,
    accumulator_tmem_addresses,
    smem_layouts,
)
from .pairs import PairShare, _pair_shares, mask_ctas, multicast_masks, pair_split, tma_multicast_masks  # noqa: F401
from .schedule import _plain, _Stub, clc_decode_table, kernel_cta_tiles  # noqa: F401
