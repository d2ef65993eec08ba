#!/usr/bin/env bash
# Session 39 device call 3: every table-coded unit of an archive with context-coded ones moved to CTAs of its own
# (literal_kinds_apart), 32, 16 or 8 of them a warp (ACEAPEX_GPU_TABLE_WARP_UNITS), against the order before
# (ACEAPEX_GPU_PARSE_ORDER=codes): two rounds on the three archives, every timed decode checked; chain clocks at 16
# and 8 on atha genome. Carry: bash bench/gpu/make-carry.sh.
export COMMIT=$(cat carry/COMMIT)
. bench/gpu/steps.sh
gpu_libtests
seek_archives
full_ab 2 "t32=./carry/gpubench" "t16=env ACEAPEX_GPU_TABLE_WARP_UNITS=16 ./carry/gpubench" \
  "t8=env ACEAPEX_GPU_TABLE_WARP_UNITS=8 ./carry/gpubench" "mixed=env ACEAPEX_GPU_PARSE_ORDER=codes ./carry/gpubench"
for t in 16 8; do
  run 240 env ACEAPEX_GPU_K1_CLOCKS=1 ACEAPEX_GPU_TABLE_WARP_UNITS=$t ./carry/gpubench /tmp/gpu-suite/atha-genome.acx --clocks --runs 3 --ranges 10 --latency 10 --contig 1
done
cp "$log" "$OUT/run3-${COMMIT:0:7}-device.log"
