#!/usr/bin/env bash
# Builds carry/ for the device suite (bench/gpu/suite.sh) from a clean worktree of one commit, so that the
# binaries measured on the H200 are exactly that commit and not the working tree.
#
# Usage: [BASE=COMMIT] bash bench/gpu/make-carry.sh [COMMIT]   (default HEAD)
# With BASE set, carry/base/gpubench is BASE's gpubench too, for suite.sh's `ab` part (old and new in one run).
# Leaves in carry/ (git-ignored): aceapex, aceapex-mount, gen_genomes, gpubench, nullfs, libtests (the lib test
# binary, for `libtests engine::gpu`), all stripped, plus atha.fa.gz and fly11/*.fna.gz from ../shared/corpus
# when it exists (kept compressed: the device takes at most 64 MiB a call, working tree included; suite.sh
# unpacks them there), and COMMIT (the commit hash).
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
commit="$(git -C "$repo" rev-parse "${1:-HEAD}")"
wt="$(mktemp -d "${TMPDIR:-/tmp}/acx-carry.XXXXXX")"
target="${CARGO_TARGET_DIR:-$repo/target}"
cleanup() { git -C "$repo" worktree remove --force "$wt" >/dev/null 2>&1 || rm -rf "$wt"; }
trap cleanup EXIT
git -C "$repo" worktree add -q --detach "$wt" "$commit"
(
  cd "$wt"
  export CARGO_TARGET_DIR="$target"
  cargo build --release --quiet --bins --example gen_genomes --example gpubench --example nullfs
  # The lib test binary's path, from cargo's own report (its file name carries a hash).
  cargo test --release --quiet --lib --no-run --message-format=json |
    python3 -c 'import json,sys; print([m["executable"] for m in map(json.loads, sys.stdin) if m.get("executable")][-1])' \
      >"$wt/libtests-path"
)
carry="$repo/carry"
mkdir -p "$carry"
rel="$target/release"
for b in aceapex aceapex-mount; do install -m 755 "$rel/$b" "$carry/$b"; done
for e in gen_genomes gpubench nullfs; do install -m 755 "$rel/examples/$e" "$carry/$e"; done
install -m 755 "$(cat "$wt/libtests-path")" "$carry/libtests"
strip "$carry"/{aceapex,aceapex-mount,gen_genomes,gpubench,nullfs,libtests}
corpus="$repo/../shared/corpus"
if [ -d "$corpus" ]; then
  rm -rf "$carry/atha.fa" "$carry/fly11"
  cp "$corpus/atha_chr1.fa.gz" "$carry/atha.fa.gz"
  mkdir -p "$carry/fly11"
  cp "$corpus"/fly-chr4/*.fna.gz "$carry/fly11/"
fi
# samtools and bgzip with the libraries the device image lacks, for suite.sh's faidx part (this machine is Debian
# 12, glibc 2.36; the device's Ubuntu 24.04 runs its binaries).
if command -v samtools >/dev/null && command -v bgzip >/dev/null; then
  mkdir -p "$carry/bin" "$carry/lib"
  install -m 755 "$(command -v samtools)" "$(command -v bgzip)" "$carry/bin/"
  for l in libhts.so.3 libhtscodecs.so.2 libdeflate.so.0 libncurses.so.6 libtinfo.so.6; do
    cp -L "$(ldconfig -p | awk -v l="$l" '$1 == l {print $NF; exit}')" "$carry/lib/$l"
  done
fi
# squashfuse and mksquashfs with their libraries, for suite.sh's mountseq (the squashfs (zstd) anchor of the
# sequential read, as bench/mount-bench.sh has it here).
if command -v squashfuse >/dev/null && command -v mksquashfs >/dev/null; then
  mkdir -p "$carry/bin" "$carry/lib"
  install -m 755 "$(command -v squashfuse)" "$(command -v mksquashfs)" "$carry/bin/"
  for l in libfuse3.so.3 liblzo2.so.2 liblz4.so.1 libzstd.so.1 liblzma.so.5 libz.so.1; do
    cp -L "$(ldconfig -p | awk -v l="$l" '$1 == l {print $NF; exit}')" "$carry/lib/$l"
  done
fi
if [ -n "${BASE:-}" ]; then
  base="$(git -C "$repo" rev-parse "$BASE")"
  bwt="$(mktemp -d "${TMPDIR:-/tmp}/acx-base.XXXXXX")"
  git -C "$repo" worktree add -q --detach "$bwt" "$base"
  # Its own target dir: BASE's build must not replace the artefacts of COMMIT above.
  (cd "$bwt" && CARGO_TARGET_DIR="$target/base" cargo build --release --quiet --example gpubench)
  mkdir -p "$carry/base"
  strip -o "$carry/base/gpubench" "$target/base/release/examples/gpubench"
  echo "$base" >"$carry/base/COMMIT"
  git -C "$repo" worktree remove --force "$bwt"
else
  rm -rf "$carry/base"
fi
echo "$commit" >"$carry/COMMIT"
echo "carry/ at $commit: $(du -sm "$carry" | cut -f1) MiB (the device takes 64 MiB a call)"
