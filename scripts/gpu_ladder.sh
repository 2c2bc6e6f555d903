#!/bin/bash
# Reproduce the course's H200 records: correctness tests, then every Hopper step against cuBLAS.
# Usage on a GPU machine, from the repo root:  scripts/gpu_ladder.sh OUT_DIR [STEPS...]
# (on the course's lent H200:  source .device/activate.sh && scripts/gpu_ladder.sh $OUT)
set -u
out=${1:?output folder}; shift
steps=${*:-"sm90/2 sm90/3 sm90/4 sm90/5 sm90/6 sm90/7 sm90/8 sm90/9 sm90/10"}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
python3 -m gemm_course doctor > "$out/doctor.log" 2>&1
python3 -m pytest -q -m gpu tests 2>&1 | tee "$out/pytest_gpu.log" | tail -5
python3 -m gemm_course bench sm90/1 --shapes 4096 --repeats 10 --rounds 2 --warmup 2 --out "$out" --tag naive 2>&1 | tail -3
python3 -m gemm_course bench $steps --shapes 4096 8192 --out "$out" --tag ladder 2>&1 | tee "$out/bench.log" | tail -14
