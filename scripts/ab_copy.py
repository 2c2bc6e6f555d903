"""Copy the Hopper kernels of a git revision into a stand-alone package, for an A/B run (this machine).

    python3 scripts/ab_copy.py HEAD            # -> .cache/kernels/sm90_base (git-ignored)
    python3 scripts/gpu_tune.py sm90_base@sm90/11 sm90/11 --shapes 4096 8192   (on the GPU machine)

The copy also takes that revision's ``schedule.py`` (as ``schedule_base.py`` inside the package), so
a change to the schedule is compared too; ``--schedule NAME=VALUE`` sets one of its module constants
in the copy (a variant of a constant without a commit):

    python3 scripts/ab_copy.py HEAD --name sm90_lockstep --schedule LOCKSTEP_K_TILES=64

Pass ``.cache`` to the device tool's ``carry`` so it travels.
"""

import argparse
import os
import re
import subprocess

from kernel_copies import ROOT, write_package

KERNELS = "src/gemm_course/kernels"


def show(rev: str, path: str) -> str:
    return subprocess.run(["git", "show", f"{rev}:{path}"], cwd=ROOT, check=True, capture_output=True, text=True).stdout


def set_constants(text: str, settings: list) -> str:
    """``text`` with each ``NAME = ...`` line of ``settings`` (``NAME=VALUE``) set to VALUE; a name it lacks stops."""
    for setting in settings:
        name, _, value = setting.partition("=")
        text, count = re.subn(rf"^{re.escape(name)} = .*$", f"{name} = {value}", text, flags=re.M)
        if count != 1:
            raise SystemExit(f"schedule.py has no single line '{name} = ...'")
    return text


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("rev")
    p.add_argument("--name", default="sm90_base")
    p.add_argument("--schedule", action="append", default=[], metavar="NAME=VALUE",
                   help="set a module constant of the copy's schedule")
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
    files["schedule_base.py"] = set_constants(show(args.rev, "src/gemm_course/schedule.py"), args.schedule)
    target = write_package(args.name, files)
    print(f"{os.path.relpath(target, ROOT)}: the Hopper kernels of {args.rev}; use '{args.name}@sm90/N' in gpu_tune.py "
          f"and carry .cache to the device")


if __name__ == "__main__":
    main()
