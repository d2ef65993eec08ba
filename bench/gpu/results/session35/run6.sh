#!/usr/bin/env bash
# Session 35 device call 6: the suite's `big` part on format v7 (the commit in carry/COMMIT): a generated 4.4 GB
# genome-mode archive (4 x 1100M mutated copies of atha, packed with --level 3, two rANS lanes), every block against
# the index xxh3 and 2,000 ranges against CPU random access, full-decode throughput, seek latency, cat md5.
# Carry: bash bench/gpu/make-carry.sh.
export COMMIT=$(cat carry/COMMIT)
bash bench/gpu/suite.sh "big"
