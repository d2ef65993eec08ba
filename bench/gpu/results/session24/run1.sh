#!/usr/bin/env bash
# Session 24 device call 1: the K = 1 loop diet (c4ce9f0), copy_flow's lane copies (bf66087) and the eight-literal
# sink (5d4e5df) against 412a17e (carry/base, `BASE=412a17e bash bench/gpu/make-carry.sh`), same run.
# The lane copies also by ACEAPEX_GPU_FLOW_LANE_MAX=0 (the warp copies every match, as before).
set -o pipefail
export SKIP_CAT=1 COMMIT=$(cat carry/COMMIT) BIG_FILES=4 BIG_BYTES=1100M BIG_RANGES=300
export GENOME_VARIANTS="ACEAPEX_GPU_FLOW_LANE_MAX=0"
export BIG_VARIANTS="ACEAPEX_GPU_FLOW_LANE_MAX=0"
bash bench/gpu/suite.sh "tests genome big ab"
