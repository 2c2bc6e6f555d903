#!/bin/bash
# Reproduce the course's H200 records: GPU correctness tests, every Hopper step against cuBLAS
# at 4096^3 and 8192^3, and the final step over the sweep (squares and LLM shapes).
# On a GPU machine, from the repo root:  scripts/gpu_ladder.sh OUT_DIR
# (NAIVE=0 skips step 1, whose kernel rarely changes and takes a while at 8192^3)
set -u
out=${1:?output folder}
final=${FINAL_STEP:-sm90/11}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
python3 -m gemm_course doctor > "$out/doctor.log" 2>&1
python3 -m pytest -q -m gpu tests 2>&1 | tee "$out/pytest_gpu.log" | tail -3
if [ "${NAIVE:-1}" != 0 ]; then
  python3 -m gemm_course bench sm90/1 --shapes 4096 --repeats 10 --rounds 2 --warmup 2 --out "$out" --tag naive 2>&1 | tail -2
fi
python3 -m gemm_course bench sm90/2 sm90/3 sm90/4 sm90/5 sm90/6 sm90/7 sm90/8 sm90/9 sm90/10 sm90/11 \
  --shapes 4096 8192 --out "$out" --tag ladder 2>&1 | tee "$out/ladder.log" | tail -21
llm=""
for n in 4096 6144 14336 28672; do for k in 4096 6144 14336 28672; do llm="$llm 8192x${n}x${k}"; done; done
python3 -m gemm_course bench "$final" --shapes 2048 4096 8192 12288 16384 $llm --rounds 5 \
  --out "$out" --tag sweep 2>&1 | tee "$out/sweep.log" | tail -22
