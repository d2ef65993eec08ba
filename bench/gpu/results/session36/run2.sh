#!/usr/bin/env bash
# Session 36 device call 2: the two-lane full decode of few units on all 32 lanes of a warp (the commit in
# carry/COMMIT) against run 1's commit 7b5a5c4 (carry/base/gpubench: eight lanes a warp). The suite's tests and
# genome part (every block, 10,000 / 2,000 ranges through both seek paths, cat md5); the full decode of the three
# archives, two rounds, every timed decode checked block by block; one-lane archives at eight lanes (the default
# there) against 32; then Nsight Compute on atha genome's full decode (the parse, finish_linear_k1 and the chase).
# Carry: BASE=7b5a5c4 bash bench/gpu/make-carry.sh.
export COMMIT=$(cat carry/COMMIT)
bash bench/gpu/suite.sh "tests genome"
. bench/gpu/steps.sh
seek_archives
full_ab 2 "base=./carry/base/gpubench" "new=./carry/gpubench"
one_lane_archives
FULL_ARCHIVES="atha-genome-k1 atha-general-k1" full_ab 2 "k1-8=./carry/gpubench" \
  "k1-32=env ACEAPEX_GPU_K1_WARP_LANES=32 ACEAPEX_GPU_K1_CTA=64 ./carry/gpubench"
FULL_ARCHIVES="fly11-k1" full_ab 2 "k1-8=./carry/gpubench" \
  "k1-32=env ACEAPEX_GPU_K1_WARP_LANES=32 ACEAPEX_GPU_K1_CTA=32 ./carry/gpubench"
say "### ncu atha-genome"
ncu --clock-control none --section SpeedOfLight --section WarpStateStats --section Occupancy \
  --section MemoryWorkloadAnalysis --section LaunchStats --section SchedulerStats \
  -k "regex:parse_k1_linear|finish_linear_k1|chase_matches|index_" --launch-count 12 \
  ./carry/gpubench /tmp/gpu-suite/atha-genome.acx --no-reference --runs 1 --ranges 0 --latency 0 --contig 0 \
  >"$out/ncu-atha-genome.txt" 2>&1
grep -E "^  [a-z_0-9]+.*\(|Duration|Registers Per|Achieved Occupancy|Theoretical Occupancy|Block Size|Grid Size|L1/TEX Hit|Memory Throughput|Compute \(SM\) Throughput|Warp Cycles Per Issued|Issued Warp|No Eligible|Active Warps Per|Stall" "$out/ncu-atha-genome.txt" | tee -a "$log"
