#!/usr/bin/env bash
# Session 31 device call 1: parse_k1_staged (kernels/decode.cu WordRing1: each unit's word stream staged in a
# shared-memory ring, ~5 instructions a renormalisation instead of ~19 and no global load on the chain), which the
# full decode of few K = 1 units now runs. libtests engine::gpu with it and without (ACEAPEX_GPU_K1_STAGED=0), then
# the full decode of atha genome, atha general and fly x11, two rounds, b28e918 (carry/base) against this commit
# without and with the staged parse, and with 16 lanes in four warps (every timed decode checked block by block
# against the index xxh3); Nsight Compute of the parse on atha genome, staged and not.
# Carry: BASE=b28e918 bash bench/gpu/make-carry.sh (COMMIT in carry/).
set -o pipefail
export COMMIT=$(cat carry/COMMIT)
. bench/gpu/steps.sh
say "commit $COMMIT base $(cat carry/base/COMMIT)"
gpu_libtests
gpu_libtests ACEAPEX_GPU_K1_STAGED=0
seek_archives
full_ab 2 "base=./carry/base/gpubench" "unstaged=env ACEAPEX_GPU_K1_STAGED=0 ./carry/gpubench" \
  "staged=./carry/gpubench" "staged-w16=env ACEAPEX_GPU_K1_WARP_LANES=16 ACEAPEX_GPU_K1_CTA=128 ./carry/gpubench"
for v in 1 0; do
  run 150 ncu --clock-control none --section WarpStateStats --section LaunchStats --section Occupancy \
    --section MemoryWorkloadAnalysis --section InstructionStats --page raw -k "regex:parse_k1" --launch-count 3 \
    env ACEAPEX_GPU_K1_STAGED=$v ./carry/gpubench \
    /tmp/gpu-suite/atha-genome.acx --no-reference --runs 1 --ranges 0 --latency 0 --contig 0 \
    >"$out/ncu-staged$v.txt" 2>&1
  grep -E "parse_k1|gpu__time_duration.sum|inst_executed  |issue_stalled_.*per_issue_active|shared_mem_config_size|l1tex__t_sector_hit_rate.pct |smsp__average_warp_latency_per_inst_issued|launch__grid_size|launch__block_size|smsp__issue_active.avg" \
    "$out/ncu-staged$v.txt" | grep -v "pcsamp" | head -90 | tee -a "$log"
done
