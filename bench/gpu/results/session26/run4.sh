#!/usr/bin/env bash
# Session 26 device call 4: the suite's big part at ebbcc63 (COMMIT in carry/): a generated 4 x 1100 MB genome-mode
# archive, every block against the index xxh3, 2000 ranges against CPU random access, the full decode, and seeks
# through the resident parse, whose literal map (stream / 8 bytes) and chase records (16 bytes a token) are new.
# Carry: bash bench/gpu/make-carry.sh (run 3's carry/ serves).
set -o pipefail
export SKIP_CAT=1 COMMIT=$(cat carry/COMMIT)
bash bench/gpu/suite.sh "big"
