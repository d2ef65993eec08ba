#!/usr/bin/env bash
# Session 37 device call 3: why run 2's 2 KiB slices (twice the chains, half as long) were slower through the same
# staged parse: Nsight Compute on parse_k1_linear (an entropy_only launch) of atha genome with 4 KiB slices
# (default launch) and with 2 KiB slices (ACEAPEX_GPU_K1_FEW_UNITS=128, 512-byte rings): occupancy, CTAs an SM,
# warp states. (ACEAPEX_GPU_K1_CARVEOUT_MANY, the s11c variant's knob at a8421e7, set parse_k1's carveout only and
# was removed after this run.)
# Carry: bash bench/gpu/make-carry.sh (commit in carry/COMMIT).
export COMMIT=$(cat carry/COMMIT)
. bench/gpu/steps.sh
unpack_corpus
mkdir -p /tmp/gpu-suite
for l in 11 12; do ACEAPEX_SLICE_LOG=$l ./carry/aceapex pack carry/atha.fa -o /tmp/gpu-suite/atha-s$l.acx -q; done
for v in "s12" "s11 ACEAPEX_GPU_K1_FEW_UNITS=128 ACEAPEX_GPU_K1_RING_BYTES=512" "s11c ACEAPEX_GPU_K1_FEW_UNITS=128 ACEAPEX_GPU_K1_RING_BYTES=512 ACEAPEX_GPU_K1_CARVEOUT_MANY=100"; do
  set -- $v
  name=$1; shift
  a=/tmp/gpu-suite/atha-${name:0:3}.acx
  say "### ncu $name $*"
  env "$@" ncu --clock-control none --section SpeedOfLight --section WarpStateStats --section Occupancy \
    --section LaunchStats --section SchedulerStats -k "regex:parse_k1_linear" --launch-skip 2 --launch-count 1 \
    ./carry/gpubench "$a" --no-reference --runs 1 --ranges 0 --latency 0 --contig 0 >"$out/ncu-$name.txt" 2>&1
  grep -E "^  [a-z_0-9]+.*\(|Duration|Registers Per|Block Limit|Achieved Occupancy|Theoretical Occupancy|Grid Size|Block Size|Dynamic Shared|Waves Per SM|Warp Cycles Per Issued|Issued Warp|No Eligible|Active Warps Per" "$out/ncu-$name.txt" | tee -a "$log"
done
