#!/usr/bin/env bash
# Session 37 device call 1: what more, shorter rANS chains would give the full decode, before building them. atha_chr1
# genome mode packed with 1, 2 and 4 KiB slices (ACEAPEX_SLICE_LOG 10, 11, 12; the default is 12): 2 KiB slices
# have twice the chains of half the length, as four lanes a 4 KiB slice would. Full decode, two rounds.
# Carry: bash bench/gpu/make-carry.sh (commit in carry/COMMIT).
export COMMIT=$(cat carry/COMMIT)
. bench/gpu/steps.sh
unpack_corpus
mkdir -p /tmp/gpu-suite
for l in 10 11 12; do
  ACEAPEX_SLICE_LOG=$l ./carry/aceapex pack carry/atha.fa -o /tmp/gpu-suite/atha-s$l.acx -q
  ACEAPEX_SLICE_LOG=$l ./carry/aceapex pack --no-genome carry/atha.fa -o /tmp/gpu-suite/atha-general-s$l.acx -q
  say "### slice_log $l: genome $(stat -c %s /tmp/gpu-suite/atha-s$l.acx) bytes, general $(stat -c %s /tmp/gpu-suite/atha-general-s$l.acx)"
done
FULL_ARCHIVES="atha-s12 atha-s11 atha-s10 atha-general-s12 atha-general-s11" full_ab 2 "new=./carry/gpubench"
