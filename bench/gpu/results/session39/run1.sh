#!/usr/bin/env bash
# Session 39 device call 1: the kernels split into parts (decode.cu + kernels/*.cuh, the host puts them in place),
# re-checked (GPU lib tests, every block of three archives in every timed decode), and the linear parse's chains
# timed one by one (ACEAPEX_GPU_K1_CLOCKS=1, gpubench --clocks) on the three archives, in both parse orders.
# Carry: bash bench/gpu/make-carry.sh.
export COMMIT=$(cat carry/COMMIT)
. bench/gpu/steps.sh
gpu_libtests
seek_archives
full_ab 2 "split=./carry/gpubench"
for a in atha-genome atha-general fly11; do
  run 240 env ACEAPEX_GPU_K1_CLOCKS=1 ./carry/gpubench /tmp/gpu-suite/$a.acx --clocks --runs 3 --ranges 10 --latency 10 --contig 1
done
run 120 env ACEAPEX_GPU_K1_CLOCKS=1 ACEAPEX_GPU_PARSE_ORDER=stream ./carry/gpubench /tmp/gpu-suite/atha-genome.acx --clocks --runs 3 --ranges 10 --latency 10 --contig 1
cp "$log" "$OUT/run1-${COMMIT:0:7}-device.log"
