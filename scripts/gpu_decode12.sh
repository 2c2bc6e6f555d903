#!/bin/bash
# Step 12 (swap A and B for decode-sized GEMMs) on a Hopper GPU, in one device call:
#   1. correctness on unseen shapes (M = 1 .. 300, K not a multiple of 64, both tile heights, with and
#      without the stream-K split), NaN-poisoned outputs against float32;
#   2. the gpu tests of the drop-in linear and the operand checks;
#   3. the decode class at M in {1, 8, 16, 32, 64, 128, 256} against cuBLAS, per launch, weights
#      rotated out of L2, sm90/11 in the same rounds (records tagged decode12);
#   4. the same inside CUDA graphs (scripts/gpu_decode_graph.py, records tagged decode_graph);
#   5. with "variants": the interleaved A/B of the tile height and the split (OUT/tune_decode12.json).
#   scripts/gpu_decode12.sh OUT [quick|variants]
set -uo pipefail
out=${1:?output folder}
what=${2:-}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
status=0
python3 - <<'EOF' 2>&1 | tee "$out/check12.log" || status=1
import dataclasses, sys
from gemm_course import ladder, run
from gemm_course.problem import GemmProblem
step = ladder.get("sm90/12")
shapes = [(1, 4096, 4096), (7, 1024, 520), (8, 2048, 8192), (16, 4096, 14336), (33, 14336, 4096), (64, 1024, 4096),
          (100, 2048, 1000), (128, 4096, 4096), (200, 3072, 1032), (256, 8192, 1024), (300, 2048, 2048), (1, 8, 8)]
bad = 0
for r in run.check(step, shapes, seed=11):
    print(r); bad += not r.ok
for changes in ({"tile_m": 64}, {"stream_k": False}, {"tile_m": 64, "stream_k": False}):
    for shape in [(1, 4096, 4096), (48, 2048, 1032), (128, 6144, 4096)]:
        config = dataclasses.replace(step.config_for(GemmProblem(*shape)), **changes)
        for r in run.check(step, [shape], config=config, seed=23):
            print(changes, r); bad += not r.ok
sys.exit(1 if bad else 0)
EOF
gpu_tests=$(ls tests/test_swap_ab.py tests/test_linear.py tests/test_problem.py tests/test_linear_graph.py 2>/dev/null)
python3 -m pytest -q -m gpu $gpu_tests 2>&1 \
  | tee "$out/pytest_gpu.log" | tail -15 || status=1
[ "$what" = quick ] && exit $status
ms="1 8 16 32 64 128 256"
nks="4096x4096 14336x4096 4096x14336 6144x4096 2048x8192"
shapes=$(for m in $ms; do for nk in $nks; do echo -n "${m}x${nk} "; done; done)
python3 -m gemm_course bench sm90/12 sm90/11 --shapes $shapes --rounds 5 --repeats 50 --rotate --out "$out" --tag decode12 \
  2>&1 | tee "$out/decode12.log" | tail -40 || status=1
python3 scripts/gpu_decode_graph.py --out "$out" --steps sm90/12 sm90/11 \
  --shapes 1x4096x4096 16x4096x4096 64x4096x4096 128x4096x4096 16x14336x4096 16x4096x14336 128x14336x4096 \
  2>&1 | tee "$out/decode_graph.log" || status=1
if [ "$what" = variants ]; then
  python3 scripts/gpu_tune.py --rotate --rounds 6 --repeats 40 --out "$out" \
    --shapes 1x4096x4096 16x4096x4096 64x4096x4096 128x4096x4096 16x14336x4096 16x4096x14336 256x4096x4096 \
    sm90/11 sm90/12 "sm90/12:tile_m=64" "sm90/12:stream_k=false" "sm90/12:gather_parts=false" 2>&1 | tee "$out/tune_decode12.log" | tail -40 || status=1
fi
exit $status
