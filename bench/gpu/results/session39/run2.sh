#!/usr/bin/env bash
# Session 39 device call 2: table-coded units apart from context-coded ones in the full decode's parse order
# (literal_kinds_apart) against the order before it (ACEAPEX_GPU_PARSE_ORDER=codes), two rounds on the three
# archives, every timed decode checked; then the chain clocks with the new order on atha genome and fly x11.
# Carry: bash bench/gpu/make-carry.sh.
export COMMIT=$(cat carry/COMMIT)
. bench/gpu/steps.sh
gpu_libtests
seek_archives
full_ab 2 "apart=./carry/gpubench" "mixed=env ACEAPEX_GPU_PARSE_ORDER=codes ./carry/gpubench"
for a in atha-genome fly11; do
  run 240 env ACEAPEX_GPU_K1_CLOCKS=1 ./carry/gpubench /tmp/gpu-suite/$a.acx --clocks --runs 3 --ranges 10 --latency 10 --contig 1
done
cp "$log" "$OUT/run2-${COMMIT:0:7}-device.log"
