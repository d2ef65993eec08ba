#!/usr/bin/env bash
# Session 38 device call 6: the final commit's kernels re-checked after chase_matches' batches moved to dynamic
# shared memory: GPU lib tests and one round of the full decode (every block checked) on the three archives.
# Carry: bash bench/gpu/make-carry.sh.
export COMMIT=$(cat carry/COMMIT)
. bench/gpu/steps.sh
gpu_libtests
seek_archives
full_ab 1 "new=./carry/gpubench"
