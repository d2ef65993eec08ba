#!/usr/bin/env bash
# Session 27 device call 1: the full decode through the chase maps (ACEAPEX_GPU_RESOLVE=maps: a thread per stream
# byte; maps:gather: a warp gathers the match bytes of 1024 stream bytes first) against the flow (the default),
# in one binary (COMMIT in carry/). The suite's tests (the new resolvers on every test archive, and the depth
# bound) and genome parts (every block, 10,000 / 2,000 / 2,000 ranges), then three rounds of the three resolvers in
# alternation on atha genome, atha general and fly x11, every timed decode checked block by block.
# Carry: bash bench/gpu/make-carry.sh.
set -o pipefail
export SKIP_CAT=1 COMMIT=$(cat carry/COMMIT)
. bench/gpu/steps.sh
bash bench/gpu/suite.sh "tests genome"
seek_archives
full_ab 3 "flow=./carry/gpubench" "maps=env ACEAPEX_GPU_RESOLVE=maps ./carry/gpubench" "gather=env ACEAPEX_GPU_RESOLVE=maps:gather ./carry/gpubench"
