#!/usr/bin/env bash
# Session 37 device call 5: the staged code phase as a loop a table over shared window addresses (k1_code_run,
# ~32 instructions a code instead of ~90) against its parent (carry/base/gpubench). GPU lib tests; full decode of
# the three archives, three rounds.
# Carry: BASE=<parent> bash bench/gpu/make-carry.sh.
export COMMIT=$(cat carry/COMMIT)
. bench/gpu/steps.sh
gpu_libtests
seek_archives
full_ab 3 "base=./carry/base/gpubench" "new=./carry/gpubench"
