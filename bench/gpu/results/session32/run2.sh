#!/usr/bin/env bash
# Session 32 device call 2: the token parse's bit reader with its words loaded a refill ahead (BitReader1.next)
# against run 1's build cc8a542 (carry/base): libtests engine::gpu, two rounds of the full decode of atha genome,
# atha general and fly x11, every timed decode checked block by block against the index xxh3 (the seeks do not run
# the staged parses); Nsight Compute source counters of parse_k1_linear on atha genome.
# Carry: BASE=cc8a542 bash bench/gpu/make-carry.sh (COMMIT in carry/).
set -o pipefail
export COMMIT=$(cat carry/COMMIT)
. bench/gpu/steps.sh
say "commit $COMMIT base $(cat carry/base/COMMIT)"
gpu_libtests
seek_archives
full_ab 2 "base=./carry/base/gpubench" "ahead=./carry/gpubench"
# Where parse_k1_linear (the default full-decode parse of few K = 1 units) now stalls: Nsight Compute source
# counters of its launch on atha genome.
run 200 ncu --clock-control none --section SourceCounters --section WarpStateStats --page source --print-source sass \
  --csv -k regex:parse_k1_linear --launch-count 1 ./carry/gpubench /tmp/gpu-suite/atha-genome.acx --no-reference \
  --runs 1 --ranges 0 --latency 0 --contig 0 >"$out/ncu-source.csv" 2>"$out/ncu-source.err"
say "ncu source: $(wc -c <"$out/ncu-source.csv") bytes; $(tail -3 "$out/ncu-source.err")"
