#!/usr/bin/env bash
# The GPU engine's device run (see docs/BENCH-GPU.md): engine tests, gpubench on every carried archive, the
# generated >= 4 GiB archive, and `aceapex cat` of its one large file with the GPU and the CPU decoder.
#
# Expects, in the git-ignored folder carry/ (built and packed on the development machine):
#   carry/gpubench      release build of examples/gpubench.rs (cargo build --release --example gpubench)
#   carry/aceapex       release build of the CLI (cargo build --release --bin aceapex)
#   carry/libtests      optional: the lib test binary (cargo test --release --lib --no-run)
#   carry/*.acx         corpus archives (aceapex pack ...); carry/atha.acx also seeds the big archive
# Usage: [SKIP_CAT=1] [VARIANTS="ACEAPEX_GPU_..."] bash bench/gpu/run.sh [quick]
# Writes $OUT/device.log (everything) and $OUT/results.tar.gz (one JSON per archive) when $OUT is set.
. "$(dirname "$0")/steps.sh"
quick="${1:-}"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv 2>&1 | tee -a "$log"
say "host cores: $(nproc)"
rc=0
if [ -x carry/libtests ]; then
  run 120 ./carry/libtests engine::gpu --test-threads 1 || rc=1
fi
for a in carry/*.acx; do
  name="$(basename "$a" .acx)"
  if [ "$name" = "atha" ] && [ -z "$quick" ]; then
    args=(--runs 15 --ranges 10000 --latency 1000 --contig 20)
  else
    args=(--runs 5 --ranges 1000 --latency 300 --contig 5)
  fi
  run 200 ./carry/gpubench "$a" "${args[@]}" --json "$out/json/$name.json" || rc=1
done
# Variants on atha (env switches read at engine start): seek token levels in K-lane groups instead of a warp per
# slice, seek levels parsing whole slices, seeks resolved by rounds instead of the byte chase, resolve rounds
# re-walking whole matches. VARIANTS="..." picks some.
if [ -f carry/atha.acx ]; then
  for v in ${VARIANTS:-ACEAPEX_GPU_SEEK_GROUP ACEAPEX_GPU_SEEK_FUSED ACEAPEX_GPU_SEEK_ROUNDS ACEAPEX_GPU_RESOLVE_WHOLE}; do
    say "=== variant $v=1 ==="
    env "$v=1" timeout 120 ./carry/gpubench carry/atha.acx --runs 5 --ranges 200 --latency 300 --contig 5 \
      --json "$out/json/atha-$v.json" 2>&1 | tee -a "$log" || rc=1
  done
fi
seed=carry/atha.acx; [ -f "$seed" ] || seed=""
if [ -n "$seed" ] && [ -z "$quick" ]; then
  big=/tmp/big.acx
  run 240 ./carry/gpubench "$seed" --runs 5 --ranges 300 --latency 300 --contig 5 --big-gib 4 --big-keep "$big" \
    --json "$out/json/big.json" || rc=1
  if [ -f "$big" ] && [ -z "${SKIP_CAT:-}" ]; then
    # cat of the one 4.32 GB file, twice per decoder (timed, to /dev/null), then once each through md5sum.
    for dec in cpu gpu cpu gpu; do
      t0=$(date +%s%N)
      RUST_LOG=info timeout 120 ./carry/aceapex cat --decoder "$dec" "$big" big.bin 2>>"$log" >/dev/null
      r=$?
      say "### aceapex cat --decoder $dec big.bin: rc=$r $(( ($(date +%s%N) - t0) / 1000000 )) ms"
    done
    for dec in cpu gpu; do
      say "### md5 of cat --decoder $dec: $(timeout 120 ./carry/aceapex cat --decoder "$dec" "$big" big.bin 2>>"$log" | md5sum)"
    done
    say "### md5 of the big archive's length-limited GPU-path read (4,000,000 bytes, block cache + GPU batches):"
    for dec in cpu gpu; do
      t0=$(date +%s%N)
      h=$(timeout 60 ./carry/aceapex cat --decoder "$dec" --offset 1000000000 --length 4000000 "$big" big.bin 2>>"$log" | md5sum)
      say "###   $dec: $h $(( ($(date +%s%N) - t0) / 1000000 )) ms"
    done
  fi
fi
tar -czf "$out/results.tar.gz" -C "$out" json && rm -rf "$out/json"
say "### overall rc=$rc"
exit $rc
