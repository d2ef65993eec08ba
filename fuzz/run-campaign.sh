#!/usr/bin/env bash
# A fuzzing campaign over every target in fuzz/Cargo.toml: each runs for SECONDS_PER_TARGET (default 600) at
# `nice -n 19`, at most two at a time, with libFuzzer's -rss_limit_mb=2048 (out-of-memory) and -timeout=10
# (hang) limits, then prints one table: target, seconds, execs, corpus size, crashes.
#
#   fuzz/run-campaign.sh [SECONDS_PER_TARGET]        (needs cargo-fuzz and a nightly toolchain)
#
# libFuzzer stops at the first crash, so a target that crashes is restarted for the rest of its time and every
# crash, timeout and out-of-memory input is counted and kept under fuzz/artifacts/<target>/. The growing corpora
# live in fuzz/corpus-gen/<target> (ignored by git); the committed seeds in fuzz/seeds/<target> are read, never
# written. Minimise a corpus into new seeds with `cargo +nightly fuzz cmin <target> fuzz/corpus-gen/<target>`.
# Environment: TARGET_DIR (default fuzz/target), TARGETS (default: all), JOBS (default 2), FAIL_ON_FINDING,
# SKIP_BUILD=1 (run the binaries already built under TARGET_DIR: a second campaign on the same commit, without the
# minutes an AddressSanitizer rebuild takes when other files of the tree moved on).
#
# After a format version bump, empty fuzz/corpus-gen/<target> of the archive targets: their framed archives of the
# old version still carry their originals, so the targets' "an intact archive opens" oracle fails on them at once.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${1:-600}"
jobs="${JOBS:-2}"
target_dir="${TARGET_DIR:-fuzz/target}"
# The [[bin]] sections of fuzz/Cargo.toml name the targets.
targets="${TARGETS:-$(awk '/^\[\[bin\]\]/ { bin = 1; next } /^\[/ { bin = 0 } bin && /^name = / { gsub(/"/, "", $3); print $3 }' fuzz/Cargo.toml)}"

if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
  echo "run-campaign: needs cargo-fuzz and a nightly toolchain (cargo install cargo-fuzz; rustup toolchain install nightly)" >&2
  exit 2
fi
# Release with debug assertions: overflow checks stay on, so an arithmetic overflow is a finding too.
if [ -z "${SKIP_BUILD:-}" ]; then
  cargo +nightly fuzz build -O -a --target-dir "$target_dir" >&2
fi
bin_dir="$target_dir/x86_64-unknown-linux-gnu/release"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# Runs one target for $seconds, restarting after each crash; writes "execs crashes" to $work/<target>.result.
run_target() {
  local t="$1" started now left execs=0 crashes=0 log
  mkdir -p "fuzz/corpus-gen/$t" "fuzz/artifacts/$t"
  started=$(date +%s)
  while :; do
    now=$(date +%s)
    left=$((seconds - (now - started)))
    [ "$left" -gt 0 ] || break
    log="$work/$t.$now.log"
    # -print_final_stats gives stat::number_of_executed_units even when the run ends on a crash.
    if nice -n 19 "$bin_dir/$t" -max_total_time="$left" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
      -artifact_prefix="fuzz/artifacts/$t/" "fuzz/corpus-gen/$t" "fuzz/seeds/$t" >"$log" 2>&1; then
      :
    else
      crashes=$((crashes + 1))
      echo "run-campaign: $t: finding after $(($(date +%s) - started)) s:" >&2
      grep -E '^(==[0-9]+==ERROR|thread .* panicked|SUMMARY|Test unit written)' "$log" | head -n 6 >&2 || true
      cp "$log" "fuzz/artifacts/$t/campaign-$now.log"
      # A run that fails within seconds fails on its starting corpus: restarting would only repeat it.
      if [ $(($(date +%s) - now)) -lt 5 ]; then
        echo "run-campaign: $t: fails on its starting corpus, stopped" >&2
        n=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
        execs=$((execs + ${n:-0}))
        break
      fi
    fi
    n=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    execs=$((execs + ${n:-0}))
  done
  echo "$execs $crashes $(( $(date +%s) - started ))" >"$work/$t.result"
}

export -f run_target
export seconds bin_dir work
printf '%s\n' $targets | xargs -P "$jobs" -I{} bash -c 'run_target "$1"' _ {}

printf '%-14s %8s %12s %8s %8s\n' target seconds execs corpus crashes
findings=0
for t in $targets; do
  read -r execs crashes took <"$work/$t.result"
  printf '%-14s %8s %12s %8s %8s\n' "$t" "$took" "$execs" "$(find "fuzz/corpus-gen/$t" -type f | wc -l)" "$crashes"
  findings=$((findings + crashes))
done
# FAIL_ON_FINDING=1 (the smoke run of scripts/test.sh): any crash, hang or out-of-memory fails the run.
if [ -n "${FAIL_ON_FINDING:-}" ] && [ "$findings" -gt 0 ]; then
  echo "run-campaign: $findings finding(s): see fuzz/artifacts/" >&2
  exit 1
fi
