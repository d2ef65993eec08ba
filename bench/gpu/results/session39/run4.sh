#!/usr/bin/env bash
# Session 39 device call 4: the moved table-coded units a group to a CTA, 8 a warp (the new default) against the
# order before this session (ACEAPEX_GPU_PARSE_ORDER=codes): three rounds on the three archives, every timed decode
# checked; chain clocks on atha genome. Carry: bash bench/gpu/make-carry.sh.
export COMMIT=$(cat carry/COMMIT)
. bench/gpu/steps.sh
gpu_libtests
seek_archives
full_ab 3 "new=./carry/gpubench" "mixed=env ACEAPEX_GPU_PARSE_ORDER=codes ./carry/gpubench"
run 240 env ACEAPEX_GPU_K1_CLOCKS=1 ./carry/gpubench /tmp/gpu-suite/atha-genome.acx --clocks --runs 3 --ranges 10 --latency 10 --contig 1
cp "$log" "$OUT/run4-${COMMIT:0:7}-device.log"
