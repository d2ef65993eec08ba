# Shared by the device scripts (bench/gpu/run.sh, session9.sh): the output folder, the log, `say`, and `run`, which
# runs one step under a time limit with its output in the log and its exit status and time noted. Sourced.
set -uo pipefail
out="${OUT:-/tmp/gpu-out}"
mkdir -p "$out/json"
log="$out/device.log"
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:/usr/local/nvidia/lib64:${LD_LIBRARY_PATH:-}"
say() { echo "$@" | tee -a "$log"; }
run() {  # run LIMIT_S CMD...: one step, its output in the log, its exit status and time noted
  local limit=$1; shift
  say "### $* (limit ${limit}s)"
  local t0=$SECONDS
  timeout "$limit" "$@" 2>&1 | tee -a "$log"
  local rc=${PIPESTATUS[0]}
  say "### rc=$rc in $((SECONDS - t0)) s"
  return "$rc"
}
