#!/usr/bin/env bash
# Session 35 device call 2: the commit in carry/COMMIT (format v7). (1) The K = 2 linear parse's launch shape:
# lanes a warp that take a unit and CTA size (default 8 lanes, 256 threads: four warps a scheduler once lane 1 has
# its own threads; 16 x 128 and 32 x 64 keep 64 units a CTA), full decode of atha genome, atha general and fly x11
# packed with two lanes, two rounds. (2) One lane: carry/base/gpubench (a0a454f, format v6) on carry/v6/*.acx
# (these archives packed here with --lanes 1 and their header version set back to 6, which is all that differs:
# a one-lane v7 payload is a v6 one) against this commit's gpubench on the same archives packed there with
# --lanes 1, two rounds: does the v7 engine's K = 1 path cost anything against v6's?
# Carry: BASE=a0a454f bash bench/gpu/make-carry.sh, then carry/v6/ as above (see session 35 in docs/BENCH-GPU.md).
export COMMIT=$(cat carry/COMMIT)
. bench/gpu/steps.sh
say "commit: $COMMIT base: $(cat carry/base/COMMIT)"
one_lane_archives
for a in atha-genome atha-general fly11; do say "### $a: $(stat -c %s carry/v6/$a.acx) bytes carried (v6)"; done
full_ab 2 "l8=./carry/gpubench" "l16=env ACEAPEX_GPU_K1_WARP_LANES=16 ACEAPEX_GPU_K1_CTA=128 ./carry/gpubench" \
  "l32=env ACEAPEX_GPU_K1_WARP_LANES=32 ACEAPEX_GPU_K1_CTA=64 ./carry/gpubench"
mkdir -p /tmp/gpu-suite/v6
for a in atha-genome atha-general fly11; do cp "carry/v6/$a.acx" "/tmp/gpu-suite/v6-$a.acx"; done
for r in 1 2; do
  for a in atha-genome atha-general fly11; do
    say "### v6-base $a full round $r"
    ./carry/base/gpubench "/tmp/gpu-suite/v6-$a.acx" --runs 5 --ranges 10 --latency 10 --contig 1 2>&1 |
      grep -E "full decode|entropy_only|parse_no|parse_with|^  full|resolve|chase|FAIL|wrong|rror" | tee -a "$log"
    say "### v7-k1 $a full round $r"
    ./carry/gpubench "/tmp/gpu-suite/$a-k1.acx" --runs 5 --ranges 10 --latency 10 --contig 1 2>&1 |
      grep -E "full decode|entropy_only|parse_no|parse_with|^  full|resolve|chase|FAIL|wrong|rror" | tee -a "$log"
  done
done
