#!/usr/bin/env bash
# Session 24 device call 2: K = 1 slice pairs (MODE_PAIRS) against one slice a thread (ACEAPEX_GPU_K1_PAIRS=0),
# same binary and run; then parse_k1's SASS-level counters on atha genome (Nsight Compute source page).
set -o pipefail
export SKIP_CAT=1 COMMIT=$(cat carry/COMMIT)
export GENOME_VARIANTS="ACEAPEX_GPU_K1_PAIRS=0"
bash bench/gpu/suite.sh "tests genome"
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:/usr/local/nvidia/lib64:${LD_LIBRARY_PATH:-}"
timeout 200 ncu --clock-control none -k regex:parse_k1 --launch-count 2 --section SourceCounters --section WarpStateStats \
  -o /tmp/rep ./carry/gpubench /tmp/gpu-suite/atha-genome.acx --no-reference --runs 1 --ranges 0 --latency 0 --contig 0 \
  > $OUT/ncu-run.txt 2>&1
ncu -i /tmp/rep.ncu-rep --page source --print-source sass --csv > $OUT/sass-src.csv 2>&1
ncu -i /tmp/rep.ncu-rep --page details > $OUT/ncu-details.txt 2>&1
gzip -9 $OUT/sass-src.csv; ls -la $OUT
