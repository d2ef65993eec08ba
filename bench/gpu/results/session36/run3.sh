#!/usr/bin/env bash
# Session 36 device call 3: finish_linear_k1 leaner (read_bits by aligned words, the placement's shift in a
# register; the commit in carry/COMMIT) against run 2's commit 12ea1fb (carry/base/gpubench). The suite's tests
# and genome part (every block, 10,000 / 2,000 ranges through both seek paths, whose token levels use read_bits
# too, cat md5); the full decode of the three archives, two rounds, every timed decode checked block by block; the
# one-lane archives against session 35's last commit ae55ed6 (carry/base0/gpubench: is the one-lane path slower?);
# then Nsight Compute on atha genome's full decode.
# Carry: BASE=12ea1fb bash bench/gpu/make-carry.sh, plus carry/base0/gpubench built at ae55ed6.
export COMMIT=$(cat carry/COMMIT)
bash bench/gpu/suite.sh "tests genome"
. bench/gpu/steps.sh
seek_archives
full_ab 2 "base=./carry/base/gpubench" "new=./carry/gpubench"
one_lane_archives
FULL_ARCHIVES="atha-genome-k1 atha-general-k1 fly11-k1" full_ab 1 "ae55ed6=./carry/base0/gpubench" "new=./carry/gpubench"
say "### ncu atha-genome"
ncu --clock-control none --section SpeedOfLight --section WarpStateStats --section Occupancy \
  --section LaunchStats --section SchedulerStats \
  -k "regex:parse_k1_linear|finish_linear_k1|chase_matches" --launch-count 4 \
  ./carry/gpubench /tmp/gpu-suite/atha-genome.acx --no-reference --runs 1 --ranges 0 --latency 0 --contig 0 \
  >"$out/ncu-atha-genome.txt" 2>&1
grep -E "^  [a-z_0-9]+.*\(|Duration|Registers Per|Achieved Occupancy|Compute \(SM\) Throughput|Warp Cycles Per Issued|Issued Warp|No Eligible" "$out/ncu-atha-genome.txt" | tee -a "$log"
