"""Decode-sized GEMMs inside CUDA graphs: a step against cuBLAS with no host in the loop.

A serving engine captures its decode step in a CUDA graph, and every layer has its own weights: so
each provider here runs ``launches`` GEMMs captured in one graph, cycling through enough operand
sets that none sits in L2 (``bench.rotation_sets``), and the time per GEMM is CUDA events around
graph replays over the launches. Step and cuBLAS (``torch.mm`` into a preallocated output)
alternate, in the opposite order every other round; medians over the rounds. Each shape's first
operand set is checked against the float32 reference first (NaN-poisoned output); a wrong output is
reported and never timed. Stopped by SIGTERM (``timeout``), the run writes the records it has.

    python3 scripts/gpu_decode_graph.py --out OUT --steps sm90/12 sm90/11 --shapes 1x4096x4096 16x4096x14336

A step may name config fields to change from its choice, as ``gpu_tune.py`` takes them
(``sm90/12:prefetch_w=8``); an A/B of such variants passes ``--kind decode_graph_ab`` so that the
chapter's figures, which read kind ``decode_graph``, keep to the runs of the steps' own choices.

Records (kind ``decode_graph``): per step and shape, both medians, the ratio, the fewest bytes over
each time and their fractions of the copy bandwidth this run measured (``bench.copy_tb_s``).
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time

import torch
from cuda.bindings import driver as cuda

from gemm_course.measure import bench, records, stopping
from gemm_course.runtime import run
from gemm_course.runtime.problem import GemmProblem, make_inputs, reference, relative_error

import gpu_tune


def graph_ms(calls: list, launches: int, replays: int) -> float:
    """ms per call of ``launches`` calls captured in one graph, cycling through ``calls`` (each
    ``fn(stream)``, as ``bench.capture_graph`` takes them): ``bench.graph_back_to_back``."""
    return bench.graph_back_to_back(lambda stream: bench.Rotation([fn(stream) for fn in calls]), launches, replays)


def step_config(spec: str, problem: GemmProblem):
    """(step, config) for ``spec`` as ``gpu_tune.py`` reads a variant: ``key`` (the step's choice for
    ``problem``) or ``key:field=value,...`` (those fields changed, typed and checked)."""
    step, changes = gpu_tune.variant(spec)
    return step, gpu_tune.config_on(step, changes, problem)


def measure(spec: str, problem: GemmProblem, rounds: int, launches: int, replays: int, copy: float, seed: int,
            kind: str = "decode_graph") -> dict:
    step, config = step_config(spec, problem)
    sets = bench.rotation_sets(problem.min_bytes, torch.cuda.get_device_properties(0).L2_cache_size)
    operands = [make_inputs(problem, "cuda", seed + i) for i in range(sets)]
    first = run.prepare(step, *operands[0], config)
    workspace = run.allocate_workspace(step, first.config, "cuda")
    launchers = [run.prepare(step, x, w, y, first.config, workspace=workspace) for x, w, y in operands]
    x, w, y = operands[0]
    y.fill_(float("nan"))
    launchers[0]()
    torch.cuda.synchronize()
    err = relative_error(y, reference(x, w))
    if not err < run.TOLERANCE:  # a wrong kernel is never timed
        raise bench.WrongOutput(f"{spec} {problem.label}: relative error {err:.3g} against float32")
    outs = [torch.empty_like(y) for _ in operands]

    def ours(launch):
        return lambda stream: dataclasses.replace(launch, stream=cuda.CUstream(stream.cuda_stream))

    def theirs(x, w, out):
        return lambda stream: (lambda: torch.mm(x, w.t(), out=out))

    providers = {"step": [ours(lc) for lc in launchers],
                 "cublas": [theirs(x, w, o) for (x, w, _), o in zip(operands, outs)]}
    times = {name: [] for name in providers}
    for r in range(rounds):
        for name in (list(providers) if r % 2 == 0 else list(providers)[::-1]):
            times[name].append(graph_ms(providers[name], launches, replays))
    step_ms, cublas_ms = statistics.median(times["step"]), statistics.median(times["cublas"])
    rec = {
        "kind": kind, "step": step.key, "variant": spec, "config": dataclasses.asdict(first.config),
        "shape": {"m": problem.m, "n": problem.n, "k": problem.k}, "rel_error": err,
        "step_ms": step_ms, "cublas_ms": cublas_ms, "ratio": cublas_ms / step_ms,
        "step_ms_rounds": times["step"], "cublas_ms_rounds": times["cublas"],
        "bandwidth": bench.bandwidth_fields(problem, step_ms, cublas_ms, torch.cuda.get_device_name(0), copy),
        "protocol": {"sets": sets, "launches_per_graph": launches, "replays": replays, "rounds": rounds,
                     "how": "each provider's launches captured in one CUDA graph, cycling through operand sets; "
                            "events around replays; providers alternate, reversed every other round; medians"},
        "date": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()),
        "command": bench.provenance_command("python3 scripts/gpu_decode_graph.py", sys.argv[1:]),
    }
    rec.update(bench.environment())
    return rec


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--steps", nargs="+", default=["sm90/12"])
    p.add_argument("--shapes", nargs="+", required=True)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--launches", type=int, default=200)
    p.add_argument("--replays", type=int, default=5)
    p.add_argument("--tag", default="decode_graph")
    p.add_argument("--kind", default="decode_graph", help="the records' kind (decode_graph_ab for an A/B of variants)")
    args = p.parse_args(argv)
    copy = bench.copy_tb_s()
    print(f"copy bandwidth {copy:.2f} TB/s on {torch.cuda.get_device_name(0)}", flush=True)
    out, wrong = [], []
    with stopping.until_stopped() as stopped:
        for text in args.shapes:
            problem = GemmProblem.parse(text)
            for key in args.steps:
                try:
                    rec = measure(key, problem, args.rounds, args.launches, args.replays, copy,
                                  seed=(len(out) + len(wrong)) * 100, kind=args.kind)
                except bench.WrongOutput as e:
                    print(f"WRONG OUTPUT, not recorded: {e}", flush=True)
                    wrong.append(str(e))
                    continue
                out.append(rec)
                bw = rec["bandwidth"]
                print(f"{key:22s} {problem.label:>18s} err {rec['rel_error']:.1e} step {rec['step_ms'] * 1e3:8.2f} us "
                      f"cuBLAS {rec['cublas_ms'] * 1e3:8.2f} us  ratio {rec['ratio']:.3f}  "
                      f"{bw['tb_s']:.2f} TB/s ({bw['fraction_of_copy']:.0%} of copy; "
                      f"cuBLAS {bw['cublas_fraction_of_copy']:.0%})", flush=True)
    path = records.write_records(out, args.tag, args.out) if out else None  # first: the output may be gone
    if stopped:
        stopping.say(f"stopped ({stopped[0]}) after {len(out)} records: written")
    if path:
        stopping.say(path)
    return 1 if wrong or stopped or not out else 0


if __name__ == "__main__":
    sys.exit(main())
