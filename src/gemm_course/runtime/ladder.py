"""The ladder: one table of every step of the course, per architecture.

Notebooks, tests, the CLI and the benchmarks look kernels up here and nowhere else::

    from gemm_course.runtime.ladder import ladder
    step = ladder["sm90"][3]          # Hopper, step 3 (128-byte swizzle)
    step.default                      # its default Config (a frozen dataclass)
    step.can_implement(problem)       # (ok, reason) before any allocation or launch

Each step module (``gemm_course/kernels/...``) provides ``Config``, ``check_config(config)``,
``can_implement(problem, config)`` and ``Gemm(config)`` whose ``@cute.jit __call__(a, b, c,
stream, *workspace)`` launches the kernel (:class:`gemm_course.runtime.plan.StepModule`).
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import itertools
from typing import Iterator, Optional

from .arch import ARCH_TARGET
from .problem import GemmInputError, GemmProblem, shape_rules

ARCH_NAMES = {"sm100": "Blackwell sm_100a", "sm90": "Hopper sm_90a"}


class UnknownStep(GemmInputError, KeyError):
    """A step the ladder does not have (a ``GemmInputError``, and a ``KeyError`` for lookups)."""

    def __str__(self):
        return str(self.args[0]) if self.args else ""


class ConfigError(GemmInputError, TypeError):
    """A config a step refuses: an unknown field, a value of the wrong type, or one ``check_config``
    refuses (a ``GemmInputError``, so a ``ValueError``; and a ``TypeError``, which is what
    ``dataclasses.replace`` raises for an unknown field and what ``measure.ab_runs.row_config`` catches)."""


# the words a true/false Config field takes in FIELD=VALUE
_BOOL_WORDS = {"1": True, "true": True, "yes": True, "0": False, "false": False, "no": False}


@dataclasses.dataclass(frozen=True)
class Step:
    number: int
    arch: str  # "sm90" or "sm100"
    module_name: str
    title: str
    adds: str  # what this step adds to the previous one, in a sentence
    shapes: str  # which problems it accepts, for people
    instructions: tuple  # instruction classes its SASS must contain (gemm_course.teaching.inspect)
    ptx_markers: tuple = ()  # PTX substrings the compiled kernel must contain
    knobs: tuple = ()  # ((field, (allowed values...)), ...): what widgets and sweeps may vary
    any_shape: bool = False  # no alignment rule (the naive step)
    roofline: str = "compute"  # the ceiling the step is built for: "compute", or "memory" (decode-sized GEMMs)

    @property
    def key(self) -> str:
        return f"{self.arch}/{self.number}"

    @property
    def target(self) -> str:
        return ARCH_TARGET[self.arch]

    def load(self):
        return importlib.import_module(self.module_name)

    @property
    def default(self):
        return self.load().Config()

    def config_fields(self) -> list:
        """The names of the step's Config fields, in order."""
        return [f.name for f in dataclasses.fields(self.default)]

    def config(self, **changes):
        """The default Config with ``changes``; :class:`ConfigError` for a field it does not have."""
        fields = self.config_fields()
        unknown = [name for name in changes if name not in fields]
        if unknown:
            raise ConfigError(
                f"{self.key} has no config field {', '.join(map(repr, unknown))}; fields: {', '.join(fields)}"
            )
        return dataclasses.replace(self.default, **changes)

    def parse_config(self, items, option: str = "") -> object:
        """``["tile_n=128", "stages=4"]`` -> the default Config with those fields changed (values
        typed like the defaults: an int, true/false, a tuple as ``2x1`` or ``2,1``). One-line
        :class:`ConfigError` for an item that is not FIELD=VALUE, an unknown field, a value that does
        not read as the field's type, or a config ``check_config`` refuses. ``option``: the command
        line's flag (``--config``), written before the examples in the messages."""
        changes = {}
        fields = self.config_fields()
        flag = f"{option} " if option else ""
        for item in items or []:
            name, eq, value = item.partition("=")
            if not eq or not name:
                example = self._example(name if name in fields else fields[0])
                raise ConfigError(f"cannot read {item!r}: write FIELD=VALUE, e.g. {flag}{example}")
            if name not in fields:
                raise ConfigError(f"{self.key} has no config field {name!r}; fields: {', '.join(fields)}")
            changes[name] = self._read_value(name, value.strip(), flag)
        config = self.config(**changes)
        ok, why = self.check_config(config)
        if not ok:
            raise ConfigError(f"invalid config for {self.key}: {why}")
        return config

    def _example(self, name: str) -> str:
        """``FIELD=VALUE`` for the field ``name`` with its default value, written as parse_config reads it."""
        default = getattr(self.default, name)
        if isinstance(default, tuple):
            return f"{name}={'x'.join(map(str, default))}"
        return f"{name}={str(default).lower() if isinstance(default, bool) else default}"

    def _read_value(self, name: str, text: str, flag: str):
        """``text`` as the type of the default's field ``name``; a ConfigError with the default as example."""
        default = getattr(self.default, name)
        try:
            if isinstance(default, tuple):
                return tuple(int(v) for v in text.replace("x", ",").split(","))
            if isinstance(default, bool):  # before int: a bool is an int
                return _BOOL_WORDS[text.lower()]
            if isinstance(default, int):
                return int(text)
        except (ValueError, KeyError):
            kind = ("integers joined by x" if isinstance(default, tuple)
                    else "true or false" if isinstance(default, bool) else "an integer")
            raise ConfigError(f"{name} must be {kind}, e.g. {flag}{self._example(name)} (got {text!r})") from None
        return text

    def check_config(self, config) -> tuple:
        mod = self.load()
        if not isinstance(config, mod.Config):
            return False, f"expected a {mod.__name__}.Config, got {type(config).__name__}"
        return mod.check_config(config)

    def config_for(self, problem):
        """The configuration ``problem`` runs with when none is given: the step module's own choice
        per shape (a ``config_for(problem)``: steps 11 and 12 on both architectures) if it has one,
        else the default."""
        choose = getattr(self.load(), "config_for", None)
        return choose(problem) if choose else self.default

    def can_implement(self, problem, config=None) -> tuple:
        """``(True, "")`` when :func:`gemm_course.runtime.run.prepare` accepts well-formed operands of this
        shape with ``config``, else ``(False, why)``; nothing is allocated or compiled.

        ``problem``: a :class:`GemmProblem` or an ``(m, n, k)`` tuple (which may hold what a
        GemmProblem refuses, e.g. a zero). The checks, in ``prepare``'s order: the shape rules
        (:func:`gemm_course.runtime.problem.shape_rules`; the TMA alignment rule unless the step is
        ``any_shape``), the config (``check_config``), the step's own limits (its module's
        ``can_implement``). Without a ``config``, the one ``prepare`` would pick (``config_for``).
        """
        m, n, k = (problem.m, problem.n, problem.k) if isinstance(problem, GemmProblem) else problem
        broken = shape_rules(m, n, k, need_tma=not self.any_shape)
        if broken:
            return False, broken[0]
        problem = GemmProblem(m, n, k) if not isinstance(problem, GemmProblem) else problem
        config = self.config_for(problem) if config is None else config
        ok, why = self.check_config(config)
        if not ok:
            return ok, why
        return self.load().can_implement(problem, config)

    def knob_grid(self) -> Iterator:
        """Every valid config over the step's knobs (for sweeps and the widget's static table)."""
        names = [k for k, _ in self.knobs]
        for values in itertools.product(*(v for _, v in self.knobs)):
            cfg = self.config(**dict(zip(names, values)))
            if self.check_config(cfg)[0]:
                yield cfg

    def __str__(self):
        return f"{self.key}: {self.title}"


_K = "gemm_course.kernels"
_MMA, _TMA, _SMEM, _BAR, _GMEM, _FMA, _TMEM = (
    "tensor-core MMA",
    "TMA copy",
    "shared memory",
    "barrier/sync",
    "global load/store",
    "SIMT FMA",
    "tensor memory",
)

_ANY_MN = "any M; N and K multiples of 8"
_HOPPER_TMA = (_MMA, _TMA, _BAR, _GMEM)  # steps 2-3: TMA in, fragments straight out
_HOPPER_TMA_STORE = (_MMA, _TMA, _BAR, _SMEM)  # step 4 on: the epilogue goes through shared memory
_HOPPER_WS = ("wgmma.mma_async", "setmaxnreg.inc", "multicast::cluster")  # steps 7-10
_HOPPER_SK = _HOPPER_WS + ("ld.acquire.gpu", "st.release.gpu")  # step 11: stream-K hand-over flags
_BLACKWELL = (
    "tcgen05.mma.cta_group::1",
    "tcgen05.alloc",
    "tcgen05.dealloc",
    "tcgen05.ld",
    "cp.async.bulk.tensor",
    "mbarrier.try_wait",
)

_BLACKWELL_PAIR = (  # steps 5-10: the CTA pair, its multicast commit, clusters and the TMA store
    "tcgen05.mma.cta_group::2",
    "tcgen05.alloc.cta_group::2",
    "tcgen05.dealloc.cta_group::2",
    "tcgen05.commit.cta_group::2",
    "tcgen05.ld",
    "barrier.cluster",
    "cp.async.bulk.tensor.2d.shared::cluster.global",
    "cp.async.bulk.tensor.2d.global.shared::cta",
)
_BLACKWELL_CLC = _BLACKWELL_PAIR + ("clusterlaunchcontrol.try_cancel", "clusterlaunchcontrol.query_cancel")
# step 11: the tail's counters, flags and partial sums folded back into tensor memory
_BLACKWELL_SK = _BLACKWELL_CLC + ("atom.global.acq_rel.add", "ld.acquire.gpu", "st.release.gpu", "tcgen05.st")

_NAIVE = dict(
    number=1,
    module_name=f"{_K}.naive",
    title="Naive: one thread per element of C",
    adds="the baseline: each thread walks K through global memory in float32",
    shapes="any M, N, K >= 1; no alignment rule",
    instructions=(_GMEM, _FMA),
    knobs=(("block_m", (8, 16, 32)), ("block_n", (16, 32, 64))),
    any_shape=True,
)

_STEPS = [
    Step(arch="sm90", **_NAIVE),
    Step(arch="sm100", **_NAIVE),
    Step(
        2,
        "sm90",
        f"{_K}.sm90.step02_wgmma_tma",
        "Tensor cores and TMA (wgmma, unswizzled shared memory)",
        "TMA loads tiles into shared memory on an mbarrier; one warpgroup issues wgmma "
        "64x256x16 four times per 64-wide K tile; the accumulator lives in registers",
        "M a multiple of tile_m, N a multiple of tile_n, K a multiple of 8 (TMA zero-fills the K tail)",
        _HOPPER_TMA,
        ptx_markers=("wgmma.mma_async", "cp.async.bulk.tensor", "mbarrier.try_wait"),
        knobs=(("tile_n", (64, 128, 256)), ("tile_k", (32, 64))),
    ),
    Step(
        3,
        "sm90",
        f"{_K}.sm90.step03_swizzle",
        "128-byte swizzled shared memory",
        "only the shared-memory layouts change: the 128-byte swizzle spreads each 8-row group "
        "of the tile across all 32 banks",
        "as step 2",
        _HOPPER_TMA,
        ptx_markers=("wgmma.mma_async", "cp.async.bulk.tensor", "mbarrier.try_wait"),
        knobs=(("tile_n", (64, 128, 256)), ("tile_k", (64,))),
    ),
    Step(
        4,
        "sm90",
        f"{_K}.sm90.step04_tma_store",
        "Epilogue through shared memory: stmatrix and a TMA store",
        "the accumulator goes to a shared-memory staging buffer with stmatrix, and the copy engine "
        "stores each 64x32 sub-tile with one TMA instruction (clipping partial tiles)",
        _ANY_MN,
        _HOPPER_TMA_STORE,
        ptx_markers=("wgmma.mma_async", "stmatrix", "cp.async.bulk.tensor.2d.global.shared", "fence.proxy.async"),
        knobs=(("tile_n", (64, 128, 256)), ("epi_n", (16, 32, 64)), ("epi_stages", (1, 2, 4))),
    ),
    Step(
        5,
        "sm90",
        f"{_K}.sm90.step05_cluster_multicast",
        "Clusters with TMA multicast; a 128x256 tile on two warpgroups",
        "two consumer warpgroups share a 128x256 tile; 2x1 clusters multicast the shared B tile "
        "into both CTAs; full/empty barriers (CuTeDSL's PipelineTmaAsync) guard each stage",
        _ANY_MN,
        _HOPPER_TMA_STORE,
        ptx_markers=("wgmma.mma_async", "multicast::cluster", "barrier.cluster", "stmatrix"),
        knobs=(("tile_n", (128, 256)), ("cluster_m", (1, 2)), ("cluster_n", (1, 2)), ("mma_n", (0, 128))),
    ),
    Step(
        6,
        "sm90",
        f"{_K}.sm90.step06_warp_specialized",
        "Multistage pipeline, warp specialization, setmaxnreg",
        "four shared-memory stages; a producer warpgroup issues TMA while two consumer warpgroups "
        "issue wgmma (one batch in flight); setmaxnreg moves registers from producer to consumers",
        _ANY_MN,
        _HOPPER_TMA_STORE,
        ptx_markers=(
            "wgmma.mma_async", "setmaxnreg.dec", "setmaxnreg.inc", "multicast::cluster", "wgmma.wait_group.sync.aligned \t1;"
        ),
        knobs=(("tile_n", (128, 256)), ("stages", (2, 3, 4)), ("cluster_m", (1, 2)), ("cluster_n", (1, 2))),
    ),
    Step(
        7,
        "sm90",
        f"{_K}.sm90.step07_epilogue_overlap",
        "The epilogue overlaps the next tile's main loop",
        "each CTA computes two tiles; the producer streams the next tile's K tiles while the "
        "consumers run the epilogue, whose TMA stores complete asynchronously",
        _ANY_MN,
        _HOPPER_TMA_STORE,
        ptx_markers=_HOPPER_WS,
        knobs=(("tiles_per_cta", (1, 2, 4)), ("stages", (3, 4))),
    ),
    Step(
        8,
        "sm90",
        f"{_K}.sm90.step08_persistent",
        "Persistent kernel with a static tile scheduler",
        "one CTA per SM for the whole GEMM: cluster c computes cluster-tiles c, c+G, c+2G, ... in "
        "row-raster order, with step 7's loop over the CTA's tiles",
        _ANY_MN,
        _HOPPER_TMA_STORE,
        ptx_markers=_HOPPER_WS,
        knobs=(("stages", (3, 4)), ("cluster_m", (1, 2)), ("cluster_n", (1, 2))),
    ),
    Step(
        9,
        "sm90",
        f"{_K}.sm90.step09_grouped_raster",
        "Thread-block swizzle: grouped raster order for L2 reuse",
        "the scheduler walks bands of `group` tile-rows column by column, so a wave of tiles "
        "touches fewer A and B panels",
        _ANY_MN,
        _HOPPER_TMA_STORE,
        ptx_markers=_HOPPER_WS,
        knobs=(("group", (1, 2, 4, 8, 16)),),
    ),
    Step(
        10,
        "sm90",
        f"{_K}.sm90.step10_gilbert",
        "Tile order along a generalized Hilbert curve (Gilbert)",
        "the scheduler maps each cluster-tile index to (m, n) along a Gilbert curve computed in "
        "the kernel, keeping every wave of tiles compact in both directions",
        _ANY_MN,
        _HOPPER_TMA_STORE,
        ptx_markers=_HOPPER_WS,
        knobs=(("stages", (3, 4)), ("cluster_m", (1, 2)), ("cluster_n", (1, 2))),
    ),
    Step(
        11,
        "sm90",
        f"{_K}.sm90.step11_beyond_the_seed",
        "Beyond the seed: tile hand-over, a short epilogue, a stream-K tail, GPC-aware places",
        "the producer hands each tile to the consumers through shared memory; half a tile per TMA "
        "store; the last partial wave's K loops are split over every cluster; each GPC's clusters "
        "take neighbouring places on the curve; the host picks the tile per shape (tile_rule)",
        _ANY_MN,
        _HOPPER_TMA_STORE,
        ptx_markers=_HOPPER_SK,
        knobs=(("stages", (3, 4)), ("epi_n", (32, 128)), ("stream_k", (False, True))),
    ),
    Step(
        12,
        "sm90",
        f"{_K}.sm90.step12_swap_ab",
        "The memory roofline: swap A and B for decode-sized GEMMs",
        "with few tokens (M <= 256) the kernel computes C^T = W x^T: W's rows fill wgmma's 64-row M, "
        "the tokens sit in its N (16 to 128), C is written transposed, W streams from enough SMs "
        "(K split only where the tiles alone leave most idle), above 16 tokens, where W's tiles number about "
        "half to all of the SM pairs, two token tiles share each W tile by multicast, and the next layer "
        "launches early; larger M runs step 11's choice",
        _ANY_MN,
        _HOPPER_TMA_STORE,
        # C^T written through transposed stmatrix; multicast only where token tiles pair (not at the default)
        ptx_markers=("wgmma.mma_async", "setmaxnreg.inc", "stmatrix.sync.aligned.m8n8.x4.trans", "ld.acquire.gpu",
                     "st.release.gpu"),
        knobs=(("tile_m", (64, 128)), ("tile_n", (16, 32, 64)), ("stream_k", (False, True))),
        roofline="memory",
    ),
    Step(
        2,
        "sm100",
        f"{_K}.sm100.step02_tcgen05_tma",
        "Tensor cores, TMA and tensor memory (tcgen05, unswizzled)",
        "TMA loads on an mbarrier; one thread issues tcgen05.mma 64x256x16 four times per K tile; "
        "the fp32 accumulator lives in tensor memory and the epilogue reads it with tcgen05.ld",
        "M a multiple of tile_m, N a multiple of tile_n, K a multiple of 8 (TMA zero-fills the K tail)",
        (_MMA, _TMA, _TMEM, _BAR, _GMEM),
        ptx_markers=_BLACKWELL,
        knobs=(("tile_n", (64, 128, 256)), ("tile_k", (32, 64))),
    ),
    Step(
        3,
        "sm100",
        f"{_K}.sm100.step03_swizzle",
        "128-byte swizzled shared memory",
        "only the shared-memory layouts change, to the 128-byte swizzle",
        "as step 2",
        (_MMA, _TMA, _TMEM, _BAR, _GMEM),
        ptx_markers=_BLACKWELL,
        knobs=(("tile_n", (64, 128, 256)),),
    ),
]


_SM100_STEPS = [
    Step(
        4,
        "sm100",
        f"{_K}.sm100.step04_tma_store",
        "Epilogue through shared memory: tcgen05.ld, stmatrix and a TMA store",
        "each 64x32 sub-tile of the accumulator goes TMEM -> registers -> a swizzled staging buffer "
        "(stmatrix) and out with one TMA store, which clips partial tiles",
        _ANY_MN,
        (_MMA, _TMA, _TMEM, _BAR, _SMEM),
        ptx_markers=_BLACKWELL + ("stmatrix", "cp.async.bulk.tensor.2d.global.shared::cta", "fence.proxy.async.shared::cta"),
        knobs=(("tile_m", (64, 128)), ("epi_n", (16, 32, 64)), ("epi_stages", (1, 2))),
    ),
    Step(
        5,
        "sm100",
        f"{_K}.sm100.step05_cta_pair_multicast",
        "Clusters: the 2-CTA MMA (cta_group::2) and TMA multicast",
        "the two CTAs of a pair share one 256x256 tcgen05.mma issued by the leader, each holding its "
        "128 rows of A and half of B; TMA multicasts what pairs of a larger cluster share; still one stage",
        _ANY_MN,
        (_MMA, _TMA, _TMEM, _BAR, _SMEM),
        ptx_markers=_BLACKWELL_PAIR,
        knobs=(("tile_n", (128, 256)), ("cluster_m", (2, 4)), ("cluster_n", (1, 2))),
    ),
    Step(
        6,
        "sm100",
        f"{_K}.sm100.step06_warp_specialized",
        "Multistage pipeline, warp specialization: TMA warp, MMA warp, epilogue warps",
        "six shared-memory stages; warp 5 issues TMA, warp 4 (leader CTA) issues tcgen05.mma, "
        "warps 0-3 read tensor memory and store (PipelineTmaUmma, PipelineUmmaAsync)",
        _ANY_MN,
        (_MMA, _TMA, _TMEM, _BAR, _SMEM),
        ptx_markers=_BLACKWELL_PAIR,
        knobs=(("stages", (3, 6)), ("cluster_m", (2, 4)), ("cluster_n", (1, 2))),
    ),
    Step(
        7,
        "sm100",
        f"{_K}.sm100.step07_tmem_double_buffer",
        "Two accumulators in tensor memory: the epilogue overlaps the next tile's MMAs",
        "each CTA computes two tiles; tensor memory holds two 256-column accumulators (all 512 "
        "columns), so the MMA warp fills one while the epilogue warps drain the other",
        _ANY_MN,
        (_MMA, _TMA, _TMEM, _BAR, _SMEM),
        ptx_markers=_BLACKWELL_PAIR,
        knobs=(("tiles_per_cta", (1, 2, 4)), ("acc_stages", (1, 2))),
    ),
    Step(
        8,
        "sm100",
        f"{_K}.sm100.step08_persistent_clc",
        "Persistent kernel with a dynamic scheduler: cluster launch control",
        "one cluster per tile is launched, but running clusters cancel the launch of waiting ones "
        "(clusterlaunchcontrol.try_cancel) and compute their tiles, tile after tile in row-raster order",
        _ANY_MN,
        (_MMA, _TMA, _TMEM, _BAR, _SMEM),
        ptx_markers=_BLACKWELL_CLC,
        knobs=(("cluster_m", (2, 4)), ("cluster_n", (1, 2))),
    ),
    Step(
        9,
        "sm100",
        f"{_K}.sm100.step09_grouped_raster",
        "Thread-block swizzle: grouped raster order for L2 reuse",
        "the cluster-tile index that cluster launch control hands out is mapped to (m, n) along "
        "bands of `group` tile-rows",
        _ANY_MN,
        (_MMA, _TMA, _TMEM, _BAR, _SMEM),
        ptx_markers=_BLACKWELL_CLC,
        knobs=(("group", (1, 4, 8, 16)),),
    ),
    Step(
        10,
        "sm100",
        f"{_K}.sm100.step10_gilbert",
        "Tile order along a generalized Hilbert curve (Gilbert)",
        "the cluster-tile index is mapped to (m, n) along a Gilbert curve computed in the kernel",
        _ANY_MN,
        (_MMA, _TMA, _TMEM, _BAR, _SMEM),
        ptx_markers=_BLACKWELL_CLC,
        knobs=(("cluster_m", (2, 4)), ("cluster_n", (1, 2))),
    ),
    Step(
        11,
        "sm100",
        f"{_K}.sm100.step11_beyond_the_seed",
        "Beyond the seed: a stream-K tail under cluster launch control",
        "the last partial wave's tiles are cut along K into units that cluster launch control hands "
        "out; the part that arrives last adds the others' partial sums and stores the tile",
        _ANY_MN,
        (_MMA, _TMA, _TMEM, _BAR, _SMEM),
        ptx_markers=_BLACKWELL_SK,
        knobs=(("stream_k", (False, True)), ("cluster_m", (2, 4))),
    ),
    Step(
        12,
        "sm100",
        f"{_K}.sm100.step12_swap_ab",
        "The memory roofline: swap A and B for decode-sized GEMMs",
        "with few tokens (M <= 256) the kernel computes C^T = W x^T on single-CTA tiles: W's rows fill "
        "tcgen05's M (64 or 128), the tokens sit in its N (16 to 256), C is written transposed "
        "(stmatrix.trans or 16-bit st.shared), and the stream-K tail spreads W's K loop over every SM; "
        "larger M runs step 11's choice",
        _ANY_MN,
        (_MMA, _TMA, _TMEM, _BAR, _SMEM),
        ptx_markers=_BLACKWELL + ("tcgen05.commit.cta_group::1", "cp.async.bulk.tensor.2d.global.shared::cta",
                                  "clusterlaunchcontrol.try_cancel", "clusterlaunchcontrol.query_cancel",
                                  "atom.global.acq_rel.add", "ld.acquire.gpu", "st.release.gpu", "tcgen05.st"),
        knobs=(("tile_m", (64, 128)), ("tile_n", (16, 32)), ("stream_k", (False, True))),
        roofline="memory",
    ),
]


def _available(step: Step) -> bool:
    return importlib.util.find_spec(step.module_name) is not None


ladder: dict = {}
for _s in _STEPS + _SM100_STEPS:
    if _available(_s):
        ladder.setdefault(_s.arch, {})[_s.number] = _s
for _arch in ladder:
    ladder[_arch] = dict(sorted(ladder[_arch].items()))


def steps(arch: Optional[str] = None) -> list:
    archs = [arch] if arch else list(ladder)
    return [s for a in archs for s in ladder.get(a, {}).values()]


def final(arch: str = "sm90") -> Step:
    """The last step of an architecture's compute-bound ladder (the one the sweeps measure)."""
    return [s for s in steps(arch) if s.roofline == "compute"][-1]


def decode(arch: str = "sm90") -> Optional[Step]:
    """The step built for the memory roofline (decode-sized GEMMs), if the architecture has one."""
    return next((s for s in reversed(steps(arch)) if s.roofline == "memory"), None)


def get(key) -> Step:
    """``get('sm90/3')``, ``get('sm90:3')``, ``get(('sm90', 3))``; a bare number means sm90."""
    if isinstance(key, Step):
        return key
    if isinstance(key, tuple):
        arch, number = key
    else:
        text = str(key).replace(":", "/")
        arch, _, number = text.rpartition("/")
        arch = arch or "sm90"
    arch = {"hopper": "sm90", "sm_90a": "sm90", "blackwell": "sm100", "sm_100a": "sm100"}.get(arch, arch)
    try:
        return ladder[arch][int(number)]
    except (KeyError, ValueError):
        have = ", ".join(s.key for s in steps())
        raise UnknownStep(f"no step {key!r}; the ladder has: {have}") from None
