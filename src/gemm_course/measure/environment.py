"""Provenance of a record: the machine it was measured on.

:func:`environment` (GPU, driver, CUDA, torch, cutlass-dsl, Python, SM count, compute capability)
and :func:`clocks` (SM and memory clocks, power, temperature from ``nvidia-smi``; None without it).
Re-exported by :mod:`gemm_course.measure.bench`, whose records carry both.
"""

from __future__ import annotations

import platform
import subprocess
from typing import Optional


def _nvidia_smi(query: str) -> Optional[list]:
    try:
        out = subprocess.run(
            ["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader,nounits", "-i", "0"],
            capture_output=True, text=True, timeout=10,
        )
        return [v.strip() for v in out.stdout.strip().split(",")] if out.returncode == 0 else None
    except Exception:
        return None


def clocks() -> Optional[dict]:
    vals = _nvidia_smi("clocks.sm,clocks.mem,clocks.max.sm,power.draw,temperature.gpu")
    if not vals or len(vals) < 5:
        return None
    keys = ("sm_mhz", "mem_mhz", "max_sm_mhz", "power_w", "temperature_c")
    res = {}
    for k, v in zip(keys, vals):
        try:
            res[k] = float(v)
        except ValueError:
            res[k] = None
    return res


def provenance_command(prefix: str, argv) -> str:
    """The command line a record names: ``prefix`` and ``argv`` with the value after ``--out`` written
    ``$OUT`` (where the file went is not provenance, and may be a machine's path)."""
    import shlex

    argv = list(argv)
    if "--out" in argv:
        i = argv.index("--out")
        argv = argv[:i + 1] + ["$OUT"] + argv[i + 2:]
    return " ".join([prefix] + [shlex.quote(a) if a != "$OUT" else a for a in argv])


def environment() -> dict:
    import torch

    env = {
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
    }
    try:
        import cutlass

        env["cutlass_dsl"] = cutlass.__version__
    except Exception:
        env["cutlass_dsl"] = None
    drv = _nvidia_smi("driver_version")
    env["driver"] = drv[0] if drv else None
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        env["sm_count"] = p.multi_processor_count
        env["capability"] = f"{p.major}.{p.minor}"
    return env
