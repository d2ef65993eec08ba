#!/usr/bin/env bash
# Session 37 device call 2: run 1's 2 KiB slices went to the many-unit parse (parse_k1: no rings, both lanes on one
# thread), so that comparison said nothing about chains. Here atha_chr1 genome mode with 2 KiB slices runs the
# staged linear parse too (ACEAPEX_GPU_K1_FEW_UNITS=128: 64 units a CTA, 235 CTAs), with 512-byte rings so that two
# CTAs fit an SM (one wave), against 4 KiB slices with either ring. Full decode, two rounds.
# Carry: bash bench/gpu/make-carry.sh (commit in carry/COMMIT).
export COMMIT=$(cat carry/COMMIT)
. bench/gpu/steps.sh
unpack_corpus
mkdir -p /tmp/gpu-suite
for l in 11 12; do ACEAPEX_SLICE_LOG=$l ./carry/aceapex pack carry/atha.fa -o /tmp/gpu-suite/atha-s$l.acx -q; done
FULL_ARCHIVES="atha-s12" full_ab 2 "s12=./carry/gpubench" "s12-ring512=env ACEAPEX_GPU_K1_RING_BYTES=512 ./carry/gpubench"
FULL_ARCHIVES="atha-s11" full_ab 2 "s11-few128-ring512=env ACEAPEX_GPU_K1_FEW_UNITS=128 ACEAPEX_GPU_K1_RING_BYTES=512 ./carry/gpubench" \
  "s11-few128=env ACEAPEX_GPU_K1_FEW_UNITS=128 ./carry/gpubench"
