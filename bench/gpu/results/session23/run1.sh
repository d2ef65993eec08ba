#!/usr/bin/env bash
# Session 23 device call 1.
set -o pipefail
export SKIP_CAT=1 COMMIT=$(cat carry/COMMIT)
export GENOME_VARIANTS="ACEAPEX_GPU_RESOLVE=matches ACEAPEX_GPU_RESOLVE=matches,ACEAPEX_GPU_CHASE_MATCHES=2 ACEAPEX_GPU_RESOLVE=matches,ACEAPEX_GPU_CHASE_MATCHES=32 ACEAPEX_GPU_RESOLVE=chase"
bash bench/gpu/suite.sh "tests genome"
log=$OUT/device.log
p=$(grep -l chase_matches ~/.cache/aceapex/*.ptx | head -1)
{ echo "### sass from $p"; /usr/local/cuda/bin/ptxas -arch=sm_90 "$p" -o /tmp/k.cubin && /usr/local/cuda/bin/cuobjdump -sass -fun parse_k1 /tmp/k.cubin; } > $OUT/sass.txt 2>&1
echo "### sass lines: $(wc -l < $OUT/sass.txt)" | tee -a $log
for a in atha-genome atha-general fly11; do
  for r in 1 2; do
    echo "### OLD 984a46a $a round $r" | tee -a $log
    ./carry/old/gpubench /tmp/gpu-suite/$a.acx --runs 3 --ranges 10 --latency 10 --contig 1 2>&1 | grep -E "median|full decode" | tee -a $log
    echo "### NEW $COMMIT matches $a round $r" | tee -a $log
    ACEAPEX_GPU_RESOLVE=matches ./carry/gpubench /tmp/gpu-suite/$a.acx --runs 3 --ranges 10 --latency 10 --contig 1 2>&1 | grep -E "median|full decode" | tee -a $log
  done
done
NCU_ARCHIVE=/tmp/gpu-suite/atha-genome.acx NCU_KERNELS="parse_k1|chase_matches|index_tokens" NCU_COUNT=8 NCU_ENV=ACEAPEX_GPU_RESOLVE=matches bash bench/gpu/suite.sh ncu
