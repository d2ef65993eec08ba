#!/usr/bin/env bash
# Session 34 device call 1: c55cb59 (the map chase a warp per 1,024 stream bytes, chase_match_windows; the K = 1
# context step's successor offset carried, 43.5 -> 39 SASS instructions a literal) against 97a23b3 (carry/base):
# libtests engine::gpu with each chase, then two rounds of the full decode of atha genome, atha general and fly x11
# by the base, the new commit, the new commit with the byte chase (ACEAPEX_GPU_CHASE_WINDOWS=0: the step alone), and
# the new commit with 16 lanes a warp in the K = 1 parse (1 warp a scheduler instead of 2), every timed decode
# checked block by block against the index xxh3.
# Carry: BASE=97a23b3 bash bench/gpu/make-carry.sh (COMMIT in carry/).
set -o pipefail
export COMMIT=$(cat carry/COMMIT)
. bench/gpu/steps.sh
say "commit $COMMIT base $(cat carry/base/COMMIT)"
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv | tee -a "$log"
gpu_libtests
gpu_libtests ACEAPEX_GPU_CHASE_WINDOWS=0
seek_archives
full_ab 2 "base=./carry/base/gpubench" "new=./carry/gpubench" \
  "new-bytechase=env ACEAPEX_GPU_CHASE_WINDOWS=0 ./carry/gpubench" \
  "new-l16=env ACEAPEX_GPU_K1_WARP_LANES=16 ACEAPEX_GPU_K1_CTA=128 ./carry/gpubench"
