#!/usr/bin/env bash
# Session 34 device call 3: the commit in carry/COMMIT (the map chase in 32-bit positions) against baaee80
# (carry/base, run 2's commit): the suite's tests, genome (every block, 10,000 / 2,000 ranges through both seek
# paths, cat md5) and two rounds of base/new full decodes.
# Carry: BASE=baaee80 bash bench/gpu/make-carry.sh (COMMIT in carry/).
export COMMIT=$(cat carry/COMMIT)
bash bench/gpu/suite.sh "tests genome ab"
