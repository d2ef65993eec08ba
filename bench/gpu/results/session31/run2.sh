#!/usr/bin/env bash
# Session 31 device call 2: parse_k1_staged staging each unit's first ring of words when the parse starts the slice
# (run 1 staged them at the literal phase, after the token parse, and those loads missed L1). libtests engine::gpu
# with and without the staged parse; two rounds of the full decode, b28e918 (carry/base) against this commit without
# and with it (every timed decode checked block by block against the index xxh3); then the end-to-end paths: the
# suite's genome part (atha genome and general, fly x11: every block against the index xxh3, 10,000 / 2,000 / 2,000
# ranges against the CPU bytes, full decode, seek latency, `aceapex cat --decoder gpu|cpu` md5 against the
# original), mount (md5 and 200 dd ranges through aceapex-mount with decoder=gpu, cpu and gpu with injected faults)
# and mountseq (atha through a fresh mount: nullfs, decoder=gpu and cpu; 5 runs each).
# Carry: BASE=b28e918 bash bench/gpu/make-carry.sh (COMMIT in carry/).
set -o pipefail
export COMMIT=$(cat carry/COMMIT)
. bench/gpu/steps.sh
say "commit $COMMIT base $(cat carry/base/COMMIT)"
gpu_libtests
gpu_libtests ACEAPEX_GPU_K1_STAGED=0
seek_archives
full_ab 2 "base=./carry/base/gpubench" "unstaged=env ACEAPEX_GPU_K1_STAGED=0 ./carry/gpubench" "staged=./carry/gpubench"
run 150 ncu --clock-control none --section WarpStateStats --section LaunchStats --section MemoryWorkloadAnalysis \
  --section InstructionStats --page raw -k "regex:parse_k1" --launch-count 3 ./carry/gpubench \
  /tmp/gpu-suite/atha-genome.acx --no-reference --runs 1 --ranges 0 --latency 0 --contig 0 >"$out/ncu-staged.txt" 2>&1
grep -E "parse_k1|gpu__time_duration.sum|inst_executed  |issue_stalled_(wait|long|short|math|not_sel).*per_issue_active|shared_mem_config_size|l1tex__t_sector_hit_rate.pct |smsp__average_warp_latency_per_inst_issued|smsp__issue_active.avg" \
  "$out/ncu-staged.txt" | head -60 | tee -a "$log"
MOUNTSEQ_BIG=0 bash bench/gpu/suite.sh "genome mount mountseq"
