#!/usr/bin/env bash
# Session 36 device call 5 (the commit in carry/COMMIT): the GPU lib tests with the new
# slices_the_cpu_refuses_fail_every_gpu_path (token checks in finish_linear_k1), then the suite's mount and faidx
# parts on atha genome (md5 and 200 random dd ranges through aceapex-mount with decoder=gpu, cpu and gpu with an
# injected fault; 1000 samtools faidx regions against bgzip), since the mount's streamed reads come from the full
# decode this session changed.
# Carry: bash bench/gpu/make-carry.sh.
export COMMIT=$(cat carry/COMMIT)
. bench/gpu/steps.sh
gpu_libtests
bash bench/gpu/suite.sh "mount faidx"
