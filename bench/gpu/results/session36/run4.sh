#!/usr/bin/env bash
# Session 36 device call 4: the placement loop of finish_linear_k1 unrolled by four (the commit in carry/COMMIT)
# against run 3's commit 62dfd37 (carry/base/gpubench). The suite's tests, genome part and big part (a generated
# 4.69 GB genome archive: every block against the index xxh3, 2,000 ranges against CPU random access, full decode,
# cat md5) on this session's kernels; the full decode of the three archives, two rounds; then Nsight Compute on
# atha genome's parse_no_literal_writes and parse_with_literals launches (where the 0.04 ms between entropy_only
# and parse_no_literal_writes goes).
# Carry: BASE=62dfd37 bash bench/gpu/make-carry.sh.
export COMMIT=$(cat carry/COMMIT)
bash bench/gpu/suite.sh "tests genome"
. bench/gpu/steps.sh
seek_archives
full_ab 2 "base=./carry/base/gpubench" "new=./carry/gpubench"
# gpubench --runs 1: the first full decode (parse, finish), then four decodes of each variant (parse, finish each).
for v in "parse_no_literal_writes 10" "parse_with_literals 18"; do
  set -- $v
  say "### ncu atha-genome $1"
  ncu --clock-control none --section SpeedOfLight --section WarpStateStats --section Occupancy \
    --section LaunchStats --section SchedulerStats \
    -k "regex:parse_k1_linear|finish_linear_k1" --launch-skip "$2" --launch-count 2 \
    ./carry/gpubench /tmp/gpu-suite/atha-genome.acx --no-reference --runs 1 --ranges 0 --latency 0 --contig 0 \
    >"$out/ncu-atha-genome-$1.txt" 2>&1
  grep -E "^  [a-z_0-9]+.*\(|Duration|Registers Per|Achieved Occupancy|Compute \(SM\) Throughput|Warp Cycles Per Issued|Issued Warp|No Eligible" "$out/ncu-atha-genome-$1.txt" | tee -a "$log"
done
bash bench/gpu/suite.sh "big"
