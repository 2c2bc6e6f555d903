"""The hardware facts the course uses, in one table: per target (what a kernel is compiled for,
``sm_90a`` or ``sm_100a``) and per card (H100 SXM, H200, B200), and the one stage-count rule.

Two kinds of number, kept apart:

* *quoted*: NVIDIA's documents (the CUDA C++ Programming Guide's table of technical
  specifications per compute capability; the cards' datasheets). Never measured here.
* *measured*: readings on this workplace's cards, where the repository has them (the device
  notes' copy bandwidth and 8192^3 bf16 product rate, which NOTES.md's section "Decode-sized GEMMs
  on Hopper" uses as its ceilings); ``None`` where nothing was measured (the B200: the Blackwell
  steps are compiled and checked on the CPU, not yet run).

Kernels, host rules (``tile_rule``, ``decode_rule``), models (``sim``) and widgets read these,
so a fact is typed once. Pure Python: imports nothing of the package or of CuTeDSL.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

# ---------------------------------------------------------------------------------------------
# targets: per-SM limits of a compute capability (quoted)
# ---------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Target:
    """Per-SM and per-CTA limits of one compile target (CUDA C++ Programming Guide, quoted)."""

    name: str  # "sm_90a"
    arch: str  # the ladder's name, "sm90"
    compute_capability: str
    registers_per_sm: int = 65536  # 32-bit registers
    register_unit: int = 256  # a warp's registers are allocated in units of 256 (8 per thread)
    smem_per_sm: int = 228 * 1024  # shared memory per SM
    smem_per_cta: int = 227 * 1024  # = 232448: the most a CTA may opt in to (cudaFuncAttributeMaxDynamicSharedMemorySize)
    smem_reserved_per_cta: int = 1024  # set aside by the system for each resident CTA (ncu: "driver shared memory")
    warps_per_sm: int = 64
    ctas_per_sm: int = 32
    tmem_lanes: int = 0  # tensor memory per SM (sm_100a): lanes (rows) of 32-bit cells ...
    tmem_columns: int = 0  # ... by columns, which resident CTAs allocate from
    source: str = ""

    @property
    def tmem_bytes(self) -> int:
        return self.tmem_lanes * self.tmem_columns * 4

    def occupancy_limits(self) -> dict:
        """The per-SM limits :func:`gemm_course.teaching.sim.occupancy` counts CTAs per SM against."""
        return {
            "registers": self.registers_per_sm,
            "register_unit": self.register_unit,
            "smem_per_sm": self.smem_per_sm,
            "smem_per_cta": self.smem_per_cta,
            "smem_reserved_per_cta": self.smem_reserved_per_cta,
            "warps": self.warps_per_sm,
            "ctas": self.ctas_per_sm,
            "source": self.source,
        }


SM90A = Target("sm_90a", "sm90", "9.0", source="CUDA C++ Programming Guide, compute capability 9.0")
# compute capability 10.0 has Hopper's registers, shared memory, warps and CTA slots, and adds
# tensor memory: 128 lanes x 512 columns of 32 bits (256 KiB) per SM
SM100A = Target("sm_100a", "sm100", "10.0", tmem_lanes=128, tmem_columns=512,
                source="CUDA C++ Programming Guide, compute capability 10.0")
TARGETS = {t.name: t for t in (SM90A, SM100A)}


def target(name: str) -> Target:
    """The :class:`Target` ``'sm_90a'`` or ``'sm_100a'`` (also by the ladder's ``'sm90'``, ``'sm100'``)."""
    for t in TARGETS.values():
        if name in (t.name, t.arch):
            return t
    raise KeyError(f"no target {name!r}; the course has: {', '.join(TARGETS)}")


# ---------------------------------------------------------------------------------------------
# cards: SMs, L2, datasheet peaks (quoted) and this workplace's readings (measured)
# ---------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Card:
    """One GPU: its target, size and ceilings."""

    name: str  # as the course writes it; :func:`card` also matches the driver's name
    target: str  # "sm_90a" or "sm_100a"
    sms: int
    l2_bytes: int
    hbm_tb_s: float  # datasheet HBM bandwidth, TB/s (quoted)
    bf16_dense_tflops: float  # datasheet dense BF16 tensor-core peak (quoted)
    datasheet: str
    fp32_tflops: Optional[float] = None  # datasheet FP32 (CUDA cores, not tensor cores), where the course quotes it
    measured_copy_tb_s: Optional[float] = None  # device-to-device copy, bytes read + written, TB/s
    measured_bf16_tflops: Optional[float] = None  # an 8192^3 bf16 product (torch.matmul, random data)
    measured: str = ""  # where and when the readings were taken

    @property
    def limits(self) -> Target:
        return TARGETS[self.target]

    def datasheet_figures(self) -> dict:
        """The quoted ceilings as ``viz.DATASHEET`` holds them (rooflines)."""
        out = {"bf16_dense_tflops": self.bf16_dense_tflops}
        if self.fp32_tflops is not None:
            out["fp32_tflops"] = self.fp32_tflops
        return dict(out, hbm_tbs=self.hbm_tb_s, source=self.datasheet)


H100_SXM = Card(
    "H100 SXM", "sm_90a", sms=132, l2_bytes=50 * 2**20, hbm_tb_s=3.35, bf16_dense_tflops=989.0,
    datasheet="NVIDIA H100 datasheet (SXM)", fp32_tflops=67.0,
    measured_copy_tb_s=3.0, measured_bf16_tflops=798.0,
    measured="this workplace's H100 80GB HBM3, 2026-11-13 (device notes, quoted in NOTES.md, 'Decode-sized GEMMs on Hopper')",
)
H200 = Card(
    "H200", "sm_90a", sms=132, l2_bytes=60 * 2**20, hbm_tb_s=4.8, bf16_dense_tflops=989.0,
    datasheet="NVIDIA H200 datasheet (SXM)", fp32_tflops=67.0,
    measured_copy_tb_s=4.3, measured_bf16_tflops=788.0,
    measured="this workplace's H200, 2026-10-28 (device notes, quoted in NOTES.md, 'Decode-sized GEMMs on Hopper')",
)
B200 = Card(
    "B200", "sm_100a", sms=148, l2_bytes=126 * 2**20, hbm_tb_s=8.0, bf16_dense_tflops=2250.0,
    datasheet="NVIDIA B200 datasheet (HGX, per GPU)",  # nothing measured: the Blackwell steps have not run here
)
CARDS = {c.name: c for c in (H100_SXM, H200, B200)}
# the card a target's kernels assume when no GPU is present to ask (the one the Hopper steps are measured on)
DEFAULT_CARD = {"sm_90a": H200, "sm_100a": B200}


def card(name: str) -> Optional[Card]:
    """The :class:`Card` of a GPU by its course name or the driver's ('NVIDIA H200',
    'NVIDIA H100 80GB HBM3'), or None where the course does not know it (an H100 PCIe, say)."""
    if name in CARDS:
        return CARDS[name]
    text = str(name or "")
    if any(other in text for other in ("PCIe", "NVL", "GB200")):
        return None  # other memory, clocks or SM counts than the cards above
    return next((c for c in CARDS.values() if c.name.split()[0] in text), None)


# ---------------------------------------------------------------------------------------------
# the one stage-count rule
# ---------------------------------------------------------------------------------------------


def stages_that_fit(stage_bytes: int, fixed_bytes: int, capacity: int, *, occupancy: int = 1) -> int:
    """The most pipeline stages of ``stage_bytes`` each that fit in ``capacity`` bytes of shared
    memory beside ``fixed_bytes`` (epilogue staging, barriers, alignment), with ``occupancy`` CTAs
    sharing it: ``(capacity // occupancy - fixed_bytes) // stage_bytes``, as CUTLASS's persistent
    GEMM examples compute their A/B stages (``_compute_stages``). 0 when not even one fits."""
    if stage_bytes <= 0:
        raise ValueError(f"stage_bytes must be positive, got {stage_bytes}")
    return max(0, (capacity // occupancy - fixed_bytes) // stage_bytes)
