#!/usr/bin/env bash
# Session 23 device call 5: where parse_k1's cycles go on atha genome, per SASS instruction (Nsight Compute).
set -o pipefail
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:/usr/local/nvidia/lib64:${LD_LIBRARY_PATH:-}"
gzip -dc carry/atha.fa.gz > /tmp/atha.fa && ./carry/aceapex pack /tmp/atha.fa -o /tmp/a.acx -q
ncu --clock-control none -k regex:parse_k1 --launch-count 2 --section SourceCounters --section WarpStateStats \
  -o /tmp/rep ./carry/gpubench /tmp/a.acx --no-reference --runs 1 --ranges 0 --latency 0 --contig 0 > $OUT/run.txt 2>&1
ncu -i /tmp/rep.ncu-rep --page source --print-source sass --csv > $OUT/sass-src.csv 2>&1
ncu -i /tmp/rep.ncu-rep --page details > $OUT/details.txt 2>&1
ls -la $OUT; head -c 3000 $OUT/sass-src.csv
