#!/usr/bin/env bash
# Session 9 device run (docs/BENCH-GPU.md "Session 9"): engine tests, seek latency with shared-memory tables
# against the global-table path (same binary, ACEAPEX_GPU_SEEK_GLOBAL_TABLES=1), the stage profile, the generated
# 4.32 GB archive, `aceapex cat` of its file through the whole-range GPU path against the 16-core CPU decoder,
# fault injection (ACEAPEX_GPU_FAULT) through cat and through a mount with decoder=gpu, md5 against the CPU.
#
# Expects carry/ as bench/gpu/run.sh does, plus carry/aceapex-mount. Usage: bash bench/gpu/session9.sh [PARTS]
# where PARTS is a list of: tests bench profile big cat faults mount (default: all).
. "$(dirname "$0")/steps.sh"
ms_since() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
parts="${1:-tests bench profile big cat faults mount}"
want() { [[ " $parts " == *" $1 "* ]]; }
# md5 of the original atha_chr1.fa (the file in carry/atha.acx), computed on the development machine.
ATHA_MD5=02a4ab4c4bc76921ab67877831375fc0
ATHA_RANGE_MD5=9726e84726772ea3223c5e3edb538401  # bytes [10,000,000, 13,000,000) of it
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv 2>&1 | tee -a "$log"
say "host cores: $(nproc); commit: $(git rev-parse --short HEAD 2>/dev/null) parts: $parts"
rc=0
if want tests && [ -x carry/libtests ]; then
  run 180 ./carry/libtests engine::gpu --test-threads 1 || rc=1
fi
if want bench; then
  run 200 ./carry/gpubench carry/atha.acx --runs 7 --ranges 10000 --latency 1000 --contig 10 \
    --json "$out/json/atha.json" || rc=1
  say "=== atha with the global-table seek path (the previous default) ==="
  ACEAPEX_GPU_SEEK_GLOBAL_TABLES=1 run 120 ./carry/gpubench carry/atha.acx --runs 3 --ranges 300 --latency 300 \
    --contig 5 --json "$out/json/atha-global.json" || rc=1
  say "=== atha expanding source pieces inside the requested units too (the previous default) ==="
  ACEAPEX_GPU_EXPAND_ALL=1 run 120 ./carry/gpubench carry/atha.acx --runs 5 --ranges 300 --latency 300 \
    --contig 10 --json "$out/json/atha-expand-all.json" || rc=1
  say "=== atha-k32 expanding source pieces inside the requested units too ==="
  ACEAPEX_GPU_EXPAND_ALL=1 run 120 ./carry/gpubench carry/atha-k32.acx --runs 3 --ranges 300 --latency 300 \
    --contig 10 --json "$out/json/atha-k32-expand-all.json" || rc=1
  say "=== atha-k32 with the global-table seek path ==="
  ACEAPEX_GPU_SEEK_GLOBAL_TABLES=1 run 120 ./carry/gpubench carry/atha-k32.acx --runs 3 --ranges 300 --latency 300 \
    --contig 5 --json "$out/json/atha-k32-global.json" || rc=1
  for a in atha-k4 atha-k32 atha-d4 fly; do
    [ -f "carry/$a.acx" ] || continue
    run 120 ./carry/gpubench "carry/$a.acx" --runs 3 --ranges 1000 --latency 300 --contig 10 \
      --json "$out/json/$a.json" || rc=1
  done
fi
if want profile; then
  for a in atha atha-k32; do
    ACEAPEX_GPU_SEEK_PROFILE=1 timeout 90 ./carry/gpubench "carry/$a.acx" --runs 1 --ranges 50 --latency 300 \
      --contig 3 2>&1 | tee -a "$out/profile.log"
  done
fi
big=/tmp/big.acx
if want big || want cat; then
  run 240 ./carry/gpubench carry/atha.acx --runs 3 --ranges 300 --latency 300 --contig 5 --big-gib 4 \
    --big-keep "$big" --json "$out/json/big.json" || rc=1
fi
if want cat && [ -f "$big" ]; then
  # The whole 4.32 GB file: each decoder once to /dev/null and once through md5sum, both timed.
  for dec in gpu cpu; do
    t0=$(date +%s%N)
    RUST_LOG=info timeout 120 ./carry/aceapex cat --decoder "$dec" "$big" big.bin 2>>"$log" >/dev/null
    say "### cat --decoder $dec big.bin >/dev/null: rc=$? $(ms_since "$t0") ms"
    t0=$(date +%s%N)
    h=$(timeout 120 ./carry/aceapex cat --decoder "$dec" "$big" big.bin 2>>"$log" | md5sum)
    say "### cat --decoder $dec big.bin | md5sum: $h $(ms_since "$t0") ms"
  done
  for spec in "--offset 2000000000 --length 268435456" "--offset 1000000000 --length 4000000"; do
    for dec in gpu cpu; do
      t0=$(date +%s%N)
      h=$(timeout 60 ./carry/aceapex cat --decoder "$dec" $spec "$big" big.bin 2>>"$log" | md5sum)
      say "### cat --decoder $dec $spec: $h $(ms_since "$t0") ms"
    done
  done
fi
if want faults; then
  # Fault injection: cat of the whole atha file (whole-range path) and of 4 MB (engine batches); every md5 must
  # be the original's. The engine's one log line and the fallback's line go to the log.
  say "=== fault injection (expected md5: whole file $ATHA_MD5, range $ATHA_RANGE_MD5) ==="
  f=atha_chr1.fa
  for fault in "" fail:3 corrupt:2 fail:1; do
    for spec in "" "--offset 10000000 --length 3000000"; do
      h=$(env ${fault:+ACEAPEX_GPU_FAULT=$fault} timeout 60 ./carry/aceapex cat --decoder gpu $spec carry/atha.acx "$f" \
        2>"$out/fault.err" | md5sum)
      say "### ACEAPEX_GPU_FAULT=$fault cat $spec: $h"
      sed 's/^/    /' "$out/fault.err" | tee -a "$log"
    done
  done
  say "### reference: length-limited cat --decoder cpu: $(./carry/aceapex cat --decoder cpu --offset 10000000 \
    --length 3000000 carry/atha.acx "$f" | md5sum)"
  if [ -f "$big" ]; then
    h=$(ACEAPEX_GPU_FAULT=corrupt:5 timeout 120 ./carry/aceapex cat --decoder gpu "$big" big.bin 2>"$out/fault.err" | md5sum)
    say "### ACEAPEX_GPU_FAULT=corrupt:5 cat big.bin: $h"
    sed 's/^/    /' "$out/fault.err" | tee -a "$log"
  fi
fi
if want mount && [ -x carry/aceapex-mount ]; then
  say "=== mount (decoder=gpu), /dev/fuse: $(ls -l /dev/fuse 2>&1) ==="
  mnt=/tmp/mnt
  mkdir -p "$mnt"
  mount_read() {  # mount_read ARCHIVE FILE DECODER FAULT: mount, time an md5 of FILE, unmount
    local archive=$1 file=$2 dec=$3 fault=$4
    env ${fault:+ACEAPEX_GPU_FAULT=$fault} ./carry/aceapex-mount "$archive" "$mnt" -f -o "decoder=$dec" 2>"$out/mount.err" &
    local pid=$!
    for _ in $(seq 1 100); do mountpoint -q "$mnt" && break; sleep 0.1; done
    if ! mountpoint -q "$mnt"; then
      say "### mount failed: $(head -5 "$out/mount.err")"
      kill "$pid" 2>/dev/null
      return 1
    fi
    local t0
    t0=$(date +%s%N)
    local h
    h=$(timeout 120 md5sum <"$mnt/$file")
    say "### mount decoder=$dec fault=$fault: $file $h $(ms_since "$t0") ms"
    kill -INT "$pid"
    wait "$pid"
    sed 's/^/    /' "$out/mount.err" | grep -v -i "debug" | head -8 | tee -a "$log"
  }
  for fault in "" fail:3 corrupt:2; do
    mount_read carry/atha.acx atha_chr1.fa gpu "$fault" || rc=1
  done
  if [ -f "$big" ]; then
    mount_read "$big" big.bin gpu "" || rc=1
    mount_read "$big" big.bin cpu "" || rc=1
  fi
fi
tar -czf "$out/results.tar.gz" -C "$out" json && rm -rf "$out/json"
say "### overall rc=$rc"
exit $rc
