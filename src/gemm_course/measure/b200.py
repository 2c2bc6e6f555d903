"""The B200 kit's Python side (``scripts/b200_validate.sh``): is device 0 a B200, where its records
go, and the short table the kit prints last.

    python -m gemm_course.measure.b200 check         # exit 0 on sm_100a, else 2 with a message saying why
    python -m gemm_course.measure.b200 slug          # this GPU's folder under results/ (as bench names it)
    python -m gemm_course.measure.b200 copy OUT      # OUT/*.json -> results/<gpu>/ (checked); the tail A/B -> results/tuning/
    python -m gemm_course.measure.b200 table OUT     # the ladder and the sweep, one line per step
    python -m gemm_course.measure.b200 redact OUT REPO   # OUT's logs name OUT, REPO and ~, not this machine's folders
    python -m gemm_course.measure.b200 logs OUT      # OUT/NAME.log -> results/logs/<UTC date>_b200_NAME.log, to publish
    python -m gemm_course.measure.b200 status        # each Blackwell step: measured, failed in the kit (its log) or compiled
    python -m gemm_course.measure.b200 phases        # the kit's phases and their time limits
    python -m gemm_course.measure.b200 repository    # the course's address (repository.url in _config.yml), or nothing

Here: whether device 0 is a B200 (:func:`check_machine`), its folder under results/ (:func:`slug`)
and the command line. What the kit's output becomes (copy, table, logs):
:mod:`gemm_course.measure.b200_records`; what runs where and the book's first screen:
:mod:`gemm_course.measure.b200_status`; the kit's phases and limits:
:mod:`gemm_course.measure.b200_phases`. Their names are re-exported here.
"""

from __future__ import annotations

import os
import sys
from typing import Optional

from ..runtime import arch
from .b200_phases import (  # noqa: F401  (re-exported: the pages', scripts' and tests' names)
    HOPPER_TWIN_LOGS,
    KIT,
    PHASE_WHAT,
    kit_steps,
    phase_limits,
    phase_plan,
    phase_table,
)
from .b200_records import (  # noqa: F401
    DECODE_GRAPH_SHAPES,
    DECODE_LAUNCH_SHAPES,
    DECODE_TAGS,
    SWEEP_TAGS,
    TAIL_AB,
    TAIL_AB_RUN,
    TAIL_AB_SHAPES,
    TAIL_AB_VARIANTS,
    copy_records,
    copy_tail_ab,
    decode_launch_variants,
    decode_lines,
    decode_shapes_text,
    decode_step_key,
    publish_logs,
    redact_logs,
    table,
    tail_ab_command,
    tail_ab_lines,
    tail_ab_run,
)
from .b200_status import (  # noqa: F401
    B200_SLUGS,
    SETUP_COMMANDS,
    b200_records,
    blackwell_status,
    first_screen,
    get_the_code,
    has_b200_record,
    hopper_status,
    kit_runs,
    measured_steps,
    repository_url,
    step_status,
)

# Tests only: "NAME,MAJOR.MINOR[,SMS]" (or "none") stands in for device 0 in check and slug, so the
# refusal and the dry run can be tried on a machine without a B200.
PRETEND = "GEMM_COURSE_PRETEND_GPU"
TARGET = "sm_100a"
HINT = "Hopper owners: scripts/gpu_ladder.sh OUT reproduces the course's H100/H200 records."


def present_machine() -> arch.Machine:
    text = os.environ.get(PRETEND)
    if not text:
        return arch.machine()
    if text.strip().lower() == "none":
        return arch.Machine(None, None, None, None)
    name, cc, *rest = [part.strip() for part in text.split(",")]
    capability = tuple(int(v) for v in cc.split("."))
    return arch.Machine(name, capability, int(rest[0]) if rest else None, arch._target_for_capability(capability))


def _why_no_gpu() -> str:
    """The reason PyTorch sees no GPU: a missing or CPU-only torch reads very differently from no driver."""
    try:
        import torch
    except Exception as e:
        return (f"PyTorch cannot be imported by {sys.executable} ({type(e).__name__}): "
                "run `make setup` or activate the environment")
    if torch.version.cuda is None:
        return f"PyTorch {torch.__version__} is a CPU-only build; a CUDA build is needed, see book/setup.md"
    return (f"PyTorch {torch.__version__} (CUDA {torch.version.cuda}) sees no GPU: check that nvidia-smi lists one "
            "and that CUDA_VISIBLE_DEVICES does not hide it")


def check_machine(machine: Optional[arch.Machine] = None, arch_list: Optional[list] = None) -> tuple:
    """(ok, message): whether device 0 is a B200-class GPU (compute capability 10.0, target sm_100a)
    and PyTorch has kernels for it (``arch_list``, as ``torch.cuda.get_arch_list()``; read from
    PyTorch for the present GPU, not checked for a given or pretended one unless passed)."""
    m = present_machine() if machine is None else machine
    if m.target == TARGET:
        if arch_list is None and machine is None and not os.environ.get(PRETEND):
            import torch

            arch_list = torch.cuda.get_arch_list()
        from ..cli import torch_arch_gap

        gap = torch_arch_gap(m, arch_list) if arch_list is not None else ""
        if gap:
            return False, (f"b200_validate.sh stops: device 0 is {m.describe()}, but {gap}. Without it every "
                           "reference and every cuBLAS timing fails. Install one (book/setup.md, 'On a B200 cloud "
                           "instance'), check with .venv/bin/gemm-course doctor, then run the kit again; nothing "
                           "was run and nothing was written under results/.")
        return True, f"device 0: {m.describe()}. B200-class: running the kit."
    if not m.has_gpu:
        found = "no CUDA GPU is visible here" + ("" if machine is not None or os.environ.get(PRETEND) else f" ({_why_no_gpu()})")
    else:
        cc = ".".join(map(str, m.capability))
        found = f"device 0 is {m.gpu_name} (compute capability {cc}, course target {m.target or 'none'})"
    message = (
        f"b200_validate.sh stops: {found}. This kit validates and times the Blackwell ladder (sm100/1..12) and "
        f"needs a B200-class GPU as device 0: compute capability 10.0 (B200, GB200), target {TARGET}, whose code "
        f"runs on 10.0 only (a B300 is 10.3); nothing was run "
        f"and nothing was written under results/. {HINT}"
    )
    return False, message


def slug(machine: Optional[arch.Machine] = None) -> str:
    """The folder bench writes this GPU's records to by default (``results/<slug>/``): 'nvidia-b200' on a B200."""
    from .bench import gpu_slug

    m = present_machine() if machine is None else machine
    return gpu_slug(m.gpu_name or "unknown-gpu")


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    command = argv[0] if argv else ""
    if command == "check":
        ok, message = check_machine()
        print(message, file=sys.stdout if ok else sys.stderr)
        return 0 if ok else 2
    if command == "slug":
        print(slug())
        return 0
    if command == "copy" and len(argv) == 2:
        from .records import RESULTS_DIR

        done = copy_records(argv[1])
        tail = copy_tail_ab(argv[1])
        for src, dest, why in done + ([tail] if tail else []):  # the destination as load_records names it: results/<gpu>/<file>
            where = f" -> {os.path.relpath(dest, os.path.dirname(RESULTS_DIR))}" if dest else ""
            print(f"{os.path.basename(src)}: {why}{where}")
        return 1 if any(d is None and why != "no records" for _, d, why in done) else 0
    if command == "redact" and len(argv) == 3:
        redact_logs(argv[1], argv[2])
        return 0
    if command == "table" and len(argv) == 2:
        print(table(argv[1]))
        return 0
    if command == "logs" and len(argv) == 2:
        from .records import RESULTS_DIR

        for dest in publish_logs(argv[1]):
            print(os.path.relpath(dest, os.path.dirname(RESULTS_DIR)))
        return 0
    if command == "status" and len(argv) == 1:
        for key, (state, detail) in step_status().items():
            print(f"{key:<10} {state:<9} {detail}")
        return 0
    if command == "phases" and len(argv) == 1:
        for r in phase_plan():
            print(f"{r['phase']:<22} at most {r['limit_s'] / 60:6.1f} min  {r['what']}")
        return 0
    if command == "repository" and len(argv) == 1:
        print(repository_url())
        return 0
    if command in ("-h", "--help", "help"):
        print(__doc__)
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
