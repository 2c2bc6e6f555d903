"""Clock, power and work per clock of a step and of cuBLAS, each run alone for a while (GPU).

    python3 scripts/gpu_clocks.py sm90/10 "sm90/10:stages=4" --shapes 4096 8192x4096x28672 --seconds 2 --out OUT

A development tool, not part of the course. Under a sustained GEMM the H200 runs at its power
limit, so a kernel's throughput is (work per clock) x (clock), and the clock is what the power
limit leaves. Each provider runs back to back for ``--seconds`` (after a warm-up of the same
length) while ``nvidia-smi`` samples the SM clock and the board power every 50 ms; the script
prints the medians, TFLOP/s, FLOP per SM clock and joules per TFLOP, and splits each variant's
ratio to cuBLAS into a clock part and a per-clock part. Variants are ``gpu_tune.py``'s
(``STEP[:FIELD=VALUE,...]``). Providers run in the order variants, cuBLAS, variants reversed, so a
drift in temperature shows as a difference between a variant's two runs (the split uses their mean).
Writes one record of kind ``clocks`` per provider run (``bench.write_records``:
``results/<gpu>/<date>_clocks.json``, or under --out), which ``viz.power_limit_bars`` draws.
"""

import argparse
import dataclasses
import datetime
import statistics
import subprocess
import sys
import time

import torch

from gemm_course.cli import _shapes
from gemm_course.measure import bench
from gemm_course.runtime.problem import GemmProblem, make_inputs

from gpu_tune import checked_launches, variant


def sampled_run(fn, seconds: float) -> dict:
    """Run fn back to back for `seconds`, sampling clocks and power; return medians and launches/s."""
    fn()
    torch.cuda.synchronize()
    smi = subprocess.Popen(
        ["nvidia-smi", "--query-gpu=clocks.sm,power.draw", "--format=csv,noheader,nounits", "-i", "0", "-lms", "50"],
        stdout=subprocess.PIPE, text=True,
    )
    launches, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for _ in range(20):
            fn()
        launches += 20
        torch.cuda.synchronize()
    elapsed = time.perf_counter() - start
    smi.terminate()
    out, _ = smi.communicate()
    samples = [line.split(",") for line in out.strip().splitlines() if line.count(",") == 1]
    mhz = [float(s[0]) for s in samples]
    watts = [float(s[1]) for s in samples]
    return {"seconds_per_launch": elapsed / launches, "sm_mhz": statistics.median(mhz), "power_w": statistics.median(watts),
            "samples": len(samples)}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("variants", nargs="+")
    p.add_argument("--shapes", nargs="+", default=["4096", "8192x4096x28672"])
    p.add_argument("--seconds", type=float, default=2.0)
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    variants = {spec: variant(spec) for spec in args.variants}
    env = bench.environment()
    command = " ".join(["python3", "scripts/gpu_clocks.py"] + (argv if argv is not None else sys.argv[1:]))
    date = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    rows = []
    for m, n, k in _shapes(args.shapes):
        problem = GemmProblem(m, n, k)
        a, b, c = make_inputs(problem, "cuda", 0)
        launches = list(checked_launches(variants, problem, a, b, c).items())
        c_ref = torch.empty_like(c)
        providers = launches + [("cublas", lambda: torch.mm(a, b.t(), out=c_ref))] + launches[::-1]
        for name, fn in providers:
            sampled_run(fn, args.seconds)  # warm-up: reach the power limit's steady clock
            r = sampled_run(fn, args.seconds)
            flops = 2.0 * m * n * k
            config = variants[name][1] if name in variants else None
            r.update(shape=problem.label, provider=name, tflops=flops / r["seconds_per_launch"] / 1e12,
                     shape_mnk={"m": m, "n": n, "k": k}, config=dataclasses.asdict(config) if config else None)
            sms = torch.cuda.get_device_properties(0).multi_processor_count
            r["flop_per_sm_clock"] = flops / r["seconds_per_launch"] / (r["sm_mhz"] * 1e6) / sms
            r["joule_per_tflop"] = r["power_w"] / r["tflops"]
            rows.append(r)
        print(f"{problem.label} done", flush=True)
    records = [{**env, "kind": "clocks", "schema": 1, "date": date, "command": command, "seconds": args.seconds,
                "title": "sustained clock, power and work per clock", "step": r["provider"], "shape": r["shape_mnk"],
                **{key: r[key] for key in ("config", "tflops", "sm_mhz", "power_w", "samples", "seconds_per_launch",
                                           "flop_per_sm_clock", "joule_per_tflop")}} for r in rows]
    print("wrote", bench.write_records(records, "clocks", args.out))
    print(f"{'shape':<18} {'provider':<28} {'TFLOP/s':>8} {'MHz':>6} {'W':>6} {'FLOP/clk/SM':>11} {'J/TFLOP':>8}")
    for r in rows:
        print(f"{r['shape']:<18} {r['provider']:<28} {r['tflops']:8.1f} {r['sm_mhz']:6.0f} {r['power_w']:6.1f} "
              f"{r['flop_per_sm_clock']:11.0f} {r['joule_per_tflop']:8.3f}")
    for shape in dict.fromkeys(r["shape"] for r in rows):
        cb = next(r for r in rows if r["shape"] == shape and r["provider"] == "cublas")
        for spec in args.variants:
            s = [r for r in rows if r["shape"] == shape and r["provider"] == spec]
            tf = statistics.mean(r["tflops"] for r in s)
            mhz = statistics.mean(r["sm_mhz"] for r in s)
            print(f"{shape:<18} {spec:<28} ratio {tf / cb['tflops']:.3f} = clock {mhz / cb['sm_mhz']:.3f} x per clock "
                  f"{(tf / mhz) / (cb['tflops'] / cb['sm_mhz']):.3f}")


if __name__ == "__main__":
    main()
