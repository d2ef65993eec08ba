#!/usr/bin/env bash
# Session 35 device call 10: the mount's GPU start waits up to 3 s, then goes on in the background (the commit in
# carry/COMMIT). Run 9's steps on a fresh machine (the kernels not built: the mount is there after ~3 s, the CPU
# serving, the GPU later), then a second mount (kernels cached: the GPU is in use from the first read), then the
# suite's mountseq on atha (fresh mounts, 3 runs): the fresh-mount sequential read with the GPU as before.
export COMMIT=$(cat carry/COMMIT)
bash bench/gpu/results/session35/run9.sh
. bench/gpu/steps.sh
a=/tmp/gpu-suite/atha-genome.acx mnt=/tmp/gpu-suite-mnt
t0=$(date +%s%N)
./carry/aceapex-mount "$a" "$mnt" -f -o decoder=gpu 2>"$out/mount-warm.err" &
pid=$!
for _ in $(seq 1 600); do mountpoint -q "$mnt" && break; sleep 0.05; done
say "### second mount after $(( ($(date +%s%N) - t0) / 1000000 )) ms; engine $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["archive_stats"].get("engine"))' "$mnt/.aceapex/stats")"
kill -INT "$pid"; wait "$pid"
MOUNTSEQ_BIG=0 MOUNTSEQ_RUNS=3 bash bench/gpu/suite.sh "mountseq"
