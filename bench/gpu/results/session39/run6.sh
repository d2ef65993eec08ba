#!/usr/bin/env bash
# Session 39 device call 6: the kernels and order this session keeps (carry/COMMIT) against session 38's final
# commit (carry/base/gpubench, d1e8255): GPU lib tests; the suite's genome part (every block, 10,000 ranges, seek
# latency, cat md5); full decode of the three archives, two rounds each side; the suite's big part (the generated
# 4.69 GB archive: every block, 2000 ranges, cat md5, full decode).
# Carry: BASE=d1e8255 bash bench/gpu/make-carry.sh.
export COMMIT=$(cat carry/COMMIT)
. bench/gpu/steps.sh
gpu_libtests
bash bench/gpu/suite.sh "genome"
full_ab 2 "base=./carry/base/gpubench" "new=./carry/gpubench"
bash bench/gpu/suite.sh "big"
cp "$log" "$OUT/run6-${COMMIT:0:7}-device.log"
cp -r "$out/json" "$OUT/json" 2>/dev/null || true
