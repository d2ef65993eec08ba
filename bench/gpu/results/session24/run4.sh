#!/usr/bin/env bash
# Session 24 device call 4: parse_k1's SASS-level counters on atha genome at the final kernel (eeef7ab), the full
# decode's parse (first profiled launch) and the entropy-only variant (second).
set -o pipefail
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:/usr/local/nvidia/lib64:${LD_LIBRARY_PATH:-}"
gzip -dc carry/atha.fa.gz > /tmp/atha.fa && ./carry/aceapex pack /tmp/atha.fa -o /tmp/a.acx -q
timeout 150 ncu --clock-control none -k regex:parse_k1 --launch-count 2 --section SourceCounters --section WarpStateStats \
  -o /tmp/rep ./carry/gpubench /tmp/a.acx --no-reference --runs 1 --ranges 0 --latency 0 --contig 0 > $OUT/ncu-run.txt 2>&1
ncu -i /tmp/rep.ncu-rep --page source --print-source sass --csv > $OUT/sass-src.csv 2>&1
ncu -i /tmp/rep.ncu-rep --page details > $OUT/ncu-details.txt 2>&1
gzip -9 $OUT/sass-src.csv; ls -la $OUT
