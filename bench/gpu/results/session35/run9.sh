#!/usr/bin/env bash
# Session 35 device call 9: aceapex-mount starting its GPU engine in the background (the commit in carry/COMMIT),
# on a fresh machine that has built no kernels: how long until the mount is there, the whole of atha through it at
# once (the CPU serving), then, once the log says the GPU engine is ready, again, and 200 random dd ranges.
export COMMIT=$(cat carry/COMMIT)
. bench/gpu/steps.sh
seek_archives
a=/tmp/gpu-suite/atha-genome.acx mnt=/tmp/gpu-suite-mnt
mkdir -p "$mnt"
want=$(md5sum <carry/atha.fa | cut -d' ' -f1)
t0=$(date +%s%N)
./carry/aceapex-mount "$a" "$mnt" -f -o decoder=gpu 2>"$out/mount-bg.err" &
pid=$!
for _ in $(seq 1 600); do mountpoint -q "$mnt" && break; sleep 0.05; done
say "### mounted after $(( ($(date +%s%N) - t0) / 1000000 )) ms: $(mountpoint "$mnt")"
t1=$(date +%s%N); got=$(md5sum <"$mnt/atha.fa" | cut -d' ' -f1)
say "### at once: md5 $got (original $want) in $(( ($(date +%s%N) - t1) / 1000000 )) ms; engine $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["archive_stats"].get("engine"))' "$mnt/.aceapex/stats")"
for _ in $(seq 1 120); do grep -q "GPU engine is ready after" "$out/mount-bg.err" && break; sleep 1; done
say "### $(grep -E 'engine is ready after|compiling|compiled' "$out/mount-bg.err" | cut -c1-200 | tr '\n' ' ')"
sync; echo 3 >/proc/sys/vm/drop_caches 2>/dev/null
t1=$(date +%s%N); got=$(md5sum <"$mnt/atha.fa" | cut -d' ' -f1)
say "### after the GPU start: md5 $got (original $want) in $(( ($(date +%s%N) - t1) / 1000000 )) ms; engine $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["archive_stats"].get("engine"))' "$mnt/.aceapex/stats")"
size=$(stat -c %s carry/atha.fa); bad=0
for i in $(seq 1 200); do
  off=$(( (RANDOM * 32768 + RANDOM) % size )); len=$(( RANDOM % 70000 + 1 ))
  cmp -s <(dd if="$mnt/atha.fa" bs=1 skip="$off" count="$len" iflag=skip_bytes,count_bytes 2>/dev/null) \
    <(dd if=carry/atha.fa bs=1 skip="$off" count="$len" iflag=skip_bytes,count_bytes 2>/dev/null) || bad=$((bad + 1))
done
say "### 200 random dd ranges: $bad differ"
kill -INT "$pid"; wait "$pid"
say "### daemon exit $?"
