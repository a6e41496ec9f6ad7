#!/usr/bin/env bash
# Benchmark of `djshard prepare` against one sha256sum pass over the same file.
#
#   bench/prepare_bench.sh [--mb 1024] [--shards 64] [--workdir DIR] [--gen PATH/gen_corpus.py]
#
# Generates a synthetic corpus with gen_corpus.py (default ../shared/data/gen_corpus.py
# beside the checkout), warms the page cache, then in one run times sha256sum and
# `djshard prepare --num-shards N`, and prints MB/s, peak RSS, the ratio, and the
# peak space the job took in its filesystem during prepare (sampled every 20 ms
# with du) against the normalized input.
# Targets: prepare <= 4x sha256sum time, peak RSS < 200 MB, peak space <= 1.02x.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
mb=1024
shards=64
workdir=/tmp/djshard-bench
gen="$root/../shared/data/gen_corpus.py"
while [ $# -gt 0 ]; do
  case "$1" in
    --mb) mb=$2; shift 2 ;;
    --shards) shards=$2; shift 2 ;;
    --workdir) workdir=$2; shift 2 ;;
    --gen) gen=$2; shift 2 ;;
    *) echo "usage: $0 [--mb N] [--shards N] [--workdir DIR] [--gen gen_corpus.py]" >&2; exit 2 ;;
  esac
done
bin="$root/build/bin/djshard"
[ -x "$bin" ] || { echo "build djshard first: scripts/build.sh" >&2; exit 2; }
[ -f "$gen" ] || { echo "gen_corpus.py not found at $gen (pass --gen)" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "/usr/bin/time is needed (scripts/setup.sh installs it)" >&2; exit 2; }

mkdir -p "$workdir"
corpus="$workdir/corpus-${mb}mb.jsonl"
if [ ! -f "$corpus" ]; then
  python3 "$gen" "$corpus" --mb "$mb" --seed 1 >&2
fi
recipe="$workdir/bench.yaml"
printf 'process:\n  - whitespace_normalization_mapper:\n  - text_length_filter:\n' >"$recipe"
bytes=$(stat -c %s "$corpus")
cat "$corpus" >/dev/null  # warm the page cache for both contenders

measure() {  # measure LABEL CMD...: prints "seconds peak_kb"
  local log="$workdir/time.log"
  /usr/bin/time -f '%e %M' -o "$log" "$@" >/dev/null
  cat "$log"
}

read -r sha_s sha_kb < <(measure sha256sum "$corpus")
rm -rf "$workdir/prep"
mkdir -p "$workdir/prep"  # the job and its staging directory, alone, for du
( peak=0
  while [ ! -f "$workdir/prep/done" ]; do
    used=$(du -sb "$workdir/prep" 2>/dev/null | cut -f1)
    [ "${used:-0}" -gt "$peak" ] && peak=$used
    sleep 0.02
  done
  echo "$peak" >"$workdir/prep/peak" ) &
sampler=$!
read -r prep_s prep_kb < <(measure "$bin" prepare --config "$recipe" --dataset-path "$corpus" \
  --job-dir "$workdir/prep/job" --num-shards "$shards")
touch "$workdir/prep/done"
wait "$sampler"
peak=$(cat "$workdir/prep/peak")
read -r rows normalized < <(python3 -c "import json;m=json.load(open('$workdir/prep/job/manifest.json'));print(m['total_rows'], m['total_size_bytes'])")
fstype=$(df --output=fstype "$workdir" | tail -1)
rm -rf "$workdir/prep"

awk -v b="$bytes" -v rows="$rows" -v ss="$sha_s" -v ps="$prep_s" -v pk="$prep_kb" -v n="$shards" \
    -v peak="$peak" -v norm="$normalized" -v fs="$fstype" 'BEGIN {
  mb = b / 1e6
  printf "input: %.1f MB, %d rows, %d shards\n", mb, rows, n
  printf "sha256sum:       %6.2f s  %7.1f MB/s\n", ss, mb / ss
  printf "djshard prepare: %6.2f s  %7.1f MB/s  %9.0f rows/s  peak RSS %.1f MB\n", ps, mb / ps, rows / ps, pk / 1024
  printf "ratio prepare/sha256sum: %.2fx (target <= 4x); RSS target < 200 MB\n", ps / ss
  printf "peak space of the job during prepare (%s): %.1f MB, %.3fx the normalized input (target <= 1.02x)\n", fs, peak / 1e6, peak / norm
}'
