"""What the B200 kit (``scripts/b200_validate.sh``) leaves in its output folder OUT, taken further:
its bench files copied into ``results/<gpu>/`` (only those whose every record passed the check),
its A/B of step 11's split tail into ``results/tuning/``, the short table it prints last, and its
logs, redacted and published under ``results/logs/``. ``python -m gemm_course.measure.b200``
(``copy``, ``table``, ``redact``, ``logs``) runs these.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import statistics
from typing import Optional


def _record_files(out: str) -> list:
    return sorted(glob.glob(os.path.join(out, "*.json")))


NO_OUTPUT_KINDS = ("cublas_kernels",)  # records of what ran, with no output of the course's to check


def copy_records(out: str, results_dir: Optional[str] = None) -> list:
    """Copy each bench file of ``out`` into ``results/<gpu-slug>/`` (where records.load_records reads them).

    A file with a record whose output failed the check is not copied: numbers of a wrong kernel are
    worthless (records of ``NO_OUTPUT_KINDS`` have no output to check). Returns [(source, destination or None, why)].
    """
    from ..runtime.run import TOLERANCE
    from .bench import gpu_slug
    from .records import RESULTS_DIR

    results_dir = results_dir or RESULTS_DIR
    done = []
    for path in _record_files(out):
        try:
            with open(path) as f:
                records = json.load(f).get("records", [])
        except (json.JSONDecodeError, UnicodeDecodeError) as e:  # cut off mid-write (a run killed at its limit)
            done.append((path, None, f"not JSON ({e}): not copied"))
            continue
        if not records:
            done.append((path, None, "no records"))
            continue
        bad = [r for r in records if r.get("kind") not in NO_OUTPUT_KINDS and not (r.get("rel_error", float("inf")) < TOLERANCE)]
        if bad:
            done.append((path, None, f"{len(bad)} record(s) with rel. error >= {TOLERANCE}: not copied"))
            continue
        folder = os.path.join(results_dir, gpu_slug(records[0].get("gpu") or "unknown-gpu"))
        os.makedirs(folder, exist_ok=True)
        dest = os.path.join(folder, os.path.basename(path))
        if os.path.exists(dest):
            done.append((path, dest, "already there"))
            continue
        shutil.copy2(path, dest)
        done.append((path, dest, "copied"))
    return done


SWEEP_TAGS = ("sweep", "broad_sweep", "broad_sweep_reversed")  # the kit's sweeps (an older kit ran "sweep")

# The kit's decode run of the memory-roofline step beside step 11 (weights rotated out of L2, both orders):
# what chapter 12 reads for Blackwell (viz.memory_roofline.decode_table(arch="sm100")); the tags and the
# shapes are the Hopper run's (scripts/gpu_decode12.sh), so the two cards' tables compare.
DECODE_TAGS = ("decode12", "decode12_reversed")
DECODE_GRAPH_SHAPES = ("1x4096x4096", "16x4096x4096", "64x4096x4096", "128x4096x4096", "16x14336x4096", "16x4096x14336",
                       "128x14336x4096", "1x6144x4096", "1x2048x8192", "16x2048x8192", "64x2048x8192")

# The kit's A/B of the early launch inside CUDA graphs (``pdl``, off on Blackwell until a B200 measures it):
# the step as it is, with the next kernel launched at the start, launched once the loads are issued, and
# launched at the start with W's first K tiles loaded before the wait
DECODE_LAUNCH_SHAPES = ("1x4096x4096", "16x4096x4096", "64x4096x4096")


def decode_launch_variants() -> tuple:
    """The decode step as it is, with ``pdl`` on, with ``pdl`` and ``launch_after_loads`` on, and with ``pdl``
    and ``w_before_wait`` (as many K tiles as the stages hold), as ``gpu_decode_graph.py --steps`` takes them."""
    key = decode_step_key()
    return key, f"{key}:pdl=true", f"{key}:pdl=true,launch_after_loads=true", f"{key}:pdl=true,w_before_wait=64"


def decode_step_key() -> str:
    """The Blackwell memory-roofline step the kit's decode run times (``ladder.decode("sm100")``)."""
    from ..runtime import ladder

    return ladder.decode("sm100").key


def decode_shapes_text(reverse: bool = False) -> str:
    """The decode run's shapes (``sweep_shapes.decode12_shapes``) as the bench command line takes them."""
    from .sweep_shapes import decode12_shapes

    shapes = ["x".join(map(str, s)) for s in decode12_shapes()]
    return " ".join(shapes[::-1] if reverse else shapes)


def decode_lines(records: list) -> list:
    """Per decode tag and step of the kit's records: shapes, the geometric mean of the ratio to cuBLAS per M
    and the lowest shape; then, per step and cuBLAS of the forward run, its times at up to
    :data:`LINE_MAX_M` tokens as a fixed cost per launch plus the bytes at a rate (``bandwidth.line_fit``)."""
    from .bandwidth import LINE_MAX_M, line_fit
    from .records import geomean, shape_of

    lines = []
    for tag in DECODE_TAGS:
        for step in sorted({r["step"] for r in records if r["_tag"] == tag}):
            run = [r for r in records if r["_tag"] == tag and r["step"] == step]
            per_m = {m: geomean(r["ratio_to_cublas"] for r in run if shape_of(r)[0] == m)
                     for m in sorted({shape_of(r)[0] for r in run})}
            low = min(run, key=lambda r: r["ratio_to_cublas"])
            lines.append(f"{tag.replace('_', ' ')} {step}: {len(run)} shapes, ratio to cuBLAS geometric mean per M "
                         + ", ".join(f"{m}: {g:.3f}" for m, g in per_m.items())
                         + f"; lowest {low['ratio_to_cublas']:.3f} ({'x'.join(map(str, shape_of(low)))})")
    few = [r for r in records if r["_tag"] == DECODE_TAGS[0] and shape_of(r)[0] <= LINE_MAX_M and r.get("bandwidth")]
    points = {}
    for r in few:
        points.setdefault(r["step"], []).append((r["bandwidth"]["min_bytes"], r["time_ms"]["median"] * 1e3))
    cublas = {shape_of(r): (r["bandwidth"]["min_bytes"], r["cublas_time_ms"]["median"] * 1e3) for r in few}
    points["cuBLAS"] = list(cublas.values())  # once per shape
    for who, found in points.items():
        fit = line_fit(found)
        if fit:
            lines.append(f"decode12 {who} at up to {LINE_MAX_M} tokens: {fit[0]:.1f} us per launch + the bytes at "
                         f"{fit[1]:.2f} TB/s (farthest of {len(found)} shapes from the line: {fit[2]:.1f} us)")
    return lines


# The kit's A/B of step 11's split tail against the same kernel without it (scripts/gpu_tune.py,
# every variant checked against float32 before it is timed): what calibrates the hand-over's price,
# schedule.FIXUP_K_TILES, on a B200. Its output folder under OUT, and its name under results/tuning/.
TAIL_AB = "tail_ab"
TAIL_AB_RUN = "tune_b200_tail_split"
TAIL_AB_SHAPES = ("4096", "12288", "16384", "1024x1024x8192", "8192x4096x28672")
TAIL_AB_VARIANTS = ("sm100/11", "sm100/11:stream_k=False")


def tail_ab_command() -> str:
    """The tail A/B as the kit runs it (OUT for its output folder)."""
    variants = " ".join(f'"{v}"' if ":" in v else v for v in TAIL_AB_VARIANTS)
    return f"scripts/gpu_tune.py {variants} --shapes {' '.join(TAIL_AB_SHAPES)} --out OUT/{TAIL_AB}"


def tail_ab_run(results_dir: Optional[str] = None) -> str:
    """The newest tail A/B under results/tuning/ (``tune_b200_tail_split_<UTC date>``, one per kit
    run), as :func:`gemm_course.measure.records.load_tuning` names it; TAIL_AB_RUN when there is none."""
    from .records import RESULTS_DIR

    found = sorted(glob.glob(os.path.join(results_dir or RESULTS_DIR, "tuning", TAIL_AB_RUN + "*.json.gz")))
    return os.path.basename(found[-1])[: -len(".json.gz")] if found else TAIL_AB_RUN


def copy_tail_ab(out: str, results_dir: Optional[str] = None) -> Optional[tuple]:
    """OUT/tail_ab/tune.json -> results/tuning/tune_b200_tail_split_<UTC date of the run>.json.gz, with
    what it compared and its command (as every tuning run the book reads). (source, destination or
    None, why), or None when the kit ran no tail A/B."""
    import datetime
    import gzip

    from .records import RESULTS_DIR

    source = os.path.join(out, TAIL_AB, "tune.json")
    if not os.path.exists(source):
        return None
    with open(source) as f:
        tune = json.load(f)
    if not tune.get("rows"):
        return source, None, "no rows"
    folder = os.path.join(results_dir or RESULTS_DIR, "tuning")
    stamp = datetime.datetime.fromtimestamp(os.path.getmtime(source), datetime.timezone.utc).strftime("%Y%m%dT%H%M")
    dest = os.path.join(folder, f"{TAIL_AB_RUN}_{stamp}.json.gz")
    if os.path.exists(dest):
        return source, dest, "already there"
    os.makedirs(folder, exist_ok=True)
    gpu = (tune.get("env") or {}).get("gpu", "a B200")
    tune.update(what=f"step 11's split tail against the same kernel without it (stream_k=False), interleaved with "
                     f"cuBLAS; the B200 kit on {gpu}", command=tail_ab_command())
    with gzip.open(dest, "wt") as f:
        json.dump(tune, f)
    return source, dest, "copied"


def tail_ab_lines(tune: dict) -> list:
    """Per shape of the tail A/B: the split tail over the whole one, beside the tail model's expectation."""
    from ..kernels.sm100.step11_beyond_the_seed import model_speedup
    from .records import ab_changes

    lines = []
    for shape, changes in ab_changes(tune, *TAIL_AB_VARIANTS).items():
        parts, model = model_speedup(*map(int, shape.split("x")))
        measured = ", ".join(f"{1 + c:.3f}" for c in changes)
        lines.append(f"split tail over whole at {shape}: {measured} (the tail model: {float(model):.3f}, "
                     f"{parts} part{'s' if parts > 1 else ''} per tail tile)")
    return lines


GRAPH_KINDS = ("decode_graph", "decode_graph_ab")  # scripts/gpu_decode_graph.py: the steps, an A/B of variants


def graph_lines(out: str) -> list:
    """Per graph file of ``out`` (kinds ``GRAPH_KINDS``) and per step or variant: the share of the run's copy
    bandwidth at each M and layer, and cuBLAS's beside it."""
    lines = []
    for path in _record_files(out):
        with open(path) as f:
            found = [r for r in json.load(f).get("records", []) if r.get("kind") in GRAPH_KINDS
                     and (r.get("bandwidth") or {}).get("fraction_of_copy")]
        for who in dict.fromkeys(r.get("variant") or r["step"] for r in found):
            cells = [f"{r['shape']['m']}x{r['shape']['n']}x{r['shape']['k']} {r['bandwidth']['fraction_of_copy']:.0%}"
                     f" (cuBLAS {r['bandwidth'].get('cublas_fraction_of_copy', 0):.0%})"
                     for r in found if (r.get("variant") or r["step"]) == who]
            lines.append(f"inside graphs ({found[0]['kind']}) {who}, share of the copy bandwidth: " + ", ".join(cells))
    return lines


def table(out: str) -> str:
    """The ladder (TFLOP/s and ratio to cuBLAS per shape), a one-line summary of each sweep and of the
    decode run (a line per order and step: the ratio per M), and the decode runs inside CUDA graphs
    (:func:`graph_lines`)."""
    from .records import geomean, shape_of, sweep_classes

    records = []
    for path in _record_files(out):
        with open(path) as f:
            tag = os.path.basename(path).rsplit(".", 1)[0].split("_", 1)[-1]
            records += [dict(r, _tag=tag) for r in json.load(f).get("records", []) if r.get("kind") == "bench"]
    if not records:
        return "no bench records under OUT"
    lines = []
    ladder_recs = [r for r in records if r["_tag"] not in SWEEP_TAGS + DECODE_TAGS]
    if ladder_recs:
        shapes = sorted({shape_of(r) for r in ladder_recs})
        head = "".join(f"  {'x'.join(map(str, s)):>16} {'ratio':>6}" for s in shapes)
        lines.append(f"{'step':<10}{head}")
        by = {(r["step"], shape_of(r)): r for r in ladder_recs}
        steps = sorted({r["step"] for r in ladder_recs}, key=lambda k: (k.split("/")[0], int(k.split("/")[1])))
        for step in steps:
            cells = ""
            for s in shapes:
                r = by.get((step, s))
                cells += f"  {r['tflops']['median']:16.1f} {r['ratio_to_cublas']:6.3f}" if r else f"  {'-':>16} {'-':>6}"
            lines.append(f"{step:<10}{cells}")
        cublas = {s: statistics.median(r["cublas_tflops"]["median"] for k, r in by.items() if k[1] == s) for s in shapes}
        lines.append(f"{'cuBLAS':<10}" + "".join(f"  {cublas[s]:16.1f} {'':>6}" for s in shapes))
        from ..kernels.sm100.step11_beyond_the_seed import model_speedup

        for s in shapes:  # the final step's one idea against its parent, and what the tail model expected
            old, new = by.get(("sm100/10", s)), by.get(("sm100/11", s))
            if old and new:
                parts, model = model_speedup(*s)
                lines.append(f"sm100/11 over sm100/10 at {'x'.join(map(str, s))}: "
                             f"{new['tflops']['median'] / old['tflops']['median']:.3f} (the tail model: "
                             f"{float(model):.3f}, {parts} part{'s' if parts > 1 else ''} per tail tile)")
    for tag in SWEEP_TAGS:
        for step in sorted({r["step"] for r in records if r["_tag"] == tag}):
            sweep = [r for r in records if r["_tag"] == tag and r["step"] == step]
            ratios = sorted((r["ratio_to_cublas"], "x".join(str(r["shape"][d]) for d in "mnk")) for r in sweep)
            lines.append(
                f"{tag.replace('_', ' ')} {step}: {len(sweep)} shapes, ratio to cuBLAS geometric mean "
                f"{geomean(v for v, _ in ratios):.3f}, min {ratios[0][0]:.3f} ({ratios[0][1]}), "
                f"max {ratios[-1][0]:.3f} ({ratios[-1][1]})"
            )
            if tag != "sweep":  # the broad sweep: a line per shape class
                for name, c in sweep_classes(sweep).items():
                    if name != "all":
                        lines.append(f"  {name}: {c['shapes']} shapes, geometric mean {c['geomean']:.3f}, "
                                     f"lowest {c['lowest']:.3f} ({c['lowest_shape']})")
    lines += decode_lines(records) + graph_lines(out)
    tail_ab = os.path.join(out, TAIL_AB, "tune.json")
    if os.path.exists(tail_ab):
        with open(tail_ab) as f:
            lines += tail_ab_lines(json.load(f))
    worst = max(records, key=lambda r: r.get("rel_error", 0.0))
    lines.append(f"largest rel. error vs float32: {worst['rel_error']:.1e} ({worst['step']})")
    return "\n".join(lines)


def redact_logs(out: str, repo: str) -> list:
    """Replace the folders of this machine in ``out``'s logs by OUT, REPO and ~ (the logs are meant
    to be published with the records, which already name no folder). Returns the files changed."""
    pairs = [(os.path.abspath(out), "OUT"), (os.path.abspath(repo), "REPO"), (os.path.expanduser("~"), "~")]
    pairs = [(old, new) for old, new in pairs if len(old) > 1]  # never replace a bare "/"
    changed = []
    for path in sorted(glob.glob(os.path.join(out, "*.log")) + glob.glob(os.path.join(out, "*.xml"))):
        with open(path, errors="replace") as f:
            text = f.read()
        new_text = text
        for old, new in sorted(pairs, key=lambda p: -len(p[0])):  # the longest first: OUT may lie in REPO or ~
            new_text = new_text.replace(old, new)
        if new_text != text:
            with open(path, "w") as f:
                f.write(new_text)
            changed.append(path)
    return changed


def publish_logs(out: str, results_dir: Optional[str] = None) -> list:
    """Copy ``out``'s logs (already redacted) to ``results/logs/<UTC date>_b200_<name>.log``, the names
    the book cites them by (``results/logs/*_b200_*.log``). Returns the destinations."""
    import datetime

    from .records import RESULTS_DIR

    folder = os.path.join(results_dir or RESULTS_DIR, "logs")
    os.makedirs(folder, exist_ok=True)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M")
    done = []
    for path in sorted(glob.glob(os.path.join(out, "*.log"))):
        dest = os.path.join(folder, f"{stamp}_b200_{os.path.basename(path)}")
        shutil.copy2(path, dest)
        done.append(dest)
    return done
