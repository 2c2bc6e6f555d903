#!/bin/bash
# Decode-sized GEMMs (records.decode_shapes: four models' linear layers at M = 128 and at one other M
# in 16..512) on the final Hopper step, against cuBLAS, with operand sets in turn so that no launch
# finds its weights in L2 (bench --rotate; each record carries its bandwidth and the run's measured
# copy bandwidth). Then what cuBLAS runs there, and the prepared A/B variants for the small-M path.
#   scripts/gpu_decode.sh OUT                (both orders: records tagged decode, decode_reversed)
#   scripts/gpu_decode.sh OUT variants       (also the A/B variants, OUT/tune_decode.json)
# The schedule copy for the more-parts variant is written on the CPU machine first:
#   python3 scripts/ab_copy.py HEAD --name sm90_parts8 --schedule MAX_PARTS=8   (carry .cache)
set -euo pipefail
out=${1:?output folder}
what=${2:-}
final=${FINAL_STEP:-sm90/11}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
shapes=$(python3 -c "from gemm_course.measure import records; print(' '.join('%dx%dx%d' % s for s in records.decode_shapes()))")
reversed=$(python3 -c "from gemm_course.measure import records; print(' '.join('%dx%dx%d' % s for s in records.decode_shapes()[::-1]))")
python3 -m gemm_course bench "$final" --shapes $shapes --rounds 5 --rotate --out "$out" --tag decode 2>&1 \
  | tee "$out/decode.log" | tail -40
python3 -m gemm_course bench "$final" --shapes $reversed --rounds 5 --rotate --out "$out" --tag decode_reversed 2>&1 \
  | tee "$out/decode_reversed.log" | tail -5
python3 scripts/cublas_kernels.py 128x4096x4096 128x14336x4096 128x4096x14336 256x8192x8192 16x4096x4096 \
  2>&1 | tee "$out/cublas_kernels_decode.txt"
if [ "$what" = variants ]; then
  variants=("$final" "$final:cluster_m=1,cluster_n=2"
            "$final:tile_n=128,stages=6,epi_n=32,cluster_m=1,cluster_n=2"
            "$final:tile_n=64,stages=8,epi_n=32,cluster_m=1,cluster_n=2"
            "$final:tile_m=64,tile_n=256,stages=5,epi_n=32,cluster_m=2,cluster_n=1")
  [ -d .cache/kernels/sm90_parts8 ] && variants+=("sm90_parts8@$final:tile_n=128,stages=6,epi_n=32,cluster_m=1,cluster_n=2")
  python3 scripts/gpu_tune.py --rotate --rounds 6 --repeats 40 --out "$out" "${variants[@]}" --shapes 128x4096x4096 \
    128x14336x4096 128x4096x14336 128x8192x8192 256x4096x4096 256x8192x28672 64x6144x4096 2>&1 \
    | tee "$out/tune_decode.log" | tail -45
fi
