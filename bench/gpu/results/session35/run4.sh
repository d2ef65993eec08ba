#!/usr/bin/env bash
# Session 35 device call 4 (experiment branch splitw, 554440a, not merged): the lane split weighing each code
# symbol W times (s = 8 ceil(max(0, nlit - W n_c) / 16), ACEAPEX_LANE_SPLIT_WEIGHT=W for the packer, the CPU
# decoder and the kernels alike), so that lane 0, which also runs the token parse, gets fewer literals. W = 1 is
# format v7 as written. atha genome, atha general, fly x11 packed with each W; the full decode, two rounds, every
# timed decode checked block by block.
export COMMIT=$(cat carry/COMMIT)
. bench/gpu/steps.sh
unpack_corpus
mkdir -p /tmp/gpu-suite
for w in 1 3 6 10; do
  export ACEAPEX_LANE_SPLIT_WEIGHT=$w
  ./carry/aceapex pack carry/atha.fa -o /tmp/gpu-suite/w$w-atha-genome.acx -q
  ./carry/aceapex pack --no-genome carry/atha.fa -o /tmp/gpu-suite/w$w-atha-general.acx -q
  ./carry/aceapex pack carry/fly11 -o /tmp/gpu-suite/w$w-fly11.acx -q
done
for r in 1 2; do
  for a in atha-genome atha-general fly11; do
    for w in 1 3 6 10; do
      say "### W=$w $a full round $r"
      ACEAPEX_LANE_SPLIT_WEIGHT=$w ./carry/gpubench "/tmp/gpu-suite/w$w-$a.acx" --runs 5 --ranges 10 --latency 10 --contig 1 2>&1 |
        grep -E "full decode|entropy_only|parse_no|parse_with|^  full|resolve|chase|FAIL|wrong|rror" | tee -a "$log"
    done
  done
done
