#!/usr/bin/env bash
# Session 30 device call 3: the end-to-end paths after this session's changes (the K = 1 parse's lanes a warp chosen
# per launch, now eight lanes in one CTA an SM of the fewest units that fit; device.rs split into compile/seek/full
# modules), at COMMIT in carry/. libtests engine::gpu; the suite's genome part (atha genome and general, fly x11:
# every block against the index xxh3, 10,000 / 2,000 / 2,000 ranges against the CPU bytes, full decode, seek
# latency, `aceapex cat --decoder gpu|cpu` md5 against the original), mount (md5 and 200 dd ranges through
# aceapex-mount with decoder=gpu, cpu and gpu with injected faults) and mountseq (atha through a fresh mount: nullfs,
# decoder=gpu and cpu; 5 runs each); then two rounds of the full decode, the default against run 2's default (16
# lanes in four-warp CTAs) and session 29's launch.
# Carry: bash bench/gpu/make-carry.sh (COMMIT in carry/).
set -o pipefail
export COMMIT=$(cat carry/COMMIT)
. bench/gpu/steps.sh
gpu_libtests
MOUNTSEQ_BIG=0 bash bench/gpu/suite.sh "genome mount mountseq"
seek_archives
g() { echo "env ACEAPEX_GPU_K1_WARP_LANES=$1 ACEAPEX_GPU_K1_CTA=$2 ./carry/gpubench"; }
full_ab 2 "default=./carry/gpubench" "l16c128=$(g 16 128)" "s29=$(g 32 64)"
