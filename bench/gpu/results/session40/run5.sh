#!/usr/bin/env bash
# Session 40 device call 5: the final kernels (carry/COMMIT): GPU lib tests; the suite's genome part (every block,
# 10,000 ranges of atha genome and 2,000 of the others through both seek paths, seek latency, cat md5); its big part
# (the generated 4.69 GB archive: every block, 2000 ranges, cat md5, full decode); then its ab part against the
# session's start (carry/base/gpubench, 40b2a38), one round, last (the device budget may cut it).
# Carry: BASE=40b2a38 bash bench/gpu/make-carry.sh.
export COMMIT=$(cat carry/COMMIT)
. bench/gpu/steps.sh
gpu_libtests
bash bench/gpu/suite.sh "genome"
bash bench/gpu/suite.sh "big"
cp -r "$out/json" "$OUT/json" 2>/dev/null || true
AB_ROUNDS=1 bash bench/gpu/suite.sh "ab"
cp "$log" "$OUT/run5-${COMMIT:0:7}-device.log"
