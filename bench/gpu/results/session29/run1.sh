#!/usr/bin/env bash
# Session 29 device call 1, two things about the K = 1 parse's memory (kernels/decode.cu "K = 1: a thread per slice"):
# - the context model in interleaved copies (K1Rows: the two 16-byte successor-row loads of a quarter-warp in
#   distinct shared-memory bank quads); ACEAPEX_GPU_CTX_COPIES_LOG=0 is one copy (the old layout);
# - the shared-memory carveout: the driver picks ~200 KB of shared memory for parse_k1's occupancy, which leaves L1
#   ~55 KB for the ~128 KB of word streams a CTA prefetches; ACEAPEX_GPU_K1_CARVEOUT=25 asks for the 64 KB one.
# Against a69efc0 (carry/base). libtests engine::gpu with the default and with one copy, two rounds of the full
# decode of atha genome, atha general and fly x11 (every timed decode checked block by block against the index
# xxh3), then Nsight Compute of parse_k1 on atha genome: stall reasons, L1 hit rate, shared-memory configuration,
# wavefronts and bank conflicts.
# Carry: BASE=a69efc0 bash bench/gpu/make-carry.sh (COMMIT in carry/).
set -o pipefail
export COMMIT=$(cat carry/COMMIT)
. bench/gpu/steps.sh
say "commit $COMMIT base $(cat carry/base/COMMIT 2>/dev/null)"
gpu_libtests
gpu_libtests ACEAPEX_GPU_CTX_COPIES_LOG=0 ACEAPEX_GPU_K1_CARVEOUT=25
seek_archives
full_ab 2 "base=./carry/base/gpubench" "new=./carry/gpubench" "one=env ACEAPEX_GPU_CTX_COPIES_LOG=0 ./carry/gpubench" \
  "new-c25=env ACEAPEX_GPU_K1_CARVEOUT=25 ./carry/gpubench" \
  "one-c25=env ACEAPEX_GPU_CTX_COPIES_LOG=0 ACEAPEX_GPU_K1_CARVEOUT=25 ./carry/gpubench" \
  "new-c50=env ACEAPEX_GPU_K1_CARVEOUT=50 ./carry/gpubench"
for v in base new new-c25; do
  case $v in
    base) b=(./carry/base/gpubench) ;;
    new) b=(./carry/gpubench) ;;
    new-c25) b=(env ACEAPEX_GPU_K1_CARVEOUT=25 ./carry/gpubench) ;;
  esac
  run 150 ncu --clock-control none --section WarpStateStats --section LaunchStats --section Occupancy \
    --section MemoryWorkloadAnalysis --page raw -k "regex:parse_k1" --launch-count 3 "${b[@]}" \
    /tmp/gpu-suite/atha-genome.acx --no-reference --runs 1 --ranges 0 --latency 0 --contig 0 \
    >"$out/ncu-$v.txt" 2>&1
  grep -E "parse_k1|gpu__time_duration.sum|issue_stalled_.*per_warp_active|shared_mem_config_size|l1tex__t_sector_hit_rate.pct |smsp__average_warp_latency_per_inst_issued" \
    "$out/ncu-$v.txt" | grep -v "pcsamp" | head -90 | tee -a "$log"
  run 150 ncu --clock-control none --metrics l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,smsp__inst_executed.sum,gpu__time_duration.sum \
    -k "regex:parse_k1" --launch-count 3 "${b[@]}" /tmp/gpu-suite/atha-genome.acx --no-reference --runs 1 \
    --ranges 0 --latency 0 --contig 0 2>&1 | grep -E "parse_k1|l1tex|inst_executed|duration|rror" | tee -a "$log"
done
