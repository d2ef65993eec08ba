#!/usr/bin/env bash
# Session 28 device call 2: the one-form chase_matches (the unroll knob removed) checked on the H200:
# `libtests engine::gpu`, then two rounds of the full decode on atha genome, atha general and fly x11 (every timed
# decode checked block by block against the index xxh3), the same numbers as run 1's u1.
# Then Nsight Compute on the parse of atha packed with K = 1, 4, 32 lanes.
# Carry: bash bench/gpu/make-carry.sh (COMMIT in carry/).
set -o pipefail
export COMMIT=$(cat carry/COMMIT)
. bench/gpu/steps.sh
say "commit $COMMIT"
gpu_libtests
seek_archives
full_ab 2 "one=./carry/gpubench"
# Why the K >= 2 step costs 4-7x the K = 1 thread's (run 1): Nsight Compute on the parse of atha packed with
# K = 1, 4 and 32 lanes (the first 3 parse launches of each: gpubench's breakdown variants), report in $OUT.
lane_archives 4 32
for a in atha-genome atha-k4 atha-k32; do
  run 150 ncu --clock-control none --section SpeedOfLight --section WarpStateStats --section Occupancy \
    --section LaunchStats --section SchedulerStats --section MemoryWorkloadAnalysis -k "regex:parse_k" \
    --launch-count 3 ./carry/gpubench /tmp/gpu-suite/$a.acx --no-reference --runs 1 --ranges 0 --latency 0 \
    --contig 0 >"$out/ncu-$a.txt" 2>&1
  grep -E "^  [a-z_0-9]+.*\(|Duration|Registers Per|Achieved Occupancy|Theoretical Occupancy|Block Size|Grid Size|Stall|Warp Cycles Per Issued|One or More Eligible|Issued Warp|L1/TEX Hit|Mem Busy" \
    "$out/ncu-$a.txt" | head -80 | tee -a "$log"
done
