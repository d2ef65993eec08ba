#!/usr/bin/env bash
# Session 26 device call 3: the token index as positions in the token arrays, so that a chase hop needs no
# tok_off load (COMMIT in carry/), against run 2's chase records (1d06aff, carry/mid) and 34fec9a (carry/base,
# session 25's end), and the new chase with the token index at 16 bytes a bucket (ACEAPEX_GPU_TOKEN_BUCKET_LOG=4).
# The suite's tests and genome parts (the full decode's resolve_chase reads the changed index too), then the
# seek profile (1000 contiguous blocks and one cold block through the resident parse: "ids + resident chase" is
# the device time) of atha genome and general and fly by each in alternation, three rounds, with 2000 resident
# ranges checked against the CPU bytes each time.
# Carry: BASE=1d06aff bash bench/gpu/make-carry.sh, its carry/base moved to carry/mid, then carry/base from
# BASE=34fec9a.
set -o pipefail
export SKIP_CAT=1 COMMIT=$(cat carry/COMMIT)
. bench/gpu/steps.sh
bash bench/gpu/suite.sh "tests genome"
seek_archives
seek_ab 3 "BASE-$(cut -c1-7 carry/base/COMMIT)=./carry/base/gpubench" "MID-$(cut -c1-7 carry/mid/COMMIT)=./carry/mid/gpubench" "NEW-bucket6=./carry/gpubench" "NEW-bucket4=env ACEAPEX_GPU_TOKEN_BUCKET_LOG=4 ./carry/gpubench"
