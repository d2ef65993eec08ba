#!/usr/bin/env bash
# Diagnostics on the device (see docs/BENCH-GPU.md): SM clock and load sampled while cold single-block seeks run
# (K = 1 and K = 32), and compute-sanitizer memcheck over the engine's GPU bit-exactness test (every K).
# `diag.sh profile`: per-stage device time of cold seeks instead ($OUT/profile.log).
# Expects carry/ as for run.sh. Writes $OUT/diag.log and $OUT/clocks-*.csv.
set -uo pipefail
out="${OUT:-/tmp/gpu-out}"
mkdir -p "$out"
log="$out/diag.log"
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:/usr/local/nvidia/lib64:${LD_LIBRARY_PATH:-}"
if [ "${1:-}" = profile ]; then
  # Per-stage device time of cold seeks (ACEAPEX_GPU_SEEK_PROFILE=1: an event after every stage, no graphs).
  for a in atha atha-d4 atha-k4 atha-k32; do
    ACEAPEX_GPU_SEEK_PROFILE=1 timeout 90 ./carry/gpubench "carry/$a.acx" --runs 1 --ranges 50 --latency 300 \
      --contig 3 2>&1 | tee -a "$out/profile.log"
  done
  exit 0
fi
for a in atha atha-k32; do
  nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,utilization.gpu --format=csv -lms 100 >"$out/clocks-$a.csv" &
  smi=$!
  timeout 120 ./carry/gpubench "carry/$a.acx" --runs 1 --ranges 0 --latency 2000 --contig 1 2>&1 | tee -a "$log"
  kill "$smi"
  echo "clock samples during $a (MHz, sorted): $(cut -d, -f2 "$out/clocks-$a.csv" | grep -o '[0-9]*' | sort -n | uniq -c | tr '\n' ' ')" | tee -a "$log"
done
echo "### compute-sanitizer memcheck" | tee -a "$log"
timeout 300 compute-sanitizer --tool memcheck --print-limit 20 ./carry/libtests \
  engine::gpu::tests::gpu_bytes_equal_the_reference_when_a_gpu_is_present engine::gpu::tests::corrupt_directory \
  --test-threads 1 2>&1 | tail -40 | tee -a "$log"
echo "### memcheck rc=${PIPESTATUS[0]}" | tee -a "$log"
