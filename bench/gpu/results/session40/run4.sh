#!/usr/bin/env bash
# Session 40 device call 4: the table-coded literal step through LDS, and the linear parse finishing its own units
# (fused_finish, ACEAPEX_GPU_FUSED_FINISH warps a CTA, default 8) against run 3's kernels (carry/base, 21e4437):
# the GPU lib tests, 2000 ranges through both seek paths (fused), two rounds of the full decode on the three
# archives (every timed decode checked), then the chain clocks with the fused finish on atha genome. Each gpubench
# under a time limit (a fused finish that hung would stop only there).
# Carry: BASE=21e4437 bash bench/gpu/make-carry.sh.
export COMMIT=$(cat carry/COMMIT)
. bench/gpu/steps.sh
gpu_libtests
seek_archives
seek_profile fused atha-genome 1 timeout 120 ./carry/gpubench /tmp/gpu-suite/atha-genome.acx
full_ab 2 "base=timeout 120 ./carry/base/gpubench" "table=env ACEAPEX_GPU_FUSED_FINISH=0 timeout 120 ./carry/gpubench" \
  "fused=timeout 120 ./carry/gpubench" "fused4=env ACEAPEX_GPU_FUSED_FINISH=4 timeout 120 ./carry/gpubench" \
  "fused16=env ACEAPEX_GPU_FUSED_FINISH=16 timeout 120 ./carry/gpubench"
run 240 env ACEAPEX_GPU_K1_CLOCKS=1 ./carry/gpubench /tmp/gpu-suite/atha-genome.acx --clocks --runs 3 --ranges 10 --latency 10 --contig 1
cp "$log" "$OUT/run4-${COMMIT:0:7}-device.log"
