#!/usr/bin/env bash
# Session 29 device call 1: the K = 1 context model in interleaved copies (kernels/decode.cu K1Rows: the two
# 16-byte successor-row loads of a quarter-warp in distinct shared-memory bank quads). Against a69efc0
# (carry/base, one copy, the old address form) and against itself with 1, 2 and 4 copies
# (ACEAPEX_GPU_CTX_COPIES_LOG=0, 1, 2; default 3 = 8 copies for order <= 4). libtests engine::gpu with the default
# and with one copy, three rounds of the full decode of atha genome, atha general and fly x11 (every timed decode
# checked block by block against the index xxh3), then Nsight Compute of parse_k1 on atha genome: stall reasons
# and shared-memory wavefronts / bank conflicts, base against new.
# Carry: BASE=a69efc0 bash bench/gpu/make-carry.sh (COMMIT in carry/).
set -o pipefail
export COMMIT=$(cat carry/COMMIT)
. bench/gpu/steps.sh
say "commit $COMMIT base $(cat carry/base/COMMIT 2>/dev/null)"
run 120 ./carry/libtests engine::gpu --test-threads 1 | grep -E "test result|FAIL|panick"
ACEAPEX_GPU_CTX_COPIES_LOG=0 run 120 ./carry/libtests engine::gpu --test-threads 1 | grep -E "test result|FAIL|panick"
seek_archives
full_ab 3 "base=./carry/base/gpubench" "new=./carry/gpubench" "one=env ACEAPEX_GPU_CTX_COPIES_LOG=0 ./carry/gpubench" \
  "two=env ACEAPEX_GPU_CTX_COPIES_LOG=1 ./carry/gpubench" "four=env ACEAPEX_GPU_CTX_COPIES_LOG=2 ./carry/gpubench"
for v in base new; do
  b=./carry/gpubench; [ $v = base ] && b=./carry/base/gpubench
  run 150 ncu --clock-control none --section WarpStateStats --section SchedulerStats --page raw -k "regex:parse_k1" \
    --launch-count 3 $b /tmp/gpu-suite/atha-genome.acx --no-reference --runs 1 --ranges 0 --latency 0 --contig 0 \
    >"$out/ncu-stalls-$v.txt" 2>&1
  grep -E "parse_k1|gpu__time_duration.sum|issue_stalled_.*per_warp_active|warp_latency_per_inst_issued" \
    "$out/ncu-stalls-$v.txt" | grep -v "pcsamp" | head -90 | tee -a "$log"
  run 150 ncu --clock-control none --metrics l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,smsp__inst_executed.sum,gpu__time_duration.sum \
    -k "regex:parse_k1" --launch-count 3 $b /tmp/gpu-suite/atha-genome.acx --no-reference --runs 1 --ranges 0 \
    --latency 0 --contig 0 2>&1 | grep -E "parse_k1|l1tex|inst_executed|duration|rror" | tee -a "$log"
done
