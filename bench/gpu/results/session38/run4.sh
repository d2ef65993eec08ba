#!/usr/bin/env bash
# Session 38 device call 4: placement a literal run at a time and bucket records beside the token index
# (carry/COMMIT), against run 2's kernels (carry/base/gpubench, 163fd33). GPU lib tests; the suite's
# genome part; full decode of the three archives, three rounds; then the suite's big part (the generated 4.69 GB
# archive: every block, 2,000 ranges through both seek paths, cat md5, full decode).
# Carry: BASE=163fd33 bash bench/gpu/make-carry.sh.
export COMMIT=$(cat carry/COMMIT)
. bench/gpu/steps.sh
gpu_libtests
bash bench/gpu/suite.sh "genome"
full_ab 3 "base=./carry/base/gpubench" "new=./carry/gpubench"
bash bench/gpu/suite.sh "big"
