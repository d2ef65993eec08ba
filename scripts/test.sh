#!/usr/bin/env bash
# Runs all tests: installs the system packages the real-mount tests need (Debian/Ubuntu), checks formatting
# and lints, runs the unit, integration and mount tests, then a short smoke run of every fuzz target.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v fusermount3 >/dev/null || need+=(fuse3)
command -v samtools >/dev/null || need+=(samtools)
command -v cc >/dev/null || need+=(build-essential)
command -v curl >/dev/null || need+=(curl)
command -v unzip >/dev/null || need+=(unzip)
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}"
fi
if ! command -v cargo >/dev/null; then
  echo "cargo not found: install Rust first (https://rustup.rs), then re-run" >&2
  exit 1
fi

# No incremental cache: CI builds once from a clean clone, and the cache roughly doubles target/ on disk.
export CARGO_INCREMENTAL=0

cargo fmt --all -- --check
cargo clippy --all-targets --locked -- -D warnings
# The docs (private items too: they carry the design notes) build without a warning, broken links included.
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --document-private-items --locked --quiet

# NVRTC from PyPI, so that the kernel compile test compiles kernels/decode.cu here too (no GPU needed). Without a
# network the test says it skipped.
if nvrtc_lib="$(bash scripts/fetch-nvrtc.sh)"; then
  export LD_LIBRARY_PATH="$nvrtc_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ACEAPEX_REQUIRE_NVRTC=1
else
  echo "NVRTC download failed: the kernel compile test will skip" >&2
fi

# Every test run's output also goes to a log, so the closing line can total them.
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
cargo test --all-targets --locked 2>&1 | tee -a "$log"
# Fuzz targets on the stable toolchain: replay every committed seed (plus truncations and byte flips), then a
# 3 s smoke run per target of random stacked mutations of its seeds (smoke_random_mutations; FUZZ_SMOKE_SECS).
# The long, coverage-guided runs use cargo-fuzz on nightly: see fuzz/run-campaign.sh.
cargo test --manifest-path fuzz/Cargo.toml --no-default-features --target-dir target 2>&1 | tee -a "$log"
# Then 4 s of libFuzzer per target (two at a time, about 20 s once the targets are built; the first build takes
# minutes), only where cargo-fuzz and a nightly toolchain are installed. CI has stable only: there the seed
# replay and the mutation smoke run above are the fuzz check. Any crash, hang or out-of-memory fails the step (inputs in fuzz/artifacts/).
if cargo +nightly fuzz --version >/dev/null 2>&1; then
  FAIL_ON_FINDING=1 fuzz/run-campaign.sh 4
else
  echo "libFuzzer smoke run: SKIPPED (cargo-fuzz or the nightly toolchain is missing; the stable seed replay and mutation smoke run above ran)"
fi

# One closing line over all test binaries (cargo prints one "test result" line per binary).
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($i ~ /^passed/) p += $(i-1); if ($i ~ /^failed/) f += $(i-1); if ($i ~ /^ignored/) s += $(i-1) } }
     END { printf "summary: %d passed, %d failed, %d skipped\n", p, f, s }' "$log"
