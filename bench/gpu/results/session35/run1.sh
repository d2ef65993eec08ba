#!/usr/bin/env bash
# Session 35 device call 1: format v7 (two independent rANS lanes a slice, lane 1 reading the word stream from
# its back), the commit in carry/COMMIT. The suite's tests and genome part on the default archives (two lanes:
# every block, 10,000 / 2,000 ranges through both seek paths, cat md5), then the full decode of atha genome,
# atha general and fly x11 packed with one lane and with two, two rounds, each timed decode checked block by block,
# also with 512-byte word rings and with the staged parse (lanes one after the other in a thread).
# Carry: bash bench/gpu/make-carry.sh (COMMIT in carry/).
export COMMIT=$(cat carry/COMMIT)
bash bench/gpu/suite.sh "tests genome"
. bench/gpu/steps.sh
one_lane_archives
FULL_ARCHIVES="atha-genome-k1 atha-genome atha-general-k1 atha-general fly11-k1 fly11" full_ab 2 "v7=./carry/gpubench" \
  "ring512=env ACEAPEX_GPU_K1_RING_BYTES=512 ./carry/gpubench" "staged=env ACEAPEX_GPU_K1_LINEAR=0 ./carry/gpubench"
