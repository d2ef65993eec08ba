#!/usr/bin/env bash
# Session 37 device call 7: the staged code phase unrolled by eight (3357ba6) against k1_code_run alone (ef85f65,
# carry/base/gpubench), and with ACEAPEX_GPU_PARSE_ORDER=codes (each table group's units with the most matches
# first); then this session's kernels re-verified: GPU lib tests, the suite's genome part (every block of the three
# archives, 10,000 / 2,000 ranges through both seek paths, latency, cat md5) and big part (a generated 4.69 GB
# archive: every block, 2,000 ranges, full decode, cat md5).
# Carry: BASE=ef85f65 bash bench/gpu/make-carry.sh.
export COMMIT=$(cat carry/COMMIT)
. bench/gpu/steps.sh
gpu_libtests
seek_archives
full_ab 2 "base=./carry/base/gpubench" "new=./carry/gpubench" "codes=env ACEAPEX_GPU_PARSE_ORDER=codes ./carry/gpubench"
bash bench/gpu/suite.sh "genome big"
