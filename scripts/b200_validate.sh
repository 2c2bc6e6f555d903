#!/bin/bash
# The B200 kit: validate and time the Blackwell ladder (sm100/1..12) on a B200 in one command, and
# leave the records where the book reads them. From anywhere:
#   bash scripts/b200_validate.sh OUT        (or: make b200 OUT=...)
# Phases, each logged under OUT: the GPU check (any other GPU, or none, stops at once with exit 2),
# doctor, every sm100 step in its own process (gemm_course.measure.stepwise: a watchdog debug build, the
# timed build, memcheck), the Blackwell-specific GPU tests, racecheck and synccheck on steps 5-8 and
# step 11's split tails, the ladder of the steps that passed at 4096^3 and 8192^3 against cuBLAS,
# the final step over the broad sweep in both orders (gpu_broad_sweep.sh) and its split tail against
# the same kernel without it (gpu_tune.py) if it passed, the memory-roofline step (sm100/12) beside step 11 at
# decode sizes, per launch in both orders and inside CUDA graphs, if it passed; the records copied into results/<gpu>/
# (results/nvidia-b200/ on a B200), then the tables. A step that fails is not timed: numbers of a
# wrong kernel are worthless. Exit 0: all passed; 1: something failed (OUT/status.log); 2: no B200.
# Knobs: PY (default .venv/bin/python, else python3), NAIVE=0 skips step 1, FINAL_STEP (sm100/11),
# DRY_RUN=1 prints each phase's command and runs nothing after the check.
set -u
out=${1:?usage: scripts/b200_validate.sh OUT_DIR}
mkdir -p "$out" && out=$(cd "$out" && pwd) || exit 2  # absolute: the script moves to the repo root
cd "$(dirname "$0")/.." || exit 2
if [ -z "${PY:-}" ]; then
  if [ -x .venv/bin/python ]; then PY=.venv/bin/python; else PY=python3; fi
fi
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
final=${FINAL_STEP:-sm100/11}
dry=${DRY_RUN:-0}
: > "$out/status.log"

# 1. The GPU, before anything long. The Python check prints one paragraph and exits 2 if it refuses.
$PY -m gemm_course.measure.b200 check > "$out/gpu_check.log" 2>&1
rc=$?
cat "$out/gpu_check.log"
if [ $rc != 0 ]; then
  if [ $rc != 2 ]; then  # the check itself broke (no torch, wrong python): still not a validated B200
    echo "b200_validate.sh stops: the GPU check could not run with PY=$PY (exit $rc, output above); run" \
      "'make setup' or set PY to the environment's python. This kit needs a B200-class GPU (sm_100a)." \
      "Hopper owners: scripts/gpu_ladder.sh OUT reproduces the course's H100/H200 records." | tee -a "$out/gpu_check.log"
  fi
  echo "gpu_check: refused (exit $rc)" >> "$out/status.log"
  exit 2
fi
echo "gpu_check: ok" >> "$out/status.log"
dest=results/$($PY -m gemm_course.measure.b200 slug)

failed=0
phase() {  # phase NAME LIMIT_S CMD...: run CMD (output shown and kept in OUT/NAME.log); sets $rc
  local name=$1 limit=$2
  shift 2
  local shown=${*//"$out"/OUT}  # logs name no folder of this machine: they are meant to be published
  echo
  echo "== $name: $shown"
  if [ "$dry" = 1 ]; then
    rc=0
    echo "$name: dry run: $shown" >> "$out/status.log"
    return
  fi
  local t0=$SECONDS res
  # the command's whole process tree is stopped at the limit (a sanitizer's Python child too); Ctrl-C still
  # reaches it, and stops this script
  $PY -m gemm_course.measure.bounded "$limit" --kill-after 60 -- "$@" 2>&1 | tee "$out/$name.log"
  rc=${PIPESTATUS[0]}
  case $rc in
    0) res=ok ;;
    124 | 137) res="FAILED: timed out after $limit s (a kernel may hang)" ;;
    *) res="FAILED (exit $rc)" ;;
  esac
  echo "$name: $res ($((SECONDS - t0)) s): $shown" >> "$out/status.log"
}
fail() {  # fail NAME WHY: mark a phase failed after the fact
  failed=1
  echo "$1: FAILED: $2" >> "$out/status.log"
}

# 2. Provenance: versions and which steps run here; the driver's own view of the GPU.
phase doctor 600 $PY -m gemm_course doctor
[ $rc = 0 ] || failed=1
if command -v nvidia-smi > /dev/null 2>&1; then  # named fields only: no serial numbers or UUIDs in a published log
  phase nvidia_smi 120 nvidia-smi --format=csv \
    --query-gpu=name,compute_cap,driver_version,vbios_version,memory.total,power.limit,clocks.max.sm,clocks.max.mem,pcie.link.gen.max
  if [ $rc != 0 ]; then  # a driver that names a field differently: its plain summary (no serials or UUIDs either)
    phase nvidia_smi 120 nvidia-smi
    [ $rc = 0 ] || failed=1
  fi
fi

# 3. Correctness, one process per step (gemm_course.measure.stepwise): each step's watchdog debug build on small
# ragged shapes (a wait that never completes names its barrier and traps), then its timed build on the
# GPU tests' random shapes, then memcheck; a step that fails or hangs is reported and the next one runs.
sanitizer=$(command -v compute-sanitizer || ls "${CUDA_HOME:-/usr/local/cuda}"/bin/compute-sanitizer 2>/dev/null | head -1)
steps="sm100/2 sm100/3 sm100/4 sm100/5 sm100/6 sm100/7 sm100/8 sm100/9 sm100/10 sm100/11 sm100/12"
[ "${NAIVE:-1}" = 0 ] || steps="sm100/1 $steps"
phase stepwise 43200 $PY -m gemm_course.measure.stepwise run "$out" $steps ${sanitizer:+--sanitizer "$sanitizer"}
[ $rc = 0 ] || failed=1
passed="$steps"
if [ "$dry" != 1 ]; then
  passed=$($PY -m gemm_course.measure.stepwise passed "$out" 2>/dev/null)
fi

# 4. The Blackwell-specific GPU tests in one process (K tails, partial tiles, cluster shapes, step 7's
# knobs, CLC grids, refusals); the per-step checks above already ran. Reported; the timing of the
# steps that passed goes on either way.
# With the watchdog (a hung kernel traps and names its barrier instead of holding the GPU to the limit), and
# without the steps stepwise failed
unchecked=$(for s in $steps; do echo " $passed " | grep -q " $s " || echo -n " and not $s] and not $s-"; done)  # test ids: [..-sm100/5]
phase pytest_gpu 5400 env GEMM_COURSE_WATCHDOG=1 $PY -m pytest -q -m gpu -k "not sm90 and not random_shapes$unchecked" \
  -rfEs -p no:cacheprovider --junitxml="$out/pytest_gpu.xml" tests/test_gpu.py
if [ "$dry" != 1 ]; then
  if [ $rc != 0 ]; then
    failed=1
  elif ! grep -Eq "[0-9]+ passed" "$out/pytest_gpu.log"; then
    fail pytest_gpu "no GPU test ran (all skipped?)"
  fi
fi

# 5. racecheck and synccheck on small shapes of steps 5-8 and two split tails of step 11 (memcheck ran
# per step above). Reported, not a gate: they may not see through a TMA or tcgen05 hand-over, but a
# wrong output drops the steps it names from the timing.
if [ -n "$sanitizer" ]; then
  for tool in racecheck synccheck; do
    phase "sanitize_$tool" 1800 "$sanitizer" --tool "$tool" --error-exitcode 86 \
      $PY scripts/b200_sanitize.py "$tool"
    if [ "$dry" != 1 ] && [ $rc != 0 ]; then
      failed=1
      for key in $(grep -E " FAIL$" "$out/sanitize_$tool.log" | cut -d" " -f1 | sort -u); do
        passed=$(echo " $passed " | sed "s| $key | |; s|^ *||; s| *$||")
      done
    fi
  done
else
  echo
  echo "compute-sanitizer is neither on PATH nor in \${CUDA_HOME:-/usr/local/cuda}/bin: the sanitizer phases are skipped." \
    "It ships with the CUDA toolkit (Ubuntu: apt-get install cuda-sanitizer-12-8, or a newer version); put its bin/" \
    "folder on PATH and run the kit again to include it." | tee "$out/sanitize_skipped.log"
  echo "sanitize: SKIPPED (no compute-sanitizer): memory errors are not checked" >> "$out/status.log"
fi

# 6. Timing of the steps that passed: numbers of a wrong kernel are worthless. The decode step runs step
# 11's config at 4096 and 8192 (the ladder figure ignores such records): it is timed at its own shapes (6c).
decode_of="from gemm_course.measure import b200"
decode=$($PY -c "$decode_of; print(b200.decode_step_key())")
ladder_steps=$(echo " $passed " | sed "s| $decode | |; s|^ *||; s| *$||")
if [ -n "$ladder_steps" ]; then
  phase ladder 5400 $PY -m gemm_course bench $ladder_steps --shapes 4096 8192 --out "$out" --tag ladder
  [ $rc = 0 ] || failed=1
else
  echo "ladder: skipped (no step passed its checks)" >> "$out/status.log"
fi
if echo " $passed " | grep -q " $final "; then
  # the broad sweep of scripts/gpu_broad_sweep.sh (squares, LLM shapes, few-wave long-K), in both
  # orders, with the course's Triton matmul beside cuBLAS where Triton is installed
  shapes_of="from gemm_course.measure import bench; shapes = ['%dx%dx%d' % s for g in bench.broad_sweep_shapes().values() for s in g]"
  broad=$($PY -c "$shapes_of; print(' '.join(shapes))")
  backwards=$($PY -c "$shapes_of; print(' '.join(shapes[::-1]))")
  peers=""
  $PY -c "import triton" 2>/dev/null && peers="--peers triton"
  phase broad_sweep 5400 $PY -m gemm_course bench "$final" --shapes $broad --rounds 5 $peers \
    --out "$out" --tag broad_sweep
  [ $rc = 0 ] || failed=1
  phase broad_sweep_reversed 5400 $PY -m gemm_course bench "$final" --shapes $backwards --rounds 5 $peers \
    --out "$out" --tag broad_sweep_reversed
  [ $rc = 0 ] || failed=1
  # step 11's split tail against the same kernel without it, interleaved (gemm_course.measure.b200.TAIL_AB_*):
  # what prices a hand-over (schedule.FIXUP_K_TILES) on a B200
  tail_of="from gemm_course.measure import b200"
  tail_variants=$($PY -c "$tail_of; print(' '.join(b200.TAIL_AB_VARIANTS))")
  tail_shapes=$($PY -c "$tail_of; print(' '.join(b200.TAIL_AB_SHAPES))")
  phase tail_ab 3600 $PY scripts/gpu_tune.py $tail_variants --shapes $tail_shapes --out "$out/tail_ab"
  [ $rc = 0 ] || failed=1
else
  echo "broad_sweep, broad_sweep_reversed, tail_ab: skipped ($final did not pass its checks)" >> "$out/status.log"
fi
# 6c. The memory roofline (chapter 12): the decode step beside step 11 at M = 1-256 on real layers' weights
# rotated out of L2, in both orders, then inside CUDA graphs; only where the decode step passed its checks
if echo " $passed " | grep -q " $decode "; then
  against=""
  echo " $passed " | grep -q " $final " && against=$final
  phase decode12 1800 $PY -m gemm_course bench $decode $against \
    --shapes $($PY -c "$decode_of; print(b200.decode_shapes_text())") --rounds 5 --repeats 50 --rotate \
    --out "$out" --tag decode12
  [ $rc = 0 ] || failed=1
  phase decode12_reversed 1800 $PY -m gemm_course bench $against $decode \
    --shapes $($PY -c "$decode_of; print(b200.decode_shapes_text(reverse=True))") --rounds 5 --repeats 50 --rotate \
    --out "$out" --tag decode12_reversed
  [ $rc = 0 ] || failed=1
  phase decode_graph 1800 $PY scripts/gpu_decode_graph.py --out "$out" --steps $decode $against \
    --shapes $($PY -c "$decode_of; print(' '.join(b200.DECODE_GRAPH_SHAPES))")
  [ $rc = 0 ] || failed=1
  # the early launch, off on Blackwell until measured: at the start or after the loads, inside graphs
  # (records of kind decode_graph_ab, which the chapter's decode figures leave out)
  phase decode_graph_launch 900 $PY scripts/gpu_decode_graph.py --out "$out" --kind decode_graph_ab \
    --tag decode_graph_launch --steps $($PY -c "$decode_of; print(' '.join(b200.decode_launch_variants()))") \
    --shapes $($PY -c "$decode_of; print(' '.join(b200.DECODE_LAUNCH_SHAPES))")
  [ $rc = 0 ] || failed=1
else
  echo "decode12, decode12_reversed, decode_graph, decode_graph_launch: skipped ($decode did not pass its checks)" \
    >> "$out/status.log"
fi
correct=0
[ -z "$passed" ] || correct=1
if [ $correct = 1 ]; then
  # 6b. Into results/<gpu>/, where records.load_records (and so the book) reads them.
  phase copy 300 $PY -m gemm_course.measure.b200 copy "$out"
  [ $rc = 0 ] || failed=1
else
  echo
  echo "No step passed its checks: the benchmarks are skipped and nothing is copied under results/." \
    | tee "$out/skipped.log"
  echo "copy: skipped (no step passed)" >> "$out/status.log"
fi

# 7. What happened, the numbers, and how to send them: the logs, redacted, also go to results/logs/.
tabled=0
if [ "$dry" != 1 ] && [ $correct = 1 ]; then
  $PY -m gemm_course.measure.b200 table "$out" > "$out/summary.log" 2>&1
  tabled=1
fi
$PY -m gemm_course.measure.b200 redact "$out" "$PWD"
[ "$dry" = 1 ] || $PY -m gemm_course.measure.b200 logs "$out" > "$out/published_logs.txt"
echo
echo "== status (OUT/status.log)"
cat "$out/status.log"
if [ "$dry" != 1 ] && [ -f "$out/stepwise/summary.json" ]; then
  echo
  echo "== steps (OUT/step_*.log): each in its own process, a watchdog debug build first"
  $PY -m gemm_course.measure.stepwise table "$out"
fi
if [ $tabled = 1 ]; then
  echo
  echo "== records (OUT/summary.log): TFLOP/s (median) and ratio to cuBLAS timed in the same run"
  cat "$out/summary.log"
fi
echo
# the course's address: repository.url in _config.yml (the one setting the book's pages read too)
repo=$($PY -m gemm_course.measure.b200 repository 2>/dev/null)
if [ -n "$repo" ]; then
  repo="the course's repository, $repo,"
else
  repo="the course's repository (not published at a public address yet: send the files to whoever gave you the course)"
fi
echo "To see them in the book: bash scripts/render_records.sh (the chapters, the results page and the intro's box)."
if [ $correct = 1 ]; then
  echo "To contribute: open a pull request on $repo that adds the new files of"
  echo "$dest/ (the book's figures read every record under results/), results/tuning/tune_b200_tail_split_*.json.gz"
  echo "(the tail A/B) and results/logs/*_b200_*.log (this run's logs, listed in OUT/published_logs.txt);"
  echo "say which cloud instance ran them. (OUT = $out)"
else
  echo "To report: open an issue or a pull request on $repo with this run's logs,"
  echo "results/logs/*_b200_*.log (listed in OUT/published_logs.txt): they show what a B200 does with the"
  echo "Blackwell steps. (OUT = $out)"
fi
grep -q "^sanitize: SKIPPED" "$out/status.log" && echo "Note: compute-sanitizer was not found, so memory errors were not checked (OUT/sanitize_skipped.log)."
exit $failed
