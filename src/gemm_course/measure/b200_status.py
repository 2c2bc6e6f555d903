"""What runs where, read from the records (one place): which Blackwell steps have run on a B200, which
failed in the B200 kit (its published logs), which Hopper steps were measured, and the boxes the
book's first pages show from it (:func:`first_screen`; the setup page's :func:`get_the_code`, from
``repository.url`` in ``_config.yml``). ``python -m gemm_course.measure.b200`` (``status``,
``repository``) prints them; ``linear`` warns on a Blackwell step without a B200 record
(:func:`has_b200_record`).
"""

from __future__ import annotations

import glob
import os
from typing import Optional

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
