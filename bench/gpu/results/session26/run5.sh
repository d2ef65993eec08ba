#!/usr/bin/env bash
# Session 26 device call 5: Nsight Compute counters of one 1000-block chase_resident launch (ebbcc63's kernels,
# the same as the session's last commit's) on atha general and genome mode, for the next session's choice: after
# the 20 one-block warm-up seeks of gpubench, the first contiguous run's launch (no CUDA graphs). Reports in
# $OUT/ncu-*.txt. Carry: bash bench/gpu/make-carry.sh (run 3's carry/ serves).
set -o pipefail
export COMMIT=$(cat carry/COMMIT)
. bench/gpu/steps.sh
[ -f carry/atha.fa ] || gzip -dc carry/atha.fa.gz >carry/atha.fa
for f in carry/fly11/*.gz; do [ -e "$f" ] && gzip -d "$f"; done
seek_archives
for a in atha-general atha-genome; do
  run 150 env ACEAPEX_GPU_SEEK_PROFILE=1 ncu --clock-control none --section SpeedOfLight --section WarpStateStats \
    --section Occupancy --section MemoryWorkloadAnalysis --section SchedulerStats -k regex:chase_resident \
    --launch-skip 20 --launch-count 1 ./carry/gpubench /tmp/gpu-suite/$a.acx --no-reference --runs 1 --ranges 0 \
    --latency 0 --contig 1 >"$out/ncu-$a.txt" 2>&1
  grep -E "Duration|Grid Size|Achieved Occupancy|Memory Throughput|DRAM Throughput|L1/TEX Hit|L2 Hit|L2 Cache Throughput|Compute \(SM\) Throughput|Warp Cycles Per Issued|One or More Eligible|Stall" "$out/ncu-$a.txt" | head -40 | tee -a "$log"
done
