"""A device run's output folder filed where the course keeps it, in one command.

    python -m gemm_course.measure.device_runs OUT [--stamp 20261207T1049] [--prefix decode12]

What a Hopper script leaves in ``OUT`` (``scripts/gpu_decode12.sh``, ``gpu_tune.py``, ``gpu_decode_graph.py``):

* record files ``OUT/*.json`` -> ``results/<gpu>/`` (:func:`gemm_course.measure.b200_records.copy_records`:
  a file with a wrong output is refused);
* A/B runs ``OUT/NAME/tune.json`` -> ``results/tuning/tune_runN_PREFIX_NAME.json.gz`` (NAME without a
  leading ``tune_``), N the next free run number, each with ``what`` and ``command`` where ``gpu_tune.py`` wrote them;
* logs ``OUT/*.log`` and ``OUT/*.txt`` -> ``results/logs/STAMP_NAME`` with OUT's own folder written as
  ``OUT`` (the files are published), STAMP the run's UTC minute.

Nothing is overwritten: a destination that exists is reported and left. Returns, and prints, one line
per file: what NOTES.md cites it by.
"""

from __future__ import annotations

import argparse
import datetime
import glob
import gzip
import json
import os
import re
import sys
from typing import Optional

RUN_NUMBER = re.compile(r"^tune_run(\d+)")


def next_run_number(results_dir: str) -> int:
    """One more than the largest N of ``results/tuning/tune_runN*.json.gz`` (1 for none)."""
    numbers = [int(m.group(1)) for p in glob.glob(os.path.join(results_dir, "tuning", "tune_run*.json.gz"))
               if (m := RUN_NUMBER.match(os.path.basename(p)))]
    return max(numbers, default=0) + 1


def _redacted(text: str, out: str) -> str:
    for folder in sorted({os.path.abspath(out), os.path.realpath(out)}, key=len, reverse=True):
        text = text.replace(folder, "OUT")
    return text


def file_run(out: str, results_dir: Optional[str] = None, stamp: Optional[str] = None, prefix: str = "") -> list:
    """File ``out`` (module docstring); returns ``[(source, destination relative to the folder above
    results/, or None, why)]``."""
    from .b200_records import copy_records
    from .records import RESULTS_DIR

    results_dir = results_dir or RESULTS_DIR
    root = os.path.dirname(results_dir)
    stamp = stamp or datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M")
    done = [(src, os.path.relpath(dest, root) if dest else None, why) for src, dest, why in copy_records(out, results_dir)]
    number = next_run_number(results_dir)
    for path in sorted(glob.glob(os.path.join(out, "*", "tune.json"))):
        name = os.path.basename(os.path.dirname(path)).removeprefix("tune_")
        dest = os.path.join(results_dir, "tuning", f"tune_run{number}_{prefix + '_' if prefix else ''}{name}.json.gz")
        with open(path) as f:
            tune = json.load(f)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        with gzip.open(dest, "wt") as f:
            json.dump(tune, f)
        done.append((path, os.path.relpath(dest, root), f"A/B run {number}, {len(tune.get('rows', []))} rows"))
        number += 1
    for path in sorted(glob.glob(os.path.join(out, "*.log")) + glob.glob(os.path.join(out, "*.txt"))):
        dest = os.path.join(results_dir, "logs", f"{stamp}_{os.path.basename(path)}")
        if os.path.exists(dest):
            done.append((path, None, f"{os.path.relpath(dest, root)} exists: left"))
            continue
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        with open(path, errors="replace") as f:
            text = f.read()
        with open(dest, "w") as f:
            f.write(_redacted(text, out))
        done.append((path, os.path.relpath(dest, root), "log"))
    return done


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", help="the run's output folder")
    p.add_argument("--stamp", help="the run's UTC minute for the logs' names, YYYYMMDDTHHMM (default: now)")
    p.add_argument("--prefix", default="", help="a word in the A/B files' names, e.g. decode12")
    p.add_argument("--results", default=None, help="the results/ folder (default: the course's)")
    args = p.parse_args(argv)
    if args.stamp and not re.fullmatch(r"\d{8}T\d{4}", args.stamp):
        p.error("--stamp is a UTC minute, YYYYMMDDTHHMM, e.g. 20261207T1049")
    done = file_run(args.out, args.results, args.stamp, args.prefix)
    for src, dest, why in done:
        print(f"{os.path.relpath(src, args.out)}: {why}" + (f" -> {dest}" if dest else ""))
    return 1 if any(dest is None and why != "no records" and not why.endswith("left") for _, dest, why in done) else 0


if __name__ == "__main__":
    sys.exit(main())
