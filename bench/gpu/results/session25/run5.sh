#!/usr/bin/env bash
# Session 25 device call 5 (CPU only, on the H200 host's 16 cores): the sequential CPU decoder's far sources
# decoded whole (a helper's FarSources change, not merged: docs/BENCH-GPU.md session 25 run 5) against the build before it, on the
# fourth of 4 mutated copies of atha_chr1 (gen_genomes --files 4 --bytes 300M), which sources its matches in the
# three copies before it. carry2/: aceapex.new, aceapex.old (stripped), gen_genomes, atha_chr1.fa.gz.
set -o pipefail
TIMEFORMAT='%R s wall %U user %S sys'
log=$OUT/device.log
say() { echo "$*" | tee -a $log; }
t() { local t0=$(date +%s%N); "$@"; echo $(( ($(date +%s%N) - t0) / 1000000 )); }
say "host cores: $(nproc)"
gzip -dc carry2/atha_chr1.fa.gz > /tmp/atha.fa
./carry2/gen_genomes /tmp/atha.fa /tmp/g4 --files 4 --bytes 300M >/dev/null
say "input: $(du -sb /tmp/g4 | cut -f1) bytes"
say "pack ms: $(t ./carry2/aceapex.new pack /tmp/g4 -o /tmp/x.acx -q)"
./carry2/aceapex.new info /tmp/x.acx | grep -E 'archive:|ratio' | tee -a $log
for f in genome000.fa genome003.fa; do want=$(md5sum < /tmp/g4/$f | cut -d' ' -f1); say "$f original md5 $want"; done
for r in 1 2; do
  for b in old new; do
    for f in genome003.fa genome000.fa; do
      t0=$(date +%s%N)
      { time ./carry2/aceapex.$b cat --decoder cpu /tmp/x.acx g4/$f 2>/dev/null | md5sum > /tmp/md5; } 2> /tmp/tm
      say "round $r $b cat $f: $(cat /tmp/tm) md5 $(cut -d' ' -f1 /tmp/md5)"
    done
  done
done
for b in old new; do
  rm -rf /tmp/un; { time ./carry2/aceapex.$b unpack --decoder cpu -C /tmp/un /tmp/x.acx 2>/dev/null; } 2> /tmp/tm
  say "$b unpack: $(cat /tmp/tm); genome003 $(md5sum < /tmp/un/g4/genome003.fa | cut -d' ' -f1)"
done
