#!/usr/bin/env bash
# Session 27 device call 2: the suite's big part at 1383b62 (COMMIT in carry/, run 1's carry): a generated
# 4 x 1100 MB genome-mode archive, every block against the index xxh3, 2000 ranges against CPU random access, the
# full decode with the flow (the default), then the map chase, the flow and the map chase again (BIG_VARIANTS;
# every timed decode checked block by block).
# Carry: bash bench/gpu/make-carry.sh.
set -o pipefail
export SKIP_CAT=1 COMMIT=$(cat carry/COMMIT)
export BIG_VARIANTS="ACEAPEX_GPU_RESOLVE=maps ACEAPEX_GPU_RESOLVE=flow ACEAPEX_GPU_RESOLVE=maps"
bash bench/gpu/suite.sh "big"
