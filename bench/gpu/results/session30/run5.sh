#!/usr/bin/env bash
# Session 30 device call 5: run 4 measured MODE_FULL_LINEAR (68f5514) faster than the placement in the chain of the
# same build, but that build's own inline path slower than run 3's f402f10 on every archive (entropy alone too):
# the two commits in the same run. Two rounds of the full decode of atha genome, atha general and fly x11, f402f10
# (carry/base) against 68f5514 with and without the linear literals (every timed decode checked block by block).
# Carry: BASE=f402f10 bash bench/gpu/make-carry.sh (COMMIT in carry/).
set -o pipefail
export COMMIT=$(cat carry/COMMIT)
. bench/gpu/steps.sh
say "commit $COMMIT base $(cat carry/base/COMMIT)"
seek_archives
full_ab 2 "base=./carry/base/gpubench" "linear=./carry/gpubench" "inline=env ACEAPEX_GPU_K1_LINEAR=0 ./carry/gpubench"
