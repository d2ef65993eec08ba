#!/usr/bin/env bash
# Session 34 device call 2: the commit in carry/COMMIT (run 1's step change alone, the window chase removed)
# against 97a23b3 (carry/base): the suite's tests (libtests engine::gpu), genome (every block and 10,000 ranges of
# atha genome, atha general and fly x11 against the CPU, cat md5), Nsight Compute counters of the atha genome full
# decode's placement and map chase (the chase is 0.116 of its 0.626 ms), and the base/new full-decode rounds.
# Carry: BASE=97a23b3 bash bench/gpu/make-carry.sh (COMMIT in carry/).
export COMMIT=$(cat carry/COMMIT)
NCU_ARCHIVE=/tmp/gpu-suite/atha-genome.acx NCU_KERNELS='chase_matches|place_literals_k1|index_' NCU_COUNT=5 \
  bash bench/gpu/suite.sh "tests genome ncu ab"
