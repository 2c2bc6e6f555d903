"""Copy the Hopper kernels of a git revision into a stand-alone package, for an A/B run (this machine).

    python3 scripts/ab_copy.py HEAD            # -> .cache/kernels/sm90_base (git-ignored)
    python3 scripts/gpu_tune.py sm90_base@sm90/11 sm90/11 --shapes 4096 8192   (on the GPU machine)

The copy also takes that revision's ``rules/schedule.py`` (``schedule.py`` before the layers were
folders) as ``schedule_base.py`` inside the package, so a change to the schedule is compared too;
``--schedule NAME=VALUE`` sets one of its module constants in the copy (a variant of a constant
without a commit):

    python3 scripts/ab_copy.py HEAD --name sm90_lockstep --schedule LOCKSTEP_K_TILES=64

Pass ``.cache`` to the device tool's ``carry`` so it travels.
"""

import argparse
import os
import re
import subprocess

from kernel_copies import ROOT, write_package

KERNELS = "src/gemm_course/kernels"
RULES = "src/gemm_course/rules"  # the schedule's folder (the package's top before the layers were folders)


def exists(rev: str, path: str) -> bool:
    return subprocess.run(["git", "cat-file", "-e", f"{rev}:{path}"], cwd=ROOT, capture_output=True).returncode == 0


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
        for imports in re.finditer(r"^from \.\.\.(rules)? import (.*)$", text, flags=re.M):  # rules/ since the layers
            names = imports.group(2).split(", ")
            if "schedule" in names:  # the revision's own schedule
                others = [name for name in names if name != "schedule"]
                own = (f"from ...{imports.group(1) or ''} import {', '.join(others)}\n" if others else "") + \
                    "from . import schedule_base as schedule"
                text = text[: imports.start()] + own + text[imports.end():]
                break
        files[os.path.basename(path)] = text
    schedule = next(path for path in (f"{RULES}/schedule.py", "src/gemm_course/schedule.py") if exists(args.rev, path))
    files["schedule_base.py"] = set_constants(show(args.rev, schedule), args.schedule)
    target = write_package(args.name, files)
    print(f"{os.path.relpath(target, ROOT)}: the Hopper kernels of {args.rev}; use '{args.name}@sm90/N' in gpu_tune.py "
          f"and carry .cache to the device")


if __name__ == "__main__":
    main()
