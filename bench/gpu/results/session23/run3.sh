#!/usr/bin/env bash
# Session 23 device call 3, the final code.
set -o pipefail
export SKIP_CAT=1 COMMIT=$(cat carry/COMMIT) BIG_FILES=4 BIG_BYTES=1100M BIG_RANGES=300
export GENOME_VARIANTS="ACEAPEX_GPU_RESOLVE=chase"
log=$OUT/device.log
bench() { echo "### $1 $2 round $3" | tee -a $log; shift 3; "$@" --runs 3 --ranges 10 --latency 10 --contig 1 2>&1 | grep -E "median|full decode" | tee -a $log; }
bash bench/gpu/suite.sh "tests genome mount"
for a in atha-genome atha-general fly11; do for r in 1 2; do
  bench OLD-984a46a $a $r ./carry/old/gpubench /tmp/gpu-suite/$a.acx
  bench NEW-$COMMIT $a $r ./carry/gpubench /tmp/gpu-suite/$a.acx
done; done
bash bench/gpu/suite.sh big
bench OLD-984a46a big-gen 1 ./carry/old/gpubench /tmp/gpu-suite/big-gen.acx --no-reference
bench NEW-$COMMIT big-gen 2 ./carry/gpubench /tmp/gpu-suite/big-gen.acx --no-reference
