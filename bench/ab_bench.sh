#!/usr/bin/env bash
# Two djshard binaries, A and B, on the same corpus and recipe, alternated,
# each command started after a sync and a second's pause (so that none pays
# for the writeback of the one before): wall, user and system seconds of
#   1. prepare (64 shards), worker --threads 2, merge, one after another;
#   2. dlc --nodes 1 --threads 2 --num-shards 64 and run --threads 2.
#
#   bench/ab_bench.sh --a OLD_BINARY --b NEW_BINARY --corpus FILE
#                     [--recipe demo|refine] [--rounds 2] [--workdir /var/tmp/djshard-ab]
#
# Put the work directory on the disk users have (not tmpfs). Prints one line
# per command, then the best of the rounds for each binary and command.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
a="" b="" corpus="" recipe=demo rounds=2 workdir=/var/tmp/djshard-ab
while [ $# -gt 0 ]; do
  case "$1" in
    --a) a=$2; shift 2 ;;
    --b) b=$2; shift 2 ;;
    --corpus) corpus=$2; shift 2 ;;
    --recipe) recipe=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --workdir) workdir=$2; shift 2 ;;
    *) echo "usage: $0 --a BIN --b BIN --corpus FILE [--recipe demo|refine] [--rounds N] [--workdir DIR]" >&2; exit 2 ;;
  esac
done
[ -x "$a" ] && [ -x "$b" ] && [ -f "$corpus" ] || { echo "need --a, --b (binaries) and --corpus (a file)" >&2; exit 2; }
rec="$root/bench/recipes/$recipe.yaml"
mkdir -p "$workdir"
log="$workdir/times.txt"
: >"$log"
# timed LABEL BINARY ARGS...: one command after a sync, its times appended to the log.
timed() {
  local label=$1 bin=$2
  shift 2
  sync
  sleep 1
  /usr/bin/time -f "$label %e %U %S" -a -o "$log" "$bin" "$@" >/dev/null 2>"$workdir/stderr" ||
    { echo "$label failed:" >&2; tail -5 "$workdir/stderr" >&2; exit 1; }
  tail -1 "$log"
}
for round in $(seq "$rounds"); do
  for side in a b; do
    bin=$a
    [ "$side" = b ] && bin=$b
    rm -rf "$workdir/job" "$workdir/dlc" "$workdir/.dlc."* "$workdir/run.jsonl"*
    timed "$side prepare" "$bin" prepare --config "$rec" --dataset-path "$corpus" \
      --job-dir "$workdir/job" --num-shards 64
    timed "$side worker" "$bin" worker --job-dir "$workdir/job" --threads 2
    timed "$side merge" "$bin" merge --job-dir "$workdir/job"
    rm -rf "$workdir/job"
    timed "$side dlc" "$bin" dlc --job-dir "$workdir/dlc" --config "$rec" --dataset-path "$corpus" \
      --nodes 1 --num-shards 64 --threads 2 --run-id "ab-$round-$side" --poll-interval-secs 0.2
    rm -rf "$workdir/dlc" "$workdir/.dlc."*
    timed "$side run" "$bin" run --config "$rec" --dataset-path "$corpus" \
      --export-path "$workdir/run.jsonl" --threads 2
  done
done
rm -rf "$workdir/run.jsonl"*
echo "best of $rounds (wall s, user s, system s), $recipe, $(basename "$corpus"):"
awk '{ k = $1 " " $2; if (!(k in w) || $3 < w[k]) { w[k] = $3; u[k] = $4; s[k] = $5 } }
     END { for (k in w) printf "  %-12s %6.2f %6.2f %6.2f\n", k, w[k], u[k], s[k] }' "$log" | sort
