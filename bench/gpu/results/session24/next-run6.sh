#!/usr/bin/env bash
# Prepared in session 24 for the next session (its device time ran out first): MODE_STAGE, context-coded K = 1
# literals decoded into a shared staging column per thread and placed after the chain (next-k1-staging.patch:
# `git apply` it and commit). It passed the host model tests (tests/kernel_host/staged_literals.cpp: placement on
# random token layouts; staged_chain.cpp: the staged chain on 300 streams of the crate's encoder) and the NVRTC
# compile (parse_k1 66 registers, no spills); it has not run on a GPU.
# Carry: `BASE=<the commit before the patch> bash bench/gpu/make-carry.sh`. Then on the device: bash this file
# (~9 minutes with the big pack).
# ACEAPEX_GPU_K1_STAGE=0 gives the old placement in the same binary; the 4.65 GB archive (1.1 M slices) is above
# K1_STAGE_MAX_UNITS and decodes as before, which the `ab` part checks.
set -o pipefail
export SKIP_CAT=1 COMMIT=$(cat carry/COMMIT) BIG_FILES=4 BIG_BYTES=1100M BIG_RANGES=300 AB_ROUNDS=1
export GENOME_VARIANTS="ACEAPEX_GPU_K1_STAGE=0"
bash bench/gpu/suite.sh "tests genome mount big ab"
