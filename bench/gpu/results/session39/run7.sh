#!/usr/bin/env bash
# Session 39 device call 7: the NO_UNIT skip before the parse loop (carry/COMMIT) against session 38's final commit
# (carry/base, d1e8255): two rounds of the full decode on the three archives, every timed decode checked.
# Carry: BASE=d1e8255 bash bench/gpu/make-carry.sh.
export COMMIT=$(cat carry/COMMIT)
. bench/gpu/steps.sh
seek_archives
full_ab 2 "base=./carry/base/gpubench" "new=./carry/gpubench"
cp "$log" "$OUT/run7-${COMMIT:0:7}-device.log"
