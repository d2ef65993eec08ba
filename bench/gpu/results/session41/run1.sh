#!/usr/bin/env bash
# Session 41 device call 1: the step bench's V18/V19 (the table-coded step through a generic load and through
# lds32); then whether more rANS chains pay now that a context step loads one 8-byte row (session 37 found twice
# the chains gave the entropy stage only -11 %, its L1/TEX pipe 70 % busy with two 16-byte row loads a literal):
# atha_chr1 packed with 2 KiB slices (ACEAPEX_SLICE_LOG=11, 15,008 slices) and 1 KiB (=10), full decode with the
# staged linear parse (ACEAPEX_GPU_K1_FEW_UNITS=128), with two CTAs an SM (…_K1_STAGED_CTAS=2, 512-byte rings),
# against the default archive; Nsight Compute on both parses; then the chain clocks of the 2 KiB archive.
# Carry: bash bench/gpu/make-carry.sh (any commit from 5c29fee on: the kernels are 62c91bd's).
export COMMIT=$(cat carry/COMMIT)
. bench/gpu/steps.sh
nvcc -O3 -std=c++17 -arch=sm_90 -I kernels bench/gpu/stepbench/stepbench.cu -o /tmp/sb 2>&1 | grep -i error
/tmp/sb | tee -a "$log"
seek_archives
ACEAPEX_SLICE_LOG=11 ./carry/aceapex pack carry/atha.fa -o /tmp/gpu-suite/atha-s11.acx -q
ACEAPEX_SLICE_LOG=10 ./carry/aceapex pack carry/atha.fa -o /tmp/gpu-suite/atha-s10.acx -q
say "### sizes: $(stat -c '%n %s' /tmp/gpu-suite/atha-*.acx | tr '\n' ' ')"
F="env ACEAPEX_GPU_K1_FEW_UNITS=128"
C2="$F ACEAPEX_GPU_K1_STAGED_CTAS=2 ACEAPEX_GPU_K1_RING_BYTES=512"
FULL_ARCHIVES="atha-genome atha-s11" full_ab 2 "def=./carry/gpubench" "f128=$F ./carry/gpubench" "c2=$C2 ./carry/gpubench"
FULL_ARCHIVES="atha-s10" full_ab 1 "def=./carry/gpubench" "f256=env ACEAPEX_GPU_K1_FEW_UNITS=256 ./carry/gpubench"
# Nsight Compute on the parse of the default archive and of the 2 KiB one with two CTAs an SM (session 37 run 4's
# sections, so that the two sessions' pipe and stall figures compare): what bounds twice the chains now.
for v in "s12:atha-genome:" "s11-2ctas:atha-s11:$C2"; do
  IFS=: read -r name arch knobs <<<"$v"
  say "### ncu $name"
  ${knobs:-env} ncu --clock-control none --section SpeedOfLight --section WarpStateStats --section Occupancy \
    --section LaunchStats --section SchedulerStats -k "regex:parse_k1_linear" --launch-skip 2 --launch-count 1 \
    ./carry/gpubench "/tmp/gpu-suite/$arch.acx" --no-reference --runs 1 --ranges 0 --latency 0 --contig 0 >"$out/ncu-$name.txt" 2>&1
  grep -E "^  [a-z_0-9]+.*\(|Duration|Block Limit Shared|Achieved Occupancy|Shared Memory Configuration|Waves Per SM|Warp Cycles Per Issued|Issued Warp|No Eligible|Active Warps Per|L1/TEX" "$out/ncu-$name.txt" | tee -a "$log"
done
run 240 env ACEAPEX_GPU_K1_CLOCKS=1 ACEAPEX_GPU_K1_FEW_UNITS=128 ACEAPEX_GPU_K1_STAGED_CTAS=2 ACEAPEX_GPU_K1_RING_BYTES=512 ./carry/gpubench /tmp/gpu-suite/atha-s11.acx --clocks --runs 3 --ranges 10 --latency 10 --contig 1
cp "$log" "$OUT/run1-${COMMIT:0:7}-device.log"
