#!/usr/bin/env bash
# Cost of run jobs (SPEC-checkpoints §4-6): `djshard run` with and without
# checkpointing, and --resume of a job whose final taps are all committed.
#
#   bench/checkpoint_bench.sh [--mb 256] [--workdir DIR] [--outdir DIR] [--shared ../shared]
#                             [--repeat 3] [--threads 2]
#
# Generates gen_corpus.py --mb N --seed 3 (in --workdir, default /tmp), then
# for the recipes demo and refine (bench/recipes) times, best of --repeat
# rounds (the kinds alternate within a round, so noise hits each alike):
#   plain     djshard run, no job
#   off       a job with --checkpoint.enabled false (partitions, no taps)
#   on        a job with the default strategy (every_n_ops, zstd, final tap)
#   on-raw    the same with --checkpoint.compression none (intermediate taps
#             uncompressed; the final tap is never compressed)
#   resume    --resume of a job killed after its last final tap committed
#             (DJSHARD_TEST_KILL_AT=before_export_commit): it rescans the
#             input and concatenates every final tap into the export
# and prints wall seconds, CPU seconds (user + system), MB/s and the ratios
# on/off, on-raw/off and resume/on (of wall time; CPU time in brackets, which
# another process on the machine disturbs less). Outputs and job directories
# go to --outdir (default: beside the corpus in --workdir, on the disk users
# write to; the filesystem is printed).
# Targets (on disk): on/off <= 1.15 (demo), <= 1.08 (refine); resume/on <= 0.20.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
mb=256
workdir=/tmp/djshard-bench
outdir=""
shared="$root/../shared"
repeat=3
threads=2
while [ $# -gt 0 ]; do
  case "$1" in
    --mb) mb=$2; shift 2 ;;
    --workdir) workdir=$2; shift 2 ;;
    --outdir) outdir=$2; shift 2 ;;
    --shared) shared=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    *) echo "usage: $0 [--mb N] [--workdir DIR] [--outdir DIR] [--shared DIR] [--repeat N]" \
         "[--threads N]" >&2
       exit 2 ;;
  esac
done
seed=3 name=ckpt-bench
. "$root/bench/corpus_setup.sh"
bytes=$(stat -c %s "$corpus")
cat "$corpus" >/dev/null

# timed ARGS...: runs djshard, its stderr into $outdir/err, and appends
# "wall cpu" seconds to $outdir/time. Each command starts after a sync (not
# timed), so that none pays for the writeback of the one before.
timed() {
  local TIMEFORMAT='%R %U %S'
  sync
  { time "$bin" "$@" >/dev/null 2>"$outdir/err"; } 2>"$outdir/time.raw" || { fail; }
  awk '{ printf "%.3f %.3f\n", $1, $2 + $3 }' "$outdir/time.raw" >"$outdir/time"
}
# run_kind RECIPE KIND: prints "wall cpu" seconds of one run of that kind.
run_kind() {
  local conf="$root/bench/recipes/$1.yaml" kind=$2
  local out="$outdir/$1.$kind.jsonl" jobs="$outdir/jobs-$1-$kind"
  rm -rf "$out" "$out".* "$jobs"
  local args=(run --config "$conf" --dataset-path "$corpus" --export-path "$out"
              --threads "$threads")
  case "$kind" in
    plain) timed "${args[@]}" ;;
    off) timed "${args[@]}" --work-dir "$jobs" --job_id b --checkpoint.enabled false ;;
    on) timed "${args[@]}" --work-dir "$jobs" --job_id b ;;
    on-raw) timed "${args[@]}" --work-dir "$jobs" --job_id b --checkpoint.compression none ;;
    resume)
      # Not timed: the job, killed once every final tap is committed.
      DJSHARD_TEST_KILL_AT=before_export_commit "$bin" "${args[@]}" --work-dir "$jobs" \
        --job_id b >/dev/null 2>&1 && { echo "the job was not killed" >&2; exit 1; }
      timed "${args[@]}" --work-dir "$jobs" --resume b
      cmp -s "$out" "$outdir/$1.plain.jsonl" || { echo "$1: resumed output differs" >&2; exit 1; }
      ;;
  esac
  if [ "$kind" != plain ]; then
    cmp -s "$out" "$outdir/$1.plain.jsonl" || { echo "$1 $kind: output differs" >&2; exit 1; }
  fi
  [ "$kind" = plain ] || rm -rf "$out" "$out".* "$jobs"
  cat "$outdir/time"
}
fail() { cat "$outdir/err" >&2; exit 1; }
min() { if [ -z "$1" ] || awk -v a="$2" -v b="$1" 'BEGIN{exit !(a<b)}'; then echo "$2"; else echo "$1"; fi; }
kinds="plain off on on-raw resume"

rows=$(wc -l <"$corpus")
printf 'corpus: %s (%.1f MB, %d rows), %d threads, best of %d\n' "$corpus" \
  "$(echo "$bytes / 1000000" | bc -l)" "$rows" "$threads" "$repeat"
printf 'outputs and job dirs: %s (%s)\n\n' "$outdir" "$(df --output=fstype "$outdir" | tail -1)"
printf '%-7s %-8s %8s %8s %9s  %s\n' recipe run seconds cpu-s MB/s "ratio (cpu)"
for recipe in demo refine; do
  declare -A best=() cpu=()
  for _ in $(seq "$repeat"); do
    for kind in $kinds; do
      read -r s c < <(run_kind "$recipe" "$kind")
      best[$kind]=$(min "${best[$kind]:-}" "$s")
      cpu[$kind]=$(min "${cpu[$kind]:-}" "$c")
    done
  done
  rm -f "$outdir/$recipe".*
  for kind in $kinds; do
    s=${best[$kind]}
    c=${cpu[$kind]}
    base=""
    case "$kind" in
      on | on-raw) base=off ;;
      resume) base=on ;;
      off) base=plain ;;
    esac
    ratio=""
    if [ -n "$base" ]; then
      ratio=$(awk -v a="$s" -v b="${best[$base]}" -v ca="$c" -v cb="${cpu[$base]}" -v n="$kind/$base" \
        'BEGIN{printf "%.3f %s (%.3f)", a / b, n, ca / cb}')
    fi
    awk -v r="$recipe" -v k="$kind" -v s="$s" -v c="$c" -v b="$bytes" -v q="$ratio" \
      'BEGIN { printf "%-7s %-8s %8.2f %8.2f %9.1f  %s\n", r, k, s, c, b / 1e6 / s, q }'
  done
  unset best cpu
  echo
done
echo "targets (on disk): on/off <= 1.15 (demo), <= 1.08 (refine); resume/on <= 0.20"
