#!/usr/bin/env bash
# Session 27 device call 5: where the map chase and the flow cross. Generated genome-mode archives of 2, 4 and 8
# mutated 30 MB copies of atha (gen_genomes; ~33, ~90 and ~210 MB of match bytes, gpubench's first line counts them),
# each decoded by the flow and by the map chase in alternation, two rounds, every timed decode checked block by
# block against the index xxh3. Carry: bash bench/gpu/make-carry.sh (COMMIT in carry/).
set -o pipefail
export COMMIT=$(cat carry/COMMIT)
. bench/gpu/steps.sh
[ -f carry/atha.fa ] || gzip -dc carry/atha.fa.gz >carry/atha.fa
mkdir -p /tmp/gpu-suite
for n in 2 4 8; do
  in=/tmp/gpu-suite/cross$n
  run 60 ./carry/gen_genomes carry/atha.fa "$in" --files "$n" --bytes 30M
  run 120 ./carry/aceapex pack --level 3 "$in" -o "$in.acx" -q
  for r in 1 2; do
    for v in flow maps; do
      say "### $v cross$n full round $r"
      env ACEAPEX_GPU_RESOLVE=$v ./carry/gpubench "$in.acx" --no-reference --runs 5 --ranges 10 --latency 10 --contig 1 2>&1 |
        grep -E "^archive|full decode|parse_with|^  full|resolve  |FAIL|wrong|rror" | tee -a "$log"
    done
  done
done
