# Shared by the device scripts (bench/gpu/run.sh, session9.sh): the output folder, the log, `say`, and `run`, which
# runs one step under a time limit with its output in the log and its exit status and time noted. Sourced.
set -uo pipefail
out="${OUT:-/tmp/gpu-out}"
mkdir -p "$out/json"
log="$out/device.log"
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:/usr/local/nvidia/lib64:${LD_LIBRARY_PATH:-}"
say() { echo "$@" | tee -a "$log"; }
run() {  # run LIMIT_S CMD...: one step, its output in the log, its exit status and time noted
  local limit=$1; shift
  say "### $* (limit ${limit}s)"
  local t0=$SECONDS
  timeout "$limit" "$@" 2>&1 | tee -a "$log"
  local rc=${PIPESTATUS[0]}
  say "### rc=$rc in $((SECONDS - t0)) s"
  return "$rc"
}
# seek_profile LABEL ARCHIVE_NAME ROUND CMD...: one gpubench run (CMD, e.g. `./carry/gpubench /tmp/gpu-suite/a.acx`
# or `env VAR=1 ./carry/base/gpubench ...`) with the seek profile on, 2000 ranges checked against the CPU bytes;
# the log keeps its resident-seek stages and checks under "### LABEL ARCHIVE_NAME round ROUND" (session 25's
# A/B rounds of the resident chase).
seek_profile() {
  say "### $1 $2 round $3"; shift 3
  env ACEAPEX_GPU_SEEK_PROFILE=1 "$@" --runs 1 --ranges 2000 --latency 300 --contig 5 2>&1 |
    grep -E "resident|FAIL|error|mismatch|equal" | tee -a "$log"
}
# gpu_libtests [VAR=VALUE...]: the lib tests of the GPU engine (`libtests engine::gpu`) with those variables set,
# the log keeping their summary and any failure.
gpu_libtests() {
  run 120 env "$@" ./carry/libtests engine::gpu --test-threads 1 | grep -E "test result|FAIL|panick"
}
# unpack_corpus: carry/ holds the corpus compressed (make-carry.sh); unpacks it here once.
unpack_corpus() {
  [ -f carry/atha.fa ] || { [ -f carry/atha.fa.gz ] && gzip -dc carry/atha.fa.gz >carry/atha.fa; }
  local f
  for f in carry/fly11/*.gz; do [ -e "$f" ] && gzip -d "$f"; done
}
# seek_archives: packs /tmp/gpu-suite/{atha-genome,atha-general,fly11}.acx from carry/ where the suite's genome
# part has not (the archives the seek_profile A/B rounds of sessions 25 and 26 compare on).
seek_archives() {
  unpack_corpus
  mkdir -p /tmp/gpu-suite
  [ -f /tmp/gpu-suite/atha-genome.acx ] || ./carry/aceapex pack carry/atha.fa -o /tmp/gpu-suite/atha-genome.acx -q
  [ -f /tmp/gpu-suite/atha-general.acx ] || ./carry/aceapex pack --no-genome carry/atha.fa -o /tmp/gpu-suite/atha-general.acx -q
  [ -f /tmp/gpu-suite/fly11.acx ] || ./carry/aceapex pack carry/fly11 -o /tmp/gpu-suite/fly11.acx -q
}
# lane_archives K...: packs /tmp/gpu-suite/atha-kK.acx, atha_chr1 with K rANS lanes (`aceapex pack --lanes K`),
# where not there yet (session 28).
lane_archives() {
  unpack_corpus
  mkdir -p /tmp/gpu-suite
  local k
  for k in "$@"; do
    [ -f "/tmp/gpu-suite/atha-k$k.acx" ] ||
      ./carry/aceapex pack --lanes "$k" carry/atha.fa -o "/tmp/gpu-suite/atha-k$k.acx" -q
  done
}
# one_lane_archives: packs /tmp/gpu-suite/{atha-genome,atha-general,fly11}-k1.acx, the seek archives with one rANS
# lane (`aceapex pack --lanes 1`; format v7's default is two), and logs both sizes (session 35).
one_lane_archives() {
  seek_archives
  local a
  for a in atha-genome atha-general fly11; do
    case $a in
      atha-genome) src=(carry/atha.fa) ;;
      atha-general) src=(--no-genome carry/atha.fa) ;;
      fly11) src=(carry/fly11) ;;
    esac
    ./carry/aceapex pack --lanes 1 "${src[@]}" -o "/tmp/gpu-suite/$a-k1.acx" -q
    say "### $a: $(stat -c %s "/tmp/gpu-suite/$a.acx") bytes with two lanes, $(stat -c %s "/tmp/gpu-suite/$a-k1.acx") with one"
  done
}
# seek_ab ROUNDS LABEL=CMD...: ROUNDS rounds of seek_profile over the seek archives, the variants in turn within
# each archive (CMD is split into words, e.g. "NEW-bucket4=env ACEAPEX_GPU_TOKEN_BUCKET_LOG=4 ./carry/gpubench").
seek_ab() {
  local rounds=$1 r a v; shift
  for r in $(seq "$rounds"); do
    for a in atha-genome atha-general fly11; do
      # shellcheck disable=SC2086  # the command's words
      for v in "$@"; do seek_profile "${v%%=*}" "$a" "$r" ${v#*=} "/tmp/gpu-suite/$a.acx"; done
    done
  done
}
# full_ab ROUNDS LABEL=CMD...: ROUNDS rounds of the full decode (gpubench, every timed run checked against the
# index xxh3; few seeks) over the seek archives, the variants in turn within each archive (CMD as in seek_ab, e.g.
# "maps=env ACEAPEX_GPU_RESOLVE=maps ./carry/gpubench"); the log keeps the breakdown lines under
# "### LABEL ARCHIVE_NAME full round ROUND" (session 27's resolvers). FULL_ARCHIVES names other archives of
# /tmp/gpu-suite (session 28: atha packed with K lanes).
full_ab() {
  local rounds=$1 r a v; shift
  for r in $(seq "$rounds"); do
    for a in ${FULL_ARCHIVES:-atha-genome atha-general fly11}; do
      for v in "$@"; do
        say "### ${v%%=*} $a full round $r"
        # shellcheck disable=SC2086  # the command's words
        ${v#*=} "/tmp/gpu-suite/$a.acx" --runs 5 --ranges 10 --latency 10 --contig 1 2>&1 |
          grep -E "full decode|entropy_only|parse_no|parse_with|^  full|resolve|chase|FAIL|wrong|rror" | tee -a "$log"
      done
    done
  done
}
