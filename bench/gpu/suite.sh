#!/usr/bin/env bash
# The device suite (docs/BENCH-GPU.md, from session 10 on). Usage: bash bench/gpu/suite.sh PARTS
#   big      a generated >= 4 GiB genome-mode archive (examples/gen_genomes: BIG_FILES files of BIG_BYTES, default
#            4 x 1100M, packed with BIG_PACK_ARGS, default --level 3 so the pack fits one call): every block against
#            the index xxh3 and BIG_RANGES (2000) ranges against CPU random access, full-decode throughput, seek
#            latency, and `cat --decoder gpu|cpu` md5; BIG_VARIANTS="VAR=VALUE ..." repeats the full decode
#            with each variable set (ACEAPEX_GPU_* variants; A=1,B=2 sets two).
#   mountseq sequential `dd bs=1M` through aceapex-mount with decoder=gpu and decoder=cpu (all host cores) beside
#            the empty FUSE filesystem (carry/nullfs) serving the same size and squashfuse over the same file in
#            squashfs (zstd) (atha only, where carry/bin has them), fresh mount and dropped page cache each run,
#            MOUNTSEQ_RUNS runs (default 5) and a summary line of medians and ratios, on atha (genome mode) and on
#            one file of the 'big' archive when that part ran first (MOUNTSEQ_BIG=0: atha only); with
#            MOUNTSEQ_TRACE=1 the daemons log where each stream run spent its time (-o trace).
#   bigpack  generate a 10 GiB FASTA input (examples/gen_genomes: mutated copies of carry/atha.fa, 10 files of
#            1 GiB) and pack it at the default level inside a 24 GiB memory cgroup when the machine allows one
#            (else the peak RSS is the evidence), then info, verify and a byte comparison of one file.
#   genome   GPU vs CPU on genome-mode archives beside general mode: atha packed both ways and the 11 fly files,
#            every block and 10,000 ranges bit-exact (gpubench), full-decode throughput, seek latency, and
#            `aceapex cat --decoder gpu|cpu` of the whole FASTA through the genome transform (md5 vs original).
#            GENOME_VARIANTS="VAR=VALUE ..." repeats the full decode of each archive with each variable set.
#   mount    atha in genome mode through aceapex-mount with decoder=gpu and cpu (and an injected GPU fault): md5
#            of the whole file and 200 random dd ranges compared with the original, timed.
#   faidx    1000 random `samtools faidx` regions of atha on a fresh aceapex-mount (decoder=gpu and cpu) against
#            samtools faidx of the bgzip'd original on local disk, three runs each, outputs compared (carry/bin
#            and carry/lib from make-carry.sh: samtools, bgzip and the libraries the image lacks).
#   tests    the engine's own tests on the GPU (carry/libtests engine::gpu).
#   ncu      Nsight Compute counters of the full decode's kernels (NCU_ARCHIVE, NCU_KERNELS, NCU_COUNT, NCU_ENV).
#   ab       the full decode of the genome part's archives (and big-gen.acx when the big part ran) by carry/base/gpubench
#            (make-carry.sh with BASE=COMMIT) and carry/gpubench in turn, AB_ROUNDS rounds (default 2): the base
#            commit and this one measured in the same run.
# Expects carry/ as bench/gpu/make-carry.sh leaves it: aceapex, aceapex-mount, gen_genomes, gpubench, nullfs,
# libtests, atha.fa(.gz), fly11/ (the 11 corpus files, .gz or not).
. "$(dirname "$0")/steps.sh"
ms_since() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
# cat_both ARCHIVE PATH ORIGINAL: `aceapex cat --decoder gpu`, then cpu, of PATH: timed into /dev/null (md5sum
# itself runs at ~0.7 GB/s, so a piped timing measured md5sum), then again through md5sum against ORIGINAL.
cat_both() {
  local want got dec t0 ms
  [ "${SKIP_CAT:-0}" = 1 ] && return 0  # SKIP_CAT=1: decode benchmarks only
  want=$(md5sum <"$3" | cut -d' ' -f1)
  for dec in gpu cpu; do
    t0=$(date +%s%N)
    RUST_LOG=info timeout 120 ./carry/aceapex cat --decoder "$dec" "$1" "$2" 2>>"$log" >/dev/null || rc=1
    ms=$(ms_since "$t0")
    got=$(timeout 120 ./carry/aceapex cat --decoder "$dec" "$1" "$2" 2>>"$log" | md5sum | cut -d' ' -f1)
    say "### $(basename "$1") cat --decoder $dec $2: $ms ms into /dev/null ($(( $(stat -c %s "$3") / 1000 / (ms > 0 ? ms : 1) )) MB/s); md5 $got (original $want)"
    [ "$got" = "$want" ] || rc=1
  done
}
parts="${1:-genome}"
want() { [[ " $parts " == *" $1 "* ]]; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv 2>&1 | tee -a "$log"
say "host cores: $(nproc); memory: $(free -g | awk '/Mem:/ {print $2}') GiB; commit: ${COMMIT:-?}; parts: $parts"
rc=0
unpack_corpus
work=/tmp/gpu-suite
mkdir -p "$work"

if want tests && [ -x carry/libtests ]; then
  run 180 ./carry/libtests engine::gpu --test-threads 1 || rc=1
fi

if want bigpack; then
  in="$work/big-in"
  run 120 ./carry/gen_genomes carry/atha.fa "$in" --files "${BIG_FILES:-10}" --bytes "${BIG_BYTES:-1G}" || rc=1
  say "input: $(du -sb "$in" | cut -f1) bytes in $(ls "$in" | wc -l) files"
  # A cgroup with memory.max = 24 GiB stands for the 24 GiB machine; page cache of the mapped input is charged
  # to it too and reclaimed under pressure, as it would be there.
  cg=/sys/fs/cgroup/acx-pack
  incg=()
  if mkdir -p "$cg" 2>/dev/null && echo $((24 << 30)) >"$cg/memory.max" 2>/dev/null; then
    say "cgroup: $cg memory.max=$(cat "$cg/memory.max")"
    incg=(bash -c 'echo $$ > "$0/cgroup.procs" && exec "$@"' "$cg")
  else
    say "cgroup: not available here; the peak RSS below is the evidence"
  fi
  # Peak RSS of the packer: GNU time where installed, else getrusage through python3.
  if [ -x /usr/bin/time ]; then
    peak=(/usr/bin/time -v)
  else
    peak=(python3 -c 'import resource,subprocess,sys; r=subprocess.call(sys.argv[1:]); print("Maximum resident set size (kbytes): %d" % resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); sys.exit(r)')
  fi
  t0=$(date +%s%N)
  run 430 "${incg[@]}" "${peak[@]}" ./carry/aceapex pack "$in" -o "$work/big.acx" -q || rc=1
  say "pack wall: $(ms_since "$t0") ms"
  [ -f "$cg/memory.peak" ] && say "cgroup memory.peak: $(cat "$cg/memory.peak") bytes"
  [ -f "$cg/memory.events" ] && say "cgroup memory.events: $(tr '\n' ' ' <"$cg/memory.events")"
  run 30 ./carry/aceapex info "$work/big.acx" || rc=1
  t0=$(date +%s%N)
  run 200 ./carry/aceapex verify "$work/big.acx" || rc=1
  say "verify wall: $(ms_since "$t0") ms"
  f="genome$(printf %03d $((${BIG_FILES:-10} - 1))).fa"
  cat_both "$work/big.acx" "big-in/$f" "$in/$f"
  rm -rf "$in"
fi

if want big; then
  in="$work/big-gen"
  run 120 ./carry/gen_genomes carry/atha.fa "$in" --files "${BIG_FILES:-4}" --bytes "${BIG_BYTES:-1100M}" || rc=1
  say "input: $(du -sb "$in" | cut -f1) bytes in $(ls "$in" | wc -l) files"
  t0=$(date +%s%N)
  # shellcheck disable=SC2086 # BIG_PACK_ARGS is a list of options
  run 400 ./carry/aceapex pack ${BIG_PACK_ARGS:---level 3} "$in" -o "$work/big-gen.acx" -q || rc=1
  say "pack wall: $(ms_since "$t0") ms"
  run 30 ./carry/aceapex info "$work/big-gen.acx" || rc=1
  # No whole-stream CPU reference for GBs (every block is checked against the index xxh3; ranges against CPU
  # random access).
  run 300 ./carry/gpubench "$work/big-gen.acx" --no-reference --runs 3 --ranges "${BIG_RANGES:-2000}" --latency 300 \
    --contig 5 --json "$out/json/big-gen.json" || rc=1
  # Full-decode variants by environment (e.g. BIG_VARIANTS="ACEAPEX_GPU_ROUND0_CHUNK_MB=256"): full decode only.
  for v in ${BIG_VARIANTS:-}; do
    run 120 env ${v//,/ } ./carry/gpubench "$work/big-gen.acx" --no-reference --runs 3 --ranges 10 --latency 10 \
      --contig 1 || rc=1
  done
  f="genome$(printf %03d $((${BIG_FILES:-4} - 1))).fa"
  cat_both "$work/big-gen.acx" "big-gen/$f" "$in/$f"
  rm -rf "$in"
fi

if want genome; then
  ./carry/aceapex pack carry/atha.fa -o "$work/atha-genome.acx" -q
  ./carry/aceapex pack --no-genome carry/atha.fa -o "$work/atha-general.acx" -q
  ./carry/aceapex pack carry/fly11 -o "$work/fly11.acx" -q
  for a in atha-genome atha-general fly11; do
    ./carry/aceapex info "$work/$a.acx" | grep -E "ratio|entries" | tee -a "$log"
    ranges=2000; [ "$a" = atha-genome ] && ranges=10000
    run 120 ./carry/gpubench "$work/$a.acx" --runs 3 --ranges "$ranges" --latency 500 --contig 5 \
      --json "$out/json/$a.json" || rc=1
  done
  # Where a seek's device time goes, by stage (events between launches, no CUDA graphs): both seek paths.
  for a in atha-genome atha-general; do
    run 60 env ACEAPEX_GPU_SEEK_PROFILE=1 ./carry/gpubench "$work/$a.acx" --runs 1 --ranges 100 --latency 200 \
      --contig 5 >/dev/null || rc=1
  done
  # Full-decode variants by environment, as BIG_VARIANTS: full decode only, every block still checked.
  for v in ${GENOME_VARIANTS:-}; do
    for a in atha-genome atha-general fly11; do
      run 60 env ${v//,/ } ./carry/gpubench "$work/$a.acx" --runs 3 --ranges 10 --latency 10 --contig 1 || rc=1
    done
  done
  for a in atha-genome atha-general; do cat_both "$work/$a.acx" atha.fa carry/atha.fa; done
fi
if want mount && [ -x carry/aceapex-mount ]; then
  a="$work/atha-genome.acx"
  [ -f "$a" ] || ./carry/aceapex pack carry/atha.fa -o "$a" -q
  want_md5=$(md5sum <carry/atha.fa | cut -d' ' -f1)
  size=$(stat -c %s carry/atha.fa)
  mnt=/tmp/gpu-suite-mnt
  mkdir -p "$mnt"
  for spec in "gpu:" "cpu:" "gpu:fail:3"; do
    dec=${spec%%:*} fault=${spec#*:}
    env ${fault:+ACEAPEX_GPU_FAULT=$fault} ./carry/aceapex-mount "$a" "$mnt" -f -o "decoder=$dec" 2>"$out/mount.err" &
    pid=$!
    for _ in $(seq 1 100); do mountpoint -q "$mnt" && break; sleep 0.1; done
    if ! mountpoint -q "$mnt"; then say "### mount failed: $(head -5 "$out/mount.err")"; kill "$pid"; rc=1; continue; fi
    t0=$(date +%s%N)
    got=$(timeout 120 md5sum <"$mnt/atha.fa" | cut -d' ' -f1)
    say "### mount decoder=$dec fault=$fault: atha.fa md5 $got (original $want_md5) $(ms_since "$t0") ms"
    [ "$got" = "$want_md5" ] || rc=1
    bad=0
    for i in $(seq 1 200); do
      off=$(( (RANDOM * 32768 + RANDOM) % size )); len=$(( 1 + (RANDOM * 7) % 70000 ))
      cmp -s <(dd if="$mnt/atha.fa" bs=65536 skip="$off" count="$len" iflag=skip_bytes,count_bytes 2>/dev/null) \
        <(dd if=carry/atha.fa bs=65536 skip="$off" count="$len" iflag=skip_bytes,count_bytes 2>/dev/null) || bad=$((bad + 1))
    done
    say "### mount decoder=$dec fault=$fault: 200 random ranges, $bad differ"
    [ "$bad" = 0 ] || rc=1
    kill -INT "$pid"; wait "$pid"
    grep -v -i debug "$out/mount.err" | head -4 | sed 's/^/    /' | tee -a "$log"
  done
fi
if want mountseq && [ -x carry/aceapex-mount ] && [ -x carry/nullfs ]; then
  a="$work/atha-genome.acx"
  [ -f "$a" ] || ./carry/aceapex pack carry/atha.fa -o "$a" -q
  mnt=/tmp/gpu-suite-mnt
  mkdir -p "$mnt"
  # seq_read LABEL FILE: one timed dd of FILE after dropping the page cache; prints MB/s and keeps the time in
  # $seq_us (a 30 MB file reads in ~30 ms: milliseconds alone were too coarse for a ratio).
  seq_read() {
    sync; echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || true
    local t0 size; t0=$(date +%s%N); size=$(stat -c %s "$2")
    timeout 300 dd if="$2" of=/dev/null bs=1M status=none || rc=1
    seq_us=$(( ($(date +%s%N) - t0) / 1000 ))
    say "### mountseq $1: $size bytes in $((seq_us / 1000)).$(printf %03d $((seq_us % 1000))) ms = $(( size / (seq_us > 0 ? seq_us : 1) )) MB/s"
  }
  wait_mounted() { for _ in $(seq 1 200); do mountpoint -q "$mnt" && return 0; sleep 0.05; done; return 1; }
  # median_mbs SIZE US...: the median of the runs' MB/s.
  median_mbs() {
    local size=$1; shift
    for us in "$@"; do echo $(( size / (us > 0 ? us : 1) )); done | sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'
  }
  targets=("$a:atha.fa")
  f="genome$(printf %03d $((${BIG_FILES:-4} - 1))).fa"
  [ -f "$work/big-gen.acx" ] && [ "${MOUNTSEQ_BIG:-1}" = 1 ] && targets+=("$work/big-gen.acx:big-gen/$f")
  # The squashfs (zstd) anchor, where make-carry.sh brought squashfuse: atha only (as bench/mount-bench.sh).
  sq() { LD_LIBRARY_PATH="$PWD/carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$@"; }
  if [ -x carry/bin/squashfuse ] && [ -x carry/bin/mksquashfs ]; then
    mkdir -p "$work/sq-in"; cp carry/atha.fa "$work/sq-in/atha.fa"; rm -f "$work/atha.sqfs"
    sq ./carry/bin/mksquashfs "$work/sq-in" "$work/atha.sqfs" -comp zstd -quiet -no-progress >/dev/null || rc=1
  fi
  for t in "${targets[@]}"; do
    arc=${t%%:*} path=${t#*:}
    size=$(./carry/aceapex ls -l "$arc" | awk -v p="$path" '$NF == p {print $(NF-3)}' | head -1)
    declare -A times=()
    for r in $(seq 1 "${MOUNTSEQ_RUNS:-5}"); do
      ./carry/nullfs "$mnt" "${size:-1G}" 2>>"$log" &
      pid=$!
      wait_mounted && seq_read "nullfs ${size}B run $r" "$mnt/null.bin" && times[nullfs]+=" $seq_us"
      fusermount3 -u "$mnt" 2>/dev/null || umount "$mnt"; wait "$pid"
      if [ "$path" = atha.fa ] && [ -f "$work/atha.sqfs" ]; then
        sq ./carry/bin/squashfuse -f "$work/atha.sqfs" "$mnt" 2>>"$log" &
        pid=$!
        wait_mounted && seq_read "squashfuse (zstd) atha.fa run $r" "$mnt/atha.fa" && times[squashfuse]+=" $seq_us"
        fusermount3 -u "$mnt" 2>/dev/null || umount "$mnt"; wait "$pid"
      fi
      # MOUNTSEQ_VARIANTS="VAR=VALUE ...": decoder=gpu again with each variable set (A=1,B=2 sets two).
      for dec in gpu cpu ${MOUNTSEQ_VARIANTS:+$MOUNTSEQ_VARIANTS}; do
        local_env=()
        label=$dec
        case "$dec" in *=*) IFS=, read -r -a local_env <<<"$dec"; dec=gpu ;; esac
        # trace: each stream run logs, per 8 MiB segment and at its end, its decoder time, hand-over time, pacing
        # and the readers' waits (src/fs/stream.rs); the stats line says how many runs the read started.
        # With the trace, the GPU engine's debug lines split each stream call's time (lock, complete decode,
        # copies, checks, sink).
        env "${local_env[@]}" ${MOUNTSEQ_TRACE:+ACEAPEX_LOG=info,aceapex::engine::gpu=debug} \
          ./carry/aceapex-mount "$arc" "$mnt" -f -o "decoder=$dec${MOUNTSEQ_TRACE:+,trace}" 2>>"$log" &
        pid=$!
        wait_mounted && seq_read "decoder=$dec ${local_env[*]} $path run $r" "$mnt/$path" && times[$label]+=" $seq_us"
        python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); print("### mountseq stats:", json.dumps(s["streams"]["runs"]), "fs:", json.dumps({k: s["fs"][k] for k in ("reads", "streamed_bytes", "read_latency")}), "structure:", json.dumps(s["archive_stats"].get("genome_structure")))' "$mnt/.aceapex/stats" 2>&1 | tee -a "$log"
        kill -INT "$pid"; wait "$pid"
      done
    done
    # One line per target: the median MB/s of each row and its ratio to the empty filesystem's median.
    null=$(median_mbs "${size:-1}" ${times[nullfs]:-})
    line="### mountseq summary $path (median of ${MOUNTSEQ_RUNS:-5} fresh runs, MB/s): nullfs $null"
    for k in "${!times[@]}"; do
      [ "$k" = nullfs ] && continue
      m=$(median_mbs "${size:-1}" ${times[$k]})
      line+="; $k $m ($(awk -v a="$m" -v b="$null" 'BEGIN {printf "%.2f", (b > 0 ? a / b : 0)}')x)"
    done
    say "$line"
    unset times
  done
fi
if want faidx && ! [ -x carry/bin/samtools ]; then
  # make-carry.sh carries samtools and bgzip only where both are installed (apt-get install samtools tabix).
  say "### faidx skipped: carry/bin/samtools missing (install samtools and tabix here, then make-carry.sh)"
  rc=1
fi
if want faidx && [ -x carry/bin/samtools ] && [ -x carry/aceapex-mount ]; then
  # Only samtools and bgzip see the carried libraries (the rest of the suite keeps the image's own).
  st() { LD_LIBRARY_PATH="$PWD/carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ./carry/bin/samtools "$@"; }
  a="$work/atha-genome.acx"
  [ -f "$a" ] || ./carry/aceapex pack carry/atha.fa -o "$a" -q
  fx="$work/faidx"
  mkdir -p "$fx"
  cp carry/atha.fa "$fx/atha.fa"
  LD_LIBRARY_PATH="$PWD/carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ./carry/bin/bgzip -@4 -c "$fx/atha.fa" >"$fx/atha.fa.gz"
  st faidx "$fx/atha.fa.gz"
  st faidx "$fx/atha.fa"
  # The same 1000 regions as bench/mount-bench.sh draws from atha (bench/faidx-regions.py, seed 3).
  python3 bench/faidx-regions.py "$fx/atha.fa.fai" "$fx/regions.txt"
  st faidx "$fx/atha.fa" -r "$fx/regions.txt" >"$fx/want.txt" || rc=1
  [ -s "$fx/want.txt" ] || { say "### faidx: samtools gave no output on the original"; rc=1; }
  mnt=/tmp/gpu-suite-faidx
  mkdir -p "$mnt"
  for r in 1 2 3; do
    sync; echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || true
    t0=$(date +%s%N)
    st faidx "$fx/atha.fa.gz" -r "$fx/regions.txt" >"$fx/got-bgzf.txt" || rc=1
    say "### faidx bgzip local run $r: $(ms_since "$t0") ms, $(cmp -s "$fx/got-bgzf.txt" "$fx/want.txt" && echo equal || echo DIFFER)"
    for dec in gpu cpu; do
      sync; echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || true
      ./carry/aceapex-mount "$a" "$mnt" -f -o "decoder=$dec" 2>>"$log" &
      pid=$!
      up=0
      for _ in $(seq 1 200); do mountpoint -q "$mnt" && { up=1; break; }; sleep 0.05; done
      if [ "$up" = 1 ]; then
        t0=$(date +%s%N)
        st faidx "$mnt/atha.fa" -r "$fx/regions.txt" >"$fx/got-$dec.txt" || rc=1
        ms=$(ms_since "$t0")
        same=$(cmp -s "$fx/got-$dec.txt" "$fx/want.txt" && echo equal || echo DIFFER)
        [ "$same" = equal ] || rc=1
        say "### faidx mount decoder=$dec run $r: $ms ms, $same"
        python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); print("### faidx stats:", json.dumps({k: s["fs"][k] for k in ("reads", "read_latency")}))' "$mnt/.aceapex/stats" 2>&1 | tee -a "$log"
      else
        say "### faidx mount decoder=$dec run $r: did not mount"
        rc=1
      fi
      kill -INT "$pid"; wait "$pid"
    done
  done
fi
if want ncu; then
  # Hardware counters of the full decode's kernels (Nsight Compute; the clocks left alone): the archive of the
  # 'big' part (run it first) or NCU_ARCHIVE, kernels matching NCU_KERNELS, NCU_COUNT launches of each, the
  # decode's environment from NCU_ENV ("VAR=VALUE ..."). The report goes to $OUT/ncu.txt.
  a="${NCU_ARCHIVE:-$work/big-gen.acx}"
  # shellcheck disable=SC2086 # NCU_ENV is a list of assignments
  run 400 env ${NCU_ENV:-} ncu --clock-control none --section SpeedOfLight --section WarpStateStats \
    --section Occupancy --section MemoryWorkloadAnalysis --section LaunchStats --section SchedulerStats \
    -k "regex:${NCU_KERNELS:-parse_k|copy_flow}" --launch-count "${NCU_COUNT:-4}" \
    ./carry/gpubench "$a" --no-reference --runs 1 --ranges 0 --latency 0 --contig 0 >"$out/ncu.txt" 2>&1 || rc=1
  grep -E "^  [a-z_0-9]+.*\(|Duration|Registers Per|Achieved Occupancy|Memory Throughput|DRAM Throughput|L2 Cache Throughput|Compute \(SM\) Throughput|Stall|Warp Cycles Per Issued|One or More Eligible" "$out/ncu.txt" | head -150 | tee -a "$log"
fi
if want ab && [ -x carry/base/gpubench ]; then
  for a in atha-genome atha-general fly11 big-gen; do
    [ -f "$work/$a.acx" ] || continue
    ref=(); [ "$a" = big-gen ] && ref=(--no-reference)
    for r in $(seq 1 "${AB_ROUNDS:-2}"); do
      for side in base new; do
        bin=./carry/gpubench; c=${COMMIT:-?}
        [ "$side" = base ] && { bin=./carry/base/gpubench; c=$(cat carry/base/COMMIT); }
        say "### ab $a round $r: $side $c"
        "$bin" "$work/$a.acx" "${ref[@]}" --runs 3 --ranges 10 --latency 10 --contig 1 2>&1 |
          grep -E "median|full decode" | tee -a "$log" || rc=1
      done
    done
  done
fi
say "### suite parts [$parts] rc=$rc"
exit "$rc"
