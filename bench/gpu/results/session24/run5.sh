#!/usr/bin/env bash
# Session 24 device call 5 (the budget's last ~4 minutes): WordReader1 without the per-take select on its newest
# word (carry/gpubench) against eeef7ab (carry/base/gpubench), atha genome, atha general and fly x11 each packed
# once, then decoded by base and new in turn (every block checked, 2,000 random ranges against the CPU bytes).
set -o pipefail
log=$OUT/device.log
d=/tmp/r5; mkdir -p $d/fly
gzip -dc carry/atha.fa.gz > $d/atha.fa
for f in carry/fly11/*; do case $f in *.gz) gzip -dc $f > $d/fly/$(basename ${f%.gz});; *) cp $f $d/fly/;; esac; done
./carry/aceapex pack $d/atha.fa -o $d/atha-genome.acx -q
./carry/aceapex pack --no-genome $d/atha.fa -o $d/atha-general.acx -q
./carry/aceapex pack $d/fly -o $d/fly11.acx -q
echo "commit $(cat carry/COMMIT) base $(cat carry/base/COMMIT)" | tee -a $log
for a in atha-genome atha-general fly11; do
  for side in base new; do
    b=./carry/gpubench; [ $side = base ] && b=./carry/base/gpubench
    echo "### $a $side" | tee -a $log
    timeout 40 $b $d/$a.acx --runs 3 --ranges 2000 --latency 0 --contig 0 2>&1 | grep -E "median|full decode|equal" | tee -a $log
  done
done
