#!/usr/bin/env bash
# Session 38 device call 2: the map chase back to a lane a stream byte, in batches of 32 windows a warp (only
# windows with a match byte are chased), with the chase maps built by finish_linear_k1 (FINISH_MAPS), against
# session 37's kernels (carry/base/gpubench, 3bca410). GPU lib tests; the suite's genome part; full decode of the
# three archives, three rounds.
# Carry: BASE=3bca410 bash bench/gpu/make-carry.sh.
export COMMIT=$(cat carry/COMMIT)
. bench/gpu/steps.sh
gpu_libtests
bash bench/gpu/suite.sh "genome"
full_ab 3 "base=./carry/base/gpubench" "new=./carry/gpubench"
