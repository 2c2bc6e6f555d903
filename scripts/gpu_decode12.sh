#!/bin/bash
# Step 12 (swap A and B for decode-sized GEMMs) on a Hopper GPU. Phases, by name (any order):
#   check  correctness on unseen shapes (M = 1 .. 300, K not a multiple of 64, both tile heights, with
#          and without the stream-K split and the gathered hand-over, at long K with the classic tail
#          and with step 11's lockstep), NaN-poisoned outputs against float32; then the gpu tests of
#          step 12, the drop-in linear (CUDA graphs, torch.compile) and the operand checks, linear's
#          kept calls (views per call, kept arguments); where linear's host time per call goes, with
#          kept arguments off and on (scripts/gpu_linear_host.py)
#   tune   the interleaved A/B of the rule's choices against sm90/11 and cuBLAS, weights rotated out of
#          L2 (OUT/tune_few_tokens/tune.json, OUT/tune_token_tiles/tune.json): at M <= 16 the tile
#          height, the split and the hand-over; at M = 64-128 the tokens split over tiles of 32 or 64
#   tune256  the same at M = 128-256: cuBLAS's 64 x 64 tile (tokens in two tiles), with multicast of
#          x or of W, split along K; two 128-token tiles at M = 256 (OUT/tune_256/tune.json)
#   tune_pairs  token tiles in pairs where the rule does not pair them: M = 64, 128-row W tiles, M = 256
#          (OUT/tune_pairs_64/tune.json, OUT/tune_pairs_256/tune.json)
#   tune_few_w  at 256 tokens over 16-48 tiles of W: the pair split along K, four 64-token tiles in pairs
#          (OUT/tune_few_w/tune.json)
#   tune_prefetch  W's first K tiles into L2 before pdl's wait, 4 to 64 of them, against none and against no pdl
#          (OUT/tune_prefetch/tune.json)
#   tune_more  pairs of 16-token tiles at M = 32, 128-row pairs at M = 64 (OUT/tune_more/tune.json)
#   tune_256b  at M = 256: the pairs split by the stream-K tail, step 11's kernel with 112- or 96-wide W tiles
#          multicast to both token tiles, cuBLAS's swapped 64 x 64 tile with both operands multicast,
#          the pairs in 2 x 2 clusters, all 256 tokens in one tile
#          (OUT/tune_256b/tune.json)
#   tune_handover  at M = 256, the split's hand-over: a split layer against the same CTAs with K whole, the
#          gathered hand-over against step 11's, W cold and warm; K split or whole at K = 4096-8192
#          (OUT/tune_handover{,_warm,_k}/tune.json)
#   tune_rows_in_n  at 129-256 tokens over 128-row W tiles, step 11's kernel with 96, 112 or 128 W rows per CTA
#          against the rule's width (OUT/tune_rows_in_n/tune.json)
#   tune_partial_m  at 160 and 200 tokens (token tiles partly empty) over 128-row W tiles: the rule (step 11's kernel,
#          W's rows in N) against step 11 and the pairs over 64- or 128-row W tiles (OUT/tune_partial_m_{160,200}/tune.json)
#   chapter  chapter 12 executed top to bottom on the GPU (OUT/12_memory_roofline.gpu.ipynb, OUT/chapter12_gpu.log)
#   bench  the decode class at M in {1, 8, 16, 32, 64, 128, 256} against cuBLAS, per launch, weights
#          rotated out of L2, sm90/11 in the same rounds (records tagged decode12)
#   reversed  bench with the shapes and the steps in the other order (records tagged decode12_reversed)
#   graphs the same inside CUDA graphs (scripts/gpu_decode_graph.py, records tagged decode_graph); the
#          kernels cuBLAS runs there and where it led step 12 (scripts/cublas_kernels.py, records tagged cublas_kernels)
#   graphs_prefetch  inside CUDA graphs at the 32 MB layer: W's first 8 or 32 K tiles into L2 before pdl's
#          wait, against none, against no pdl and against K split in two (every SM streaming), with either
#          hand-over (records of kind
#          decode_graph_ab, tag decode_graph_prefetch)
#   graphs_launch  inside CUDA graphs at the 32 MB layer, 1-64 tokens: the next kernel launched once the loads
#          are issued (launch_after_loads) with 0-32 K tiles of W prefetched, against the launch at the start;
#          8 stages (records of kind decode_graph_ab, tag decode_graph_launch)
#   graphs_m1_second  inside CUDA graphs, one token measured after 16 (every graph run so far measured M = 1 first,
#          and it alone gained nothing from the late launch): the rule, late launch with 8 K tiles prefetched, neither
#          (records of kind decode_graph_ab, tag decode_graph_m1_second)
#   m1_late  one token, where the late launch would apply (K whole, tiles on at most half the SMs): the rule
#          against the late launch with 8 K tiles prefetched, per launch (OUT/tune_m1_late/tune.json) and inside
#          CUDA graphs after 16 tokens (records of kind decode_graph_ab, tag decode_graph_m1_late): whether
#          LATE_FROM_M may be 1
#   m1_w   W before the wait with few K tiles (4) against many (64), each with the launch at the start and no
#          prefetch, and the 22 stages that fit at 64 x 16 with and without it, against the rule: per launch at
#          one token's five layers and 16 tokens' two (OUT/tune_m1_w/tune.json), then inside CUDA graphs after
#          16 tokens (tag decode_graph_m1_w): whether the x behind W's queued loads costs per launch
#   w_more  W before the wait with 8 and 16 K tiles, and 4 with 24 more put in L2 (prefetch requests return
#          nothing to the SM, so x need not queue behind them), against the rule (4), per launch at one token's
#          five layers (OUT/tune_w_more/tune.json) and inside CUDA graphs after 16 tokens (tag decode_graph_w_more)
#   split2048  the 2048 x 8192 layer at 1-16 tokens (stream-K over 32 W tiles: 78-81% in graphs): parts per
#          tile instead of stream-K, and 128-row W tiles, per launch (OUT/tune_split2048/tune.json) and in
#          graphs (tag decode_graph_split2048)
#   w_early_check  W's first K tiles loaded into the stages before pdl's wait (w_before_wait, as many as the
#          stages hold), checked on unseen shapes and in the chained-layer gpu tests
#   w_early  the same against the rule (each variant checked against float32 first) per launch
#          (OUT/tune_w_early/tune.json) and inside CUDA graphs, with the rule's launch, with the launch at the
#          start and with the launch after the loads, 8 K tiles more prefetched (16 tokens first; records of kind
#          decode_graph_ab, tag decode_graph_w_early); before it, at 64 x 16 tiles, with the 22 stages that fit
#          against the rule's 16, so that more of W goes before the wait (tag decode_graph_w_early_stages)
#   sweep  bench, then graphs
# Times on an H100 (2026-12-07): check 80-100 s, a tune phase 20-55 s, bench 90 s, reversed 65 s, graphs
# 35 s, chapter 40 s; a device call runs at most 10 minutes, and a cold start takes about 2 of them:
#   scripts/gpu_decode12.sh OUT check tune_prefetch tune_more   (then)   scripts/gpu_decode12.sh OUT bench graphs reversed chapter
# Then, wherever OUT is: `python -m gemm_course.measure.device_runs OUT --stamp <the run's UTC minute>
# --prefix decode12` files it: records under results/<gpu>/ (a file with a wrong output is not copied), each
# OUT/NAME/tune.json (an A/B's raw rows) as results/tuning/tune_runN_decode12_NAME.json.gz, logs under results/logs/.
set -uo pipefail
out=${1:?output folder}
shift
mkdir -p "$out"
export PYTHONUNBUFFERED=1
status=0
# ab NAME WHAT SHAPES GRAPH_SHAPES VARIANT...: the variants against step 12's rule, per launch with weights rotated
# out of L2 (OUT/tune_NAME/tune.json), then inside CUDA graphs (records of kind decode_graph_ab, tag decode_graph_NAME)
ab() {
  local name=$1 what=$2 shapes=$3 graph_shapes=$4
  shift 4
  python3 scripts/gpu_tune.py --rotate --rounds 7 --repeats 30 --out "$out/tune_$name" --what "$what" \
    sm90/12 "$@" --shapes $shapes 2>&1 | tee "$out/tune_$name.log" | tail -30 || status=1
  python3 scripts/gpu_decode_graph.py --out "$out" --kind decode_graph_ab --tag "decode_graph_$name" \
    --steps sm90/12 "$@" --shapes $graph_shapes 2>&1 | tee "$out/decode_graph_$name.log" || status=1
}
for phase in "$@"; do
case $phase in
check)
python3 - <<'EOF' 2>&1 | tee "$out/check12.log" || status=1
import dataclasses, sys
from gemm_course.runtime import ladder, run
from gemm_course.runtime.problem import GemmProblem
step = ladder.get("sm90/12")
shapes = [(1, 4096, 4096), (7, 1024, 520), (8, 2048, 8192), (16, 4096, 14336), (33, 14336, 4096), (64, 1024, 4096),
          (100, 2048, 1000), (128, 4096, 4096), (200, 3072, 1032), (256, 8192, 1024), (300, 2048, 2048), (1, 8, 8),
          (65, 3072, 1032), (72, 4096, 520), (120, 2048, 14336), (40, 4096, 1000), (160, 6144, 2048),
          (250, 14336, 1032), (24, 4096, 4096), (32, 2048, 8192)]  # the last eight: token tiles in pairs
bad = 0
for r in run.check(step, shapes, seed=11):
    print(r); bad += not r.ok
for changes in ({"tile_m": 64}, {"stream_k": False}, {"stream_k": True}, {"gather_parts": False}, {"max_parts": 4},
                {"tile_m": 64, "max_parts": 16}):
    for shape in [(1, 4096, 4096), (48, 2048, 1032), (128, 6144, 4096), (16, 1024, 8192)]:
        config = dataclasses.replace(step.config_for(GemmProblem(*shape)), **changes)
        for r in run.check(step, [shape], config=config, seed=23):
            print(changes, r); bad += not r.ok
for changes in ({}, {"lockstep": True}, {"lockstep": True, "tile_m": 64}):  # long K: the classic tail, and step 11's lockstep
    for shape in [(16, 4096, 14336), (128, 2048, 14336), (1, 1024, 9216)]:
        config = dataclasses.replace(step.config_for(GemmProblem(*shape)), **changes)
        for r in run.check(step, [shape], config=config, seed=29):
            print(changes, r); bad += not r.ok
sys.exit(1 if bad else 0)
EOF
gpu_tests=$(ls tests/test_swap_ab.py tests/test_linear.py tests/test_problem.py tests/test_linear_graph.py tests/test_linear_kept.py 2>/dev/null)
timeout 240 python3 -m pytest -q -m gpu $gpu_tests 2>&1 | tee "$out/pytest_gpu.log" | tail -15 || status=1
python3 scripts/gpu_linear_host.py --m 16 2>&1 | tee "$out/linear_host.txt" || status=1  # linear's host time, by part
;;
tune)
# at M <= 16 (one 16-token tile): the rule's tile height against 128 rows, and its split against none;
# programmatic dependent launch (pdl): its gain is in the back-to-back column ("seed"), where each
# launch may start while the one before runs
python3 scripts/gpu_tune.py --rotate --rounds 5 --repeats 30 --out "$out/tune_few_tokens" \
  sm90/11 sm90/12 "sm90/12:tile_m=128,stages=12" "sm90/12:stream_k=false" "sm90/12:max_parts=8" "sm90/12:gather_parts=false" \
  "sm90/12:pdl=true" \
  --shapes 1x4096x4096 16x4096x4096 16x6144x4096 16x2048x8192 16x14336x4096 16x4096x14336 16x1024x4096 \
  2>&1 | tee "$out/tune_few_tokens.log" | tail -40 || status=1
# at M = 64-128: the tokens in one tile against tiles of 32 or 64 tokens (cuBLAS's choice there), as
# fewer parts per tile, alone and in 1 x 2 clusters that multicast W to both token tiles (as cuBLAS);
# at 6 stages, which every tile here fits, beside the rule's at 6 stages; and the rule against no split
python3 scripts/gpu_tune.py --rotate --rounds 5 --repeats 30 --out "$out/tune_token_tiles" \
  sm90/11 sm90/12 "sm90/12:stages=6" "sm90/12:tile_n=32,epi_n=32,stages=6" "sm90/12:tile_n=64,epi_n=64,stages=6" \
  "sm90/12:tile_n=32,epi_n=32,cluster_n=2,stages=6" "sm90/12:tile_n=64,epi_n=64,cluster_n=2,stages=6" \
  "sm90/12:stream_k=false" \
  --shapes 64x4096x4096 128x4096x4096 64x14336x4096 128x14336x4096 128x4096x14336 128x2048x8192 \
  2>&1 | tee "$out/tune_token_tiles.log" | tail -40 || status=1
;;
tune256)
# at M = 128-256: cuBLAS's tile there (64 rows of W x 64 tokens, 13 stages, K whole: nvjet 64x64_64x13_2x1), alone,
# in 2 x 1 clusters that multicast x (as cuBLAS) and in 1 x 2 clusters that multicast W; split along K;
# and 128-token tiles (two at M = 256), each spelled out in full so that it applies above SWAP_MAX_M
t64="swap_ab=true,tile_m=64,tile_n=64,epi_n=64,epi_stages=1,stages=13,cluster_m=1,cluster_n=1,gpc_order=false,lockstep=false,gather_parts=true,stream_k=false"
python3 scripts/cublas_kernels.py --out "$out" 128x2048x8192 128x14336x4096 256x4096x4096 256x14336x4096 256x4096x14336 256x2048x8192 \
  2>&1 | tee "$out/cublas_kernels_256.txt" | tail -7
python3 scripts/gpu_tune.py --rotate --rounds 5 --repeats 30 --out "$out/tune_256" \
  sm90/11 sm90/12 "sm90/12:$t64" "sm90/12:${t64/cluster_m=1/cluster_m=2}" "sm90/12:${t64/cluster_n=1/cluster_n=2}" \
  "sm90/12:${t64/stream_k=false/stream_k=true}" "sm90/12:$(echo $t64 | sed 's/tile_n=64/tile_n=128/; s/stages=13/stages=9/')" \
  --shapes 128x4096x4096 128x2048x8192 128x14336x4096 128x4096x14336 128x6144x4096 \
  256x4096x4096 256x14336x4096 256x4096x14336 256x2048x8192 256x6144x4096 \
  2>&1 | tee "$out/tune_256.log" | tail -80 || status=1
;;
tune_pairs)
# token tiles in pairs (1 x 2 clusters multicasting W) where the rule does not pair them: two 32-token tiles
# at M = 64 (16 stages, K whole or split); 128-row W tiles at 6144 and 14336 rows (M = 128); two 128-token
# tiles, or four 64-token ones over 128 rows, at M = 256 (spelled out in full, so that they apply above SWAP_MAX_M)
pair="swap_ab=true,epi_stages=1,cluster_m=1,cluster_n=2,gpc_order=false,lockstep=false,gather_parts=true,stream_k=false"
python3 scripts/gpu_tune.py --rotate --rounds 5 --repeats 30 --out "$out/tune_pairs_64" \
  sm90/11 sm90/12 "sm90/12:$pair,tile_m=64,tile_n=32,epi_n=32,stages=16" \
  "sm90/12:${pair/stream_k=false/stream_k=true},tile_m=64,tile_n=32,epi_n=32,stages=16" \
  --shapes 64x4096x4096 64x2048x8192 64x4096x14336 64x6144x4096 64x14336x4096 \
  2>&1 | tee "$out/tune_pairs_64.log" | tail -30 || status=1
python3 scripts/gpu_tune.py --rotate --rounds 5 --repeats 30 --out "$out/tune_pairs_256" \
  sm90/11 sm90/12 "sm90/12:$pair,tile_m=64,tile_n=128,epi_n=64,stages=9" "sm90/12:$pair,tile_m=128,tile_n=64,epi_n=64,stages=8" \
  "sm90/12:$pair,tile_m=128,tile_n=128,epi_n=64,stages=6" \
  --shapes 128x6144x4096 128x14336x4096 256x4096x4096 256x2048x8192 256x4096x14336 256x6144x4096 256x14336x4096 \
  2>&1 | tee "$out/tune_pairs_256.log" | tail -40 || status=1
;;
tune_few_w)
# at 256 tokens over few W tiles (1024-3072 rows: 16-48 tiles for 66 pairs), where the pair's K-whole tile
# leaves SMs idle: the pair split along K, and four 64-token tiles in pairs, whole and split
pair="swap_ab=true,epi_stages=1,cluster_m=1,cluster_n=2,gpc_order=false,lockstep=false,gather_parts=true"
python3 scripts/gpu_tune.py --rotate --rounds 5 --repeats 30 --out "$out/tune_few_w" \
  sm90/11 sm90/12 "sm90/12:$pair,tile_m=64,tile_n=128,epi_n=64,stages=9,stream_k=false" \
  "sm90/12:$pair,tile_m=64,tile_n=128,epi_n=64,stages=9,stream_k=true" \
  "sm90/12:$pair,tile_m=64,tile_n=64,epi_n=64,stages=13,stream_k=false" "sm90/12:$pair,tile_m=64,tile_n=64,epi_n=64,stages=13,stream_k=true" \
  --shapes 256x2048x8192 256x2048x4096 256x1024x8192 256x3072x4096 \
  2>&1 | tee "$out/tune_few_w.log" | tail -30 || status=1
;;
tune_prefetch)
# with pdl, W's first K tiles put in L2 before the wait (prefetch_w; the rule's for pairs): its gain is in the back-to-back
# column ("seed"), where each launch may start while the one before drains; per launch it should tie
python3 scripts/gpu_tune.py --rotate --rounds 5 --repeats 30 --out "$out/tune_prefetch" \
  --what "step 12 with W's first 4-64 K tiles put in L2 before pdl's wait, against none and against no pdl" \
  sm90/12 "sm90/12:prefetch_w=0" "sm90/12:prefetch_w=4" "sm90/12:prefetch_w=8" "sm90/12:prefetch_w=16" "sm90/12:prefetch_w=64" \
  "sm90/12:pdl=false,prefetch_w=0,launch_after_loads=false,w_before_wait=0" \
  --shapes 1x4096x4096 16x4096x4096 64x4096x4096 128x4096x4096 16x2048x8192 16x14336x4096 256x2048x8192 \
  2>&1 | tee "$out/tune_prefetch.log" | tail -50 || status=1
;;
tune_more)
# what the rule leaves out, at 32 and 64 tokens: two 16-token tiles in a pair at M = 32 (64-row W tiles,
# where 64-row pairs fit), and 128-row pairs at M = 64 (6144 and 14336 rows, where 64-row pairs do not)
pair="swap_ab=true,epi_stages=1,cluster_m=1,cluster_n=2,gpc_order=false,lockstep=false,gather_parts=true,stream_k=false"
python3 scripts/gpu_tune.py --rotate --rounds 5 --repeats 30 --out "$out/tune_more" \
  --what "two 16-token tiles in a pair at M = 32; 128-row pairs at M = 64" \
  sm90/11 sm90/12 "sm90/12:$pair,tile_m=64,tile_n=16,epi_n=16,stages=16" "sm90/12:$pair,tile_m=128,tile_n=32,epi_n=32,stages=10" \
  --shapes 32x4096x4096 32x2048x8192 32x4096x14336 64x6144x4096 64x14336x4096 32x6144x4096 \
  2>&1 | tee "$out/tune_more.log" | tail -30 || status=1
;;
tune_256b)
# 256 tokens where W's tiles fill the pairs unevenly (6144 and 14336 rows) or few (2048 x 8192): the rule's
# pairs split along K by the stream-K tail; step 11's kernel (tokens in M) with W's rows in 112- or 96-wide
# tiles, each W tile multicast to both 128-token tiles, or a token tile to two W tiles (cuBLAS ran 112 x 128
# in clusters of two along W's rows at 14336 rows); cuBLAS's 64 x 64 tile (W rows x tokens: four token tiles)
# at 13 stages with both operands multicast (x or W alone lost, 0.57-0.84 of cuBLAS: results/logs/20261207T1018_tune_256.log); fewer bytes from L2 to the SMs: the rule's pairs with x multicast to
# two W tiles too (2 x 2 clusters), and all 256 tokens in one tile (64 or 128 W rows), x multicast to two, K split
s11="sm90/11:epi_stages=1,cluster_m=2,cluster_n=1,stages=7"
sw64="sm90/12:tile_m=64,tile_n=64,epi_n=64,stages=13,stream_k=false"
sw256="sm90/12:tile_n=256,epi_n=64,epi_stages=1,cluster_m=2,cluster_n=1,stream_k=true"  # all 256 tokens in one tile
python3 scripts/cublas_kernels.py --out "$out" 256x14336x4096 256x6144x4096 256x2048x8192 256x4096x4096 256x4096x14336 \
  2>&1 | tee "$out/cublas_kernels_256b.txt" | tail -5
python3 scripts/gpu_tune.py --rotate --rounds 5 --repeats 30 --out "$out/tune_256b" \
  --what "M = 256: the rule's pairs split by the stream-K tail, step 11's kernel with 112/96-wide W tiles, cuBLAS's 64 x 64 tile multicast" \
  sm90/11 sm90/12 "sm90/12:stream_k=true" "sm90/12:tile_m=64,stages=9,stream_k=true" \
  "$s11,tile_n=112,epi_n=16" "$s11,tile_n=96,epi_n=32" "$s11,tile_n=112,epi_n=16,cluster_m=1,cluster_n=2" \
  "$sw64,cluster_m=2,cluster_n=2" \
  "sm90/12:cluster_m=2" "$sw256,tile_m=64,stages=5" "$sw256,tile_m=128,stages=4" "$sw256,tile_m=128,stages=4,max_parts=8" \
  --shapes 256x14336x4096 256x6144x4096 256x2048x8192 256x4096x4096 256x4096x14336 \
  2>&1 | tee "$out/tune_256b.log" | tail -40 || status=1
# the same kernels with W left in L2 (32 MB layers fit the 50 MB): if step 12 takes as long as with W from HBM,
# the bytes from L2 to the SMs or the MMAs bound it, not HBM
python3 scripts/gpu_tune.py --rounds 5 --repeats 30 --out "$out/tune_256_warm" \
  --what "M = 256, W left in L2 (no rotation): is HBM the bound?" \
  sm90/12 "sm90/12:cluster_m=2" "$sw256,tile_m=128,stages=4" "$s11,tile_n=112,epi_n=16" \
  --shapes 256x2048x8192 256x4096x4096 128x4096x4096 \
  2>&1 | tee "$out/tune_256_warm.log" | tail -20 || status=1
;;
tune_handover)
# the split's hand-over at 256 tokens: 256 x 2048 x 8192 (pairs, K in two parts) against 256 x 2048 x 4096
# (the same tiles with K whole: each CTA the same bytes and MMAs, no hand-over) and 256 x 4096 x 4096
# (twice the tiles, K whole); the rule's hand-over (step 11's, one part after the other, for the pairs) against
# the gathered loads;
# W rotated out of L2, then left in it (OUT/tune_handover/tune.json, OUT/tune_handover_warm/tune.json)
for warm in "" _warm; do
rotate=--rotate; [ -n "$warm" ] && rotate=
python3 scripts/gpu_tune.py $rotate --rounds 5 --repeats 30 --out "$out/tune_handover$warm" \
  --what "M = 256: the split's hand-over against the same CTAs with K whole${warm:+ (W left in L2)}" \
  sm90/12 "sm90/12:gather_parts=true" --shapes 256x2048x8192 256x2048x4096 256x4096x4096 \
  2>&1 | tee "$out/tune_handover$warm.log" | tail -12 || status=1
done
# the same layer width at K = 4096 to 8192 (W warm), K split in two against K whole: a hand-over that costs
# the same at every K is a fixed latency; one that grows with K is the split's streams (OUT/tune_handover_k/tune.json)
python3 scripts/gpu_tune.py --rounds 5 --repeats 30 --out "$out/tune_handover_k" \
  --what "M = 256 over 2048 rows of W, W left in L2: K split in two or whole, at K = 4096 to 8192" \
  sm90/12 "sm90/12:stream_k=true" "sm90/12:stream_k=false" --shapes 256x2048x4096 256x2048x6144 256x2048x8192 \
  2>&1 | tee "$out/tune_handover_k.log" | tail -12 || status=1
;;
tune_rows_in_n)
# above 128 tokens over 128-row W tiles the rule runs step 11's kernel with W's rows in N, the width whose
# 2-CTA clusters fill their waves (rows_in_n_width, from one A/B at 6144 and 14336 rows): each width at more
# layers and token counts, W rotated out of L2 (OUT/tune_rows_in_n/tune.json)
python3 scripts/gpu_tune.py --rotate --rounds 5 --repeats 30 --out "$out/tune_rows_in_n" \
  --what "129-256 tokens over 128-row W tiles: step 11's kernel with 96, 112 or 128 W rows per CTA" \
  sm90/11 sm90/12 "sm90/12:tile_n=96,epi_n=32,stages=7" "sm90/12:tile_n=112,epi_n=16,stages=7" \
  "sm90/12:tile_n=128,epi_n=32,stages=6" \
  --shapes 256x6144x4096 256x14336x4096 256x8192x4096 256x28672x4096 200x6144x4096 160x14336x4096 \
  2>&1 | tee "$out/tune_rows_in_n.log" | tail -40 || status=1
;;
chapter)
# chapter 12 top to bottom on this GPU (its live cells included), with nbclient (the notebook tools'
# bundle); the executed notebook and every cell's text output go to OUT. Needs notebooks/12_memory_roofline.ipynb
# (`make notebooks`; git-ignored, so a device call carries it)
python3 - "$out" <<'EOF2' 2>&1 | tee "$out/chapter12_gpu.log" | tail -25 || status=1
import sys, time, nbformat, nbclient
out = sys.argv[1]
nb = nbformat.read("notebooks/12_memory_roofline.ipynb", as_version=4)
start = time.time()
try:
    nbclient.NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": "notebooks"}}).execute()
    failed = None
except nbclient.exceptions.CellExecutionError as e:
    failed = e
nbformat.write(nb, f"{out}/12_memory_roofline.gpu.ipynb")
for i, cell in enumerate(nb.cells):
    for o in cell.get("outputs", []):
        text = o.get("text") or o.get("data", {}).get("text/plain", "")
        if text:
            print(f"--- cell {i}\n{text.rstrip()}")
print(f"chapter 12: {'FAILED: ' + str(failed)[-800:] if failed else 'every cell ran'} ({time.time() - start:.0f} s)")
sys.exit(1 if failed else 0)
EOF2
;;
bench|reversed|sweep)
ms="1 8 16 32 64 128 256"
nks="4096x4096 14336x4096 4096x14336 6144x4096 2048x8192"
shapes=$(for m in $ms; do for nk in $nks; do echo -n "${m}x${nk} "; done; done)
if [ "$phase" = reversed ]; then  # the other order: a drift of clocks or heat over the run shows as a difference
  python3 -m gemm_course bench sm90/11 sm90/12 --shapes $(echo $shapes | tr ' ' '\n' | tac) --rounds 5 --repeats 50 \
    --rotate --out "$out" --tag decode12_reversed 2>&1 | tee "$out/decode12_reversed.log" | tail -40 || status=1
else
  python3 -m gemm_course bench sm90/12 sm90/11 --shapes $shapes --rounds 5 --repeats 50 --rotate --out "$out" \
    --tag decode12 2>&1 | tee "$out/decode12.log" | tail -40 || status=1
fi
;;&
graphs|sweep)
python3 scripts/cublas_kernels.py --out "$out" 1x4096x4096 16x4096x4096 64x4096x4096 128x4096x4096 16x14336x4096 16x4096x14336 \
  16x1024x4096 256x6144x4096 256x14336x4096 256x2048x8192 \
  32x4096x4096 64x6144x4096 128x2048x8192 128x6144x4096 2>&1 | tee "$out/cublas_kernels_decode12.txt" | tail -10  # which kernels cuBLAS ran
python3 scripts/gpu_decode_graph.py --out "$out" --steps sm90/12 sm90/11 \
  --shapes 1x4096x4096 16x4096x4096 64x4096x4096 128x4096x4096 16x14336x4096 16x4096x14336 128x14336x4096 \
  1x6144x4096 1x2048x8192 16x2048x8192 64x2048x8192 \
  2>&1 | tee "$out/decode_graph.log" || status=1
;;
graphs_launch)
python3 scripts/gpu_decode_graph.py --out "$out" --kind decode_graph_ab --tag decode_graph_launch \
  --steps sm90/12 "sm90/12:launch_after_loads=true" "sm90/12:launch_after_loads=true,prefetch_w=8" \
  "sm90/12:launch_after_loads=true,prefetch_w=16" "sm90/12:launch_after_loads=true,prefetch_w=32" "sm90/12:stages=8" \
  --shapes 1x4096x4096 16x4096x4096 64x4096x4096 \
  2>&1 | tee "$out/decode_graph_launch.log" || status=1
;;
graphs_m1_second)
python3 scripts/gpu_decode_graph.py --out "$out" --kind decode_graph_ab --tag decode_graph_m1_second \
  --steps sm90/12 "sm90/12:launch_after_loads=true,prefetch_w=8" "sm90/12:launch_after_loads=false,prefetch_w=0" \
  --shapes 16x4096x4096 1x4096x4096 64x4096x4096 \
  2>&1 | tee "$out/decode_graph_m1_second.log" || status=1
;;
m1_late)
python3 scripts/gpu_tune.py --rotate --rounds 9 --repeats 30 --out "$out/tune_m1_late" \
  --what "one token: the rule against the late launch with 8 K tiles of W prefetched (LATE_FROM_M), per launch, where the late launch would apply" \
  sm90/12 "sm90/12:launch_after_loads=true,prefetch_w=8" --shapes 1x4096x4096 1x4096x14336 \
  2>&1 | tee "$out/tune_m1_late.log" | tail -20 || status=1
python3 scripts/gpu_decode_graph.py --out "$out" --kind decode_graph_ab --tag decode_graph_m1_late \
  --steps sm90/12 "sm90/12:launch_after_loads=true,prefetch_w=8" --shapes 16x4096x4096 1x4096x4096 1x4096x14336 \
  2>&1 | tee "$out/decode_graph_m1_late.log" || status=1
;;
w_early_check)
python3 - <<'EOF' 2>&1 | tee "$out/check_w_early.log" || status=1
import dataclasses, sys
from gemm_course.runtime import ladder, run
from gemm_course.runtime.problem import GemmProblem
step = ladder.get("sm90/12")
bad = 0
for shape in [(1, 4096, 4096), (7, 1024, 520), (16, 4096, 4096), (16, 2048, 8192), (33, 14336, 4096), (64, 4096, 4096),
              (100, 2048, 1000), (128, 4096, 4096), (1, 8, 8), (200, 3072, 1032), (3, 1024, 40)]:
    for changes in ({"w_before_wait": 64}, {"w_before_wait": 64, "launch_after_loads": False, "prefetch_w": 0}):
        config = dataclasses.replace(step.config_for(GemmProblem(*shape)), **changes)
        for r in run.check(step, [shape], config=config, seed=31):
            print(changes, r); bad += not r.ok
sys.exit(1 if bad else 0)
EOF
timeout 200 python3 -m pytest -q -m gpu tests/test_swap_ab.py -k "pdl" 2>&1 | tee "$out/pytest_w_early.log" | tail -8 || status=1
;;
w_early)
python3 scripts/gpu_tune.py --rotate --rounds 5 --repeats 30 --out "$out/tune_w_early" \
  --what "W's first K tiles loaded into the stages before pdl's wait (w_before_wait), per launch: against the rule" \
  sm90/12 "sm90/12:w_before_wait=64" \
  --shapes 1x4096x4096 16x4096x4096 64x4096x4096 128x4096x4096 1x14336x4096 16x2048x8192 \
  2>&1 | tee "$out/tune_w_early.log" | tail -16 || status=1
python3 scripts/gpu_decode_graph.py --out "$out" --kind decode_graph_ab --tag decode_graph_w_early_stages \
  --steps sm90/12 "sm90/12:w_before_wait=64" "sm90/12:w_before_wait=64,tile_m=64,stages=22" \
  --shapes 16x4096x4096 1x4096x4096 16x2048x8192 \
  2>&1 | tee "$out/decode_graph_w_early_stages.log" || status=1
python3 scripts/gpu_decode_graph.py --out "$out" --kind decode_graph_ab --tag decode_graph_w_early \
  --steps sm90/12 "sm90/12:w_before_wait=64" "sm90/12:w_before_wait=64,launch_after_loads=false,prefetch_w=0" \
  "sm90/12:w_before_wait=64,launch_after_loads=true,prefetch_w=8" \
  --shapes 16x4096x4096 1x4096x4096 64x4096x4096 128x4096x4096 1x14336x4096 16x2048x8192 \
  2>&1 | tee "$out/decode_graph_w_early.log" || status=1
;;
w_more)
ab w_more "W before the wait: 8 or 16 K tiles, or 4 with 24 more in L2, against the rule (4), per launch" \
  "1x4096x4096 1x14336x4096 1x4096x14336 1x6144x4096 1x2048x8192" \
  "16x4096x4096 1x4096x4096 1x14336x4096 1x4096x14336 1x6144x4096 1x2048x8192" \
  "sm90/12:w_before_wait=8" "sm90/12:w_before_wait=16" "sm90/12:prefetch_w=24"
;;
split2048)
ab split2048 "2048 x 8192 at 1-16 tokens: stream-K over 64-row W tiles (the rule), parts per tile, 128-row tiles" \
  "1x2048x8192 8x2048x8192 16x2048x8192" "16x2048x8192 1x2048x8192 8x2048x8192" \
  "sm90/12:stream_k=false,max_parts=4" "sm90/12:stream_k=false,max_parts=8" "sm90/12:tile_m=128,stages=12"
;;
m1_w)
V="launch_after_loads=false,prefetch_w=0"
ab m1_w "W before the wait, 4 or 64 K tiles, and 22 stages at 64 x 16, per launch: against the rule" \
  "1x4096x4096 1x14336x4096 1x4096x14336 1x6144x4096 1x2048x8192 16x4096x4096 16x2048x8192" \
  "16x4096x4096 1x4096x4096 1x14336x4096 1x4096x14336 1x6144x4096 1x2048x8192 16x2048x8192" \
  "sm90/12:w_before_wait=4,$V" "sm90/12:w_before_wait=64,$V" "sm90/12:tile_m=64,stages=22" \
  "sm90/12:w_before_wait=64,$V,tile_m=64,stages=22"
;;
tune_partial_m)
for spec in "160 80 14336 6144" "200 112 6144 14336"; do
read -r m w n1 n2 <<< "$spec"
python3 scripts/gpu_tune.py --rotate --rounds 5 --repeats 30 --out "$out/tune_partial_m_$m" \
  --what "$m tokens over 128-row W tiles: step 11's kernel with W's rows in N (the rule), step 11, the pairs over 64- or 128-row W tiles" \
  sm90/11 sm90/12 \
  "sm90/12:swap_ab=true,tile_m=128,tile_n=$w,epi_n=16,epi_stages=1,cluster_m=1,cluster_n=2,stages=$(( $w == 80 ? 8 : 7 )),stream_k=false,gather_parts=false,lockstep=false,pdl=true,gpc_order=false" \
  "sm90/12:swap_ab=true,tile_m=64,tile_n=$w,epi_n=16,epi_stages=1,cluster_m=1,cluster_n=2,stages=$(( $w == 80 ? 12 : 10 )),stream_k=false,gather_parts=false,lockstep=false,pdl=true,gpc_order=false" \
  --shapes "${m}x${n1}x4096" "${m}x${n2}x4096" \
  2>&1 | tee "$out/tune_partial_m_$m.log" | tail -12 || status=1
done
;;
graphs_prefetch)
python3 scripts/gpu_decode_graph.py --out "$out" --kind decode_graph_ab --tag decode_graph_prefetch \
  --steps sm90/12 "sm90/12:prefetch_w=0" "sm90/12:prefetch_w=8" "sm90/12:prefetch_w=32" "sm90/12:pdl=false,prefetch_w=0,launch_after_loads=false,w_before_wait=0" \
  "sm90/12:stream_k=true" "sm90/12:stream_k=true,gather_parts=false" \
  --shapes 1x4096x4096 16x4096x4096 64x4096x4096 128x4096x4096 \
  2>&1 | tee "$out/decode_graph_prefetch.log" || status=1
;;
check|tune|tune256|tune_pairs|tune_few_w|tune_prefetch|tune_more|tune_256b|tune_handover|tune_rows_in_n|tune_partial_m|chapter|bench|reversed|graphs|graphs_launch|graphs_m1_second|graphs_prefetch|m1_late|m1_w|w_more|split2048|w_early_check|w_early|sweep) ;;
*) echo "unknown phase $phase (check, tune, tune256, tune_pairs, tune_few_w, tune_prefetch, tune_more, tune_256b, tune_handover, tune_rows_in_n, tune_partial_m, chapter, bench, reversed, graphs, graphs_launch, graphs_m1_second, graphs_prefetch, m1_late, m1_w, w_more, split2048, w_early_check, w_early, sweep)"; status=2 ;;
esac
done
exit $status
