"""A small driver for compute-sanitizer (B200 kit): steps 5-8 and 11 on small shapes, each output checked.

    compute-sanitizer --tool racecheck python scripts/b200_sanitize.py racecheck
    python scripts/b200_sanitize.py --plan                 # the steps and shapes per tool (no GPU)

Inputs are made on the CPU and copied, and the float32 reference is computed on the CPU, so the
only kernels the sanitizer instruments are the course's. Exit 1 if any output is wrong.
"""

from __future__ import annotations

import sys

STEPS = ("sm100/5", "sm100/6", "sm100/7", "sm100/8")

# racecheck and synccheck: few CTAs (the tools are slow) and enough K tiles that the stages wrap around.
SHAPES = {
    "racecheck": [(256, 256, 448), (512, 512, 192)],
    "synccheck": [(256, 256, 448), (512, 512, 192)],
    "memcheck": [(200, 264, 72), (1000, 1000, 200), (1, 8, 8)],  # partial tiles: the TMA store clips
}
# every tool, step 8: 128 pair-clusters, more than a B200 holds at once (74), so CLC cancellations succeed
MANY_CLUSTERS = (4096, 2048, 64)
# every tool, step 11: 16 cluster-tiles whose K loops are cut in two (schedule.tail_parts), one with ragged edges
SPLIT_TAILS = [(1024, 1024, 4096), (1000, 1000, 4000)]


def plan(tool: str) -> list:
    """[(step key, shape), ...] for ``tool``."""
    return ([(key, shape) for key in STEPS for shape in SHAPES[tool]] + [("sm100/8", MANY_CLUSTERS)]
            + [("sm100/11", shape) for shape in SPLIT_TAILS])


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--plan"]:
        for tool in SHAPES:
            print(tool, " ".join(f"{k}:{'x'.join(map(str, s))}" for k, s in plan(tool)))
        return 0
    if len(argv) != 1 or argv[0] not in SHAPES:
        print(f"usage: b200_sanitize.py {{{','.join(SHAPES)}}} | --plan", file=sys.stderr)
        return 2
    import torch

    from gemm_course.runtime import run
    from gemm_course.runtime.problem import GemmProblem, make_inputs, reference, relative_error

    bad = 0
    for i, (key, shape) in enumerate(plan(argv[0])):
        a, b, c = (t.cuda() for t in make_inputs(GemmProblem(*shape), "cpu", seed=i))
        run.prepare(key, a, b, c)()
        torch.cuda.synchronize()
        err = relative_error(c.cpu(), reference(a.cpu(), b.cpu()))
        ok = err < run.TOLERANCE
        bad += not ok
        print(f"{key} {'x'.join(map(str, shape))}: rel. error {err:.2e} {'ok' if ok else 'FAIL'}", flush=True)
    print(f"{len(plan(argv[0])) - bad} ok, {bad} wrong")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
