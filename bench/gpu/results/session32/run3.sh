#!/usr/bin/env bash
# Session 32 device call 3: the review commit (code_entry: the shared code-table lookup written once; parse_k1's
# generic code phase 5 instructions shorter, the staged entries' SASS unchanged) against b71b7a9 (carry/base):
# libtests engine::gpu with the staged parses and with parse_k1 (ACEAPEX_GPU_K1_STAGED=0), and two rounds of the
# full decode of atha genome, atha general and fly x11 by both, every timed decode checked block by block against
# the index xxh3.
# Carry: BASE=b71b7a9 bash bench/gpu/make-carry.sh (COMMIT in carry/).
set -o pipefail
export COMMIT=$(cat carry/COMMIT)
. bench/gpu/steps.sh
say "commit $COMMIT base $(cat carry/base/COMMIT)"
gpu_libtests
gpu_libtests ACEAPEX_GPU_K1_STAGED=0
seek_archives
full_ab 2 "base=./carry/base/gpubench" "review=./carry/gpubench" \
  "base-k1=env ACEAPEX_GPU_K1_STAGED=0 ./carry/base/gpubench" "review-k1=env ACEAPEX_GPU_K1_STAGED=0 ./carry/gpubench"
