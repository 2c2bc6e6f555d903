"""Copy the Hopper kernels of a git revision into a sibling package, for an A/B run (this machine).

    python3 scripts/ab_copy.py HEAD            # -> src/gemm_course/kernels/sm90_base
    python3 scripts/gpu_tune.py sm90_base@sm90/11 sm90/11 --shapes 4096 8192   (on the GPU machine)

The copy also takes that revision's ``schedule.py`` (as ``schedule_base.py`` inside the package), so
a change to the schedule is compared too. ``kernels/sm90_*/`` is git-ignored: pass the package to
the device tool's ``carry`` so it travels.
"""

import argparse
import os
import re
import shutil
import subprocess

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
KERNELS = "src/gemm_course/kernels"


def show(rev: str, path: str) -> str:
    return subprocess.run(["git", "show", f"{rev}:{path}"], cwd=ROOT, check=True, capture_output=True, text=True).stdout


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("rev")
    p.add_argument("--name", default="sm90_base")
    args = p.parse_args(argv)
    target = os.path.join(ROOT, KERNELS, args.name)
    shutil.rmtree(target, ignore_errors=True)
    os.makedirs(target)
    files = subprocess.run(["git", "ls-tree", "--name-only", args.rev, f"{KERNELS}/sm90/"], cwd=ROOT, check=True,
                           capture_output=True, text=True).stdout.split()
    for path in files:
        text = show(args.rev, path)
        imports = re.search(r"^from \.\.\. import (.*)$", text, flags=re.M)
        if imports and "schedule" in imports.group(1).split(", "):  # the revision's own schedule
            others = [name for name in imports.group(1).split(", ") if name != "schedule"]
            own = (f"from ... import {', '.join(others)}\n" if others else "") + "from . import schedule_base as schedule"
            text = text[: imports.start()] + own + text[imports.end():]
        with open(os.path.join(target, os.path.basename(path)), "w") as f:
            f.write(text)
    with open(os.path.join(target, "schedule_base.py"), "w") as f:
        f.write(show(args.rev, "src/gemm_course/schedule.py"))
    print(f"{os.path.relpath(target, ROOT)}: the Hopper kernels of {args.rev}; use '{args.name}@sm90/N' in gpu_tune.py "
          f"and carry it to the device")


if __name__ == "__main__":
    main()
