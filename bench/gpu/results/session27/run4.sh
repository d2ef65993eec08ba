#!/usr/bin/env bash
# Session 27 device call 4: the suite's big part at COMMIT in carry/ (run 3's carry): the generated 4 x 1100 MB
# genome-mode archive, every block against the index xxh3, 2000 ranges against CPU random access, the full decode
# by the default (Resolve::Auto picks the flow: 4.4 GB of match bytes), the map chase once more for the record.
# Carry: bash bench/gpu/make-carry.sh.
set -o pipefail
export SKIP_CAT=1 COMMIT=$(cat carry/COMMIT)
export BIG_VARIANTS="ACEAPEX_GPU_RESOLVE=maps"
bash bench/gpu/suite.sh "big"
