#!/usr/bin/env bash
# Session 31 device call 6: the review commit (the staged parses no longer prime the unused global word window)
# against f111590 (carry/base): libtests engine::gpu, and two rounds of the full decode of atha genome, atha general
# and fly x11, every timed decode checked block by block against the index xxh3.
# Carry: BASE=f111590 bash bench/gpu/make-carry.sh (COMMIT in carry/).
set -o pipefail
export COMMIT=$(cat carry/COMMIT)
. bench/gpu/steps.sh
say "commit $COMMIT base $(cat carry/base/COMMIT)"
gpu_libtests
seek_archives
full_ab 2 "base=./carry/base/gpubench" "review=./carry/gpubench"
