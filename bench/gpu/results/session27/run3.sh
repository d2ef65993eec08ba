#!/usr/bin/env bash
# Session 27 device call 3: the final resolver choice (Resolve::Auto, the default: the map chase for atha and fly,
# whose matches produce at most 32 MiB) at COMMIT in carry/. The suite's tests, genome (every block, 10,000 / 2,000
# / 2,000 ranges, `aceapex cat --decoder gpu|cpu` md5) and mount (md5 and 200 dd ranges with decoder=gpu, cpu and
# gpu with injected faults) parts, then two rounds of the flow against the default in alternation.
# Carry: bash bench/gpu/make-carry.sh.
set -o pipefail
export COMMIT=$(cat carry/COMMIT)
. bench/gpu/steps.sh
bash bench/gpu/suite.sh "tests genome mount"
seek_archives
full_ab 2 "flow=env ACEAPEX_GPU_RESOLVE=flow ./carry/gpubench" "auto=./carry/gpubench"
