"""The measured half of NOTES.md, generated from the records (never typed by hand).

``python -m gemm_course.measure.notes`` rewrites the block between the markers in NOTES.md;
``tests/test_notes.py`` fails when the block and the records disagree.
"""

from __future__ import annotations

import os
import sys

from ..runtime import ladder
from ..runtime.problem import GemmProblem
from . import records as rec

BEGIN, END = "<!-- measured:begin (python -m gemm_course.measure.notes) -->", "<!-- measured:end -->"
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
    and the final step's broad sweep in both orders by class and shape (:func:`gemm_course.measure.records.broad_sweep`;
    without one, the newest sweep, :func:`gemm_course.measure.records.latest_sweep`); where records of the
    final step carry energy or back-to-back times (:func:`gemm_course.measure.records.energy_sweep`), their
    table by class (:func:`gemm_course.measure.records.energy_class_table`) and by shape (:func:`_energy_lines`)."""
    records = rec.load_records() if records is None else records
    out = [
        "Median TFLOP/s (p10-p90) against cuBLAS's median in the same run, and the ratio; "
        "H200, bench protocol of `gemm_course.measure.bench`.",
        "",
        "| step | 4096^3 | 8192^3 | records |",
        "|---|---|---|---|",
    ]
    for step in ladder.steps("sm90"):
        recs = [rec.latest(records, step.key, s, s, s) for s in (4096, 8192)]
        files = sorted({os.path.basename(r["_file"]) for r in recs if r})
        out.append(f"| {step.key} {step.title} | {_cell(recs[0])} | {_cell(recs[1])} | {', '.join(files) or '-'} |")
    final = ladder.final("sm90")
    broad = {order: rec.broad_sweep(records, final.key, order) for order in rec.BROAD_SWEEP_ORDERS}
    energy = {order: rec.energy_sweep(records, final.key, order) for order in rec.ENERGY_SWEEP_ORDERS}
    if all(broad.values()):
        out += _broad_sweep_lines(final.key, broad, records)  # its class table includes the energy table
        out += _energy_lines(energy)
        return "\n".join(out)
    if any(energy.values()):
        out += ["", rec.energy_class_table(records, final.key)] + _energy_lines(energy)
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


def _broad_sweep_lines(step: str, broad: dict, records: list) -> list:
    """The broad sweep in both orders (``broad``, ``records.broad_sweep`` of ``records``): a line per
    class and order (``records.sweep_class_table``, which adds the energy table where ``records``
    have energy), then each shape's ratios and tile side by side."""
    files = sorted({os.path.basename(r["_file"]) for rows in broad.values() for r in rows})
    out = ["", f"Broad sweep of {step}, each shape with the tile the step picks for it, in two opposite shape orders "
           f"({', '.join(files)}); Triton is the course's autotuned matmul timed in the same rounds.", "",
           rec.sweep_class_table(records, step)]
    out += ["", "| shape | tile | TFLOP/s | cuBLAS | ratio, forward | ratio, reversed | Triton, forward |",
            "|---|---|---|---|---|---|---|"]
    reversed_by_shape = {rec.shape_of(r): r for r in broad["reversed"]}
    for r in broad["forward"]:
        back = reversed_by_shape.get(rec.shape_of(r))
        triton = (r.get("peers") or {}).get("triton", {}).get("ratio_to_cublas")
        cells = [GemmProblem(*rec.shape_of(r)).label, f"{r['config']['tile_m']}x{r['config']['tile_n']}",
                 f"{r['tflops']['median']:.0f}", f"{r['cublas_tflops']['median']:.0f}", f"{r['ratio_to_cublas']:.3f}",
                 f"{back['ratio_to_cublas']:.3f}" if back else "-", f"{triton:.3f}" if triton is not None else "-"]
        out.append("| " + " | ".join(cells) + " |")
    return out


def _energy_lines(energy: dict) -> list:
    """Each shape of the energy sweep (``{order: records}``, :func:`gemm_course.measure.records.energy_sweep`):
    millijoules per GEMM of the step and cuBLAS and their ratio in each order, the back-to-back
    ratios (host in the loop, CUDA graph) and the host's microseconds per launch, forward order's
    values where a shape has both; nothing where no record has them."""
    if not any(energy.values()):
        return []

    def cell(x, fmt=".3f"):
        return "-" if x is None else format(x, fmt)

    out = ["", "| shape | step mJ | cuBLAS mJ | energy ratio, forward | energy ratio, reversed | back to back, host in "
           "the loop | CUDA graph | host us per launch, step / torch.mm |", "|---|---|---|---|---|---|---|---|"]
    by_order = {order: {rec.shape_of(r): r for r in rows} for order, rows in energy.items()}
    shapes = list(dict.fromkeys(rec.shape_of(r) for rows in energy.values() for r in rows))
    for shape in sorted(shapes, key=lambda s: [x for g in rec.broad_sweep_shapes().values() for x in g].index(s)):
        fwd, back = by_order["forward"].get(shape), by_order["reversed"].get(shape)
        r = fwd or back
        joules = r.get("energy_j_per_gemm") or {}
        host = r.get("host_launch_us") or {}
        out.append("| " + " | ".join([
            GemmProblem(*shape).label,
            cell(None if joules.get("step") is None else joules["step"] * 1e3, ".2f"),
            cell(None if joules.get("cublas") is None else joules["cublas"] * 1e3, ".2f"),
            cell(rec.energy_ratio(fwd) if fwd else None), cell(rec.energy_ratio(back) if back else None),
            cell(rec.b2b_ratio(r)), cell(rec.b2b_ratio(r, "b2b_graph_ms")),
            f"{cell(host.get('step'), '.1f')} / {cell(host.get('cublas'), '.1f')}"]) + " |")
    notes = sorted({r["energy_note"] for rows in energy.values() for r in rows if r.get("energy_note")})
    out += [f"\nEnergy note: {n}" for n in notes]
    return out


def render(text: str, block: str) -> str:
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    return f"{head}{BEGIN}\n{block}\n{END}{tail}"


def main(argv=None):
    import argparse

    argparse.ArgumentParser(prog="python -m gemm_course.measure.notes",
                            description="Rewrite NOTES.md's measured block from the records under results/.").parse_args(argv)
    with open(NOTES) as f:
        text = f.read()
    new = render(text, measured_block())
    with open(NOTES, "w") as f:
        f.write(new)
    print(f"updated {NOTES}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
