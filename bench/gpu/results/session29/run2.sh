#!/usr/bin/env bash
# Session 29 device call 2: the committed form of run 1's two changes (8 context-model copies; the 64 KB
# shared-memory carveout chosen per launch for a K = 1 parse of at most one CTA an SM), against a69efc0
# (carry/base). First the generated >= 4 GiB archive (its parse grid keeps the driver's carveout, and its CTAs
# now hold 47 KB of shared memory instead of 39, so fewer fit an SM): every block against the index xxh3 and 1000
# ranges against CPU random access, then base, new and new with one copy (ACEAPEX_GPU_CTX_COPIES_LOG=0) in turn.
# Then libtests engine::gpu and two rounds of the small archives: base, new, new without the carveout
# (ACEAPEX_GPU_K1_CARVEOUT=-1).
# Carry: BASE=a69efc0 bash bench/gpu/make-carry.sh (COMMIT in carry/).
set -o pipefail
export COMMIT=$(cat carry/COMMIT)
. bench/gpu/steps.sh
say "commit $COMMIT base $(cat carry/base/COMMIT 2>/dev/null)"
unpack_corpus
w=/tmp/gpu-suite; mkdir -p $w
run 120 ./carry/gen_genomes carry/atha.fa $w/big-gen --files 4 --bytes 1100M
run 400 ./carry/aceapex pack --level 3 $w/big-gen -o $w/big-gen.acx -q
rm -rf $w/big-gen
run 200 ./carry/gpubench $w/big-gen.acx --no-reference --runs 3 --ranges 1000 --latency 10 --contig 1 |
  grep -E "full decode|entropy_only|parse_with|^  full|equal|FAIL|wrong|rror"
for r in 1 2; do
  for v in "base=./carry/base/gpubench" "new=./carry/gpubench" "one=env ACEAPEX_GPU_CTX_COPIES_LOG=0 ./carry/gpubench"; do
    say "### ${v%%=*} big-gen full round $r"
    ${v#*=} $w/big-gen.acx --no-reference --runs 3 --ranges 0 --latency 0 --contig 0 2>&1 |
      grep -E "full decode|entropy_only|parse_with|^  full|FAIL|wrong|rror" | tee -a "$log"
  done
done
gpu_libtests
seek_archives
full_ab 2 "base=./carry/base/gpubench" "new=./carry/gpubench" "nocarve=env ACEAPEX_GPU_K1_CARVEOUT=-1 ./carry/gpubench"
