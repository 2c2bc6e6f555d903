"""Copy the Hopper kernels of a git revision into a stand-alone package, for an A/B run (this machine).

    python3 scripts/ab_copy.py HEAD            # -> .cache/kernels/sm90_base (git-ignored)
    python3 scripts/gpu_tune.py sm90_base@sm90/11 sm90/11 --shapes 4096 8192   (on the GPU machine)

The copy also takes that revision's ``schedule.py`` (as ``schedule_base.py`` inside the package), so
a change to the schedule is compared too. Pass ``.cache`` to the device tool's ``carry`` so it travels.
"""

import argparse
import os
import re
import subprocess

from kernel_copies import ROOT, write_package

KERNELS = "src/gemm_course/kernels"


def show(rev: str, path: str) -> str:
    return subprocess.run(["git", "show", f"{rev}:{path}"], cwd=ROOT, check=True, capture_output=True, text=True).stdout


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("rev")
    p.add_argument("--name", default="sm90_base")
    args = p.parse_args(argv)
    files = {}
    names = subprocess.run(["git", "ls-tree", "--name-only", args.rev, f"{KERNELS}/sm90/"], cwd=ROOT, check=True,
                           capture_output=True, text=True).stdout.split()
    for path in names:
        text = show(args.rev, path)
        imports = re.search(r"^from \.\.\. import (.*)$", text, flags=re.M)
        if imports and "schedule" in imports.group(1).split(", "):  # the revision's own schedule
            others = [name for name in imports.group(1).split(", ") if name != "schedule"]
            own = (f"from ... import {', '.join(others)}\n" if others else "") + "from . import schedule_base as schedule"
            text = text[: imports.start()] + own + text[imports.end():]
        files[os.path.basename(path)] = text
    files["schedule_base.py"] = show(args.rev, "src/gemm_course/schedule.py")
    target = write_package(args.name, files)
    print(f"{os.path.relpath(target, ROOT)}: the Hopper kernels of {args.rev}; use '{args.name}@sm90/N' in gpu_tune.py "
          f"and carry .cache to the device")


if __name__ == "__main__":
    main()
