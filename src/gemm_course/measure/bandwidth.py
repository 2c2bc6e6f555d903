"""The memory roofline: bytes over time, and operands that do not sit in L2.

A record's ``bandwidth`` (:func:`bandwidth_fields`): the fewest bytes a GEMM must move over its
median time, against the datasheet's HBM bandwidth (:data:`DATASHEET_TB_S`) and a measured copy
(:func:`copy_tb_s`). With ``rotate`` :func:`gemm_course.measure.bench.bench_step` times each
provider on enough operand sets in turn (:class:`Rotation`, :func:`rotated_providers`) that no
launch finds its operands in L2. :func:`line_fit`: a kernel's times over layers of several sizes as
a fixed cost per launch plus the bytes at a rate. Re-exported by :mod:`gemm_course.measure.bench`.
"""

from __future__ import annotations

import math
import statistics
from typing import Callable, Optional, Sequence

from ..runtime.problem import GemmProblem, make_inputs
from .timing import time_each

# HBM bandwidth by the vendors' datasheets (TB/s), by a substring of the GPU's name, most specific first
DATASHEET_TB_S = (("H100 PCIe", 2.0), ("H100 NVL", 3.9), ("H100", 3.35), ("H200", 4.8), ("B200", 8.0), ("GB200", 8.0))
ROTATE_CACHE_FACTOR = 3  # operand sets in turn cover at least this many L2s, so each launch reads DRAM


def datasheet_tb_s(gpu_name: Optional[str]) -> Optional[float]:
    """The datasheet's HBM bandwidth of a GPU by its name (None where the course does not know it)."""
    for part, tb_s in DATASHEET_TB_S:
        if gpu_name and part in gpu_name:
            return tb_s
    return None


def rotation_sets(set_bytes: int, cache_bytes: int, factor: int = ROTATE_CACHE_FACTOR) -> int:
    """How many operand sets, used in turn, keep a launch's operands out of an L2 of ``cache_bytes``."""
    return max(1, math.ceil(factor * cache_bytes / max(set_bytes, 1)))


class Rotation:
    """Calls ``fns`` in turn, each bound to its own operands: in a model's decode step every layer
    has its own weights, so a GEMM finds none of them in L2; timing one set over and over would
    measure the cache."""

    def __init__(self, fns: Sequence[Callable]):
        self.fns, self.next = list(fns), 0

    def __call__(self):
        fn = self.fns[self.next]
        self.next = (self.next + 1) % len(self.fns)
        fn()


def rotated_providers(launches: dict, problem: GemmProblem, a, b, out, seed: int = 0) -> tuple:
    """({name: Rotation} for each prepared launcher of ``launches`` and for cuBLAS (``"cublas"``), the
    record's ``rotation``): the first operand set is ``a``, ``b`` (cuBLAS writes ``out``), the others
    fresh (seeds ``seed + 1`` on), enough of them for :func:`rotation_sets`; each launcher is prepared
    again, with its own config, on every other set."""
    import torch

    from ..runtime import run

    cache = torch.cuda.get_device_properties(a.device).L2_cache_size
    sets = rotation_sets(problem.min_bytes, cache)
    others = [make_inputs(problem, "cuda", seed + 1 + i) for i in range(sets - 1)]
    rotated = {name: Rotation([launch] + [run.prepare(launch.step, x, w, y, launch.config) for x, w, y in others])
               for name, launch in launches.items()}
    rotated["cublas"] = Rotation([(lambda x=x, w=w, y=y: torch.mm(x, w.t(), out=y)) for x, w, y in [(a, b, out)] + others])
    return rotated, {"sets": sets, "set_bytes": problem.min_bytes, "l2_bytes": cache,
                     "how": "each provider launches on its operand sets in turn (bench.Rotation)"}


def copy_tb_s(gib: float = 2.0, repeats: int = 20) -> float:
    """Measured device-to-device copy bandwidth, TB/s counting bytes read plus bytes written
    (median of ``repeats`` copies of ``gib`` GiB): the memory ceiling this GPU reaches today."""
    import torch

    n = int(gib * 2**30) // 2
    src, dst = torch.empty(n, dtype=torch.bfloat16, device="cuda").normal_(), torch.empty(n, dtype=torch.bfloat16, device="cuda")
    for _ in range(3):
        dst.copy_(src)
    times = time_each(lambda: dst.copy_(src), repeats)
    return 2 * n * 2 / (statistics.median(times) * 1e-3) / 1e12


def bandwidth_fields(problem: GemmProblem, step_ms: float, cublas_ms: float, gpu_name: Optional[str],
                     copy: Optional[float] = None) -> dict:
    """A record's memory roofline: the fewest bytes (A and B read once, C written once) over each
    median time, and their fractions of the datasheet's and of the measured copy bandwidth."""
    sheet = datasheet_tb_s(gpu_name)
    out = {"min_bytes": problem.min_bytes, "tb_s": problem.min_bytes / (step_ms * 1e-3) / 1e12,
           "cublas_tb_s": problem.min_bytes / (cublas_ms * 1e-3) / 1e12, "datasheet_tb_s": sheet, "copy_tb_s": copy}
    for name, ceiling in (("datasheet", sheet), ("copy", copy)):
        out[f"fraction_of_{name}"] = out["tb_s"] / ceiling if ceiling else None
        out[f"cublas_fraction_of_{name}"] = out["cublas_tb_s"] / ceiling if ceiling else None
    return out


LINE_MAX_M = 16  # tokens up to which a decode layer's bytes are W's (within 1% at K = 4096): its times fall on a line


def line_fit(points: Sequence[tuple]) -> Optional[tuple]:
    """(fixed microseconds, TB/s, worst residual in microseconds) of the least-squares line through
    (bytes, microseconds) points: time = fixed + bytes / rate. None with fewer than two sizes that
    differ by 10% or more, or a slope that is not positive."""
    sizes = sorted(b for b, _ in points)
    if len(sizes) < 2 or sizes[-1] < 1.1 * sizes[0]:
        return None
    n = len(points)
    mean_b = sum(b for b, _ in points) / n
    mean_t = sum(t for _, t in points) / n
    slope = (sum((b - mean_b) * (t - mean_t) for b, t in points) / sum((b - mean_b) ** 2 for b, _ in points))
    if slope <= 0:
        return None
    fixed = mean_t - slope * mean_b
    worst = max(abs(fixed + slope * b - t) for b, t in points)
    return fixed, 1e-6 / slope, worst  # bytes per microsecond x 1e-6 = TB/s
