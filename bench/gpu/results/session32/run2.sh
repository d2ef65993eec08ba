#!/usr/bin/env bash
# Session 32 device call 2: the token parse's bit reader with its words loaded a refill ahead (BitReader1.next)
# against run 1's build cc8a542 (carry/base): libtests engine::gpu, two rounds of the full decode of atha genome,
# atha general and fly x11, every timed decode checked block by block against the index xxh3 (the seeks do not run
# the staged parses).
# Carry: BASE=cc8a542 bash bench/gpu/make-carry.sh (COMMIT in carry/).
set -o pipefail
export COMMIT=$(cat carry/COMMIT)
. bench/gpu/steps.sh
say "commit $COMMIT base $(cat carry/base/COMMIT)"
gpu_libtests
seek_archives
full_ab 2 "base=./carry/base/gpubench" "ahead=./carry/gpubench"
