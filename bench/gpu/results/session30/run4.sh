#!/usr/bin/env bash
# Session 30 device call 4: MODE_FULL_LINEAR (68f5514): a K = 1 full decode of few units writes its literals in
# literal order, eight a word, and place_literals_k1 moves them to their offsets, against the placement inside the
# chain (ACEAPEX_GPU_K1_LINEAR=0). libtests engine::gpu with both; 2,000 random ranges of each archive through both
# seek paths (the resident parse is a full-decode parse too); two rounds of the full decode of atha genome, atha
# general and fly x11 (every timed decode checked block by block against the index xxh3).
# Carry: bash bench/gpu/make-carry.sh (COMMIT in carry/).
set -o pipefail
export COMMIT=$(cat carry/COMMIT)
. bench/gpu/steps.sh
say "commit $COMMIT"
gpu_libtests
gpu_libtests ACEAPEX_GPU_K1_LINEAR=0
seek_archives
for a in atha-genome atha-general fly11; do
  run 120 ./carry/gpubench "/tmp/gpu-suite/$a.acx" --runs 1 --ranges 2000 --latency 100 --contig 2 |
    grep -E "equal|wrong|FAIL|rror|one block|contig"
done
full_ab 2 "linear=./carry/gpubench" "inline=env ACEAPEX_GPU_K1_LINEAR=0 ./carry/gpubench"
