#!/usr/bin/env bash
# Pack speed of two commits side by side: each commit's `aceapex` built in a worktree of its own, then every
# dataset packed by the two builds in alternation, N rounds, and the medians, minimums, mean CPU seconds and
# archive sizes printed as one markdown table.
#
# Why alternation: this 2-core development machine is shared, and its speed drifts by ±8 % between runs and by
# 2-3x over an hour (session 43). Two builds run back to back see the same drift, so their ratio holds while the
# absolute times do not. This is how the README's pack-speed row and the packer commits' timings are measured.
#
# Datasets (from ../shared/corpus, decompressed to a temp dir): atha_chr1 in genome mode (the target's input),
# every fly-chr4 file in genome mode (related genomes and their CDS), atha_chr1 in general mode (--no-genome).
#
# Usage: bash bench/pack-ab.sh [--corpus DIR] [--rounds N] [--sets "atha fly general"] [BASE [HEAD]]
#   BASE, HEAD  commits (default: HEAD~1 and HEAD; HEAD may be WORKTREE for the working tree as it is)
#   --rounds N  alternating rounds per dataset (default 8)
# Runtime: about rounds x (1 + 1 + 4) s x 2 on an idle 2-core machine, plus two release builds.
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
corpus="$repo/../shared/corpus"
rounds=8
sets="atha fly general"
revs=()
while [ $# -gt 0 ]; do
  case "$1" in
    --corpus) corpus="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --sets) sets="$2"; shift 2 ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    -*) echo "unknown option: $1" >&2; exit 2 ;;
    *) revs+=("$1"); shift ;;
  esac
done
base="${revs[0]:-HEAD~1}"
head="${revs[1]:-HEAD}"
[ -d "$corpus" ] || { echo "corpus not found at $corpus (use --corpus DIR)" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "needs /usr/bin/time (apt-get install time)" >&2; exit 1; }

log() { echo "[pack-ab] $*" >&2; }
work="$(mktemp -d "${TMPDIR:-/tmp}/aceapex-pack-ab.XXXXXX")"
worktrees=()
cleanup() {
  for wt in "${worktrees[@]}"; do git -C "$repo" worktree remove --force "$wt" >/dev/null 2>&1 || true; done
  rm -rf "$work"
}
trap cleanup EXIT

# build REV NAME: $work/NAME, the release `aceapex` of REV (WORKTREE: the working tree as it is).
build() {
  local rev="$1" name="$2" src
  if [ "$rev" = WORKTREE ]; then
    src="$repo"
  else
    src="$work/src-$name"
    git -C "$repo" worktree add -q --detach "$src" "$rev"
    worktrees+=("$src")
  fi
  log "building $rev"
  (cd "$src" && CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$repo/target}/pack-ab-$name" cargo build --release --quiet --bin aceapex)
  cp "${CARGO_TARGET_DIR:-$repo/target}/pack-ab-$name/release/aceapex" "$work/$name"
}
build "$base" base
build "$head" head
label_of() { [ "$1" = WORKTREE ] && echo "working tree" || git -C "$repo" rev-parse --short "$1"; }

mkdir -p "$work/in/fly"
gzip -dc "$corpus/atha_chr1.fa.gz" > "$work/in/atha_chr1.fa"
for f in "$corpus"/fly-chr4/*.fna.gz; do gzip -dc "$f" > "$work/in/fly/$(basename "${f%.gz}")"; done

# One timed pack: appends "wall user sys bytes" to $work/NAME.SET.
pack_once() {
  local name="$1" set="$2" input args=()
  case "$set" in
    atha) input="$work/in/atha_chr1.fa" ;;
    fly) input="$work/in/fly" ;;
    general) input="$work/in/atha_chr1.fa"; args=(--no-genome) ;;
  esac
  /usr/bin/time -f "%e %U %S" -o "$work/time" "$work/$name" pack "$input" -o "$work/out.acx" -q "${args[@]}"
  echo "$(cat "$work/time") $(stat -c %s "$work/out.acx")" >> "$work/$name.$set"
}

# summary FILE: "median min mean-cpu bytes" of its runs.
summary() {
  sort -n -k1 "$1" | awk '{ w[NR] = $1; cpu += $2 + $3; b = $4 }
    END { printf "%.3f %.3f %.2f %d", (NR % 2 ? w[(NR + 1) / 2] : (w[NR / 2] + w[NR / 2 + 1]) / 2), w[1], cpu / NR, b }'
}

input_bytes() {
  case "$1" in
    atha|general) stat -c %s "$work/in/atha_chr1.fa" ;;
    fly) cat "$work/in/fly"/* | wc -c ;;
  esac
}

echo
echo "### Pack speed, $(label_of "$base") (A) against $(label_of "$head") (B): $rounds alternating rounds, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%Y-%m-%d)"
echo
echo "| dataset | A median s | B median s | B / A | A min | B min | A CPU s | B CPU s | B MB/s (median) | A bytes | B bytes |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
for set in $sets; do
  log "$set: $rounds rounds"
  for _ in $(seq "$rounds"); do
    pack_once base "$set"
    pack_once head "$set"
  done
  read -r a_med a_min a_cpu a_bytes <<<"$(summary "$work/base.$set")"
  read -r b_med b_min b_cpu b_bytes <<<"$(summary "$work/head.$set")"
  awk -v s="$set" -v am="$a_med" -v bm="$b_med" -v an="$a_min" -v bn="$b_min" -v ac="$a_cpu" -v bc="$b_cpu" \
    -v ab="$a_bytes" -v bb="$b_bytes" -v in_bytes="$(input_bytes "$set")" 'BEGIN {
      printf "| %s | %.3f | %.3f | %.3f | %.3f | %.3f | %.2f | %.2f | %.1f | %d | %d |\n",
        s, am, bm, (am > 0 ? bm / am : 0), an, bn, ac, bc, (bm > 0 ? in_bytes / bm / 1e6 : 0), ab, bb }'
done
echo
echo "Sets: atha = atha_chr1.fa (genome mode), fly = all fly-chr4 files (genome mode), general = atha_chr1.fa --no-genome."
