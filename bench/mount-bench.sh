#!/usr/bin/env bash
# Benchmarks reads through `aceapex-mount`, side by side with the baselines, in one run on one machine.
#
# Prints markdown tables:
#   1. sequential `dd bs=1M` of the FASTA through: the aceapex mount (cold cache, fresh mount), an empty FUSE
#      filesystem serving a static buffer through the same fs layer and adapter settings (examples/nullfs.rs),
#      and squashfuse over `mksquashfs -comp zstd`; MB/s and the ratio to nullfs;
#   2. random 4 KiB reads through the mount: cold (fresh mount, O_DIRECT, distinct offsets), warm daemon cache
#      (same offsets again, O_DIRECT) and warm page cache (buffered, third pass): p50/p90/p99 in µs;
#   3. 1000 random `samtools faidx` regions on the mount vs on the bgzip'd original on local disk (outputs are
#      compared byte for byte).
#
# Usage: bash bench/mount-bench.sh [FASTA]
#   FASTA  input (default: atha_chr1 from ../shared/corpus, else a generated 64 MiB genome)
# Needs root (or fusermount3) and /dev/fuse; installs fuse3, samtools, tabix, squashfs-tools, squashfuse if
# missing. Runtime: a few minutes on 2 cores.
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
input="${1:-}"

log() { echo "[mount-bench] $*" >&2; }
die() { echo "[mount-bench] FAILED: $*" >&2; exit 1; }

# --- tools -----------------------------------------------------------------------------------------------------
need=()
command -v fusermount3 >/dev/null || need+=(fuse3)
command -v samtools >/dev/null || need+=(samtools)
command -v bgzip >/dev/null || need+=(tabix)
command -v mksquashfs >/dev/null || need+=(squashfs-tools)
command -v squashfuse >/dev/null || need+=(squashfuse)
if [ ${#need[@]} -gt 0 ]; then
  log "installing ${need[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >&2
fi
[ -w /dev/fuse ] || die "/dev/fuse is not usable here"

log "building release binaries"
(cd "$repo" && cargo build --release --quiet --bin aceapex --bin aceapex-mount --example nullfs) >&2
target="${CARGO_TARGET_DIR:-$repo/target}/release"
acx="$target/aceapex"
mountbin="$target/aceapex-mount"
nullfs="$target/examples/nullfs"
for b in "$acx" "$mountbin" "$nullfs"; do [ -x "$b" ] || die "$b not built"; done

work="$(mktemp -d "${TMPDIR:-/tmp}/aceapex-mount-bench.XXXXXX")"
pids=()
cleanup() {
  for m in "$work"/mnt-*; do
    [ -d "$m" ] && mountpoint -q "$m" && fusermount3 -u -z "$m" 2>/dev/null || true
  done
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

# --- input -----------------------------------------------------------------------------------------------------
mkdir -p "$work/data"
fasta="$work/data/genome.fa"
if [ -n "$input" ]; then
  case "$input" in
    *.gz) gzip -dc "$input" > "$fasta" ;;
    *) cp "$input" "$fasta" ;;
  esac
elif [ -f "$repo/../shared/corpus/atha_chr1.fa.gz" ]; then
  gzip -dc "$repo/../shared/corpus/atha_chr1.fa.gz" > "$fasta"
else
  log "generating a 64 MiB genome"
  python3 - "$fasta" <<'EOF'
import random, sys
random.seed(5)
motifs = [''.join(random.choice('ACGT') for _ in range(2000)) for _ in range(50)]
with open(sys.argv[1], 'w') as f:
    for c in range(4):
        f.write(f'>chr{c+1}\n')
        parts, n = [], 0
        while n < 16 << 20:
            r = random.random()
            if r < 0.5:
                m = random.choice(motifs); s = random.randrange(1500); p = m[s:s + random.randrange(50, 500)]
            elif r < 0.55:
                p = 'N' * random.randrange(10, 1000)
            else:
                p = ''.join(random.choice('ACGT') for _ in range(random.randrange(20, 200)))
            if random.random() < 0.2: p = p.lower()
            parts.append(p); n += len(p)
        seq = ''.join(parts)[:16 << 20]
        for i in range(0, len(seq), 60): f.write(seq[i:i+60] + '\n')
EOF
fi
size=$(stat -c %s "$fasta")
log "input: $(basename "$fasta"), $size bytes"

log "packing"
"$acx" pack "$fasta" -o "$work/genome.acx" >&2
log "squashfs (zstd)"
mksquashfs "$work/data" "$work/genome.sqfs" -comp zstd -noappend -quiet >/dev/null
log "bgzip + index"
bgzip -c -@ "$(nproc)" "$fasta" > "$work/genome.fa.gz"
samtools faidx "$work/genome.fa.gz"

# --- helpers ---------------------------------------------------------------------------------------------------
wait_mounted() {
  local m="$1" i
  for i in $(seq 1 500); do mountpoint -q "$m" && return 0; sleep 0.02; done
  die "$m did not mount"
}

mount_acx() { # mount_acx DIR [options]: fresh daemon, cold cache
  local m="$1"; shift
  mkdir -p "$m"
  "$mountbin" "$work/genome.acx" "$m" -f -o "cache_size=2G${1:+,$1}" 2>>"$work/daemon.log" &
  pids+=($!)
  wait_mounted "$m"
}

unmount() { fusermount3 -u "$1"; sleep 0.2; }

seq_mbps() { # seq_mbps FILE -> MB/s of dd bs=1M to /dev/null
  python3 - "$1" <<'EOF'
import subprocess, sys, time
t = time.perf_counter()
subprocess.run(['dd', 'if=' + sys.argv[1], 'of=/dev/null', 'bs=1M', 'status=none'], check=True)
dt = time.perf_counter() - t
import os
print(f"{os.path.getsize(sys.argv[1]) / dt / 1e6:.0f}")
EOF
}

# --- 1. sequential ---------------------------------------------------------------------------------------------
log "sequential reads"
mount_acx "$work/mnt-acx"
acx_mbps=$(seq_mbps "$work/mnt-acx/genome.fa")
cmp "$work/mnt-acx/genome.fa" "$fasta" || die "mounted bytes differ"
unmount "$work/mnt-acx"

mkdir -p "$work/mnt-null"
"$nullfs" "$work/mnt-null" "$size" 2>>"$work/daemon.log" &
pids+=($!)
wait_mounted "$work/mnt-null"
null_mbps=$(seq_mbps "$work/mnt-null/null.bin")
unmount "$work/mnt-null"

mkdir -p "$work/mnt-sq"
squashfuse "$work/genome.sqfs" "$work/mnt-sq"
wait_mounted "$work/mnt-sq"
sq_mbps=$(seq_mbps "$work/mnt-sq/genome.fa")
unmount "$work/mnt-sq"

ratio() { python3 -c "print(f'{$1 / $2:.2f}')"; }
echo
echo "### Sequential read (dd bs=1M, fresh mount), $((size >> 20)) MiB FASTA"
echo
echo "| filesystem | MB/s | vs nullfs |"
echo "| --- | --- | --- |"
echo "| nullfs (static buffer, same adapter) | $null_mbps | 1.00 |"
echo "| aceapex-mount | $acx_mbps | $(ratio "$acx_mbps" "$null_mbps") |"
echo "| squashfuse (mksquashfs -comp zstd) | $sq_mbps | $(ratio "$sq_mbps" "$null_mbps") |"

# --- 2. random 4 KiB -------------------------------------------------------------------------------------------
log "random 4 KiB reads"
mount_acx "$work/mnt-acx" "readahead=0"
python3 - "$work/mnt-acx/genome.fa" "$fasta" <<'EOF'
import mmap, os, random, sys, time
path, orig = sys.argv[1], sys.argv[2]
size = os.path.getsize(orig)
random.seed(11)
n = 1000
offsets = random.sample(range(0, size - 4096, 4096), n)
with open(orig, 'rb') as f:
    want = {o: (f.seek(o), f.read(4096))[1] for o in offsets}
buf = mmap.mmap(-1, 4096)  # page-aligned buffer for O_DIRECT

def run(flags, label):
    fd = os.open(path, os.O_RDONLY | flags)
    lat = []
    for o in offsets:
        t = time.perf_counter_ns()
        got = os.preadv(fd, [buf], o)
        lat.append((time.perf_counter_ns() - t) / 1000)
        assert got == 4096 and buf[:4096] == want[o], f"bytes differ at {o}"
    os.close(fd)
    lat.sort()
    p = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))]
    print(f"| {label} | {n} | {p(0.5):.0f} | {p(0.9):.0f} | {p(0.99):.0f} |")

print()
print("### Random 4 KiB reads through the mount (µs)")
print()
print("| case | reads | p50 | p90 | p99 |")
print("| --- | --- | --- | --- | --- |")
run(os.O_DIRECT, "cold: fresh mount, O_DIRECT, distinct offsets")
run(os.O_DIRECT, "warm daemon cache: same offsets, O_DIRECT")
run(0, "page cache filled: buffered, first pass")
run(0, "warm page cache: buffered, second pass")
EOF
unmount "$work/mnt-acx"

# --- 3. samtools faidx ------------------------------------------------------------------------------------------
log "samtools faidx, 1000 regions"
samtools faidx "$fasta"
python3 - "$fasta.fai" "$work/regions.txt" <<'EOF'
import random, sys
random.seed(3)
seqs = [(l.split('\t')[0], int(l.split('\t')[1])) for l in open(sys.argv[1])]
with open(sys.argv[2], 'w') as f:
    for _ in range(1000):
        name, n = random.choice(seqs)
        s = random.randrange(1, max(2, n - 1000))
        f.write(f"{name}:{s}-{min(n, s + random.randrange(1, 1000))}\n")
EOF
rm -f "$fasta.fai"
mount_acx "$work/mnt-acx"
time_faidx() { # time_faidx FILE OUT -> seconds
  python3 - "$1" "$work/regions.txt" "$2" <<'EOF'
import subprocess, sys, time
t = time.perf_counter()
with open(sys.argv[3], 'wb') as out:
    subprocess.run(['samtools', 'faidx', sys.argv[1], '-r', sys.argv[2]], stdout=out, check=True)
print(f"{time.perf_counter() - t:.3f}")
EOF
}
t_acx=$(time_faidx "$work/mnt-acx/genome.fa" "$work/out-acx.txt")
t_bgz=$(time_faidx "$work/genome.fa.gz" "$work/out-bgz.txt")
cmp "$work/out-acx.txt" "$work/out-bgz.txt" || die "samtools outputs differ"
[ ! -e "$work/data/genome.fa.fai" ] || die "an index was written next to the original"
unmount "$work/mnt-acx"
echo
echo "### samtools faidx, 1000 random regions (fresh mount; outputs identical)"
echo
echo "| source | seconds | regions/s |"
echo "| --- | --- | --- |"
echo "| aceapex mount (packed .fai sidecar) | $t_acx | $(python3 -c "print(f'{1000 / $t_acx:.0f}')") |"
echo "| bgzip'd FASTA on local disk (.fai + .gzi) | $t_bgz | $(python3 -c "print(f'{1000 / $t_bgz:.0f}')") |"
