#!/usr/bin/env bash
# Session 29 device call 4 (what the budget had left): libtests engine::gpu with run 3's 64-thread K = 1 CTAs as
# the default for small archives (every test archive is one), then one round of the full decode of the small
# archives (every timed decode checked block by block).
# Carry: bash bench/gpu/make-carry.sh (COMMIT in carry/).
set -o pipefail
export COMMIT=$(cat carry/COMMIT)
. bench/gpu/steps.sh
say "commit $COMMIT"
gpu_libtests
seek_archives
full_ab 1 "new=./carry/gpubench"
