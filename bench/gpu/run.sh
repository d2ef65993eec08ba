#!/usr/bin/env bash
# Runs the GPU benchmark on the device machine (see docs/BENCH-GPU.md).
#
# Expects, in the git-ignored folder carry/ (built and packed on the development machine):
#   carry/gpubench      release build of examples/gpubench.rs (cargo build --release --example gpubench)
#   carry/*.acx         corpus archives (aceapex pack ...)
# Usage: bash bench/gpu/run.sh [gpubench options...]   e.g. --big-gib 4
# Writes $OUT/gpubench-<archive>.json and $OUT/gpubench.log when $OUT is set.
set -uo pipefail
out="${OUT:-/tmp}"
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:/usr/local/nvidia/lib64:${LD_LIBRARY_PATH:-}"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv 2>&1 | tee -a "$out/gpubench.log"
rc=0
for a in carry/*.acx; do
  name="$(basename "$a" .acx)"
  echo "=== $name ===" | tee -a "$out/gpubench.log"
  ./carry/gpubench "$a" --json "$out/gpubench-$name.json" "$@" 2>&1 | tee -a "$out/gpubench.log" || rc=1
done
exit $rc
