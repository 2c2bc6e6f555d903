"""The B200 kit's phases and their time limits, read from the kit itself (``scripts/b200_validate.sh``),
beside how long the same phase took on the H200 with the Hopper steps (its newest log under
``results/logs/``): what the setup page's table shows (:func:`phase_table`) and
``python -m gemm_course.measure.b200 phases`` prints.
"""

from __future__ import annotations

import glob
import os
from typing import Optional

KIT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "scripts", "b200_validate.sh"))
# what each phase of the kit does, in a few words (its comments in scripts/b200_validate.sh say more)
PHASE_WHAT = {
    "doctor": "versions, and which steps run here",
    "nvidia_smi": "the driver's view of the GPU",
    "stepwise": "every step in its own process: watchdog debug build, timed build, memcheck",
    "pytest_gpu": "the Blackwell-specific GPU tests",
    "sanitize_racecheck": "racecheck on steps 5-8 and step 11's split tails",
    "sanitize_synccheck": "synccheck on the same",
    "ladder": "the steps that passed at 4096³ and 8192³ against cuBLAS",
    "broad_sweep": "step 11 over the broad sweep",
    "broad_sweep_reversed": "the same, shapes in the opposite order",
    "tail_ab": "step 11's split tail against the kernel without it",
    "decode12": "step 12 beside step 11 and cuBLAS at M = 1-256, weights rotated out of L2",
    "decode12_reversed": "the same, shapes and steps in the opposite order",
    "decode_graph": "the same inside CUDA graphs, at seven shapes",
    "decode_graph_launch": "step 12 inside CUDA graphs with the next kernel launched early, at the start or after the loads, "
                           "or at the start with W loaded before the wait",
    "copy": "the records into results/",
}
# the logs under results/logs/ of the same phase run on the H200 with the Hopper steps (the newest of each)
HOPPER_TWIN_LOGS = {"stepwise": "*_stepwise_sm90.log", "pytest_gpu": "*_pytest_gpu.log",
                    "broad_sweep": "*_broad_sweep.log", "broad_sweep_reversed": "*_broad_sweep_reversed.log"}


def phase_limits(script: Optional[str] = None) -> dict:
    """``{phase: time limit in seconds}`` as the kit (``scripts/b200_validate.sh``) sets them, in its
    order; the stepwise phase's own per-step limits are :data:`gemm_course.measure.stepwise.LIMITS_S`."""
    import re

    with open(script or KIT) as f:
        text = f.read()
    loop = re.search(r"for tool in ([\w ]+); do", text)
    out = {}
    for name, limit in re.findall(r"^\s*phase\s+\"?([\w$]+)\"?\s+(\d+)\s", text, re.M):
        names = [name.replace("$tool", tool) for tool in loop.group(1).split()] if "$tool" in name and loop else [name]
        for each in names:
            out.setdefault(each, int(limit))
    return out


def kit_steps(script: Optional[str] = None) -> list:
    """The steps the kit checks one process each, as ``scripts/b200_validate.sh`` lists them (step 1
    included, as by default)."""
    import re

    with open(script or KIT) as f:
        text = f.read()
    steps = re.search(r'^steps="([^"$]*)"', text, re.M).group(1).split()
    first = re.search(r'steps="([^"$]*) \$steps"', text)
    return (first.group(1).split() if first else []) + steps


def _hopper_twin_seconds(phase: str, results_dir: Optional[str] = None) -> tuple:
    """(seconds, log) of the same phase on the H200 with the Hopper steps, read from its newest log under
    results/logs/, or (None, None)."""
    import re

    from .records import RESULTS_DIR

    pattern = HOPPER_TWIN_LOGS.get(phase)
    found = sorted(glob.glob(os.path.join(results_dir or RESULTS_DIR, "logs", pattern))) if pattern else []
    found = [p for p in found if "_b200_" not in os.path.basename(p)]
    if not found:
        return None, None
    with open(found[-1], errors="replace") as f:
        text = f.read()
    if phase == "stepwise":  # each phase of each step, as stepwise.run_step prints it
        seconds = sum(int(v) for v in re.findall(r"^sm90/\d+ \w+: \w+ \((\d+) s\)$", text, re.M)) or None
    elif phase == "pytest_gpu":  # pytest's last line
        times = re.findall(r" in ([\d.]+)s\b", text)
        seconds = float(times[-1]) if times else None
    else:  # a sweep: the time since its start on its last shape's line
        times = re.findall(r"^\[\d+/\d+\].*\((\d+) s\)", text, re.M)
        seconds = int(times[-1]) if times else None
    return seconds, f"results/logs/{os.path.basename(found[-1])}" if seconds else None


def phase_plan(script: Optional[str] = None, results_dir: Optional[str] = None) -> list:
    """The kit's phases in order: ``{"phase", "what", "limit_s", "hopper_s", "hopper_log"}``: its time
    limit (the stepwise phase: the per-step limits of :mod:`gemm_course.measure.stepwise` times :func:`kit_steps`) and,
    where the same phase has run on the H200 with the Hopper steps, how long that took and its log."""
    from .stepwise import LIMITS_S

    rows = []
    for name, limit in phase_limits(script).items():
        if name == "stepwise":  # the per-step limits of the steps the kit checks, within the phase's own
            limit = min(limit, sum(LIMITS_S.values()) * len(kit_steps(script)))
        seconds, log = _hopper_twin_seconds(name, results_dir)
        rows.append({"phase": name, "what": PHASE_WHAT.get(name, ""), "limit_s": limit, "hopper_s": seconds,
                     "hopper_log": log})
    return rows


def phase_table(script: Optional[str] = None, results_dir: Optional[str] = None) -> str:
    """:func:`phase_plan` as a Markdown table, with the total of the limits."""
    from .stepwise import LIMITS_S

    def minutes(seconds):
        return f"{seconds / 60:.0f}" if seconds >= 60 else f"{seconds / 60:.1f}"

    plan = phase_plan(script, results_dir)
    lines = ["| phase | what it does | stopped after (min) | the same on the H200, Hopper steps (min) |",
             "|---|---|---:|---|"]
    for r in plan:
        limit = minutes(r["limit_s"])
        if r["phase"] == "stepwise":
            per = ", ".join(f"{k} {minutes(v)}" for k, v in LIMITS_S.items())
            limit += f" ({per} a step)"
        twin = f"{minutes(r['hopper_s'])} (`{r['hopper_log']}`)" if r["hopper_s"] else "-"
        lines.append(f"| `{r['phase']}` | {r['what']} | {limit} | {twin} |")
    total = sum(r["limit_s"] for r in plan)
    lines.append(f"| all | | {total / 3600:.1f} h | |")
    return "\n".join(lines)
