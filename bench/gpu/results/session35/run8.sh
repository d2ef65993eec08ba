#!/usr/bin/env bash
# Session 35 device call 8: run 7 again after a cold GPU start is timed. Run 7 (mount first on a fresh machine) had
# its decoder=gpu mounts time out: the daemon took ~10 s to mount. Here: a 100-byte `aceapex cat --decoder gpu` in a
# fresh process, three times (the first on a machine that has compiled no kernel yet), timed with the engine's
# log; then the suite's mount, faidx and mountseq parts on atha.
export COMMIT=$(cat carry/COMMIT)
. bench/gpu/steps.sh
seek_archives
for i in 1 2 3; do
  t0=$(date +%s%N)
  RUST_LOG=info ./carry/aceapex cat --decoder gpu /tmp/gpu-suite/atha-genome.acx atha.fa --offset 1000000 --length 100 \
    2>"$out/cat$i.err" | md5sum >/dev/null
  say "### cold-start cat $i: $(( ($(date +%s%N) - t0) / 1000000 )) ms; $(grep -iE 'gpu|kernel|nvrtc|cache' "$out/cat$i.err" | head -3 | tr '\n' ' ' | cut -c1-300)"
done
MOUNTSEQ_BIG=0 bash bench/gpu/suite.sh "mount faidx mountseq"
