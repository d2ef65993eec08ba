#!/usr/bin/env bash
# Benchmarks reads through `aceapex-mount`, side by side with the baselines, in one run on one machine.
#
# Prints one markdown table, titled with the input, how it packed (genome mode or general, and the ratio), the
# commit (`-dirty` when the tree has uncommitted changes), the cores and the load average (at the start and the end):
#   - sequential `dd bs=1M` of the FASTA through: the aceapex mount (decoder=cpu, fresh mount), an empty FUSE
#     filesystem serving a static buffer through the same fs layer and adapter settings (examples/nullfs.rs),
#     and squashfuse over `mksquashfs -comp zstd`; MB/s and the ratio to nullfs; and the mount again with its
#     daemon's cache warm and the page cache dropped (serving alone: rebuilding the bytes and FUSE, no decoding),
#     read in PAIR_ROUNDS rounds (default 9) that each read it and nullfs, one right after the other; its ratio
#     is the median of the rounds' ratios (steadier on a shared machine than a ratio of medians);
#   - random 4 KiB O_DIRECT reads at 1000 distinct offsets: cold (fresh mount with readahead=0,fill=0, so every
#     read decodes through the random-access path), warm (the same offsets again), and on a fresh mount with
#     default options (the first random read starts a background fill of the file); squashfuse alongside;
#   - 1000 random `samtools faidx` regions on a fresh mount (default options, and fill=0) vs on the bgzip'd
#     original on local disk (outputs compared byte for byte), and where the fresh mount's time goes: the daemon's
#     CPU seconds (decoding the file's fill and serving), the FUSE reads that reached it, the reads that waited
#     for the fill (from `/.aceapex/stats`), and the same regions again with the daemon's cache warm but the
#     file's page cache dropped (serving alone: rebuilding the FASTA bytes and the FUSE round trips; also the
#     daemon's CPU seconds for it, which a loaded machine disturbs less than the wall clock) and with the page
#     cache warm (samtools alone).
#
# Usage: bash bench/mount-bench.sh [--seq] [FASTA]
#   FASTA  input (default: atha_chr1 from ../shared/corpus, else a generated 64 MiB genome)
#   --seq  the sequential part only (its two rows, nullfs and squashfuse included), squashfuse's `dd` measured
#          SEQ_REPS times (default 3; MB/s of each, the median first), for a quick before/after on a busy machine
# Needs root (or fusermount3) and /dev/fuse; installs fuse3, samtools, tabix, squashfs-tools, squashfuse if
# missing. Runtime: a few minutes on 2 cores (--seq: under a minute after the build).
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
seq_only=0
input=""
for arg in "$@"; do
  case "$arg" in
    --seq) seq_only=1 ;;
    *) input="$arg" ;;
  esac
done
seq_reps=1
[ "$seq_only" -eq 0 ] || seq_reps="${SEQ_REPS:-3}"

log() { echo "[mount-bench] $*" >&2; }
die() { echo "[mount-bench] FAILED: $*" >&2; exit 1; }

# --- tools -----------------------------------------------------------------------------------------------------
need=()
command -v fusermount3 >/dev/null || need+=(fuse3)
[ "$seq_only" -eq 1 ] || command -v samtools >/dev/null || need+=(samtools)
[ "$seq_only" -eq 1 ] || command -v bgzip >/dev/null || need+=(tabix)
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
input_name="${input:-atha_chr1.fa.gz}"
if [ -n "$input" ]; then
  case "$input" in
    *.gz) gzip -dc "$input" > "$fasta" ;;
    *) cp "$input" "$fasta" ;;
  esac
elif [ -f "$repo/../shared/corpus/atha_chr1.fa.gz" ]; then
  gzip -dc "$repo/../shared/corpus/atha_chr1.fa.gz" > "$fasta"
else
  input_name="generated 64 MiB genome"
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
# How the FASTA was packed (genome mode: bases + structure, FORMAT.md §2.6; general: bytes as they are), and the
# ratio, for the table's title: the mount's numbers depend on both.
info="$("$acx" info "$work/genome.acx")"
if grep -Eq '^entries:.* [1-9][0-9]* in genome mode' <<<"$info"; then pack_mode=genome; else pack_mode=general; fi
pack_ratio=$(awk '/^ratio:/ {print $2}' <<<"$info")
log "squashfs (zstd)"
mksquashfs "$work/data" "$work/genome.sqfs" -comp zstd -noappend -quiet >/dev/null
if [ "$seq_only" -eq 0 ]; then
  log "bgzip + index"
  bgzip -c -@ "$(nproc)" "$fasta" > "$work/genome.fa.gz"
  samtools faidx "$work/genome.fa.gz"
fi

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

seq_mbps() { # seq_mbps FILE [REPS] -> MB/s of dd bs=1M to /dev/null; with REPS > 1 the file's page cache is
  # dropped before each and every rate is printed, the median first ("median (r1 r2 ...)")
  python3 - "$1" "${2:-1}" <<'EOF'
import os, subprocess, sys, time
path, reps = sys.argv[1], int(sys.argv[2])
rates = []
for _ in range(reps):
    if reps > 1:
        fd = os.open(path, os.O_RDONLY); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED); os.close(fd)
    t = time.perf_counter()
    subprocess.run(['dd', 'if=' + path, 'of=/dev/null', 'bs=1M', 'status=none'], check=True)
    rates.append(os.path.getsize(path) / (time.perf_counter() - t) / 1e6)
median = sorted(rates)[len(rates) // 2]
print(f"{median:.0f}" if reps == 1 else f"{median:.0f} ({' '.join(f'{r:.0f}' for r in rates)})")
EOF
}

paired_mbps() { # paired_mbps A B ROUNDS -> three lines: A's MB/s and B's ("median (min-max, N rounds)"), and the
  # median of the rounds' A/B ratios. Each round reads both with dd bs=1M (page cache dropped first), A first in
  # even rounds and B first in odd ones.
  python3 - "$1" "$2" "$3" <<'EOF'
import os, statistics, subprocess, sys, time
paths, rounds = sys.argv[1:3], max(1, int(sys.argv[3]))
rates = ([], [])
for r in range(rounds):
    for k in ((0, 1) if r % 2 == 0 else (1, 0)):
        fd = os.open(paths[k], os.O_RDONLY); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED); os.close(fd)
        t = time.perf_counter()
        subprocess.run(['dd', 'if=' + paths[k], 'of=/dev/null', 'bs=1M', 'status=none'], check=True)
        rates[k].append(os.path.getsize(paths[k]) / (time.perf_counter() - t) / 1e6)
for x in rates:
    print(f"{statistics.median(x):.0f} ({min(x):.0f}-{max(x):.0f}, {len(x)} rounds)")
print(f"{statistics.median(a / b for a, b in zip(*rates)):.2f}")
EOF
}

drop_page_cache() { # drop_page_cache FILE: the kernel forgets the file's cached pages (the daemon keeps its cache)
  python3 -c "import os, sys; fd = os.open(sys.argv[1], os.O_RDONLY); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)" "$1"
}

load_at_start=$(cut -d' ' -f1-3 /proc/loadavg)
# --- 1. sequential ---------------------------------------------------------------------------------------------
log "sequential reads"
mount_acx "$work/mnt-acx" "decoder=cpu"
acx_mbps=$(seq_mbps "$work/mnt-acx/genome.fa")
cmp "$work/mnt-acx/genome.fa" "$fasta" || die "mounted bytes differ"
# Again from the daemon's cache (page cache dropped): what serving costs once decoding is out of the way; and
# nullfs, mounted beside it. The two are read in alternating rounds (paired_mbps, PAIR_ROUNDS of them, default 9),
# and the served row's ratio is the median of the rounds' ratios: on the shared machine the load moves within a
# minute, and a ratio of medians taken one after the other moved with it (0.73-1.02x for one build, five runs).
mkdir -p "$work/mnt-null"
"$nullfs" "$work/mnt-null" "$size" 2>>"$work/daemon.log" &
pids+=($!)
wait_mounted "$work/mnt-null"
pair_rounds=${PAIR_ROUNDS:-9}
mapfile -t paired < <(paired_mbps "$work/mnt-acx/genome.fa" "$work/mnt-null/null.bin" "$pair_rounds")
[ ${#paired[@]} -eq 3 ] || die "paired reads failed"
acx_served_mbps=${paired[0]}
null_mbps=${paired[1]}
served_ratio=${paired[2]}
unmount "$work/mnt-null"
unmount "$work/mnt-acx"

mkdir -p "$work/mnt-sq"
squashfuse "$work/genome.sqfs" "$work/mnt-sq"
wait_mounted "$work/mnt-sq"
sq_mbps=$(seq_mbps "$work/mnt-sq/genome.fa" "$seq_reps")
unmount "$work/mnt-sq"

ratio() { python3 -c "print(f'{${1%% *} / ${2%% *}:.2f}')"; }
# BENCH_COMMIT names the commit when the tree is an export without .git (git archive).
# "-dirty" marks a tree with uncommitted changes.
commit=${BENCH_COMMIT:-$(cd "$repo" && git describe --always --dirty --abbrev=7 2>/dev/null || echo unknown)}
title() {
  echo
  echo "### aceapex-mount vs baselines: ${input_name##*/}, $size bytes, $pack_mode mode (ratio $pack_ratio)," \
    "commit $commit, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg) (at start: $load_at_start)," \
    "$(date -u +%Y-%m-%d)"
  echo
  echo "| measure | aceapex-mount (decoder=cpu) | baselines |"
  echo "| --- | --- | --- |"
}
seq_rows() {
  echo "| sequential \`dd bs=1M\`, fresh mount | $acx_mbps MB/s ($(ratio "$acx_mbps" "$null_mbps")× nullfs) |" \
    "empty FUSE fs (nullfs) $null_mbps MB/s; squashfuse (zstd) $sq_mbps MB/s |"
  echo "| sequential \`dd bs=1M\` again, daemon cache warm, page cache dropped (serving alone) |" \
    "$acx_served_mbps MB/s (${served_ratio}× nullfs: the median of the rounds' ratios, each read beside nullfs) | — |"
}
if [ "$seq_only" -eq 1 ]; then
  title
  seq_rows
  exit 0
fi

# --- 2. random 4 KiB -------------------------------------------------------------------------------------------
# rand_lat PATH -> "cold_p50 cold_p99 warm_p50 warm_p99 cold_max" in µs: 1000 distinct 4 KiB-aligned offsets read with
# O_DIRECT (every read reaches the filesystem), then the same offsets again; every byte is checked.
rand_lat() {
  python3 - "$1" "$fasta" <<'EOF'
import mmap, os, random, sys, time
path, orig = sys.argv[1], sys.argv[2]
size = os.path.getsize(orig)
random.seed(11)
offsets = random.sample(range(0, size - 4096, 4096), min(1000, size // 4096 - 1))
with open(orig, 'rb') as f:
    want = {o: (f.seek(o), f.read(4096))[1] for o in offsets}
buf = mmap.mmap(-1, 4096)  # page-aligned buffer for O_DIRECT
out = []
for _ in range(2):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    lat = []
    for o in offsets:
        t = time.perf_counter_ns()
        got = os.preadv(fd, [buf], o)
        lat.append((time.perf_counter_ns() - t) / 1000)
        assert got == 4096 and buf[:4096] == want[o], f"bytes differ at {o}"
    os.close(fd)
    lat.sort()
    out += [lat[len(lat) // 2], lat[min(len(lat) - 1, int(0.99 * len(lat)))]]
    if len(out) == 2:
        cold_max = lat[-1]
print(" ".join(f"{x:.0f}" for x in out + [cold_max]))
EOF
}
log "random 4 KiB reads: cold decodes (no stream runs, no fills)"
mount_acx "$work/mnt-acx" "decoder=cpu,readahead=0,fill=0"
read -r cold50 cold99 warm50 warm99 coldmax <<<"$(rand_lat "$work/mnt-acx/genome.fa")"
unmount "$work/mnt-acx"
log "random 4 KiB reads: default options (the file is filled in the background)"
mount_acx "$work/mnt-acx" "decoder=cpu"
read -r fill50 fill99 _ _ fillmax <<<"$(rand_lat "$work/mnt-acx/genome.fa")"
unmount "$work/mnt-acx"
log "random 4 KiB reads: squashfuse"
squashfuse "$work/genome.sqfs" "$work/mnt-sq"
wait_mounted "$work/mnt-sq"
read -r sqc50 sqc99 sqw50 sqw99 sqcmax <<<"$(rand_lat "$work/mnt-sq/genome.fa")"
unmount "$work/mnt-sq"

# --- 3. samtools faidx ------------------------------------------------------------------------------------------
log "samtools faidx, 1000 regions"
samtools faidx "$fasta"
python3 "$repo/bench/faidx-regions.py" "$fasta.fai" "$work/regions.txt"
rm -f "$fasta.fai"
time_faidx() { # time_faidx FILE OUT -> seconds
  python3 - "$1" "$work/regions.txt" "$2" <<'EOF'
import subprocess, sys, time
t = time.perf_counter()
with open(sys.argv[3], 'wb') as out:
    subprocess.run(['samtools', 'faidx', sys.argv[1], '-r', sys.argv[2]], stdout=out, check=True)
print(f"{time.perf_counter() - t:.3f}")
EOF
}
daemon_cpu() { # daemon_cpu PID -> CPU seconds (user + system) the process has used so far
  python3 -c "import os, sys; f = open(f'/proc/{sys.argv[1]}/stat').read().rsplit(')', 1)[1].split();
print((int(f[11]) + int(f[12])) / os.sysconf('SC_CLK_TCK'))" "$1"
}
mount_acx "$work/mnt-acx" "decoder=cpu"
cpu0=$(daemon_cpu "${pids[-1]}")
t_acx=$(time_faidx "$work/mnt-acx/genome.fa" "$work/out-acx.txt")
faidx_cpu=$(python3 -c "print(f'{$(daemon_cpu "${pids[-1]}") - $cpu0:.2f}')")
# What reached the daemon: FUSE reads, bytes, reads that waited for the fill (stats counted since the mount).
read -r faidx_reads faidx_mb faidx_waits < <(python3 - "$work/mnt-acx/.aceapex/stats" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
print(s['fs']['reads'], f"{s['fs']['bytes_served'] / 1e6:.1f}", s['streams']['runs']['waits'])
EOF
)
drop_page_cache "$work/mnt-acx/genome.fa"
cpu1=$(daemon_cpu "${pids[-1]}")
t_acx_served=$(time_faidx "$work/mnt-acx/genome.fa" "$work/out-acx-served.txt")
served_cpu=$(python3 -c "print(f'{$(daemon_cpu "${pids[-1]}") - $cpu1:.3f}')")
t_acx_pages=$(time_faidx "$work/mnt-acx/genome.fa" "$work/out-acx-pages.txt")
unmount "$work/mnt-acx"
mount_acx "$work/mnt-acx" "decoder=cpu,fill=0"
t_acx_nofill=$(time_faidx "$work/mnt-acx/genome.fa" "$work/out-acx-nofill.txt")
unmount "$work/mnt-acx"
t_bgz=$(time_faidx "$work/genome.fa.gz" "$work/out-bgz.txt")
cmp "$work/out-acx.txt" "$work/out-bgz.txt" || die "samtools outputs differ"
cmp "$work/out-acx-nofill.txt" "$work/out-bgz.txt" || die "samtools outputs differ (fill=0)"
cmp "$work/out-acx-served.txt" "$work/out-bgz.txt" || die "samtools outputs differ (daemon cache warm)"
cmp "$work/out-acx-pages.txt" "$work/out-bgz.txt" || die "samtools outputs differ (page cache warm)"
[ ! -e "$work/data/genome.fa.fai" ] || die "an index was written next to the original"

# --- the table --------------------------------------------------------------------------------------------------
ms() { python3 -c "print(f'{$1 / 1000:.2f}')"; }
title
seq_rows
echo "| random 4 KiB O_DIRECT, cold (readahead=0,fill=0), p50 / p99 / max |" \
  "$(ms "$cold50") / $(ms "$cold99") / $(ms "$coldmax") ms | squashfuse $(ms "$sqc50") / $(ms "$sqc99") / $(ms "$sqcmax") ms |"
echo "| random 4 KiB O_DIRECT, warm (same offsets again), p50 / p99 | $(ms "$warm50") / $(ms "$warm99") ms |" \
  "squashfuse $(ms "$sqw50") / $(ms "$sqw99") ms |"
echo "| random 4 KiB O_DIRECT, fresh mount, default options (file filled), p50 / p99 / max |" \
  "$(ms "$fill50") / $(ms "$fill99") / $(ms "$fillmax") ms | — |"
echo "| 1000 random \`samtools faidx\` regions, fresh mount | $t_acx s (fill=0: $t_acx_nofill s) |" \
  "bgzip'd FASTA on local disk $t_bgz s |"
echo "| the fresh mount's faidx run: daemon CPU, FUSE reads, reads that waited for the fill |" \
  "$faidx_cpu s, $faidx_reads reads ($faidx_mb MB), $faidx_waits waits | — |"
echo "| the same regions again: daemon cache warm, page cache dropped (serving alone) / page cache warm |" \
  "$t_acx_served s / $t_acx_pages s | — |"
echo "| daemon CPU of the serving-alone run (rebuilding the bytes and answering FUSE; steadier than the wall" \
  "clock on a loaded machine) | $served_cpu s | — |"
