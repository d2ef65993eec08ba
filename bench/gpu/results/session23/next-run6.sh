#!/usr/bin/env bash
# Prepared in session 23 for the next session (its device time ran out first): copy_flow's lane copies
# (next-flow-lane-copies.patch, applied with `git apply` and committed) against the commit before them.
# Carry: `BASE=<commit before the patch> bash bench/gpu/make-carry.sh`. Then on the device: bash this file.
set -o pipefail
export SKIP_CAT=1 COMMIT=$(cat carry/COMMIT) BIG_FILES=4 BIG_BYTES=1100M BIG_RANGES=300
export GENOME_VARIANTS="ACEAPEX_GPU_FLOW_LANE_MAX=0 ACEAPEX_GPU_FLOW_LANE_MAX=32 ACEAPEX_GPU_FLOW_LANE_MAX=256"
export BIG_VARIANTS="ACEAPEX_GPU_FLOW_LANE_MAX=0"
bash bench/gpu/suite.sh "tests genome big ab"
