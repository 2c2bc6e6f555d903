"""Nsight Compute text logs -> typed records (``kind: ncu``) that the book reads (no GPU needed).

    python3 scripts/ncu_records.py results/logs/*_ncu_*.txt --out results/nvidia-h200
    (scripts/ncu_counters.sh and scripts/profile_ncu.py run it on the log they write)

One record per log: the log it came from, the GPU, the date (from the log's name, else now), and
per profiled kernel (in the log's order) every metric as ``{name: [value, unit]}`` plus, where the
log has the speed-of-light sections, the busiest pipeline and its share of elapsed cycles. Kernel
names are shortened to the course's ``stepNN`` (the module's name when the log was written) or
``nvjet (cuBLAS)``. The chapters read the records through ``gemm_course.measure.records``, never the text.
"""

import argparse
import datetime
import os
import re
import sys

SCALE = {"byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9}


def short_name(name: str) -> str:
    step = re.search(r"sm90(step\d+)_", name)
    return step.group(1) if step else "nvjet (cuBLAS)" if name.startswith("nvjet") else name[:60]


def parse(text: str) -> list:
    """``[{kernel, name, metrics, utilization?}, ...]`` for each kernel block of an ncu text log."""
    kernels = []
    for block in re.split(r"\n  (?=\S)", text)[1:]:
        name = block.split()[0]
        metrics = {}
        for metric, unit, value in re.findall(r"^\s{4,}([a-z][\w.]*\.\w+)\s+([A-Za-z%/]*)\s+([\d,]+(?:\.\d+)?)\s*$", block,
                                              flags=re.M):
            number = float(value.replace(",", ""))
            metrics[metric] = [number * SCALE.get(unit, 1), "byte" if unit in SCALE else unit]
        for label, unit, value in re.findall(r"^\s{4,}([A-Z][\w ]+?)\s{2,}(\S+)\s+([\d,]+(?:\.\d+)?)\s*$", block, flags=re.M):
            metrics.setdefault(label.strip(), [float(value.replace(",", "")), unit])
        entry = {"kernel": short_name(name), "name": name, "metrics": metrics}
        pipe = re.search(r"(\w+) is the highest-utilized pipeline \(([\d.]+)%\)", block)
        if pipe:
            entry["busiest_pipe"] = {"pipe": pipe.group(1), "percent_of_elapsed": float(pipe.group(2))}
        if metrics or pipe:
            kernels.append(entry)
    return kernels


def to_record(path: str, gpu: str) -> dict:
    base = os.path.basename(path)
    stamp = re.match(r"(\d{8}T\d{4})", base)
    when = (datetime.datetime.strptime(stamp.group(1), "%Y%m%dT%H%M").replace(tzinfo=datetime.timezone.utc) if stamp
            else datetime.datetime.now(datetime.timezone.utc))
    with open(path) as f:
        kernels = parse(f.read())
    return {"schema": 1, "kind": "ncu", "gpu": gpu, "date": when.isoformat(timespec="seconds"), "source_log": base,
            "command": "ncu --clock-control none (scripts/ncu_counters.sh, ncu_pair.sh or profile_ncu.py)",
            "kernels": kernels}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("logs", nargs="+")
    p.add_argument("--out", required=True, help="folder for the records file")
    p.add_argument("--gpu", default="NVIDIA H200")
    p.add_argument("--tag", default="ncu")
    args = p.parse_args(argv)
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))
    from gemm_course.measure import bench

    records = [to_record(path, args.gpu) for path in args.logs if not path.endswith(".csv")]
    records = [r for r in records if r["kernels"]]
    print(f"{len(records)} ncu record(s):", bench.write_records(records, args.tag, args.out))


if __name__ == "__main__":
    main()
