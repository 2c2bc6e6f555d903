"""The measured half of NOTES.md, generated from the records (never typed by hand).

``python -m gemm_course.notes`` rewrites the block between the markers in NOTES.md;
``tests/test_notes.py`` fails when the block and the records disagree.
"""

from __future__ import annotations

import os
import sys

from . import ladder
from . import records as rec
from .problem import GemmProblem

BEGIN, END = "<!-- measured:begin (python -m gemm_course.notes) -->", "<!-- measured:end -->"
NOTES = os.path.join(os.path.dirname(rec.RESULTS_DIR), "NOTES.md")


def _cell(r) -> str:
    if r is None:
        return "not measured"
    fmt = ".1f" if r["tflops"]["median"] < 10 else ".0f"
    t = r["tflops"]
    return (f"{t['median']:{fmt}} ({t['p10']:{fmt}}-{t['p90']:{fmt}}) "
            f"vs {r['cublas_tflops']['median']:.0f} = {r['ratio_to_cublas']:.3f}")


def measured_block(records=None) -> str:
    """The block between the markers: the newest record of each Hopper step at 4096^3 and 8192^3,
    and the newest sweep of the final step (:func:`gemm_course.records.latest_sweep`)."""
    records = rec.load_records() if records is None else records
    out = [
        "Median TFLOP/s (p10-p90) against cuBLAS's median in the same run, and the ratio; "
        "H200, bench protocol of `gemm_course.bench`.",
        "",
        "| step | 4096^3 | 8192^3 | records |",
        "|---|---|---|---|",
    ]
    for step in ladder.steps("sm90"):
        recs = [rec.latest(records, step.key, s, s, s) for s in (4096, 8192)]
        files = sorted({os.path.basename(r["_file"]) for r in recs if r})
        out.append(f"| {step.key} {step.title} | {_cell(recs[0])} | {_cell(recs[1])} | {', '.join(files) or '-'} |")
    final = ladder.final("sm90")
    sweep = rec.latest_sweep(records, final.key)
    if sweep:
        summary = rec.sweep_summary(sweep)
        out += [
            "",
            f"Sweep of {final.key} ({os.path.basename(sweep[0]['_file'])}, {summary['shapes']} shapes): geometric mean "
            f"of the ratio to cuBLAS {summary['geomean']:.3f} (per-launch medians), {summary['seed_geomean']:.3f} (the "
            f"seed's protocol: mean of 100 back-to-back launches); {summary['at_or_above']} of {summary['shapes']} "
            "shapes at or above cuBLAS.",
            "",
            "| shape | TFLOP/s | cuBLAS | ratio |",
            "|---|---|---|---|",
        ]
        for r in sweep:
            p = GemmProblem(*rec.shape_of(r))
            tflops, cublas = r["tflops"]["median"], r["cublas_tflops"]["median"]
            out.append(f"| {p.label} | {tflops:.0f} | {cublas:.0f} | {r['ratio_to_cublas']:.3f} |")
    return "\n".join(out)


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
