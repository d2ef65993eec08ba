#!/usr/bin/env bash
# Session 37 device call 9: parse_k1_linear's code tables in the dtab layout (K1_WIDE_CODES: a code step one shared
# load instead of two) against the compact tables (ACEAPEX_GPU_K1_WIDE_CODES=0), same binary. GPU lib tests (the
# wide path included: a corrupt code fails every GPU path); full decode, one round (the session's device time).
# Carry: bash bench/gpu/make-carry.sh.
export COMMIT=$(cat carry/COMMIT)
. bench/gpu/steps.sh
gpu_libtests
seek_archives
full_ab 1 "wide=./carry/gpubench" "narrow=env ACEAPEX_GPU_K1_WIDE_CODES=0 ./carry/gpubench"
