#!/usr/bin/env bash
# Session 24 device call 3, the final code: the suite's tests, genome, mount and big parts, then `ab` (one round)
# against 604ecfc (carry/base: the run-1 kernel without copy_flow's lane copies), and atha genome by 412a17e's
# gpubench (carry/old, the session's starting point) and this commit's in alternation, two rounds.
set -o pipefail
export SKIP_CAT=1 COMMIT=$(cat carry/COMMIT) BIG_FILES=4 BIG_BYTES=1100M BIG_RANGES=300 AB_ROUNDS=1
log=$OUT/device.log
bench() { echo "### $1 $2 round $3" | tee -a $log; shift 3; "$@" --runs 3 --ranges 10 --latency 10 --contig 1 2>&1 | grep -E "median|full decode" | tee -a $log; }
bash bench/gpu/suite.sh "tests genome mount big ab"
for r in 1 2; do
  bench OLD-412a17e atha-genome $r ./carry/old/gpubench /tmp/gpu-suite/atha-genome.acx
  bench NEW-$COMMIT atha-genome $r ./carry/gpubench /tmp/gpu-suite/atha-genome.acx
done
