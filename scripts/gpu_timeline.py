"""Launch timeline of the persistent steps (GPU): when each CTA reaches fixed points of step 11's kernel.

    python3 scripts/gpu_timeline.py --steps sm90/11 "sm90/11:stream_k=0" --shapes 2048 4096 --out OUT

A development tool, not part of the course. It copies ``gemm_course/kernels/sm90`` to a package
``.cache/kernels/sm90_timeline`` (git-ignored, removed afterwards) and inserts, at the points named in ``POINTS``,
a write of ``%globaltimer_lo`` by one thread per CTA (thread 0: the producer warp, "P"; thread 128:
the first consumer thread, "C") into the stream-K workspace. Launches whose tail is not split never
use that workspace otherwise; with a split tail the stamps overwrite part of one partial sum, so
such a launch's output is wrong (the timeline never checks it) and its hand-over timing slightly
off: prefer shapes whose tail stays whole, such as 2048^3 and 4096^3. Prints the median over CTAs and launches
of each point, in microseconds from the first CTA's entry, and writes them as records of kind
``timeline`` (``bench.write_records``: ``results/<gpu>/<date>_timeline.json``, or under --out),
which ``viz.launch_timeline`` draws. The workspace is zeroed before each timed launch, so L2
starts cold: compare points, not events. If step 11's code no longer contains an anchor line, the
script stops and says which.
"""

import argparse
import dataclasses
import os
import shutil
import statistics
import sys

import kernel_copies

HERE = os.path.dirname(os.path.abspath(__file__))
KERNELS = os.path.join(HERE, "..", "src", "gemm_course", "kernels")
PACKAGE = "sm90_timeline"

# (stamp, name, thread, anchor: a stripped line of step 11's kernel, where: "before"/"after"/"first"/"guard")
POINTS = [
    (0, "entry", 0, "tidx, warp_idx, warpgroup_idx = self.roles(tma_atom_a, tma_atom_b)", "before"),
    (1, "smem + arrive", 0, "plan = self.make_plan(constants)", "before"),
    (2, "plan", 0, "plan = self.make_plan(constants)", "after"),
    (3, "num_units", 0, "num_units = self.num_units(plan)", "after"),
    (4, "first tile", 0, "pipeline.pipeline_init_wait(cluster_shape_mn=self.cluster_shape_mnk[:2])", "before"),
    (5, "cluster wait", 0, "pipeline.pipeline_init_wait(cluster_shape_mn=self.cluster_shape_mnk[:2])", "after"),
    (6, "P setmaxreg", 0, "cute.arch.setmaxregister_decrease(self.config.producer_registers)", "after"),
    (7, "P unit 0 published", 0, "self.publish_tile(u, tile_coord, storage)", "after-first-unit"),
    (8, "P unit 0 loads issued", 0, "if u + 1 < num_units:  # the next unit's tile, while this unit's last loads are in flight",
     "before-first-unit"),
    (10, "C setup", 128,
     "tCrA, tCrB, accumulators, read_state, release_state, store_pipeline = self.consumer_setup(tiled_mma, sA, sB, sC)", "after"),
    (11, "C first stage full", 128, "index, k_begin, k_end = self.work_unit(u, plan, num_k_tiles)", "after-first-unit-wait"),
    (12, "C unit 0 main loop done", 128, "if k_begin > 0:  # (never with stream_k off: no hand-over code is compiled then)",
     "before-first-unit"),
    (13, "C last epilogue issued", 128, "store_pipeline.producer_tail()", "before-guard"),
    (14, "C stores drained", 128, "store_pipeline.producer_tail()", "after-guard"),
    (15, "exit", 0, "cute.arch.cluster_wait()", "after-last"),
]

STAMP_METHOD = '''
    @cute.jit
    def stamp(self, mPartials, k: cutlass.Constexpr, thread: cutlass.Constexpr):
        """Timeline point k: one thread writes %globaltimer_lo into the workspace (CTA-major, 32 per CTA)."""
        tidx, _, _ = cute.arch.thread_idx()
        bidx, bidy, _ = cute.arch.block_idx()
        gdimx, _, _ = cute.arch.grid_dim()
        if tidx == thread:
            buf = cute.make_tensor(cute.recast_ptr(mPartials.iterator, dtype=cutlass.Int32), cute.make_layout(1 << 16))
            buf[(bidy * gdimx + bidx) * 32 + k] = cute.arch.globaltimer_lo()

'''


def instrument(src: str) -> str:
    lines = src.split("\n")
    kernel_at = max(i for i, line in enumerate(lines) if line.strip() == "@cute.kernel")
    inserts = []  # (line index, text lines); applied bottom-up

    def find(anchor, last=False, guard=False):
        hits = [i for i, line in enumerate(lines) if i > kernel_at and line.strip() == anchor]
        if not hits:
            sys.exit(f"gpu_timeline: step11_beyond_the_seed.py has no line '{anchor}' in its kernel; update POINTS")
        return hits[-1] if last else hits[0]

    for k, _, thread, anchor, where in POINTS:
        i = find(anchor, last=where in ("after-last", "before-guard", "after-guard"))
        indent = lines[i][: len(lines[i]) - len(lines[i].lstrip())]
        call = f"self.stamp(mPartials, {k}, {thread})"
        if where == "before":
            inserts.append((i, [indent + call]))
        elif where in ("after", "after-last"):
            inserts.append((i + 1, [indent + call]))
        elif where == "after-first-unit":
            inserts.append((i + 1, [indent + "if u == 0:", indent + "    " + call]))
        elif where == "before-first-unit":
            inserts.append((i, [indent + "if u == 0:", indent + "    " + call]))
        elif where == "after-first-unit-wait":  # the first full stage, before the unit's main loop
            inserts.append((i + 1, [indent + "if u == 0:", indent + "    mainloop_pipeline.consumer_wait(read_state)",
                                    indent + "    " + call]))
        elif where == "before-guard":  # before the `if ...:` that guards the anchor
            inserts.append((i - 1, [lines[i - 1][: len(lines[i - 1]) - len(lines[i - 1].lstrip())] + call]))
        elif where == "after-guard":
            guard_indent = lines[i - 1][: len(lines[i - 1]) - len(lines[i - 1].lstrip())]
            inserts.append((i + 1, [guard_indent + call]))
    for i, text in sorted(inserts, key=lambda t: t[0], reverse=True):
        lines[i:i] = text
    lines.insert(kernel_at, STAMP_METHOD.rstrip("\n"))
    return "\n".join(lines)


def build_package():
    files = {}
    folder = os.path.join(KERNELS, "sm90")
    for name in sorted(os.listdir(folder)):
        if name.endswith(".py"):
            with open(os.path.join(folder, name)) as f:
                files[name] = f.read()
    files["step11_beyond_the_seed.py"] = instrument(files["step11_beyond_the_seed.py"])
    return kernel_copies.write_package(PACKAGE, files)


def timeline(step_key, fields, problem, a, b, c, launches):
    import torch

    from gemm_course.cli import _parse_config
    from gemm_course.runtime import ladder, run

    step = kernel_copies.step_from(PACKAGE, ladder.get(step_key))
    config = _parse_config(step, fields)
    launch = run.prepare(step, a, b, c, config)
    for _ in range(10):
        launch()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    points = {k: [] for k, *_ in POINTS}
    events, last_exit = [], []
    for _ in range(launches):
        launch.workspace[0].zero_()
        torch.cuda.synchronize()
        start.record()
        launch()
        end.record()
        torch.cuda.synchronize()
        events.append(start.elapsed_time(end) * 1000)
        stamps = launch.workspace[0].view(torch.int32)[: 132 * 2 * 32].view(-1, 32).cpu().long() & 0xFFFFFFFF
        live = stamps[:, 0] > 0
        base = int(stamps[live, 0].min())
        for k in points:
            v = stamps[live, k]
            v = v[v > 0]
            if len(v):
                points[k].append(statistics.median(((v - base) & 0xFFFFFFFF).tolist()) / 1000)
        last_exit.append(int(((stamps[live, 15] - base) & 0xFFFFFFFF).max()) / 1000)
    names = {k: name for k, name, *_ in POINTS}
    return {
        "config": dataclasses.asdict(config),
        "launches": launches,
        "event_us": statistics.median(events),
        "last_exit_us": statistics.median(last_exit),
        "points_us": {names[k]: round(statistics.median(v), 3) for k, v in points.items() if v},
    }


def to_record(row: dict, env: dict, command: str, date: str) -> dict:
    """A measured row as a results record (``kind: timeline``), with the run's provenance."""
    m, n, k = row["shape"]
    return {**env, "kind": "timeline", "schema": 1, "date": date, "command": command, "step": row["step"],
            "shape": {"m": m, "n": n, "k": k}, "title": "launch timeline (medians over CTAs and launches, us)",
            **{key: row[key] for key in ("config", "launches", "event_us", "last_exit_us", "points_us")}}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", nargs="+", default=["sm90/11"], help="STEP[:FIELD=VALUE,...] of step 11")
    p.add_argument("--shapes", nargs="+", default=["2048", "4096"])
    p.add_argument("--launches", type=int, default=30)
    p.add_argument("--out", default=None)
    p.add_argument("--keep", action="store_true", help="keep the instrumented package")
    args = p.parse_args(argv)
    target = build_package()
    try:
        import datetime

        from gemm_course.cli import _shapes
        from gemm_course.measure import bench
        from gemm_course.runtime.problem import GemmProblem, make_inputs

        env = bench.environment()
        command = " ".join(["python3", "scripts/gpu_timeline.py"] + (argv if argv is not None else sys.argv[1:]))
        date = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        records = []
        for m, n, k in _shapes(args.shapes):
            problem = GemmProblem(m, n, k)
            a, b, c = make_inputs(problem, "cuda", 0)
            for spec in args.steps:
                key, _, fields = spec.partition(":")
                row = {"shape": (m, n, k), "step": spec,
                       **timeline(key, fields.split(",") if fields else [], problem, a, b, c, args.launches)}
                records.append(to_record(row, env, command, date))
                print(f"{problem.label:>16} {spec:<20} event {row['event_us']:8.2f} us   last exit {row['last_exit_us']:8.2f} us")
                print("    " + "  ".join(f"{name}={t:.2f}" for name, t in row["points_us"].items()))
        print("wrote", bench.write_records(records, "timeline", args.out))
    finally:
        if not args.keep:
            shutil.rmtree(target, ignore_errors=True)


if __name__ == "__main__":
    main()
