#!/usr/bin/env bash
# Session 30 device call 1: the K = 1 parse with fewer units a warp (ACEAPEX_GPU_K1_WARP_LANES: only the first 16 or
# 8 lanes of each warp take a slice; kernels/decode.cu K1_WARP_LANES). atha_chr1's 7,504 slices are 118 CTAs of 64
# units either way (64, 128 or 256 threads), so each SM runs two, four or eight warps, a scheduler's loads serving 32,
# 16 or 8 slices. libtests engine::gpu with each, two rounds of the full decode of atha genome, atha general and fly
# x11 (every timed decode checked block by block against the index xxh3), then Nsight Compute of parse_k1 on atha
# genome (stall reasons, L1) for 32 and 16.
# Carry: bash bench/gpu/make-carry.sh (COMMIT in carry/).
set -o pipefail
export COMMIT=$(cat carry/COMMIT)
. bench/gpu/steps.sh
say "commit $COMMIT"
gpu_libtests
gpu_libtests ACEAPEX_GPU_K1_WARP_LANES=16
gpu_libtests ACEAPEX_GPU_K1_WARP_LANES=8
seek_archives
full_ab 2 "w32=./carry/gpubench" "w16=env ACEAPEX_GPU_K1_WARP_LANES=16 ./carry/gpubench" \
  "w8=env ACEAPEX_GPU_K1_WARP_LANES=8 ./carry/gpubench"
for v in 32 16; do
  run 150 ncu --clock-control none --section WarpStateStats --section LaunchStats --section Occupancy \
    --section MemoryWorkloadAnalysis --page raw -k "regex:parse_k1" --launch-count 3 \
    env ACEAPEX_GPU_K1_WARP_LANES=$v ./carry/gpubench \
    /tmp/gpu-suite/atha-genome.acx --no-reference --runs 1 --ranges 0 --latency 0 --contig 0 \
    >"$out/ncu-w$v.txt" 2>&1
  grep -E "parse_k1|gpu__time_duration.sum|issue_stalled_.*per_warp_active|shared_mem_config_size|l1tex__t_sector_hit_rate.pct |smsp__average_warp_latency_per_inst_issued|launch__grid_size|launch__block_size" \
    "$out/ncu-w$v.txt" | grep -v "pcsamp" | head -90 | tee -a "$log"
done
