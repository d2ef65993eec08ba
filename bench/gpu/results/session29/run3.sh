#!/usr/bin/env bash
# Session 29 device call 3 (the budget's last minutes): the K = 1 parse of a small archive in smaller CTAs
# (ACEAPEX_GPU_K1_CTA=64: atha's 7,504 slices in 118 CTAs on 118 SMs, two warps an SM, with the 64 KB carveout;
# =32: 235 CTAs, more than one an SM, the driver's carveout) against the default 128 (59 CTAs), two rounds of the
# full decode of atha genome, atha general and fly x11, every timed decode checked block by block.
# Carry: bash bench/gpu/make-carry.sh (COMMIT in carry/).
set -o pipefail
export COMMIT=$(cat carry/COMMIT)
. bench/gpu/steps.sh
say "commit $COMMIT"
seek_archives
full_ab 2 "cta128=./carry/gpubench" "cta64=env ACEAPEX_GPU_K1_CTA=64 ./carry/gpubench" \
  "cta32=env ACEAPEX_GPU_K1_CTA=32 ./carry/gpubench"
