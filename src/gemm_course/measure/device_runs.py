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

``OUT`` may also be an archive of such a folder (``.tgz`` or ``.tar.gz``), or a folder holding only one:
a device call returns at most 8 files, so a run packs its folder (``tar czf R.tgz R``) and this unpacks it.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import glob
import gzip
import json
import os
import re
import sys
import tarfile
import tempfile
from typing import Optional

ARCHIVES = (".tgz", ".tar.gz")

RUN_NUMBER = re.compile(r"^tune_run(\d+)")


def next_run_number(results_dir: str) -> int:
    """One more than the largest N of ``results/tuning/tune_runN*.json.gz`` (1 for none)."""
    numbers = [int(m.group(1)) for p in glob.glob(os.path.join(results_dir, "tuning", "tune_run*.json.gz"))
               if (m := RUN_NUMBER.match(os.path.basename(p)))]
    return max(numbers, default=0) + 1


def _redacted(text: str, out: str) -> str:
    """``text`` with ``out``'s path written as OUT, and any other absolute path to a folder of ``out``'s name
    (where the run wrote it, on the device, before it was packed and brought here)."""
    for folder in sorted({os.path.abspath(out), os.path.realpath(out)}, key=len, reverse=True):
        text = text.replace(folder, "OUT")
    name = re.escape(os.path.basename(os.path.abspath(out)))
    return re.sub(rf"(?:/[^\s/'\"]+)+/{name}(?=[/\s'\",:)]|$)", "OUT", text)


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
        try:
            with open(path) as f:
                tune = json.load(f)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:  # cut off mid-write
            done.append((path, None, f"not JSON ({e}): not filed"))
            continue
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


@contextlib.contextmanager
def unpacked(out: str):
    """The run's folder: ``out`` itself, or, where ``out`` is an archive or a folder holding only one, the
    archive unpacked into a temporary folder (its one top folder, if it has one), removed afterwards."""
    entries = os.listdir(out) if os.path.isdir(out) else []
    archive = out if out.endswith(ARCHIVES) else (
        os.path.join(out, entries[0]) if len(entries) == 1 and entries[0].endswith(ARCHIVES) else None)
    if archive is None:
        yield out
        return
    with tempfile.TemporaryDirectory(prefix="device-run-") as tmp, tarfile.open(archive) as tar:
        tar.extractall(tmp, filter="data")  # no links or paths out of the folder
        inside = os.listdir(tmp)
        yield os.path.join(tmp, inside[0]) if len(inside) == 1 and os.path.isdir(os.path.join(tmp, inside[0])) else tmp


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", help="the run's output folder, or an archive of it (.tgz)")
    p.add_argument("--stamp", help="the run's UTC minute for the logs' names, YYYYMMDDTHHMM (default: now)")
    p.add_argument("--prefix", default="", help="a word in the A/B files' names, e.g. decode12")
    p.add_argument("--results", default=None, help="the results/ folder (default: the course's)")
    args = p.parse_args(argv)
    if args.stamp and not re.fullmatch(r"\d{8}T\d{4}", args.stamp):
        p.error("--stamp is a UTC minute, YYYYMMDDTHHMM, e.g. 20261207T1049")
    with unpacked(args.out) as out:
        done = file_run(out, args.results, args.stamp, args.prefix)
        for src, dest, why in done:
            print(f"{os.path.relpath(src, out)}: {why}" + (f" -> {dest}" if dest else ""))
    return 1 if any(dest is None and why != "no records" and not why.endswith("left") for _, dest, why in done) else 0


if __name__ == "__main__":
    sys.exit(main())
