#!/usr/bin/env bash
# Session 26 device call 2: chase_resident through the literal map and the chase records (COMMIT in
# carry/) against 34fec9a (carry/base, session 25's end: a warp token search, then the chase's hops), and the new
# chase with the token index at 16 bytes a bucket (ACEAPEX_GPU_TOKEN_BUCKET_LOG=4; default 6).
# The suite's tests, genome and mount parts, then the seek profile (1000 contiguous blocks and one cold block through the resident
# parse: "ids + resident chase" is the device time) of atha genome and general and fly by each in alternation,
# three rounds, with 2000 resident ranges checked against the CPU bytes each time.
# Carry: BASE=34fec9a bash bench/gpu/make-carry.sh.
set -o pipefail
export SKIP_CAT=1 COMMIT=$(cat carry/COMMIT)
. bench/gpu/steps.sh
bash bench/gpu/suite.sh "tests genome mount"
seek_archives
seek_ab 3 "BASE-$(cut -c1-7 carry/base/COMMIT)=./carry/base/gpubench" "NEW-bucket6=./carry/gpubench" "NEW-bucket4=env ACEAPEX_GPU_TOKEN_BUCKET_LOG=4 ./carry/gpubench"
