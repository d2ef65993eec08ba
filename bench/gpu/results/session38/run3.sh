#!/usr/bin/env bash
# Session 38 device call 3: where finish_linear_k1 (with FINISH_MAPS) and chase_matches spend their time on atha
# genome: Nsight Compute on the first full decode's launch of each (instruction counts, warp states, the SASS
# lines' executed instructions and stall samples), exported as CSV for comparison with scripts/kernel-sass.py's
# local SASS.
# Carry: bash bench/gpu/make-carry.sh (commit in carry/COMMIT).
export COMMIT=$(cat carry/COMMIT)
. bench/gpu/steps.sh
seek_archives
a=/tmp/gpu-suite/atha-genome.acx
run 300 ncu --clock-control none --section SpeedOfLight --section WarpStateStats --section Occupancy \
  --section LaunchStats --section SchedulerStats --section InstructionStats --section SourceCounters \
  -k "regex:finish_linear_k1|chase_matches" --launch-count 2 -o "$out/fc" \
  ./carry/gpubench "$a" --no-reference --runs 1 --ranges 0 --latency 0 --contig 0 >/dev/null
ncu --import "$out/fc.ncu-rep" >"$out/ncu-fc.txt" 2>&1
grep -E "^  [a-z_0-9]+.*\(|Duration|Registers Per|Achieved Occupancy|Executed Ipc|Issue Slots Busy|Executed Instructions |Warp Cycles Per Issued|No Eligible|Active Warps Per|Stall" "$out/ncu-fc.txt" | tee -a "$log"
for k in finish_linear_k1 chase_matches; do
  ncu --import "$out/fc.ncu-rep" -k "$k" --page source --print-source sass --csv >"$out/src-$k.csv" 2>&1
  say "### $k source rows: $(wc -l <"$out/src-$k.csv")"
done
rm -f "$out/fc.ncu-rep"
