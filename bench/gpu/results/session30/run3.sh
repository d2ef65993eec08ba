#!/usr/bin/env bash
# Session 30 device call 3: the end-to-end paths after this session's two changes (the K = 1 parse's lanes a warp
# chosen per launch; device.rs split into compile/seek/full modules), at COMMIT in carry/ (d848f76). The suite's
# genome part (atha genome and general, fly x11: every block against the index xxh3, 10,000 / 2,000 / 2,000 ranges
# against the CPU bytes, full decode, seek latency, `aceapex cat --decoder gpu|cpu` md5 against the original), mount
# (md5 and 200 dd ranges through aceapex-mount with decoder=gpu, cpu and gpu with injected faults) and mountseq (atha
# through a fresh mount: nullfs, decoder=gpu and cpu; 5 runs each).
# Carry: bash bench/gpu/make-carry.sh (COMMIT in carry/).
set -o pipefail
export COMMIT=$(cat carry/COMMIT)
. bench/gpu/steps.sh
MOUNTSEQ_BIG=0 bash bench/gpu/suite.sh "genome mount mountseq"
