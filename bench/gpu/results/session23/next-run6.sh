#!/usr/bin/env bash
# Prepared in session 23 for the next session (its device time ran out first): copy_flow's lane copies (ACEAPEX_GPU_FLOW_LANE_MAX) beside the warp copies and 984a46a.
set -o pipefail
export SKIP_CAT=1 COMMIT=$(cat carry/COMMIT)
export GENOME_VARIANTS="ACEAPEX_GPU_FLOW_LANE_MAX=0 ACEAPEX_GPU_FLOW_LANE_MAX=32 ACEAPEX_GPU_FLOW_LANE_MAX=256"
log=$OUT/device.log
bench() { echo "### $1 $2 round $3" | tee -a $log; shift 3; "$@" --runs 3 --ranges 10 --latency 10 --contig 1 2>&1 | grep -E "median|full decode" | tee -a $log; }
bash bench/gpu/suite.sh "tests genome"
for r in 1 2; do
  bench OLD-984a46a atha-genome $r ./carry/old/gpubench /tmp/gpu-suite/atha-genome.acx
  bench NEW-$COMMIT atha-genome $r ./carry/gpubench /tmp/gpu-suite/atha-genome.acx
done
