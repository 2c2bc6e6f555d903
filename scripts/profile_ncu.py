"""Launch steps and cuBLAS alternately on one problem, for Nsight Compute to read counters.

    ncu --clock-control none --kernel-name regex:'cutlass|gemm|xmma' --launch-skip 8 --launch-count 6 \
        --metrics <list> python3 scripts/profile_ncu.py sm90/10 --size 4096
"""

import argparse

import torch

from gemm_course.runtime import run
from gemm_course.runtime.problem import GemmProblem, make_inputs

from gpu_tune import variant  # STEP[:FIELD=VALUE,...]

parser = argparse.ArgumentParser()
parser.add_argument("steps", nargs="+")
parser.add_argument("--size", default="4096")
parser.add_argument("--launches", type=int, default=8)
args = parser.parse_args()

problem = GemmProblem.parse(args.size)
a, b, c = make_inputs(problem, "cuda", seed=0)
launchers = [run.prepare(step, a, b, c, config) for step, config in map(variant, args.steps)]
c_ref = torch.empty_like(c)
for _ in range(args.launches):
    for launch in launchers:
        launch()
    torch.mm(a, b.t(), out=c_ref)
torch.cuda.synchronize()
print("done", args.steps, problem.label)  # the variants in launch order, as ncu lists their kernels
