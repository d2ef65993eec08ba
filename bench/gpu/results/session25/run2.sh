#!/usr/bin/env bash
# Session 25 device call 2: chase_resident with 4 bytes a thread (c6a0c08; ACEAPEX_GPU_RESIDENT_WORD=8 for 8)
# against d2d0538 (carry/base, one byte a thread). The suite's tests and genome parts, then the seek profile
# (1000 contiguous blocks and one cold block through the resident parse, "ids + resident chase" is the device
# time) of atha genome and general and fly by the base, word 4 and word 8 in alternation, three rounds.
# Carry: BASE=d2d0538 bash bench/gpu/make-carry.sh (at c6a0c08).
set -o pipefail
export SKIP_CAT=1 COMMIT=$(cat carry/COMMIT)
export GENOME_VARIANTS="ACEAPEX_GPU_RESIDENT_WORD=8"
. bench/gpu/steps.sh
bash bench/gpu/suite.sh "tests genome"
seek_ab 3 "BASE-$(cut -c1-7 carry/base/COMMIT)=./carry/base/gpubench" "NEW-word4=./carry/gpubench" "NEW-word8=env ACEAPEX_GPU_RESIDENT_WORD=8 ./carry/gpubench"
