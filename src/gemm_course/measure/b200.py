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
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import statistics
import sys
from typing import Optional

from ..runtime import arch

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


def _record_files(out: str) -> list:
    return sorted(glob.glob(os.path.join(out, "*.json")))


def copy_records(out: str, results_dir: Optional[str] = None) -> list:
    """Copy each bench file of ``out`` into ``results/<gpu-slug>/`` (where records.load_records reads them).

    A file with a record whose output failed the check is not copied: numbers of a wrong kernel are
    worthless. Returns [(source, destination or None, why)].
    """
    from ..runtime.run import TOLERANCE
    from .bench import gpu_slug
    from .records import RESULTS_DIR

    results_dir = results_dir or RESULTS_DIR
    done = []
    for path in _record_files(out):
        with open(path) as f:
            records = json.load(f).get("records", [])
        if not records:
            done.append((path, None, "no records"))
            continue
        bad = [r for r in records if not (r.get("rel_error", float("inf")) < TOLERANCE)]
        if bad:
            done.append((path, None, f"{len(bad)} record(s) with rel. error >= {TOLERANCE}: not copied"))
            continue
        folder = os.path.join(results_dir, gpu_slug(records[0].get("gpu") or "unknown-gpu"))
        os.makedirs(folder, exist_ok=True)
        dest = os.path.join(folder, os.path.basename(path))
        if os.path.exists(dest):
            done.append((path, dest, "already there"))
            continue
        shutil.copy2(path, dest)
        done.append((path, dest, "copied"))
    return done


SWEEP_TAGS = ("sweep", "broad_sweep", "broad_sweep_reversed")  # the kit's sweeps (an older kit ran "sweep")

# The kit's A/B of step 11's split tail against the same kernel without it (scripts/gpu_tune.py,
# every variant checked against float32 before it is timed): what calibrates the hand-over's price,
# schedule.FIXUP_K_TILES, on a B200. Its output folder under OUT, and its name under results/tuning/.
TAIL_AB = "tail_ab"
TAIL_AB_RUN = "tune_b200_tail_split"
TAIL_AB_SHAPES = ("4096", "12288", "16384", "1024x1024x8192", "8192x4096x28672")
TAIL_AB_VARIANTS = ("sm100/11", "sm100/11:stream_k=False")


def tail_ab_command() -> str:
    """The tail A/B as the kit runs it (OUT for its output folder)."""
    variants = " ".join(f'"{v}"' if ":" in v else v for v in TAIL_AB_VARIANTS)
    return f"scripts/gpu_tune.py {variants} --shapes {' '.join(TAIL_AB_SHAPES)} --out OUT/{TAIL_AB}"


def tail_ab_run(results_dir: Optional[str] = None) -> str:
    """The newest tail A/B under results/tuning/ (``tune_b200_tail_split_<UTC date>``, one per kit
    run), as :func:`gemm_course.measure.records.load_tuning` names it; TAIL_AB_RUN when there is none."""
    from .records import RESULTS_DIR

    found = sorted(glob.glob(os.path.join(results_dir or RESULTS_DIR, "tuning", TAIL_AB_RUN + "*.json.gz")))
    return os.path.basename(found[-1])[: -len(".json.gz")] if found else TAIL_AB_RUN


def copy_tail_ab(out: str, results_dir: Optional[str] = None) -> Optional[tuple]:
    """OUT/tail_ab/tune.json -> results/tuning/tune_b200_tail_split_<UTC date of the run>.json.gz, with
    what it compared and its command (as every tuning run the book reads). (source, destination or
    None, why), or None when the kit ran no tail A/B."""
    import datetime
    import gzip

    from .records import RESULTS_DIR

    source = os.path.join(out, TAIL_AB, "tune.json")
    if not os.path.exists(source):
        return None
    with open(source) as f:
        tune = json.load(f)
    if not tune.get("rows"):
        return source, None, "no rows"
    folder = os.path.join(results_dir or RESULTS_DIR, "tuning")
    stamp = datetime.datetime.fromtimestamp(os.path.getmtime(source), datetime.timezone.utc).strftime("%Y%m%dT%H%M")
    dest = os.path.join(folder, f"{TAIL_AB_RUN}_{stamp}.json.gz")
    if os.path.exists(dest):
        return source, dest, "already there"
    os.makedirs(folder, exist_ok=True)
    gpu = (tune.get("env") or {}).get("gpu", "a B200")
    tune.update(what=f"step 11's split tail against the same kernel without it (stream_k=False), interleaved with "
                     f"cuBLAS; the B200 kit on {gpu}", command=tail_ab_command())
    with gzip.open(dest, "wt") as f:
        json.dump(tune, f)
    return source, dest, "copied"


def tail_ab_lines(tune: dict) -> list:
    """Per shape of the tail A/B: the split tail over the whole one, beside the tail model's expectation."""
    from ..kernels.sm100.step11_beyond_the_seed import model_speedup
    from .records import ab_changes

    lines = []
    for shape, changes in ab_changes(tune, *TAIL_AB_VARIANTS).items():
        parts, model = model_speedup(*map(int, shape.split("x")))
        measured = ", ".join(f"{1 + c:.3f}" for c in changes)
        lines.append(f"split tail over whole at {shape}: {measured} (the tail model: {float(model):.3f}, "
                     f"{parts} part{'s' if parts > 1 else ''} per tail tile)")
    return lines


def table(out: str) -> str:
    """The ladder (TFLOP/s and ratio to cuBLAS per shape) and a one-line summary of each sweep."""
    from .records import geomean, shape_of, sweep_classes

    records = []
    for path in _record_files(out):
        with open(path) as f:
            tag = os.path.basename(path).rsplit(".", 1)[0].split("_", 1)[-1]
            records += [dict(r, _tag=tag) for r in json.load(f).get("records", []) if r.get("kind") == "bench"]
    if not records:
        return "no bench records under OUT"
    lines = []
    ladder_recs = [r for r in records if r["_tag"] not in SWEEP_TAGS]
    if ladder_recs:
        shapes = sorted({shape_of(r) for r in ladder_recs})
        head = "".join(f"  {'x'.join(map(str, s)):>16} {'ratio':>6}" for s in shapes)
        lines.append(f"{'step':<10}{head}")
        by = {(r["step"], shape_of(r)): r for r in ladder_recs}
        steps = sorted({r["step"] for r in ladder_recs}, key=lambda k: (k.split("/")[0], int(k.split("/")[1])))
        for step in steps:
            cells = ""
            for s in shapes:
                r = by.get((step, s))
                cells += f"  {r['tflops']['median']:16.1f} {r['ratio_to_cublas']:6.3f}" if r else f"  {'-':>16} {'-':>6}"
            lines.append(f"{step:<10}{cells}")
        cublas = {s: statistics.median(r["cublas_tflops"]["median"] for k, r in by.items() if k[1] == s) for s in shapes}
        lines.append(f"{'cuBLAS':<10}" + "".join(f"  {cublas[s]:16.1f} {'':>6}" for s in shapes))
        from ..kernels.sm100.step11_beyond_the_seed import model_speedup

        for s in shapes:  # the final step's one idea against its parent, and what the tail model expected
            old, new = by.get(("sm100/10", s)), by.get(("sm100/11", s))
            if old and new:
                parts, model = model_speedup(*s)
                lines.append(f"sm100/11 over sm100/10 at {'x'.join(map(str, s))}: "
                             f"{new['tflops']['median'] / old['tflops']['median']:.3f} (the tail model: "
                             f"{float(model):.3f}, {parts} part{'s' if parts > 1 else ''} per tail tile)")
    for tag in SWEEP_TAGS:
        for step in sorted({r["step"] for r in records if r["_tag"] == tag}):
            sweep = [r for r in records if r["_tag"] == tag and r["step"] == step]
            ratios = sorted((r["ratio_to_cublas"], "x".join(str(r["shape"][d]) for d in "mnk")) for r in sweep)
            lines.append(
                f"{tag.replace('_', ' ')} {step}: {len(sweep)} shapes, ratio to cuBLAS geometric mean "
                f"{geomean(v for v, _ in ratios):.3f}, min {ratios[0][0]:.3f} ({ratios[0][1]}), "
                f"max {ratios[-1][0]:.3f} ({ratios[-1][1]})"
            )
            if tag != "sweep":  # the broad sweep: a line per shape class
                for name, c in sweep_classes(sweep).items():
                    if name != "all":
                        lines.append(f"  {name}: {c['shapes']} shapes, geometric mean {c['geomean']:.3f}, "
                                     f"lowest {c['lowest']:.3f} ({c['lowest_shape']})")
    tail_ab = os.path.join(out, TAIL_AB, "tune.json")
    if os.path.exists(tail_ab):
        with open(tail_ab) as f:
            lines += tail_ab_lines(json.load(f))
    worst = max(records, key=lambda r: r.get("rel_error", 0.0))
    lines.append(f"largest rel. error vs float32: {worst['rel_error']:.1e} ({worst['step']})")
    return "\n".join(lines)


def redact_logs(out: str, repo: str) -> list:
    """Replace the folders of this machine in ``out``'s logs by OUT, REPO and ~ (the logs are meant
    to be published with the records, which already name no folder). Returns the files changed."""
    pairs = [(os.path.abspath(out), "OUT"), (os.path.abspath(repo), "REPO"), (os.path.expanduser("~"), "~")]
    pairs = [(old, new) for old, new in pairs if len(old) > 1]  # never replace a bare "/"
    changed = []
    for path in sorted(glob.glob(os.path.join(out, "*.log")) + glob.glob(os.path.join(out, "*.xml"))):
        with open(path, errors="replace") as f:
            text = f.read()
        new_text = text
        for old, new in sorted(pairs, key=lambda p: -len(p[0])):  # the longest first: OUT may lie in REPO or ~
            new_text = new_text.replace(old, new)
        if new_text != text:
            with open(path, "w") as f:
                f.write(new_text)
            changed.append(path)
    return changed


def publish_logs(out: str, results_dir: Optional[str] = None) -> list:
    """Copy ``out``'s logs (already redacted) to ``results/logs/<UTC date>_b200_<name>.log``, the names
    the book cites them by (``results/logs/*_b200_*.log``). Returns the destinations."""
    import datetime

    from .records import RESULTS_DIR

    folder = os.path.join(results_dir or RESULTS_DIR, "logs")
    os.makedirs(folder, exist_ok=True)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M")
    done = []
    for path in sorted(glob.glob(os.path.join(out, "*.log"))):
        dest = os.path.join(folder, f"{stamp}_b200_{os.path.basename(path)}")
        shutil.copy2(path, dest)
        done.append(dest)
    return done


# ---------------------------------------------------------------------------------------------
# what runs where: the status the book shows, read from the records (one place)
# ---------------------------------------------------------------------------------------------

B200_SLUGS = ("nvidia-b200", "nvidia-gb200")  # results/<slug>/ of the GPUs sm_100a code runs on


def b200_records(records=None) -> list:
    """The timed records (kind ``bench``) of Blackwell steps measured on a B200-class GPU, oldest first."""
    from .records import gpu_slug, load_records

    records = load_records() if records is None else records
    return [r for r in records if r.get("kind", "bench") == "bench" and str(r.get("step", "")).startswith("sm100/")
            and gpu_slug(r.get("gpu") or "") in B200_SLUGS]


def has_b200_record(step: Optional[str] = None, records=None) -> bool:
    """Whether any record of a Blackwell step (of ``step``, e.g. ``"sm100/11"``, when given; a variant
    such as ``sm100/11:stream_k=False`` counts for its step) measured on a B200 exists under results/."""
    return any(step is None or r["step"].split(":")[0] == step for r in b200_records(records))


def measured_steps(records=None) -> dict:
    """``{step key: its newest B200 record}`` for every Blackwell step with one."""
    out = {}
    for r in b200_records(records):
        out[r["step"].split(":")[0]] = r
    return out


def _step_order(key: str) -> tuple:
    arch_name, number = key.split("/")
    return arch_name, int(number)


def kit_runs(results_dir: Optional[str] = None) -> list:
    """The B200 kit runs published under results/logs/ (``<UTC date>_b200_stepwise.log``), newest first:
    ``{"stamp", "log", "failed"}``, ``failed`` being ``{step: {"why", "log"}}`` for every step whose
    phase failed, read from the lines :func:`gemm_course.measure.stepwise.run_step` prints as each phase ends
    (so a run stopped before its closing table still counts): ``why`` as the kit's table says it (the
    phase, then the barrier, the wrong shape or the time-out), ``log`` that phase's published log."""
    import re

    from .records import RESULTS_DIR

    folder = os.path.join(results_dir or RESULTS_DIR, "logs")
    failure = re.compile(r"^  (sm100/\d+) ((?:debug|timed|sanitizer): .*)$")
    runs = []
    for path in sorted(glob.glob(os.path.join(folder, "*_b200_stepwise.log")), reverse=True):
        stamp = os.path.basename(path).split("_b200_")[0]
        failed = {}
        with open(path, errors="replace") as f:
            for line in f:
                found = failure.match(line.rstrip("\n"))
                if found:
                    key, why = found.groups()
                    phase = why.split(":", 1)[0]
                    failed[key] = {"why": why, "log": f"results/logs/{stamp}_b200_step_{key.replace('/', '-')}_{phase}.log"}
        runs.append({"stamp": stamp, "log": f"results/logs/{os.path.basename(path)}", "failed": failed})
    return runs


def step_status(records=None, results_dir: Optional[str] = None) -> dict:
    """Every Blackwell step's status from the records and the published kit logs: ``{key: (state, detail)}``
    with state ``"measured"`` (a B200 record; detail: its file), ``"failed"`` (the newest kit run failed
    it; detail: the phase, why, and its log) or ``"compiled"`` (compiled and checked on the CPU, not run)."""
    from ..runtime import ladder

    measured = measured_steps(records)
    runs = kit_runs(results_dir)
    failed = runs[0]["failed"] if runs else {}
    out = {}
    for step in ladder.steps("sm100"):
        if step.key in failed:
            out[step.key] = ("failed", f"{failed[step.key]['why']} (log: `{failed[step.key]['log']}`)")
        elif step.key in measured:
            out[step.key] = ("measured", f"`{measured[step.key]['_file']}`" if measured[step.key].get("_file") else "")
        else:
            out[step.key] = ("compiled", "")
    return out


def _steps_text(keys) -> str:
    """``["sm100/1", "sm100/4", "sm100/5", "sm100/6"]`` -> "steps 1, 4-6" (runs of three or more as ranges)."""
    numbers = sorted(_step_order(k)[1] for k in keys)
    runs = []
    for n in numbers:
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    parts = [f"{r[0]}-{r[-1]}" if len(r) >= 3 else ", ".join(map(str, r)) for r in runs]
    return ("step " if len(numbers) == 1 else "steps ") + ", ".join(parts)


def blackwell_status(records=None, results_dir: Optional[str] = None) -> str:
    """One paragraph: which Blackwell steps have run on a B200 (from the records), which failed in the
    kit (with their logs), and which are compiled and checked on the CPU only."""
    status = step_status(records, results_dir)
    by = {state: [k for k, (s, _) in status.items() if s == state] for state in ("measured", "failed", "compiled")}
    if not by["measured"] and not by["failed"]:
        return ("every step compiled and checked on the CPU; **none has run on a B200 yet** (no B200 record under "
                "`results/`): the Blackwell figures show the seed's quoted B200 numbers, not measurements.")
    parts = []
    if by["measured"]:
        dates = sorted(r.get("date", "")[:10] for r in measured_steps(records).values())
        parts.append(f"{_steps_text(by['measured'])} measured on a B200 (records of {dates[-1]})")
    if by["failed"]:
        parts.append(f"{_steps_text(by['failed'])} failed in the B200 kit: "
                     + "; ".join(f"{k}: {status[k][1]}" for k in sorted(by["failed"], key=_step_order)))
    if by["compiled"]:
        parts.append(f"{_steps_text(by['compiled'])} compiled and checked on the CPU, not yet run on a B200")
    return "; ".join(parts) + "."


def hopper_status(records=None) -> str:
    """One sentence: which Hopper steps were run, checked and timed, on which GPUs, the newest record's
    date, and which steps have no record yet."""
    from ..runtime import ladder
    from .records import load_records

    records = load_records() if records is None else records
    hopper = [r for r in records if str(r.get("step", "")).startswith("sm90/") and r.get("kind", "bench") == "bench"]
    if not hopper:
        return "run and checked on an H100 or H200; no record of them exists yet under `results/`."
    measured = {r["step"].split(":")[0] for r in hopper}
    keys = [s.key for s in ladder.steps("sm90")]
    missing = [k for k in keys if k not in measured]
    which = "every step" if not missing else _steps_text([k for k in keys if k in measured])
    gpus = sorted({r.get("gpu") or "?" for r in hopper})
    newest = max(r.get("date", "") for r in hopper)[:10]
    text = (f"{which} run, checked and timed against cuBLAS on {' and '.join(gpus)} "
            f"({len(hopper)} records, the newest of {newest})")
    if missing:
        text += f"; {_steps_text(missing)} compiled and checked on the CPU, not yet measured"
    return text + "."


def first_screen(records=None, results_dir: Optional[str] = None) -> str:
    """The intro's box (MyST Markdown): what runs where, from the records, and what to do first."""
    return "\n".join([
        ":::{admonition} What runs where, and where to start",
        ":class: important",
        f"- **Blackwell** (B200, `sm_100a`, the course's target): {blackwell_status(records, results_dir)}",
        f"- **Hopper** (H100/H200, `sm_90a`): {hopper_status(records)}",
        "- **Without a GPU**: every chapter runs, compiles both ladders and draws the records.",
        "",
        "**First**: [Setup](setup.md): what to install and, on a B200, what to run in which order "
        "(the B200 kit before any chapter).",
        ":::",
    ])


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


def repository_url(config_path: Optional[str] = None) -> str:
    """The course's public address: ``repository.url`` in ``_config.yml`` (Jupyter Book's setting, which
    also drives the book's repository button), or '' while the course is not published."""
    import re

    from .records import RESULTS_DIR

    path = config_path or os.path.join(os.path.dirname(RESULTS_DIR), "_config.yml")
    with open(path) as f:
        text = f.read()
    try:
        import yaml

        return str(((yaml.safe_load(text) or {}).get("repository") or {}).get("url") or "").strip()
    except ImportError:  # the kit's python without PyYAML: the one key, read plainly
        block = re.search(r"^repository:\s*\n((?:[ \t]+.*\n?)*)", text, re.M)
        found = re.search(r"^\s+url:\s*[\"']?([^\"'#\s]*)", block.group(1), re.M) if block else None
        return found.group(1) if found else ""


SETUP_COMMANDS = ["cd gemm-course", "make setup          # .venv: the pinned packages and the course (editable)",
                  ".venv/bin/gemm-course doctor"]


def get_the_code(url: Optional[str] = None) -> str:
    """The setup page's "get the code" (MyST Markdown): the clone command from :func:`repository_url`,
    or, while the course has no public address, where the tree comes from instead."""
    url = repository_url() if url is None else url
    if url:
        lead = f"The course is published at <{url}> (`repository.url` in `_config.yml`):"
        first = [f"git clone {url} gemm-course"]
    else:
        lead = ("The course is not published at a public address yet (its one setting, `repository.url` in "
                "`_config.yml`, is empty), so this book cannot name one to clone. Get the course's folder from "
                "whoever gave you this book, as a copy of the folder or as a git bundle "
                "(`git clone gemm-course.bundle gemm-course`), then:")
        first = []
    return "\n".join([lead, "", "```bash", *first, *SETUP_COMMANDS, "```"])


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
