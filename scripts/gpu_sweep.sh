#!/bin/bash
# Sweep configurations of one step at 4096^3 and 8192^3 (records tagged 'sweep').
# Usage: scripts/gpu_sweep.sh OUT_DIR STEP "cfg1" "cfg2" ...   e.g. "stages=3 epi_n=64 epi_stages=4"
set -u
out=${1:?output folder}; step=${2:?step}; shift 2
for cfg in "$@"; do
  echo "== $step $cfg"
  python3 -m gemm_course bench "$step" --shapes 4096 8192 --config $cfg --out "$out" --tag sweep 2>&1 | tail -3
done
