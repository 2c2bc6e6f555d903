"""Compare kernel variants and cuBLAS interleaved in one process (GPU). For tuning, not for the book.

    python3 scripts/gpu_tune.py --shapes 4096 8192 --out OUT  sm90/10  sm90/11  "sm90/11:epi_stages=4"

A variant is ``STEP[:FIELD=VALUE,...]``: on each shape, the config the step picks for it
(``Step.config_for``; the default Config for steps without a rule) with those fields changed.
``PACKAGE@STEP`` takes the step's module from a copy of
the Hopper kernels under ``.cache/kernels/PACKAGE`` (e.g. an older revision's, written by
``scripts/ab_copy.py REV``, for an A/B test).
Every variant is checked against float32 on the shape before timing. All variants and cuBLAS
go through one ``bench.compare`` call per shape, so they share the GPU's clock and temperature.
Prints a table of medians and ratios to cuBLAS; writes the raw per-launch times as JSON with the
command line, the date and ``--what`` (what the run compares, in words); the course keeps them as
``results/tuning/NAME.json.gz`` (``python -m gemm_course.measure.device_runs OUT`` files them).
"""

import argparse
import dataclasses
import json
import os
import sys
import time

import torch

from gemm_course.cli import _parse_config, _shapes
from gemm_course.measure import bench, stopping
from gemm_course.runtime import ladder, run
from gemm_course.runtime.problem import GemmProblem, make_inputs, reference, relative_error

import kernel_copies


def variant(spec: str):
    """(step, {field: value}) for ``spec``: the fields typed and checked like the CLI's ``--config``."""
    package, _, rest = spec.rpartition("@")
    key, _, fields = rest.partition(":")
    step = ladder.get(key)
    if package:
        step = kernel_copies.step_from(package, step)
    items = fields.split(",") if fields else []
    parsed = _parse_config(step, items)
    return step, {item.partition("=")[0]: getattr(parsed, item.partition("=")[0]) for item in items}


def config_on(step, changes: dict, problem):
    """The step's config for ``problem`` with ``changes``; exits if the step refuses the result."""
    config = dataclasses.replace(step.config_for(problem), **changes)
    ok, why = step.check_config(config)
    if not ok:
        sys.exit(f"{step.key} with {changes} on {problem.label}: {why}")
    return config


def checked_launches(variants: dict, problem, a, b, c, wrong: list) -> dict:
    """{spec: launcher} for each variant on these operands that matches float32 (NaN-poisoned output);
    each one that does not is appended to ``wrong`` as (spec, shape, error) and left out."""
    ref = reference(a, b)
    launches = {}
    for spec, (step, changes) in variants.items():
        config = config_on(step, changes, problem)
        out = torch.full_like(c, float("nan"))
        launch = run.prepare(step, a, b, out, config)
        launch()
        torch.cuda.synchronize()
        err = relative_error(out, ref)
        if not err < run.TOLERANCE:  # never timed; the other variants go on
            print(f"WRONG OUTPUT, not timed: {spec} on {problem.label}: relative error {err:.3g}", flush=True)
            wrong.append((spec, problem.label, err))
            continue
        launches[spec] = launch
    return launches


def measure_shape(problem, variants: dict, args, rows: list, wrong: list):
    """Check every variant on ``problem``, then time the right ones and cuBLAS in one ``compare``;
    append a row per provider to ``rows``."""
    a, b, c = make_inputs(problem, "cuda", 0)
    providers = checked_launches(variants, problem, a, b, c, wrong)
    configs = {spec: dataclasses.asdict(launch.config) for spec, launch in providers.items()}
    c_ref = torch.empty_like(c)
    if args.rotate:  # operand sets in turn, so no launch finds its operands in L2 (bench.Rotation)
        providers, _ = bench.rotated_providers(providers, problem, a, b, c_ref)
    else:
        providers["cublas"] = lambda: torch.mm(a, b.t(), out=c_ref)
    timed = bench.compare(providers, repeats=args.repeats, rounds=args.rounds)
    cublas = bench.summarize(timed["cublas"]["each"])["median"]
    for spec, t in timed.items():
        med = bench.summarize(t["each"])["median"]
        rows.append({"shape": problem.label, "variant": spec, "median_ms": med, "tflops": bench.tflops(problem, med),
                     "tb_s": problem.min_bytes / (med * 1e-3) / 1e12, "rotate": args.rotate,
                     "ratio_to_cublas": cublas / med, "seed_tflops": bench.tflops(problem, t["seed_mean"]),
                     "each_ms": t["each"], "config": configs.get(spec)})
    print(f"{problem.label} done", flush=True)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("variants", nargs="+")
    p.add_argument("--shapes", nargs="+", default=["4096", "8192"])
    p.add_argument("--repeats", type=int, default=50)
    p.add_argument("--rounds", type=int, default=8)
    p.add_argument("--out", default=None)
    p.add_argument("--rotate", action="store_true", help="operand sets in turn, none in L2 (decode GEMMs)")
    p.add_argument("--what", default="", help="what the run compares, in words (kept in the JSON)")
    args = p.parse_args(argv)
    command = bench.provenance_command("python3 scripts/gpu_tune.py", sys.argv[1:] if argv is None else argv)
    variants = {spec: variant(spec) for spec in args.variants}
    rows, wrong = [], []
    with stopping.until_stopped() as stopped:
        for m, n, k in _shapes(args.shapes):
            measure_shape(GemmProblem(m, n, k), variants, args, rows, wrong)
    if stopped:
        print(f"stopped ({stopped[0]}): writing the {len(rows)} rows measured so far", flush=True)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "tune.json"), "w") as f:
            json.dump({"env": bench.environment(), "rows": rows, "wrong": wrong, "stopped": bool(stopped),
                       "command": command, "what": args.what,
                       "date": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime())}, f)
    print(f"{'shape':<18} {'variant':<40} {'TFLOP/s':>8} {'TB/s':>6} {'x cuBLAS':>9} {'seed':>7}")
    for r in rows:
        print(f"{r['shape']:<18} {r['variant']:<40} {r['tflops']:8.1f} {r['tb_s']:6.2f} {r['ratio_to_cublas']:9.3f} "
              f"{r['seed_tflops']:7.1f}")
    return 1 if wrong or stopped else 0


if __name__ == "__main__":
    sys.exit(main())
