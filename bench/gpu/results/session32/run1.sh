#!/usr/bin/env bash
# Session 32 device call 1: the staged K = 1 parses' token parse in a loop of its own (k1_token_values, BitReader1)
# against f82a89b (carry/base): libtests engine::gpu (with it, and with parse_k1: ACEAPEX_GPU_K1_STAGED=0), two rounds
# of the full decode of atha genome, atha general and fly x11, every timed decode checked block by block against the
# index xxh3; then the suite's genome part (every block, 10,000 / 2,000 / 2,000 ranges through both seek paths, full
# decode, seek latency, `aceapex cat --decoder gpu|cpu` md5), mount (md5 and 200 dd ranges with decoder=gpu, cpu and
# gpu with injected faults) and mountseq (atha through a fresh mount, 5 runs each).
# Carry: BASE=f82a89b bash bench/gpu/make-carry.sh (COMMIT in carry/).
set -o pipefail
export COMMIT=$(cat carry/COMMIT)
. bench/gpu/steps.sh
say "commit $COMMIT base $(cat carry/base/COMMIT)"
gpu_libtests
gpu_libtests ACEAPEX_GPU_K1_STAGED=0
seek_archives
full_ab 2 "base=./carry/base/gpubench" "tokens=./carry/gpubench"
MOUNTSEQ_BIG=0 bash bench/gpu/suite.sh "genome mount mountseq"
