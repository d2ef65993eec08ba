#!/usr/bin/env bash
# Session 34 device call 5: the commit in carry/COMMIT (place_literals_k1 a lane an aligned output word) against
# 08cfbc5 (carry/base, the final chase): libtests engine::gpu, then two rounds of the full decode of atha genome,
# atha general and fly x11 by both, every timed decode checked block by block against the index xxh3.
# Carry: BASE=08cfbc5 bash bench/gpu/make-carry.sh (COMMIT in carry/).
set -o pipefail
export COMMIT=$(cat carry/COMMIT)
. bench/gpu/steps.sh
say "commit $COMMIT base $(cat carry/base/COMMIT)"
gpu_libtests
seek_archives
full_ab 2 "base=./carry/base/gpubench" "new=./carry/gpubench"
