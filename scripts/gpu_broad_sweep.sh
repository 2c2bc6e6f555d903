#!/bin/bash
# The final Hopper step over the broad sweep (bench.broad_sweep_shapes: squares, LLM shapes,
# few-wave long-K shapes), with cuBLAS and the course's Triton matmul timed in the same rounds.
# Each shape runs the tile step 11 picks for it (no --config). Run it twice, in opposite orders:
#   scripts/gpu_broad_sweep.sh OUT            (records tagged broad_sweep)
#   scripts/gpu_broad_sweep.sh OUT reversed   (records tagged broad_sweep_reversed)
# (on the course's lent H200:  source .device/activate.sh && scripts/gpu_broad_sweep.sh $OUT)
set -euo pipefail
out=${1:?output folder}
order=${2:-forward}
final=${FINAL_STEP:-sm90/11}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
shapes=$(python3 -c "
from gemm_course import bench
shapes = [s for group in bench.broad_sweep_shapes().values() for s in group]
print(' '.join('%dx%dx%d' % s for s in (shapes[::-1] if '$order' == 'reversed' else shapes)))")
tag=broad_sweep; [ "$order" = reversed ] && tag=broad_sweep_reversed
python3 -m gemm_course bench "$final" --shapes $shapes --rounds 5 --peers triton \
  --out "$out" --tag "$tag" 2>&1 | tee "$out/$tag.log" | tail -50
