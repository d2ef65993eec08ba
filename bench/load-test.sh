#!/usr/bin/env bash
# Load test of the mount: 16 concurrent readers mixing sequential and random reads for a fixed time, with a
# daemon cache budget far smaller than the data. Every byte is compared with the originals; the daemon's resident
# memory is sampled throughout (bench/load_readers.py does the reading and the sampling).
#
# Usage: bash bench/load-test.sh [SECONDS] [CACHE_SIZE]      defaults: 600 s, 4M
# Env: THREADS (default 16), NO_BUILD=1 to use the binaries already in target/release, HEAP_LOG=SECS to have the
#      daemon log its heap (live bytes vs allocator slack) every SECS s, DAEMON_LOG=FILE to keep the daemon's log,
#      PACK_ARGS (e.g. --no-genome: general mode, where sequential readers get stream runs; the default packs the
#      FASTA files in genome mode).
# Data: atha_chr1 + the 11 fly-chr4 files from $CORPUS (default ../shared/corpus next to the repository; set it
#       when running from a worktree elsewhere) when present, else a generated 48 MiB tree.
# Needs root (drops the page cache every 5 s so buffered reads keep reaching the daemon) and /dev/fuse.
# Prints a markdown table and the raw JSON; exits non-zero on any wrong byte, read error or daemon death.
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
seconds="${1:-600}"
cache="${2:-4M}"
threads="${THREADS:-16}"

log() { echo "[load-test] $*" >&2; }
die() { echo "[load-test] FAILED: $*" >&2; exit 1; }

command -v fusermount3 >/dev/null || die "fusermount3 missing (apt-get install -y fuse3)"
[ -w /dev/fuse ] || die "/dev/fuse is not usable here"

if [ -z "${NO_BUILD:-}" ]; then
  log "building release binaries"
  (cd "$repo" && cargo build --release --quiet --bin aceapex --bin aceapex-mount) >&2
fi
bin="${CARGO_TARGET_DIR:-$repo/target}/release"

work="$(mktemp -d "${TMPDIR:-/tmp}/aceapex-load.XXXXXX")"
mnt="$work/mnt"
daemon=""
cleanup() {
  [ -n "${DAEMON_LOG:-}" ] && cp "$work/daemon.log" "$DAEMON_LOG" 2>/dev/null || true
  mountpoint -q "$mnt" 2>/dev/null && fusermount3 -u -z "$mnt" 2>/dev/null || true
  [ -n "$daemon" ] && kill "$daemon" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

data="$work/data"
mkdir -p "$data/fly" "$mnt"
corpus="${CORPUS:-$repo/../shared/corpus}"
if [ -f "$corpus/atha_chr1.fa.gz" ]; then
  gzip -dc "$corpus/atha_chr1.fa.gz" > "$data/atha_chr1.fa"
  for f in "$corpus"/fly-chr4/*; do
    case "$f" in
      *.gz) gzip -dc "$f" > "$data/fly/$(basename "$f" .gz)" ;;
      *) cp "$f" "$data/fly/" ;;
    esac
  done
else
  log "corpus not found: generating 48 MiB of related sequences"
  python3 - "$data" <<'EOF'
import os, random, sys
random.seed(11)
base = ''.join(random.choice('ACGT') for _ in range(4 << 20))
for i in range(12):
    s = list(base)
    for _ in range(20000):
        s[random.randrange(len(s))] = random.choice('ACGTacgtN')
    seq = ''.join(s)
    with open(os.path.join(sys.argv[1], f'g{i}.fa'), 'w') as f:
        f.write(f'>g{i}\n')
        for j in range(0, len(seq), 60):
            f.write(seq[j:j + 60] + '\n')
EOF
fi
total=$(du -sb "$data" | cut -f1)
log "data: $(find "$data" -type f | wc -l) files, $total bytes; cache budget $cache; $threads readers; ${seconds}s"

# shellcheck disable=SC2086
"$bin/aceapex" pack ${PACK_ARGS:-} "$data" -o "$work/load.acx" >&2
# The readers compare against the packed tree: pack stores the directory's contents under its name.
top="$("$bin/aceapex" ls "$work/load.acx" | head -1 | cut -d/ -f1)"

ACEAPEX_HEAP_LOG="${HEAP_LOG:-}" "$bin/aceapex-mount" "$work/load.acx" "$mnt" -f -o "cache_size=$cache,decoder=cpu" 2>"$work/daemon.log" &
daemon=$!
for _ in $(seq 1 500); do mountpoint -q "$mnt" && break; sleep 0.02; done
mountpoint -q "$mnt" || die "mount did not come up: $(cat "$work/daemon.log")"

rc=0
python3 "$repo/bench/load_readers.py" --mount "$mnt/$top" --originals "$data" --pid "$daemon" \
  --threads "$threads" --seconds "$seconds" > "$work/result.json" || rc=$?
cat "$work/result.json"
stats="$(cat "$mnt/.aceapex/stats" 2>/dev/null || echo '{}')"
fusermount3 -u "$mnt" || rc=1
wait "$daemon" || true
daemon=""
mountpoint -q "$mnt" && { log "stale mount left behind"; rc=1; }

# The daemon logs its documented memory bound at mount (MemoryBudget::bound_bytes): the peak must stay under it.
bound_kib="$(grep -o 'bound_kib=[0-9]*' "$work/daemon.log" | head -1 | cut -d= -f2)"
python3 - "$work/result.json" "$cache" "$total" "$stats" "${bound_kib:-0}" <<'EOF' || rc=1
import json, sys
r = json.load(open(sys.argv[1]))
cache, total, bound = sys.argv[2], int(sys.argv[3]), int(sys.argv[5])
try:
    s = json.loads(sys.argv[4])
except ValueError:
    s = {}
peak = r["daemon_rss_kib"]["peak"] or 0
print()
print("| readers | time | data | cache budget | reads (seq / random) | MB/s | random read p50 / p99 | wrong | errors | daemon peak RSS | documented bound |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
print(f"| {r['threads']} | {r['seconds']} s | {total / 1e6:.1f} MB | {cache} | {r['reads']['sequential']} / {r['reads']['random']} "
      f"| {r['mb_per_s']} | {r['random_read_us']['p50']} / {r['random_read_us']['p99']} µs | {r['wrong_reads']} "
      f"| {r['errors']} | {peak / 1024:.1f} MiB | {bound / 1024:.1f} MiB |")
if s:
    print()
    print("daemon stats at the end:", json.dumps({k: s[k] for k in list(s)[:12]}))
if not bound:
    sys.exit("no memory bound in the daemon's log")
if peak > bound:
    sys.exit(f"peak RSS {peak} KiB is above the documented bound of {bound} KiB")
EOF
[ "$rc" -eq 0 ] && log "PASS" || log "FAIL (see above; daemon log: $(tail -3 "$work/daemon.log" 2>/dev/null))"
exit "$rc"
