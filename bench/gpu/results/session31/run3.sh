#!/usr/bin/env bash
# Session 31 device call 3: what is left around parse_k1_staged. Run 2 measured its token parse (parse without
# literal writes minus entropy alone) at 0.087 ms against parse_k1's 0.028 on atha genome, with the L1 hit rate 92 ->
# 81 %: its 46 KB of tables and 65 KB of rings leave L1 121 KB of the SM's 256 (parse_k1: 192). Variants: the ring at
# 512 bytes (ACEAPEX_GPU_K1_RING_BYTES=512: 33 KB of rings), the word stream left out of the L1 prefetch
# (ACEAPEX_GPU_K1_STAGED_PREFETCH=0), both, and parse_k1_linear (ACEAPEX_GPU_K1_LINEAR=1: literals in literal order,
# placed by place_literals_k1). libtests engine::gpu with each; two rounds of the full decode, b28e918 (carry/base)
# against this commit's variants (every timed decode checked block by block against the index xxh3); Nsight Compute
# source counters of parse_k1_staged on atha genome (where its stalls are).
# Carry: BASE=b28e918 bash bench/gpu/make-carry.sh (COMMIT in carry/).
set -o pipefail
export COMMIT=$(cat carry/COMMIT)
. bench/gpu/steps.sh
say "commit $COMMIT base $(cat carry/base/COMMIT)"
gpu_libtests ACEAPEX_GPU_K1_LINEAR=1
gpu_libtests ACEAPEX_GPU_K1_RING_BYTES=512 ACEAPEX_GPU_K1_STAGED_PREFETCH=0
seek_archives
e() { echo "env $* ./carry/gpubench"; }
full_ab 2 "base=./carry/base/gpubench" "staged=./carry/gpubench" "linear=$(e ACEAPEX_GPU_K1_LINEAR=1)" \
  "r512=$(e ACEAPEX_GPU_K1_RING_BYTES=512)" "nopf=$(e ACEAPEX_GPU_K1_STAGED_PREFETCH=0)" \
  "r512-nopf=$(e ACEAPEX_GPU_K1_RING_BYTES=512 ACEAPEX_GPU_K1_STAGED_PREFETCH=0)"
run 200 ncu --clock-control none --section SourceCounters --section WarpStateStats --page source --print-source sass \
  --csv -k regex:parse_k1_staged --launch-count 1 ./carry/gpubench /tmp/gpu-suite/atha-genome.acx --no-reference \
  --runs 1 --ranges 0 --latency 0 --contig 0 >"$out/ncu-source.csv" 2>"$out/ncu-source.err"
say "ncu source: $(wc -c <"$out/ncu-source.csv") bytes; $(tail -3 "$out/ncu-source.err")"
