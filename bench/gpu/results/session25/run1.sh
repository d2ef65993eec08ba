#!/usr/bin/env bash
# Session 25 device call 1: MODE_STAGE and MODE_STAGE_LEAN (9abe41c) on the small archives. The suite's tests,
# genome (default ACEAPEX_GPU_K1_STAGE=2, variants 0 and 1) and mount parts, `ab` against d2d0538 (carry/base, the
# session's starting point), then atha genome by the base gpubench and this one's three stage settings in
# alternation, three rounds.
# Carry: BASE=d2d0538 bash bench/gpu/make-carry.sh (at 9abe41c).
set -o pipefail
export SKIP_CAT=1 COMMIT=$(cat carry/COMMIT) AB_ROUNDS=1
export GENOME_VARIANTS="ACEAPEX_GPU_K1_STAGE=0 ACEAPEX_GPU_K1_STAGE=1"
log=$OUT/device.log
bench() { echo "### $1 $2 round $3" | tee -a $log; shift 3; "$@" --runs 3 --ranges 10 --latency 10 --contig 1 2>&1 | grep -E "median|full decode|mismatch|FAIL|error" | tee -a $log; }
bash bench/gpu/suite.sh "tests genome mount ab"
for r in 1 2 3; do
  for a in atha-genome atha-general fly11; do
    bench BASE-$(cut -c1-7 carry/base/COMMIT) $a $r ./carry/base/gpubench /tmp/gpu-suite/$a.acx
    for k in 0 1 2; do
      bench NEW-K1_STAGE=$k $a $r env ACEAPEX_GPU_K1_STAGE=$k ./carry/gpubench /tmp/gpu-suite/$a.acx
    done
  done
done
