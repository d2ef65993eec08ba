#!/usr/bin/env bash
# Session 25 device call 3: chase_from with a hop's loads issued together (COMMIT in carry/) against d2d0538
# (carry/base), and the token index at 16 and 32 bytes a bucket (ACEAPEX_GPU_TOKEN_BUCKET_LOG=4, 5; default 6).
# The suite's tests and genome parts, then the seek profile (1000 contiguous blocks and one cold block through
# the resident parse: "ids + resident chase" is the device time) of atha genome and general and fly by each in
# alternation, three rounds, with 2000 resident ranges checked against the CPU bytes each time.
# Carry: BASE=d2d0538 bash bench/gpu/make-carry.sh.
set -o pipefail
export SKIP_CAT=1 COMMIT=$(cat carry/COMMIT)
. bench/gpu/steps.sh
bash bench/gpu/suite.sh "tests genome"
seek_ab 3 "BASE-$(cut -c1-7 carry/base/COMMIT)=./carry/base/gpubench" "NEW-bucket6=./carry/gpubench" "NEW-bucket5=env ACEAPEX_GPU_TOKEN_BUCKET_LOG=5 ./carry/gpubench" "NEW-bucket4=env ACEAPEX_GPU_TOKEN_BUCKET_LOG=4 ./carry/gpubench"
