#!/usr/bin/env bash
# Session 37 device call 6 (experiment branch weight-exp, ef85f65 + ACEAPEX_LANE_SPLIT_WEIGHT for the packer and the
# kernels): now that a code step is cheaper (k1_code_run), the lane split's code weight again. The three archives
# packed with weights 10 (the format's), 5, 3 and 2, full decode two rounds, each decoded with its own weight.
export COMMIT=$(cat carry/COMMIT)
. bench/gpu/steps.sh
unpack_corpus
mkdir -p /tmp/gpu-suite
for w in 10 5 3 2; do
  export ACEAPEX_LANE_SPLIT_WEIGHT=$w
  ./carry/aceapex pack carry/atha.fa -o /tmp/gpu-suite/w$w-atha-genome.acx -q
  ./carry/aceapex pack --no-genome carry/atha.fa -o /tmp/gpu-suite/w$w-atha-general.acx -q
  ./carry/aceapex pack carry/fly11 -o /tmp/gpu-suite/w$w-fly11.acx -q
  say "### weight $w: $(stat -c %s /tmp/gpu-suite/w$w-atha-genome.acx) $(stat -c %s /tmp/gpu-suite/w$w-atha-general.acx) $(stat -c %s /tmp/gpu-suite/w$w-fly11.acx) bytes"
done
for r in 1 2; do
  for a in atha-genome atha-general fly11; do
    for w in 10 5 3 2; do
      say "### w$w $a full round $r"
      ACEAPEX_LANE_SPLIT_WEIGHT=$w ./carry/gpubench /tmp/gpu-suite/w$w-$a.acx --runs 5 --ranges 10 --latency 10 --contig 1 2>&1 |
        grep -E "full decode|entropy_only|parse_no|parse_with|^  full|FAIL|wrong|rror" | tee -a "$log"
    done
  done
done
