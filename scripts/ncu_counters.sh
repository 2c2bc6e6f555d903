#!/bin/bash
# Nsight Compute counters of where operand bytes go (L2 lookups, crossbar bytes into the SMs,
# shared-memory bank reads and writes, DRAM, and the L2 request coalescer where this ncu knows it),
# for ladder steps and cuBLAS's kernel in one process.
#   scripts/ncu_counters.sh OUT_DIR        (writes OUT_DIR/ncu_SHAPE.txt)
#   STEPS="sm90/8 sm90/10" SHAPES="4096" scripts/ncu_counters.sh OUT_DIR
set -u
out=$1
steps=${STEPS:-sm90/11}
shapes=${SHAPES:-4096 8192x4096x28672}
ncu --query-metrics --chip gh100 2>/dev/null | awk '{print $1}' > $out/names.txt  # only the names this ncu knows
want="lts__t_sectors_srcunit_tex_op_read lts__t_requests_srcunit_tex_op_read l1tex__m_xbar2l1tex_read_bytes lts__t_sectors_srcunit_ltcfabric lts__t_sectors_op_read lts__t_sectors_srcunit_tex_op_read_lookup_hit smsp__inst_executed l1tex__data_pipe_lsu_wavefronts_mem_shared sm__sass_data_bytes_mem_shared l1tex__data_bank_reads l1tex__data_bank_writes lts__t_sectors_srcunit_tex_op_write dram__bytes_read gpu__time_duration sm__cycles_active lts__t_sectors_srcunit_tex lts__t_requests_srcunit_tex_op_read_lookup_hit l1tex__m_l1tex2xbar_write_bytes smsp__inst_executed_op_ldsm smsp__sass_inst_executed_op_shared_st"
want="$want $(grep '^lrc__' $out/names.txt | tr '\n' ' ')"
m=""
for w in $want; do grep -qx "$w" $out/names.txt && m="$m,$w.sum" || echo "no metric $w"; done
m=${m#,}
n=$(( $(echo $steps | wc -w) + 1 ))  # kernels per round: the steps, then cuBLAS
for shape in $shapes; do
  ncu --clock-control none --kernel-name regex:'Gemm|nvjet' --launch-skip $((2 * n)) --launch-count $n --metrics "$m" \
    python3 scripts/profile_ncu.py $steps --size $shape --launches 4 > $out/ncu_$shape.txt 2>&1
done
rm -f $out/names.txt
python3 scripts/ncu_records.py $out/ncu_*.txt --out $out   # the typed records the book reads (kind: ncu)
