#!/usr/bin/env bash
# Session 30 device call 2: the K = 1 parse's lanes a warp as a launch parameter (Device::k1_launch, 1fd9f31; measured at d848f76, which also splits device.rs). The
# default now picks four-warp CTAs with the fewest lanes a warp (power of two, >= 8) that fit the units on the SMs
# (atha: 16 lanes, 118 CTAs; fly x11: 8 lanes, 118 CTAs). libtests engine::gpu with the default (the small test
# archives: 8 lanes), with session 29's launch (32 lanes, 64 threads) and with 15 lanes (CTAs that straddle table
# groups, part of their units reading the tables from global memory); then two rounds of the full decode of atha
# genome, atha general and fly x11 against session 29's launch and other shapes (every timed decode checked block by
# block against the index xxh3).
# Carry: bash bench/gpu/make-carry.sh (COMMIT in carry/).
set -o pipefail
export COMMIT=$(cat carry/COMMIT)
. bench/gpu/steps.sh
say "commit $COMMIT"
gpu_libtests
gpu_libtests ACEAPEX_GPU_K1_WARP_LANES=32 ACEAPEX_GPU_K1_CTA=64
gpu_libtests ACEAPEX_GPU_K1_WARP_LANES=15
seek_archives
g() { echo "env ACEAPEX_GPU_K1_WARP_LANES=$1 ACEAPEX_GPU_K1_CTA=$2 ./carry/gpubench"; }
full_ab 2 "s29=$(g 32 64)" "auto=./carry/gpubench" "l8c128=$(g 8 128)" "l8c256=$(g 8 256)" "l15c128=$(g 15 128)" \
  "l16c256=$(g 16 256)"
