#!/usr/bin/env bash
# Session 37 device call 4: run 3 showed run 2's 2 KiB slices ran in two waves (the staged parse's carveout holds
# one CTA an SM). Here two CTAs an SM (ACEAPEX_GPU_K1_STAGED_CTAS=2, 512-byte rings), so that twice the chains of
# half the length run at once: what four rANS lanes a 4 KiB slice could give. Full decode two rounds, then Nsight
# Compute on the entropy_only launch.
# Carry: bash bench/gpu/make-carry.sh (commit in carry/COMMIT).
export COMMIT=$(cat carry/COMMIT)
. bench/gpu/steps.sh
unpack_corpus
mkdir -p /tmp/gpu-suite
for l in 11 12; do ACEAPEX_SLICE_LOG=$l ./carry/aceapex pack carry/atha.fa -o /tmp/gpu-suite/atha-s$l.acx -q; done
s11="ACEAPEX_GPU_K1_FEW_UNITS=128 ACEAPEX_GPU_K1_RING_BYTES=512 ACEAPEX_GPU_K1_STAGED_CTAS=2"
FULL_ARCHIVES="atha-s12" full_ab 2 "s12=./carry/gpubench"
FULL_ARCHIVES="atha-s11" full_ab 2 "s11-2ctas=env $s11 ./carry/gpubench"
say "### ncu s11-2ctas"
env $s11 ncu --clock-control none --section SpeedOfLight --section WarpStateStats --section Occupancy \
  --section LaunchStats --section SchedulerStats -k "regex:parse_k1_linear" --launch-skip 2 --launch-count 1 \
  ./carry/gpubench /tmp/gpu-suite/atha-s11.acx --no-reference --runs 1 --ranges 0 --latency 0 --contig 0 >"$out/ncu-s11-2ctas.txt" 2>&1
grep -E "^  [a-z_0-9]+.*\(|Duration|Block Limit Shared|Achieved Occupancy|Shared Memory Configuration|Waves Per SM|Warp Cycles Per Issued|Issued Warp|No Eligible|Active Warps Per" "$out/ncu-s11-2ctas.txt" | tee -a "$log"
