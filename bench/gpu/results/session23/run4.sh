#!/usr/bin/env bash
# Session 23 device call 4: the final commit's correctness and its atha numbers beside 984a46a's.
set -o pipefail
export SKIP_CAT=1 COMMIT=$(cat carry/COMMIT)
log=$OUT/device.log
bench() { echo "### $1 $2 round $3" | tee -a $log; shift 3; "$@" --runs 3 --ranges 10 --latency 10 --contig 1 2>&1 | grep -E "median|full decode" | tee -a $log; }
bash bench/gpu/suite.sh "tests genome mount"
for r in 1 2; do
  bench OLD-984a46a atha-genome $r ./carry/old/gpubench /tmp/gpu-suite/atha-genome.acx
  bench NEW-$COMMIT atha-genome $r ./carry/gpubench /tmp/gpu-suite/atha-genome.acx
done
