#!/usr/bin/env bash
# Session 28 device call 1: session 27's prepared run6 (the map chase with 1, 2 or 4 stream bytes a thread), then
# the full decode of atha_chr1 genome mode packed with K = 1, 4, 8, 16, 32 rANS lanes (`aceapex pack --lanes K`), two
# rounds: which stage bounds the full decode once the entropy chains are short.
# Carry: bash bench/gpu/make-carry.sh (COMMIT in carry/).
set -o pipefail
export COMMIT=$(cat carry/COMMIT)
. bench/gpu/steps.sh
bash bench/gpu/results/session27/run6.sh
lane_archives 4 8 16 32
FULL_ARCHIVES="atha-genome atha-k4 atha-k8 atha-k16 atha-k32" full_ab 2 "K=./carry/gpubench"
