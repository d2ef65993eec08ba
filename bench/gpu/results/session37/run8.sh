#!/usr/bin/env bash
# Session 37 device call 8: the kernels this session keeps (4ef6d06: k1_code_run as in ef85f65) re-verified — GPU lib
# tests, the suite's genome part (every block of the three archives, 10,000 / 2,000 ranges through both seek paths,
# latency, cat md5) — and their full decode, two rounds, in stream order and with ACEAPEX_GPU_PARSE_ORDER=codes.
# (The generated 4.69 GB archive decodes through parse_k1, which this session did not change: run 7 re-verified
# it.) Carry: bash bench/gpu/make-carry.sh.
export COMMIT=$(cat carry/COMMIT)
. bench/gpu/steps.sh
gpu_libtests
bash bench/gpu/suite.sh "genome"
full_ab 2 "new=./carry/gpubench" "codes=env ACEAPEX_GPU_PARSE_ORDER=codes ./carry/gpubench"
