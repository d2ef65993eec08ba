#!/usr/bin/env bash
# Session 36 device call 1: the linear full decode's token parse off the serial chain (finish_linear_k1 parses the
# tokens a warp a unit), the commit in carry/COMMIT, against carry/base/gpubench (ae55ed6, session 35's last
# commit) in the same run. The suite's tests and genome part (every block, 10,000 / 2,000 ranges through both seek
# paths, cat md5); the full decode of atha genome, atha general and fly x11, two rounds, base / new / new at 16 and
# 32 lanes a warp, every timed decode checked block by block; then the lane split's code weight W = 1 and 3 (the
# experiment branch splitw2's binaries in carry/w/, ACEAPEX_LANE_SPLIT_WEIGHT for packer and kernels alike)
# against this commit's W = 10, now that lane 0's thread no longer parses the tokens.
# Carry: BASE=ae55ed6 bash bench/gpu/make-carry.sh; carry/w/{aceapex,gpubench} built from branch splitw2.
export COMMIT=$(cat carry/COMMIT)
bash bench/gpu/suite.sh "tests genome"
. bench/gpu/steps.sh
seek_archives
full_ab 2 "base=./carry/base/gpubench" "new=./carry/gpubench" \
  "new-w16=env ACEAPEX_GPU_K1_WARP_LANES=16 ACEAPEX_GPU_K1_CTA=128 ./carry/gpubench" \
  "new-w32=env ACEAPEX_GPU_K1_WARP_LANES=32 ACEAPEX_GPU_K1_CTA=64 ./carry/gpubench"
for w in 1 3; do
  export ACEAPEX_LANE_SPLIT_WEIGHT=$w
  ./carry/w/aceapex pack carry/atha.fa -o /tmp/gpu-suite/w$w-atha-genome.acx -q
  ./carry/w/aceapex pack --no-genome carry/atha.fa -o /tmp/gpu-suite/w$w-atha-general.acx -q
  ./carry/w/aceapex pack carry/fly11 -o /tmp/gpu-suite/w$w-fly11.acx -q
  unset ACEAPEX_LANE_SPLIT_WEIGHT
done
for a in atha-genome atha-general fly11; do
  say "### $a: $(stat -c %s /tmp/gpu-suite/$a.acx) bytes at W=10, $(stat -c %s /tmp/gpu-suite/w1-$a.acx) at W=1, $(stat -c %s /tmp/gpu-suite/w3-$a.acx) at W=3"
done
for r in 1 2; do
  for a in atha-genome atha-general fly11; do
    for w in 1 3; do
      for v in "W=$w" "W=$w-w16"; do
        say "### $v $a full round $r"
        lanes=(); [ "$v" = "W=$w-w16" ] && lanes=(ACEAPEX_GPU_K1_WARP_LANES=16 ACEAPEX_GPU_K1_CTA=128)
        env ACEAPEX_LANE_SPLIT_WEIGHT=$w "${lanes[@]}" ./carry/w/gpubench "/tmp/gpu-suite/w$w-$a.acx" --runs 5 --ranges 10 --latency 10 --contig 1 2>&1 |
          grep -E "full decode|entropy_only|parse_no|parse_with|^  full|resolve|chase|FAIL|wrong|rror" | tee -a "$log"
      done
    done
  done
done
