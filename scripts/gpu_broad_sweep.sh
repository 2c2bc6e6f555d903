#!/bin/bash
# The final Hopper step over the broad sweep (bench.broad_sweep_shapes: squares, LLM shapes,
# few-wave long-K shapes), with cuBLAS and the course's Triton matmul timed in the same rounds.
# Each shape runs the tile step 11 picks for it (no --config). Run it twice, in opposite orders:
#   scripts/gpu_broad_sweep.sh OUT            (records tagged broad_sweep)
#   scripts/gpu_broad_sweep.sh OUT reversed   (records tagged broad_sweep_reversed)
# Shapes after the order re-measure only those (e.g. the shapes whose choice a rule change moved);
# records.broad_sweep takes each shape's newest record of each order.
# Energy per GEMM and back-to-back times over the same shapes, both orders in one run:
#   python3 scripts/gpu_energy_b2b.py --out OUT   (records tagged broad_sweep_energy[_reversed])
set -euo pipefail
out=${1:?output folder}
order=${2:-forward}
shift $(( $# < 2 ? $# : 2 ))
only="$*"
final=${FINAL_STEP:-sm90/11}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
shapes=$(python3 -c "
from gemm_course.measure import bench
shapes = ['%dx%dx%d' % s for group in bench.broad_sweep_shapes().values() for s in group]
only = '$only'.split()
shapes = [s for s in shapes if s in only] if only else shapes
print(' '.join(shapes[::-1] if '$order' == 'reversed' else shapes))")
tag=broad_sweep; [ "$order" = reversed ] && tag=broad_sweep_reversed
python3 -m gemm_course bench "$final" --shapes $shapes --rounds 5 --peers triton \
  --out "$out" --tag "$tag" 2>&1 | tee "$out/$tag.log" | tail -50
# the run's summary by shape class (this run's records only)
python3 - "$out" "$tag" <<'PY'
import glob, json, os, sys
from gemm_course.measure import records
out, tag = sys.argv[1], sys.argv[2]
path = max(glob.glob(os.path.join(out, f"*_{tag}.json")), key=os.path.getmtime)
rows = [dict(r, _file=path) for r in json.load(open(path))["records"]]
for name, c in records.sweep_classes(rows).items():
    triton = "-" if c["triton_geomean"] is None else f"{c['triton_geomean']:.3f}"
    print(f"{name:<16} {c['shapes']:>3} shapes  geomean {c['geomean']:.3f}  lowest {c['lowest']:.3f} "
          f"({c['lowest_shape']})  triton {triton}")
PY
