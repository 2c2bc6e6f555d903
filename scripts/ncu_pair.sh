#!/bin/bash
# Nsight Compute: one launch of a step and one of cuBLAS's kernel on a shape, in one process.
#   scripts/ncu_pair.sh STEP SHAPE OUT_PREFIX
set -u
step=$1; shape=$2; out=$3
ncu --query-metrics --chip gh100 2>/dev/null | awk '{print $1}' | grep -E 'gmma|tensor_op' > "$out.metric_names.txt"
extra=""
for m in sm__pipe_tensor_op_gmma_cycles_active sm__inst_executed_pipe_tensor_op_gmma; do
  grep -qx "$m" "$out.metric_names.txt" && extra="$extra,$m.avg.pct_of_peak_sustained_active,$m.avg.pct_of_peak_sustained_elapsed,$m.sum"
done
ncu --clock-control none --kernel-name regex:'cutlass|nvjet|gemm|xmma' --launch-skip 6 --launch-count 2 \
  --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats --section MemoryWorkloadAnalysis \
  --section SchedulerStats --section LaunchStats --metrics "gpc__cycles_elapsed.avg.per_second,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_srcunit_tex_op_read.sum${extra}" \
  --export "$out" -f python3 scripts/profile_ncu.py "$step" --size "$shape" > "$out.run.log" 2>&1
ncu --import "$out.ncu-rep" --page details > "$out.details.txt" 2>&1
python3 scripts/ncu_records.py "$out.details.txt" --out "$(dirname "$out")"   # the typed record (kind: ncu)
ncu --import "$out.ncu-rep" --page raw --csv > "$out.raw.csv" 2>&1
