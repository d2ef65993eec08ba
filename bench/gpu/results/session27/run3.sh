#!/usr/bin/env bash
# Session 27 device call 3: the final resolver choice (Resolve::Auto, the default: the map chase for atha and fly,
# whose matches produce at most 32 MiB) at COMMIT in carry/. The suite's tests, genome (every block, 10,000 / 2,000
# / 2,000 ranges, `aceapex cat --decoder gpu|cpu` md5) and mount (md5 and 200 dd ranges with decoder=gpu, cpu and
# gpu with injected faults), mountseq (atha through a fresh mount: nullfs, decoder=gpu and cpu, squashfuse; 5 runs
# each) and faidx (1000 regions, fresh mount gpu and cpu against bgzip on local disk) parts, then two rounds of the
# flow against the default in alternation.
# Carry: bash bench/gpu/make-carry.sh (with samtools, bgzip, squashfuse and mksquashfs installed here).
set -o pipefail
export COMMIT=$(cat carry/COMMIT)
. bench/gpu/steps.sh
MOUNTSEQ_BIG=0 bash bench/gpu/suite.sh "tests genome mount mountseq faidx"
seek_archives
full_ab 2 "flow=env ACEAPEX_GPU_RESOLVE=flow ./carry/gpubench" "auto=./carry/gpubench"
