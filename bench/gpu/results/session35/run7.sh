#!/usr/bin/env bash
# Session 35 device call 7: the mount on format v7 (the commit in carry/COMMIT): the suite's mount part (md5 of atha
# and 200 random dd ranges through aceapex-mount with decoder=gpu and cpu, and an injected GPU fault), faidx (1000
# samtools faidx regions on a fresh mount against samtools on the bgzip'd original) and mountseq on atha only
# (sequential dd through the mount against the empty FUSE filesystem, fresh mounts, medians of 5).
# Carry: bash bench/gpu/make-carry.sh (with samtools and bgzip installed here).
export COMMIT=$(cat carry/COMMIT)
MOUNTSEQ_BIG=0 bash bench/gpu/suite.sh "mount faidx mountseq"
