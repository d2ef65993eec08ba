#!/usr/bin/env bash
# Session 34 device call 4: the commit in carry/COMMIT (1f490cb's u32 bound at 2 GiB, and the CHASE_BYTES knob,
# default 1) against 0a75064 (carry/base, run 3's commit): libtests engine::gpu with CHASE_BYTES 1 and 4, then two
# rounds of the full decode of atha genome, atha general and fly x11 by the base, the new commit, and the new commit
# with 2 and 4 stream bytes a chase thread, every timed decode checked block by block against the index xxh3.
# Carry: BASE=0a75064 bash bench/gpu/make-carry.sh (COMMIT in carry/).
set -o pipefail
export COMMIT=$(cat carry/COMMIT)
. bench/gpu/steps.sh
say "commit $COMMIT base $(cat carry/base/COMMIT)"
gpu_libtests
gpu_libtests ACEAPEX_GPU_CHASE_BYTES=4
seek_archives
full_ab 2 "base=./carry/base/gpubench" "new=./carry/gpubench" \
  "new-b2=env ACEAPEX_GPU_CHASE_BYTES=2 ./carry/gpubench" "new-b4=env ACEAPEX_GPU_CHASE_BYTES=4 ./carry/gpubench"
