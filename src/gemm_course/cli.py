"""``gemm-course`` / ``python -m gemm_course``: doctor, list, inspect, source, diff, check, bench."""

from __future__ import annotations

import argparse
import os
import sys
import time

from .runtime import arch, ladder
from .runtime.problem import GemmInputError


def _parse_config(step, items):
    """``tile_n=128 stages=4`` -> the step's Config with those fields changed (``Step.parse_config``),
    or exit with its one-line error (for scripts; the subcommands let :func:`main` report it)."""
    try:
        return step.parse_config(items)
    except ValueError as e:
        raise SystemExit(str(e)) from None


def _config(step, items):
    """The ``--config`` items as the step's Config; a ``ConfigError`` (exit 2 in :func:`main`) if refused."""
    return step.parse_config(items, option="--config")


def _shapes(texts):
    from .runtime.problem import GemmProblem

    out = []
    for t in texts:
        for part in t.split():
            p = GemmProblem.parse(part)
            out.append((p.m, p.n, p.k))
    return out


def torch_arch_gap(machine, arch_list=None) -> str:
    """A warning when this PyTorch has no kernels for the GPU's architecture (cuBLAS through
    ``torch.mm`` and the float32 reference would fail there), else ''. ``arch_list`` defaults to
    ``torch.cuda.get_arch_list()``."""
    if not machine.has_gpu or not machine.capability:
        return ""
    if arch_list is None:
        import torch

        arch_list = torch.cuda.get_arch_list()
    major, minor = machine.capability
    wanted = f"sm_{major}{minor}"
    if any(a.startswith(wanted) for a in arch_list):
        return ""
    return (f"this PyTorch was built for {', '.join(arch_list) or 'no GPU architecture'}, not {wanted}: torch.mm "
            f"(cuBLAS) and the reference will fail here; install a PyTorch built for CUDA 12.8 or newer")


def cmd_doctor(args):
    import platform

    m = arch.machine()
    print(f"python      {platform.python_version()}")
    for mod in ("cutlass", "torch", "numpy", "matplotlib", "ipywidgets"):
        try:
            version = __import__(mod).__version__
        except Exception as e:  # report, don't fail: doctor is for diagnosing
            version = f"missing ({type(e).__name__})"
        print(f"{mod:<11} {version}")
    from .teaching import inspect as insp

    for t in ("nvdisasm", "cuobjdump"):
        try:
            print(f"{t:<11} {insp.tool(t)}")
        except FileNotFoundError as e:
            print(f"{t:<11} MISSING: {e}")
    print(f"machine     {m.describe()}")
    gap = torch_arch_gap(m)
    if gap:
        print(f"WARNING     {gap}")
    print()
    print(f"{'step':<9} {'here':<22} title")
    for s in ladder.steps():
        if m.target and (s.any_shape or s.target == m.target):
            where = "compile + run"
        else:
            where = f"compile only ({s.target})"
        print(f"{s.key:<9} {where:<22} {s.title}")  # the title last and whole
    return 0


def cmd_list(args):
    for s in ladder.steps(args.arch):
        print(f"{s.key:<9} {s.title}")
        print(f"{'':<9} adds:   {s.adds}")
        print(f"{'':<9} shapes: {s.shapes}")
        print(f"{'':<9} config: {s.default}")
        if getattr(s.load(), "config_for", None):
            print(f"{'':<9} per shape: without --config, the tile, stages and cluster come from the shape "
                  f"({per_shape_rule(s)})")
    return 0


def per_shape_rule(step) -> str:
    """Where the choice per shape of a step with a ``config_for`` comes from, in ``list``'s words."""
    from .rules import decode_rule

    if step.roofline == "memory":  # step 12: its own swap-AB rule, step 11's choice for larger M
        return f"{step.module_name}.config_for up to M = {step.load().SWAP_MAX_M}, step 11's choice above"
    if step.arch == "sm90":
        return "gemm_course.rules.tile_rule"
    return f"gemm_course.rules.decode_rule, for M <= {decode_rule.DECODE_MAX_M}"


def cmd_inspect(args):
    from .teaching import inspect as insp

    step = _step(args.step)
    config = _config(step, args.config)
    if args.arch and not step.any_shape and args.arch != step.target:
        # refused here: the compiler's own error for a foreign target is a page of ANSI-coloured MLIR
        twin = ladder.ladder.get(arch.TARGET_ARCH[args.arch], {}).get(step.number)
        use = f"use its twin, gemm-course inspect {twin.key}" if twin else f"{args.arch} has no step {step.number}"
        raise GemmInputError(
            f"{step.key} is built for {ladder.ARCH_NAMES[step.arch]}, not {args.arch}: {use}; or leave out --arch"
        )
    targets = [args.arch] if args.arch else [step.target] if not step.any_shape else ["sm_100a", "sm_90a"]
    for target in targets:
        art = arch.compile_step(step, config, target)
        rep = insp.report(art)
        print(rep)
        print(f"  compiled in {art.seconds:.2f} s; kernels: {', '.join(n[:60] + '...' for n in art.kernel_names)}")
        if args.sass:
            print(insp.sass(art.cubin))
        if args.ptx:
            print(art.ptx)
        print()
    return 0


def cmd_check(args):
    from .runtime import run

    step = _step(args.step)
    config = _config(step, args.config) if args.config else None  # None: the step's choice per shape
    shapes = _shapes(args.shapes) if args.shapes else None
    run.require_gpu_for(step)
    shapes = shapes or run.shapes_for(step, config, count=args.count)
    results = run.check(step, shapes, config, seed=args.seed)
    for r in results:
        print(r)
    bad = [r for r in results if not r.ok]
    print(f"{len(results) - len(bad)} passed, {len(bad)} failed")
    return 1 if bad else 0


def cmd_bench(args):
    from .measure import bench, stopping
    from .runtime import run
    from .runtime.problem import GemmProblem

    steps = [_step(s) for s in args.steps]
    # None: the step's choice per shape. Read before the GPU check, so a typo is refused anywhere
    configs = {step.key: _config(step, args.config) if args.config else None for step in steps}
    shapes = _shapes(args.shapes)
    for step in steps:
        run.require_gpu_for(step)
    command = bench.provenance_command("gemm-course", sys.argv[1:])
    env = bench.environment()
    copy = bench.copy_tb_s() if args.rotate else None  # the memory ceiling of this run, beside its records
    records, wrong = [], []
    jobs = [(s, sh) for s in steps for sh in shapes]
    t0 = time.time()
    with stopping.until_stopped() as stopped:
        for i, (step, shape) in enumerate(jobs, 1):
            config = configs[step.key]
            problem = GemmProblem(*shape)
            ok, why = step.can_implement(problem, config)
            if not ok:
                print(f"[{i}/{len(jobs)}] {step.key} {problem.label}: skipped ({why})", file=sys.stderr)
                continue
            try:
                rec = bench.bench_step(step, problem, config, args.warmup, args.repeats, args.rounds, command=command,
                                       env=env, seed_launches=args.seed_launches, peers=args.peers, rotate=args.rotate,
                                       copy=copy)
            except bench.WrongOutput as e:
                print(f"[{i}/{len(jobs)}] WRONG OUTPUT, not recorded: {e}", file=sys.stderr, flush=True)
                wrong.append(e)
                continue
            records.append(rec)
            _print_bench_line(i, len(jobs), step, problem, rec, t0)
    path = bench.write_records(records, args.tag or "bench", args.out) if records and not args.no_write else None
    if stopped:  # said after the records are written: a stopped run's output may be gone (stopping.say)
        stopping.say(f"stopped ({stopped[0]}) after {len(records)} of {len(jobs)} measurements: the records measured so "
                     f"far are kept", file=sys.stderr)
    if not records:
        stopping.say("nothing measured")
        return 1
    if path:
        print(f"wrote {len(records)} records to {path}")
    print()
    print(f"{'step':<8} {'shape':<18} {'TFLOP/s':>8} {'cuBLAS':>8} {'ratio':>6} {'seed-protocol':>13} {'rel.err':>8}")
    for r in records:
        s = r["shape"]
        print(
            f"{r['step']:<8} {s['m']}x{s['n']}x{s['k']:<8} {r['tflops']['median']:8.1f} {r['cublas_tflops']['median']:8.1f} "
            f"{r['ratio_to_cublas']:6.3f} {r['tflops']['seed_mean']:13.1f} {r['rel_error']:8.1e}"
        )
    if wrong:
        print(f"{len(wrong)} measurement(s) refused for a wrong output (above): not recorded")
    return 1 if wrong or stopped else 0


def _print_bench_line(i, total, step, problem, rec, t0):
    print(
        f"[{i}/{total}] {step.key:<8} {problem.label:<18} {rec['tflops']['median']:7.1f} TFLOP/s  "
        f"cuBLAS {rec['cublas_tflops']['median']:7.1f}  ratio {rec['ratio_to_cublas']:.3f}  "
        f"err {rec['rel_error']:.1e}  tile {rec['config'].get('tile_m')}x{rec['config'].get('tile_n')}  "
        f"{rec['bandwidth']['tb_s']:.2f} TB/s (cuBLAS {rec['bandwidth']['cublas_tb_s']:.2f})  "
        f"({time.time() - t0:.0f} s)"
        + "".join(f"  {name} {p['tflops']['median']:.1f} ({p['ratio_to_cublas']:.3f})"
                  for name, p in rec.get("peers", {}).items()),
        file=sys.stderr,
        flush=True,
    )


def cmd_source(args):
    from .teaching import source

    print(source.flatten(_step(args.step)), end="")
    return 0


def cmd_diff(args):
    from .teaching import source

    step = _step(args.step)
    added, removed = source.changed_lines(step)
    print(f"# {step.key} against {getattr(source.parent(step), 'key', 'nothing')}: +{added} -{removed} lines")
    print(source.diff(step, context=args.context), end="")
    return 0


def build_parser():
    p = argparse.ArgumentParser(
        prog="gemm-course", description=__doc__,
        epilog="On a B200: make b200 OUT=folder (scripts/b200_validate.sh; python -m gemm_course.measure.b200 --help) "
               "validates and times the Blackwell ladder and writes the records the book reads.")
    sub = p.add_subparsers(dest="command", required=True)

    step_help = "e.g. sm100/2 or sm90/3"
    config_help = "config fields to change, e.g. tile_n=128 (default: the step's config"
    d = sub.add_parser("doctor", help="machine, versions, and which steps run or only compile here")
    d.set_defaults(fn=cmd_doctor)

    ls = sub.add_parser("list", help="the ladder")
    ls.add_argument("--arch", choices=["sm90", "sm100"], help="only this architecture's steps (default: both)")
    ls.set_defaults(fn=cmd_list)

    i = sub.add_parser("inspect", help="compile a step (no GPU needed) and show resources and instruction mix")
    i.add_argument("step", help=step_help)
    i.add_argument("--arch", choices=list(arch.TARGETS),
                   help="the target to compile for: the step's own (the default), or either for step 1 "
                        "(default there: both)")
    i.add_argument("--config", nargs="*", metavar="FIELD=VALUE", help=config_help + ")")
    i.add_argument("--sass", action="store_true", help="print the SASS listing")
    i.add_argument("--ptx", action="store_true", help="print the PTX")
    i.set_defaults(fn=cmd_inspect)

    s = sub.add_parser("source", help="a step as one listing: every config field and method, inheritance resolved")
    s.add_argument("step", help=step_help)
    s.set_defaults(fn=cmd_source)

    df = sub.add_parser("diff", help="what a step changes against its parent (flattened, code only)")
    df.add_argument("step", help=step_help)
    df.add_argument("--context", type=int, default=3, help="lines of context around each change (3)")
    df.set_defaults(fn=cmd_diff)

    shapes_help = "M (square) or MxNxK, e.g. 4096 8192x4096x14336"
    c = sub.add_parser("check", help="GPU: correctness on random shapes with poisoned outputs")
    c.add_argument("step", help=step_help)
    c.add_argument("--shapes", nargs="*", help=shapes_help + " (default: random shapes the step claims)")
    c.add_argument("--count", type=int, default=8,
                   help="random shapes drawn besides the fixed ones, without --shapes (8)")
    c.add_argument("--seed", type=int, default=0, help="seed of the random inputs; shape i uses SEED + i (0)")
    c.add_argument("--config", nargs="*", metavar="FIELD=VALUE",
                   help=config_help + "; steps 11 and 12 pick theirs per shape)")
    c.set_defaults(fn=cmd_check)

    b = sub.add_parser("bench", help="GPU: time steps against cuBLAS (interleaved) and write records")
    b.add_argument("steps", nargs="+", metavar="step", help="steps to time, " + step_help)
    b.add_argument("--shapes", nargs="+", default=["4096", "8192"], help=shapes_help + " (default: 4096 8192)")
    b.add_argument("--config", nargs="*", metavar="FIELD=VALUE",
                   help=config_help + "; steps 11 and 12 pick theirs per shape)")
    b.add_argument("--warmup", type=int, default=10, help="untimed launches of each kernel first (10)")
    b.add_argument("--repeats", type=int, default=100, help="timed launches of each kernel per round (100)")
    b.add_argument("--rounds", type=int, default=5,
                   help="rounds; every other one times the kernels in reverse order (5)")
    b.add_argument("--seed-launches", type=int, default=100, help="launches in the seed-protocol block (100)")
    b.add_argument("--out", help="folder for the record file (default results/<gpu>/)")
    b.add_argument("--tag", help="name part of the record file")
    b.add_argument("--no-write", action="store_true", help="print the results only; write no record file")
    b.add_argument("--rotate", action="store_true",
                   help="time each kernel on enough operand sets in turn that none sits in L2 (decode GEMMs: "
                        "every layer has its own weights); the run also measures the copy bandwidth")
    b.add_argument("--peers", nargs="*", default=[], choices=["triton"],
                   help="also time these kernels in the same rounds (triton: the course's Triton matmul)")
    b.set_defaults(fn=cmd_bench)
    return p


def _step(key):
    """A step named on the command line: ``sm100/3`` or ``sm90/3``. A bare number is refused with the
    two it could mean, Blackwell's (the course's target) first."""
    if str(key).strip().isdigit():
        n = int(key)
        raise GemmInputError(f"say which architecture: sm100/{n} (Blackwell, the course's target) or sm90/{n} "
                             f"(Hopper), e.g. gemm-course inspect sm100/{n}")
    return ladder.get(key)


def main(argv=None):
    args = build_parser().parse_args(argv)
    try:
        return args.fn(args)
    except GemmInputError as e:  # unknown steps, bad shapes, no GPU: one line, no traceback
        print(f"error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `gemm-course list | head`: the reader has seen enough
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # the interpreter's final flush must not fail either
        return 0


if __name__ == "__main__":
    sys.exit(main())
