#!/usr/bin/env bash
# Session 39 device call 5: the linear parse's literal pieces in pairs (16-byte stores) against run 4's kernels
# (carry/base, ce3ad0f): three rounds on the three archives, every timed decode checked; GPU lib tests.
# Carry: BASE=ce3ad0f bash bench/gpu/make-carry.sh.
export COMMIT=$(cat carry/COMMIT)
. bench/gpu/steps.sh
gpu_libtests
seek_archives
full_ab 3 "pairs=./carry/gpubench" "base=./carry/base/gpubench"
cp "$log" "$OUT/run5-${COMMIT:0:7}-device.log"
