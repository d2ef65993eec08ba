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
# seek_profile LABEL ARCHIVE_NAME ROUND CMD...: one gpubench run (CMD, e.g. `./carry/gpubench /tmp/gpu-suite/a.acx`
# or `env VAR=1 ./carry/base/gpubench ...`) with the seek profile on, 2000 ranges checked against the CPU bytes;
# the log keeps its resident-seek stages and checks under "### LABEL ARCHIVE_NAME round ROUND" (session 25's
# A/B rounds of the resident chase).
seek_profile() {
  say "### $1 $2 round $3"; shift 3
  env ACEAPEX_GPU_SEEK_PROFILE=1 "$@" --runs 1 --ranges 2000 --latency 300 --contig 5 2>&1 |
    grep -E "resident|FAIL|error|mismatch|equal" | tee -a "$log"
}
