#!/usr/bin/env bash
# The README demo, end to end, failing loudly on any mismatch:
#   build (release) -> pack samples/ -> inspect -> mount with aceapex-mount -> read through the mount with
#   cat, dd and samtools faidx, comparing every byte with the originals -> unmount.
# Needs FUSE (fusermount3; Debian package fuse3) and samtools; installs them with apt-get when missing and
# running as root. Usage: bash scripts/demo.sh [--no-build]
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
cd "$repo"
build=1
[ "${1:-}" = "--no-build" ] && build=0

# Any command that fails without its own message still ends the demo loudly.
trap 'echo "DEMO FAILED: line $LINENO: $BASH_COMMAND" >&2' ERR

say() { printf '\n\033[1m$ %s\033[0m\n' "$*" >&2; }
die() { echo "DEMO FAILED: $*" >&2; exit 1; }

need=()
command -v fusermount3 >/dev/null || need+=(fuse3)
command -v samtools >/dev/null || need+=(samtools)
if [ ${#need[@]} -gt 0 ]; then
  [ "$(id -u)" -eq 0 ] || die "please install: ${need[*]}"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

if [ "$build" -eq 1 ]; then
  say cargo build --release
  cargo build --release --quiet --bin aceapex --bin aceapex-mount
fi
bin="${CARGO_TARGET_DIR:-$repo/target}/release"
export PATH="$bin:$PATH"
command -v aceapex >/dev/null && command -v aceapex-mount >/dev/null || die "binaries not found in $bin"

work="$(mktemp -d /tmp/aceapex-demo.XXXXXX)"
mnt="$work/mnt"
mkdir -p "$mnt"
mounted=0
cleanup() {
  if [ "$mounted" -eq 1 ]; then
    fusermount3 -u "$mnt" 2>/dev/null || umount "$mnt" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

src="$repo/samples/genome"
[ -f "$src/speciesA.fa" ] || die "sample missing: run python3 scripts/gen-sample.py"

say aceapex pack samples/genome -o "$work/genome.acx"
aceapex pack --quiet "$src" -o "$work/genome.acx"
say aceapex info "$work/genome.acx"
aceapex info "$work/genome.acx"
say aceapex ls -l "$work/genome.acx"
aceapex ls -l "$work/genome.acx"
say aceapex verify "$work/genome.acx"
aceapex verify "$work/genome.acx"

say aceapex-mount "$work/genome.acx" "$mnt"
aceapex-mount "$work/genome.acx" "$mnt"
mounted=1
for _ in $(seq 50); do
  [ -e "$mnt/genome/speciesA.fa" ] && break
  sleep 0.1
done
[ -e "$mnt/genome/speciesA.fa" ] || die "mount did not come up (no $mnt/genome/speciesA.fa)"
say ls -l "$mnt/genome"
ls -l "$mnt/genome"

say "cmp every file through the mount"
for f in speciesA.fa speciesB.fa reference.fa; do
  cmp "$src/$f" "$mnt/genome/$f" || die "$f differs through the mount"
  echo "  $f: identical ($(stat -L -c %s "$mnt/genome/$f") bytes)"
done
[ "$(readlink "$mnt/genome/reference.fa")" = "speciesA.fa" ] || die "symlink target differs"

say "dd 4 KiB blocks at scattered offsets"
for skip in 0 1 17 40 54; do
  a=$(dd if="$src/speciesA.fa" bs=4096 skip="$skip" count=1 status=none | md5sum) || die "dd skip=$skip failed"
  b=$(dd if="$mnt/genome/speciesA.fa" bs=4096 skip="$skip" count=1 status=none | md5sum) \
    || die "dd skip=$skip through the mount failed"
  [ "$a" = "$b" ] || die "dd skip=$skip differs"
  echo "  skip=$skip: ${b%% *}"
done

say "samtools faidx through the mount vs the original"
# The mount serves a generated speciesA.fa.fai next to the FASTA: samtools uses it as is (the mount is
# read-only). It must equal the index samtools builds from the original.
mount_fai=()
if [ -e "$mnt/genome/speciesA.fa.fai" ]; then
  samtools faidx "$src/speciesA.fa" --fai-idx "$work/local.fai"
  cmp "$work/local.fai" "$mnt/genome/speciesA.fa.fai" || die "generated .fai differs from samtools' own"
  echo "  generated speciesA.fa.fai equals samtools' index"
else
  echo "  (no generated .fai on the mount: samtools indexes into $work)"
  mount_fai=(--fai-idx "$work/mount.fai")
fi
for region in chr1:1-60 chr1:1000-1100 chr1:74990-75210 chr2:60000-61234 chrM:1-9999; do
  a=$(samtools faidx "$src/speciesA.fa" "$region" --fai-idx "$work/local.fai") || die "samtools faidx $region failed"
  b=$(samtools faidx "$mnt/genome/speciesA.fa" "$region" "${mount_fai[@]}") \
    || die "samtools faidx $region through the mount failed"
  [ "$a" = "$b" ] || die "samtools faidx $region differs"
  echo "  $region: $(printf '%s\n' "$b" | sed 1d | tr -d '\n' | wc -c) bases match"
done
samtools faidx "$mnt/genome/speciesB.fa" chr1:100-200 --fai-idx "$work/b.fai" > "$work/b.out" \
  || die "samtools faidx on speciesB through the mount failed"
cat "$work/b.out"

say "aceapex cat with --offset/--length vs dd"
aceapex cat "$work/genome.acx" genome/speciesB.fa --offset 100000 --length 5000 > "$work/range.out" \
  || die "aceapex cat --offset/--length failed"
# dd, not `tail | head`: with pipefail, tail's SIGPIPE after head has its bytes would abort the script.
dd if="$src/speciesB.fa" iflag=skip_bytes,count_bytes skip=100000 count=5000 bs=64K status=none > "$work/range.ref"
cmp "$work/range.ref" "$work/range.out" || die "cat --offset/--length differs"
echo "  ok"

say fusermount3 -u "$mnt"
fusermount3 -u "$mnt" || umount "$mnt"
mounted=0
echo
echo "demo OK: every byte read through the mount matched the originals"
