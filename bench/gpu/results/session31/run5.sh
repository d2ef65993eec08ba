#!/usr/bin/env bash
# Session 31 device call 5: the staged K = 1 parses' own code-phase loop (its words from the ring), against run 4's
# defaults (a75b0f6, carry/base). libtests engine::gpu with it (and parse_k1 for the rest); two rounds of the full
# decode of atha genome, atha general and fly x11, every timed decode checked block by block against the index
# xxh3; 2,000 random ranges of each archive through both seek paths (cat and the mount read through the same full
# decode: run 4).
# Carry: BASE=a75b0f6 bash bench/gpu/make-carry.sh (COMMIT in carry/).
set -o pipefail
export COMMIT=$(cat carry/COMMIT)
. bench/gpu/steps.sh
say "commit $COMMIT base $(cat carry/base/COMMIT)"
gpu_libtests
seek_archives
full_ab 2 "base=./carry/base/gpubench" "default=./carry/gpubench"
for a in atha-genome atha-general fly11; do
  run 120 ./carry/gpubench /tmp/gpu-suite/$a.acx --runs 1 --ranges 2000 --latency 0 --contig 0 | grep -E "equal|wrong|FAIL|rror"
done
