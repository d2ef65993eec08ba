#!/usr/bin/env bash
# Session 38 device call 5: the kernels this session keeps (carry/COMMIT: the batched map chase, the chase maps from
# finish_linear_k1, one Maps argument) against session 37's (carry/base/gpubench, 3bca410). GPU lib tests; the
# suite's genome part; full decode of the three archives, three rounds; the suite's big part (the generated 4.69 GB
# archive).
# Carry: BASE=3bca410 bash bench/gpu/make-carry.sh.
export COMMIT=$(cat carry/COMMIT)
. bench/gpu/steps.sh
gpu_libtests
bash bench/gpu/suite.sh "genome"
full_ab 3 "base=./carry/base/gpubench" "new=./carry/gpubench"
bash bench/gpu/suite.sh "big"
