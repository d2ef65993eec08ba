#!/usr/bin/env bash
# Session 35 device call 3: Nsight Compute on parse_k1_linear (the commit in carry/COMMIT), atha genome packed with
# two lanes (default launch shape) and with one: the first nine launches of a gpubench run (the first full decode,
# then entropy_only and parse_no_literal_writes, warm-ups included), to see why the two-lane parse with its token
# parse (parse_no_literal_writes 0.385 ms) takes so much longer than without (entropy_only 0.24-0.31 ms; one lane:
# 0.424 against 0.461).
export COMMIT=$(cat carry/COMMIT)
. bench/gpu/steps.sh
seek_archives
./carry/aceapex pack --lanes 1 carry/atha.fa -o /tmp/gpu-suite/atha-genome-k1.acx -q
for a in atha-genome atha-genome-k1; do
  say "### ncu $a"
  ncu --clock-control none --section SpeedOfLight --section WarpStateStats --section Occupancy \
    --section MemoryWorkloadAnalysis --section LaunchStats --section SchedulerStats \
    -k "regex:parse_k1_linear" --launch-count 9 \
    ./carry/gpubench "/tmp/gpu-suite/$a.acx" --no-reference --runs 1 --ranges 0 --latency 0 --contig 0 >"$out/ncu-$a.txt" 2>&1
  grep -E "parse_k1_linear|Duration|Registers Per|Achieved Occupancy|Theoretical Occupancy|Block Size|Grid Size|Dynamic Shared|L1/TEX Hit|L2 Hit|Memory Throughput|Compute \(SM\) Throughput|Warp Cycles Per Issued|Issued Warp|No Eligible|Active Warps Per" "$out/ncu-$a.txt" | tee -a "$log"
done
