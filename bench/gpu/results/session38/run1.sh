#!/usr/bin/env bash
# Session 38 device call 1: the map chase a warp a token (chase_match_tokens) and the chase maps built by
# finish_linear_k1 (FINISH_MAPS) / one index_chase_maps launch, against session 37's kernels (carry/base/gpubench,
# 3bca410). GPU lib tests; the suite's genome part (every block of the three archives, 10,000 / 2,000 ranges through
# both seek paths, latency, cat md5); full decode of the three archives, two rounds, with 32 (default), 16 and 8
# lanes a token.
# Carry: BASE=3bca410 bash bench/gpu/make-carry.sh 024ce41 (chase_match_tokens and its knob were removed after this run).
export COMMIT=$(cat carry/COMMIT)
. bench/gpu/steps.sh
gpu_libtests
bash bench/gpu/suite.sh "genome"
full_ab 2 "base=./carry/base/gpubench" "new=./carry/gpubench" \
  "lanes16=env ACEAPEX_GPU_CHASE_LANES=16 ./carry/gpubench" "lanes8=env ACEAPEX_GPU_CHASE_LANES=8 ./carry/gpubench"
