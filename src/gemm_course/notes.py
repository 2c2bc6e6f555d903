"""The measured half of NOTES.md, generated from the records (never typed by hand).

``python -m gemm_course.notes`` rewrites the block between the markers in NOTES.md;
``tests/test_notes.py`` fails when the block and the records disagree.
"""

from __future__ import annotations

import math
import os
import sys

from . import bench, ladder
from .problem import GemmProblem

BEGIN, END = "<!-- measured:begin (python -m gemm_course.notes) -->", "<!-- measured:end -->"
NOTES = os.path.join(os.path.dirname(bench.RESULTS_DIR), "NOTES.md")


def _cell(rec) -> str:
    if rec is None:
        return "not measured"
    fmt = ".1f" if rec["tflops"]["median"] < 10 else ".0f"
    return f"{rec['tflops']['median']:{fmt}} ({rec['tflops']['p10']:{fmt}}-{rec['tflops']['p90']:{fmt}}) vs {rec['cublas_tflops']['median']:.0f} = {rec['ratio_to_cublas']:.3f}"


def measured_block(records=None) -> str:
    records = bench.load_records() if records is None else records
    out = [
        "Median TFLOP/s (p10-p90) against cuBLAS's median in the same run, and the ratio; "
        "H200, bench protocol of `gemm_course.bench`.",
        "",
        "| step | 4096^3 | 8192^3 | records |",
        "|---|---|---|---|",
    ]
    for step in ladder.steps("sm90"):
        recs = [bench.latest(records, step.key, s, s, s) for s in (4096, 8192)]
        files = sorted({os.path.basename(r["_file"]) for r in recs if r})
        out.append(f"| {step.key} {step.title} | {_cell(recs[0])} | {_cell(recs[1])} | {', '.join(files) or '-'} |")
    final = ladder.steps("sm90")[-1]
    sweep = [r for r in records if r["step"] == final.key and bench.has_default_config(r, final) and "sweep" in r["_file"]]
    if sweep:
        latest_file = max(r["_file"] for r in sweep)
        sweep = [r for r in sweep if r["_file"] == latest_file]
        ratios = [r["ratio_to_cublas"] for r in sweep]
        seed = [r["tflops"]["seed_mean"] / r["cublas_tflops"]["seed_mean"] for r in sweep]
        out += [
            "",
            f"Sweep of {final.key} ({os.path.basename(latest_file)}, {len(sweep)} shapes): geometric mean of the "
            f"ratio to cuBLAS {_geomean(ratios):.3f} (per-launch medians), {_geomean(seed):.3f} (the seed's "
            f"protocol: mean of 100 back-to-back launches); {sum(x >= 1 for x in ratios)} of {len(ratios)} shapes at or "
            "above cuBLAS.",
            "",
            "| shape | TFLOP/s | cuBLAS | ratio |",
            "|---|---|---|---|",
        ]
        for r in sweep:
            p = GemmProblem(r["shape"]["m"], r["shape"]["n"], r["shape"]["k"])
            out.append(f"| {p.label} | {r['tflops']['median']:.0f} | {r['cublas_tflops']['median']:.0f} | {r['ratio_to_cublas']:.3f} |")
    return "\n".join(out)


def _geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def render(text: str, block: str) -> str:
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    return f"{head}{BEGIN}\n{block}\n{END}{tail}"


def main():
    with open(NOTES) as f:
        text = f.read()
    new = render(text, measured_block())
    with open(NOTES, "w") as f:
        f.write(new)
    print(f"updated {NOTES}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
