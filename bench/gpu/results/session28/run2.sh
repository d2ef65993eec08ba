#!/usr/bin/env bash
# Session 28 device call 2: the one-form chase_matches (the unroll knob removed) checked on the H200:
# `libtests engine::gpu`, then two rounds of the full decode on atha genome, atha general and fly x11 (every timed
# decode checked block by block against the index xxh3), the same numbers as run 1's u1.
# Carry: bash bench/gpu/make-carry.sh (COMMIT in carry/).
set -o pipefail
export COMMIT=$(cat carry/COMMIT)
. bench/gpu/steps.sh
[ -f carry/atha.fa ] || gzip -dc carry/atha.fa.gz >carry/atha.fa
for f in carry/fly11/*.gz; do [ -e "$f" ] && gzip -d "$f"; done
say "commit $COMMIT"
run 120 ./carry/libtests engine::gpu --test-threads 1 | grep -E "test result|FAIL|panick"
seek_archives
full_ab 2 "one=./carry/gpubench"
