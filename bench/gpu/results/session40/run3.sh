#!/usr/bin/env bash
# Session 40 device call 3: the step bench again (bench/gpu/stepbench: its V0-V3 are now the new kernel step,
# V16/V17 rows of 16 bytes); then the shared-memory context chain loading the next row after the base
# (carry/COMMIT) against the session's start (carry/base, 40b2a38), and with the shared rows 16 bytes wide
# (ACEAPEX_GPU_CTX_WIDE=1, four copies of an order-4 model): the GPU lib tests, two rounds of the full decode on the
# three archives (every timed decode checked), then the chain clocks of the new kernels on atha genome.
# Carry: BASE=40b2a38 bash bench/gpu/make-carry.sh.
export COMMIT=$(cat carry/COMMIT)
. bench/gpu/steps.sh
nvcc -O3 -std=c++17 -arch=sm_90 -I kernels bench/gpu/stepbench/stepbench.cu -o /tmp/sb 2>&1 | grep -i error
/tmp/sb | tee -a "$log"
gpu_libtests
seek_archives
full_ab 2 "base=./carry/base/gpubench" "new=./carry/gpubench" "wide=env ACEAPEX_GPU_CTX_WIDE=1 ./carry/gpubench"
run 240 env ACEAPEX_GPU_K1_CLOCKS=1 ./carry/gpubench /tmp/gpu-suite/atha-genome.acx --clocks --runs 3 --ranges 10 --latency 10 --contig 1
cp "$log" "$OUT/run3-${COMMIT:0:7}-device.log"
