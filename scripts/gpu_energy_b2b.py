"""The final Hopper step over the broad sweep, in both shape orders, with energy per GEMM and
back-to-back times beside the per-launch protocol (GPU; about 7 minutes on an H200).

    python3 scripts/gpu_energy_b2b.py --out OUT                  # both orders, the defaults below
    python3 scripts/gpu_energy_b2b.py --estimate-only            # the estimate only (no GPU needed)
    python3 scripts/gpu_energy_b2b.py --out OUT --orders forward --energy-seconds 1 --energy-rounds 3

Each shape runs the tile the step picks for it (no config given), through ``bench.bench_step``:
the per-launch protocol (``--rounds`` x ``--repeats``, fewer than ``scripts/gpu_broad_sweep.sh``'s
5 x 100 so that both orders fit in one run; no Triton), then the step and cuBLAS back to back with
the host in the loop (``--b2b-seconds`` of launches, ``--b2b-rounds``), the same launches in a CUDA
graph (unless ``--no-graph``), and each provider's energy per GEMM from NVML's total-energy
counter (``--energy-seconds`` per block, ``--energy-rounds``; providers alternate). The host's time
per launch in parts (``bench.host_launch_breakdown``) is taken on the ``--host-breakdown``
smallest shapes of the first order (their kernels are short, so the launches it queues cost little
GPU time).

Before measuring it prints an estimate (per-launch times of the committed broad sweep, or a
650 TFLOP/s model where there is none; compiles at ``COMPILE_S`` per tile config) and warns when it
exceeds ``--budget-s``; during the run a shape whose estimate would end past ``--deadline-s`` is not
started, and the records measured so far are written (also on SIGTERM). Records go through
``bench.write_records`` into OUT, one file per order, tagged ``broad_sweep_energy`` and
``broad_sweep_energy_reversed`` (``records.ENERGY_SWEEP_ORDERS``): copy them to
``results/nvidia-h200/`` and run ``python -m gemm_course.measure.notes``. They do not replace the broad
sweep's own files (``records.broad_sweep`` reads ``*_broad_sweep.json``), but they are bench
records of the default step like any other, so ``records.latest`` sees them.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import sys
import time

from gemm_course.measure import bench, records
from gemm_course.runtime import ladder
from gemm_course.runtime.problem import GemmProblem

COMPILE_S = 10.0  # seconds per distinct tile config the step compiles (one process: each once)
MODEL_TFLOPS = 650.0  # per-launch time of a shape no committed record has
TAGS = {"forward": "broad_sweep_energy", "reversed": "broad_sweep_energy_reversed"}
assert all(records.ENERGY_SWEEP_ORDERS[o] == f"_{t}.json" for o, t in TAGS.items())


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", help="folder for the records files (required unless --estimate-only)")
    p.add_argument("--step", default=os.environ.get("FINAL_STEP") or ladder.final("sm90").key)
    p.add_argument("--orders", nargs="+", default=["forward", "reversed"], choices=list(TAGS))
    p.add_argument("--shapes", nargs="*", default=None, help="MxNxK of the broad sweep to run (default: all 46)")
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--repeats", type=int, default=50)
    p.add_argument("--seed-launches", type=int, default=100)
    p.add_argument("--b2b-seconds", type=float, default=0.05, help="GPU seconds of one back-to-back block (0: none)")
    p.add_argument("--b2b-rounds", type=int, default=2)
    p.add_argument("--no-graph", action="store_true", help="no CUDA-graph back-to-back blocks")
    p.add_argument("--energy-seconds", type=float, default=0.5, help="seconds of one energy block (0: no energy)")
    p.add_argument("--energy-rounds", type=int, default=2)
    p.add_argument("--host-breakdown", type=int, default=3, help="shapes of the first order with the host-time breakdown")
    p.add_argument("--budget-s", type=float, default=480.0, help="warn when the estimate exceeds this")
    p.add_argument("--deadline-s", type=float, default=540.0, help="start no shape that would end after this")
    p.add_argument("--estimate-only", action="store_true")
    args = p.parse_args(argv)
    if not args.out and not args.estimate_only:
        p.error("--out is required")
    return args


def sweep_shapes(only=None) -> list:
    shapes = [s for group in bench.broad_sweep_shapes().values() for s in group]
    if only:
        wanted = {tuple(int(x) for x in s.split("x")) for s in only}
        unknown = wanted - set(shapes)
        if unknown:
            raise SystemExit(f"not broad-sweep shapes: {sorted(unknown)}")
        shapes = [s for s in shapes if s in wanted]
    return shapes


def order_shapes(shapes, order) -> list:
    return list(shapes[::-1] if order == "reversed" else shapes)


def per_launch_ms(step: str, results_dir=None) -> dict:
    """{shape: (step ms, cuBLAS ms)} from the committed broad sweep's per-launch medians."""
    try:
        recs = records.load_records(results_dir)
    except Exception:
        return {}
    return {records.shape_of(r): (r["time_ms"]["median"], r["cublas_time_ms"]["median"])
            for r in records.broad_sweep(recs, step, "forward") if r.get("time_ms") and r.get("cublas_time_ms")}


def shape_seconds(args, shape, known: dict) -> float:
    """The estimate of one shape's bench_step with this run's settings."""
    model = 2.0 * shape[0] * shape[1] * shape[2] / (MODEL_TFLOPS * 1e12) * 1e3
    step_ms, cublas_ms = known.get(tuple(shape), (model, model))
    return bench.bench_seconds(step_ms, cublas_ms, args.warmup, args.repeats, args.rounds, args.seed_launches,
                               args.b2b_seconds, args.b2b_rounds, not args.no_graph, args.energy_seconds,
                               args.energy_rounds)


def configs_to_compile(step: str, shapes) -> int:
    """Distinct configs the step picks over ``shapes`` (each compiles once per process)."""
    try:
        s = ladder.get(step)
        return len({s.config_for(GemmProblem(*shape)) for shape in shapes})
    except Exception:
        return len(shapes)


def estimate(args, shapes, known: dict) -> dict:
    measuring = sum(shape_seconds(args, s, known) for s in shapes) * len(args.orders)
    compiling = COMPILE_S * configs_to_compile(args.step, shapes)
    return {"measuring_s": measuring, "compiling_s": compiling, "total_s": measuring + compiling,
            "known": sum(tuple(s) in known for s in shapes), "shapes": len(shapes)}


def breakdown_shapes(shapes, count: int) -> set:
    return set(sorted(shapes, key=lambda s: s[0] * s[1] * s[2])[:count])


def summary_lines(recs: list) -> list:
    """The run's energy table by class (records.energy_classes), one line per class."""
    out = []
    for name, c in records.energy_classes(recs).items():
        def f(x):
            return "-" if x is None else f"{x:.3f}"

        out.append(f"{name:<16} {c['shapes']:>3}/{c['records']:<3} energy step/cuBLAS {f(c['energy_geomean'])} "
                   f"(clock {f(c['clock_geomean'])})  per launch {f(c['time_geomean'])}  back to back "
                   f"{f(c['b2b_geomean'])}  graph {f(c['graph_geomean'])}")
    return out


def command_line(argv) -> str:
    argv = list(argv)
    if "--out" in argv:  # where the files went is not provenance
        i = argv.index("--out")
        argv = argv[:i + 1] + ["$OUT"] + argv[i + 2:]
    return "python3 scripts/gpu_energy_b2b.py " + " ".join(a if a == "$OUT" else shlex.quote(a) for a in argv)


def describe(rec: dict, i: int, total: int, t0: float) -> str:
    def pair(field, scale=1.0, fmt=".2f"):
        v = rec.get(field) or {}
        return "/".join("-" if v.get(k) is None else format(v[k] * scale, fmt) for k in ("step", "cublas"))

    e, b, g = records.energy_ratio(rec), records.b2b_ratio(rec), records.b2b_ratio(rec, "b2b_graph_ms")
    label = GemmProblem(*records.shape_of(rec)).label
    return (f"[{i}/{total}] {label:<18} {rec['tflops']['median']:6.1f} TFLOP/s ratio {rec['ratio_to_cublas']:.3f}  "
            f"mJ {pair('energy_j_per_gemm', 1e3)} ({'-' if e is None else f'{e:.3f}'})  "
            f"MHz {pair('sm_clock_mhz_median', 1.0, '.0f')}  b2b ms {pair('b2b_ms', 1.0, '.4f')} "
            f"({'-' if b is None else f'{b:.3f}'})  graph {'-' if g is None else f'{g:.3f}'}  "
            f"({time.time() - t0:.0f} s)")


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse(argv)
    shapes = sweep_shapes(args.shapes)
    known = per_launch_ms(args.step)
    est = estimate(args, shapes, known)
    print(f"estimate: {est['shapes']} shapes x {len(args.orders)} order(s) ({est['known']} with committed per-launch "
          f"times): {est['measuring_s']:.0f} s measuring + {est['compiling_s']:.0f} s compiling = {est['total_s']:.0f} s "
          f"(budget {args.budget_s:.0f} s, deadline {args.deadline_s:.0f} s)", flush=True)
    if est["total_s"] > args.budget_s:
        print(f"warning: the estimate exceeds the budget; lower --energy-seconds ({args.energy_seconds}), "
              f"--energy-rounds ({args.energy_rounds}), --rounds/--repeats ({args.rounds}x{args.repeats}) or run "
              "one --orders at a time", flush=True)
    if args.estimate_only:
        return 0

    env = bench.environment()
    meter = bench.open_meter(0) if args.energy_seconds > 0 else (None, None)
    print("energy:", "NVML total-energy counter" if meter[0] else f"none ({meter[1]})", flush=True)
    command = command_line(argv)
    t0 = time.time()
    written, skipped = [], []
    breakdown = breakdown_shapes(shapes, args.host_breakdown)

    def stop(signum, frame):
        raise SystemExit(f"signal {signum}: writing what was measured")

    signal.signal(signal.SIGTERM, stop)
    for n, order in enumerate(args.orders):
        recs = []
        todo = order_shapes(shapes, order)
        try:
            for i, shape in enumerate(todo, 1):
                if time.time() - t0 + shape_seconds(args, shape, known) > args.deadline_s:
                    skipped += [(order, s) for s in todo[i - 1:]]
                    print(f"deadline: {len(todo) - i + 1} shape(s) of {order} not started", flush=True)
                    break
                rec = bench.bench_step(args.step, GemmProblem(*shape), None, args.warmup, args.repeats, args.rounds,
                                       command=command, env=env, seed_launches=args.seed_launches,
                                       b2b_seconds=args.b2b_seconds, b2b_rounds=args.b2b_rounds,
                                       graph=not args.no_graph, energy_seconds=args.energy_seconds,
                                       energy_rounds=args.energy_rounds, meter=meter,
                                       host_breakdown=n == 0 and tuple(shape) in breakdown)
                recs.append(rec)
                print(describe(rec, i, len(todo), t0), flush=True)
        finally:
            if recs:
                path = bench.write_records(recs, TAGS[order], args.out)
                written.append(path)
                print(f"wrote {len(recs)} records to {path}", flush=True)
        print(f"\n{order}, by class (this run's records):")
        print("\n".join(summary_lines(recs)), flush=True)
        if skipped:
            break
    print("\nhost time per call, us (bench.host_launch_breakdown):")
    for path in written:
        with open(path) as f:
            for r in json.load(f)["records"]:
                h = r.get("host_launch_breakdown_us")
                if h:
                    parts = "  ".join(f"{k} {h[k]:.1f}" for k in ("launcher", "torch_mm", "call_arguments",
                                                                   "execution_args", "prebuilt") if h.get(k) is not None)
                    print(f"  {GemmProblem(*records.shape_of(r)).label:<18} {parts}  prebuilt rel. error "
                          f"{h.get('prebuilt_rel_error')}  {h.get('note') or ''}")
    print(f"done in {time.time() - t0:.0f} s; {len(skipped)} shape(s) skipped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
