#!/usr/bin/env bash
# Session 31 device call 4: the end-to-end paths with this session's defaults (the full decode of few K = 1 units
# by parse_k1_linear and place_literals_k1). libtests engine::gpu with them and with parse_k1
# (ACEAPEX_GPU_K1_STAGED=0); two rounds of the full decode, b28e918 (carry/base) against this commit's default and
# its staged parse with the literals placed in the chain (ACEAPEX_GPU_K1_LINEAR=0), every timed decode checked block
# by block against the index xxh3; then the suite's genome part (every block, 10,000 / 2,000 / 2,000 ranges through
# both seek paths, full decode, seek latency, `aceapex cat --decoder gpu|cpu` md5), mount (md5 and 200 dd ranges with
# decoder=gpu, cpu and gpu with injected faults) and mountseq (atha through a fresh mount, 5 runs each).
# Carry: BASE=b28e918 bash bench/gpu/make-carry.sh (COMMIT in carry/).
set -o pipefail
export COMMIT=$(cat carry/COMMIT)
. bench/gpu/steps.sh
say "commit $COMMIT base $(cat carry/base/COMMIT)"
gpu_libtests
gpu_libtests ACEAPEX_GPU_K1_STAGED=0
seek_archives
full_ab 2 "base=./carry/base/gpubench" "default=./carry/gpubench" "inline=env ACEAPEX_GPU_K1_LINEAR=0 ./carry/gpubench"
MOUNTSEQ_BIG=0 bash bench/gpu/suite.sh "genome mount mountseq"
