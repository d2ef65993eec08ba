#!/usr/bin/env bash
# Session 27 device call 6: the map chase with 1, 2 or 4 stream bytes a thread, their first loads issued together
# (ACEAPEX_GPU_CHASE_UNROLL), in alternation on atha genome, atha general and fly x11, two rounds, every timed
# decode checked block by block; `libtests engine::gpu` with 2 and 4 (every test archive through that kernel).
# Carry: bash bench/gpu/make-carry.sh (COMMIT in carry/).
set -o pipefail
export COMMIT=$(cat carry/COMMIT)
. bench/gpu/steps.sh
for u in 2 4; do gpu_libtests ACEAPEX_GPU_CHASE_UNROLL=$u; done
seek_archives
full_ab 2 "u1=env ACEAPEX_GPU_CHASE_UNROLL=1 ./carry/gpubench" "u2=env ACEAPEX_GPU_CHASE_UNROLL=2 ./carry/gpubench" "u4=env ACEAPEX_GPU_CHASE_UNROLL=4 ./carry/gpubench"
