#!/usr/bin/env bash
# Reference shards and the parts layout on this machine's disk.
#
#   bench/reference_bench.sh [--workdir DIR] [--shared ../shared] [--mb 1024] [--workers 4]
#                            [--rounds 2] [--instances 4]
#
# 1. Bytes each phase moves, as a fraction of the corpus (a gen_corpus.py
#    corpus, --mb, seed 3, refine recipe, 64 shards): `prepare`, each of
#    --workers workers (one executor thread each) and `merge`, with
#    `--shards copy` and the default file layout, then with `--shards reference
#    --layout parts`. Read + written is rchar + wchar of /proc/<pid>/io: the
#    process is run by a shell that prints its own io afterwards, which holds
#    the reaped child's counters. Targets (issue): merge <= 0.02 with parts;
#    prepare <= 0.35 for the busiest instance (part 3: a prepare split over them).
# 2. The whole job as one command: `dlc --nodes 1 --threads 2`, with copy shards
#    and the file layout and with `--shards reference --layout parts`, against
#    `run --threads 2`, refine and demo, best of --rounds alternated rounds.
#    Targets (reference/parts): <= 1.10x (refine), <= 1.6x (demo).
#    (Part 1 checks the bytes: run keeps the corpus's JSON spacing, a job
#    writes normalized records, so run's output is not the comparison.)
# 3. --instances `dlc` instances (default 4) on their own hostnames (UTS
#    namespaces: run as root), one thread each, 64 shards, refine: read +
#    written per instance and phase (bench/dlc_instances_io.py), with
#    `--shards reference --layout parts` (targets: busiest instance <= 0.35 in
#    prepare, <= 0.02 in merge), `--shards reference --layout file` (merge
#    <= 0.35) and `--shards copy --layout file` (the instances write the shards).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
workdir=/tmp/djshard-reference-bench
shared="$root/../shared"
mb=1024
workers=4
rounds=2
instances=4
while [ $# -gt 0 ]; do
  case "$1" in
    --workdir) workdir=$2; shift 2 ;;
    --shared) shared=$2; shift 2 ;;
    --mb) mb=$2; shift 2 ;;
    --workers) workers=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --instances) instances=$2; shift 2 ;;
    *) echo "usage: $0 [--workdir DIR] [--shared DIR] [--mb N] [--workers N] [--rounds N] [--instances N]" >&2; exit 2 ;;
  esac
done
bin="$root/build/bin/djshard"
[ -x "$bin" ] || { echo "build djshard first: scripts/build.sh" >&2; exit 2; }
gen="$shared/data/gen_corpus.py"
[ -f "$gen" ] || { echo "gen_corpus.py not found at $gen (pass --shared)" >&2; exit 2; }
mkdir -p "$workdir"
echo "filesystem of $workdir: $(df -T "$workdir" | awk 'NR == 2 { print $2 }')"
corpus="$workdir/corpus-${mb}mb-seed3.jsonl"
[ -f "$corpus" ] || python3 "$gen" "$corpus" --mb "$mb" --seed 3 >&2
size=$(stat -c %s "$corpus")
now() { date +%s.%N; }
least() { awk -v f="$1" -v a="$2" -v b="$3" 'BEGIN { n = b - a; if (f != "" && f < n) n = f; print n }'; }
# io LABEL CMD...: runs CMD in a shell that then prints its io counters (the
# reaped CMD's included); prints LABEL, seconds and the fraction of the corpus.
io() {
  local label=$1
  shift
  local t0
  t0=$(now)
  local counters
  counters=$(sh -c '"$@" >/dev/null 2>&1; cat /proc/$$/io' sh "$@")
  awk -v label="$label" -v a="$t0" -v b="$(now)" -v size="$size" '
    /^rchar:/ { r = $2 } /^wchar:/ { w = $2 }
    END { printf "  %-34s %6.2f s  read %7.1f MB  written %7.1f MB  (read + written) / corpus %.3f\n",
          label, b - a, r / 1e6, w / 1e6, (r + w) / size }' <<<"$counters"
}

# --- 1. bytes per phase ---------------------------------------------------------
recipe="$root/bench/recipes/refine.yaml"
for mode in "copy file" "reference parts"; do
  set -- $mode
  job="$workdir/job-$1"
  rm -rf "$job" "$job.merged"*
  echo "--shards $1 --layout $2 ($(awk -v s="$size" 'BEGIN { printf "%.0f MB", s / 1e6 }'), 64 shards, refine, $workers workers):"
  io "prepare" "$bin" prepare --config "$recipe" --dataset-path "$corpus" --job-dir "$job" \
    --num-shards 64 --shards "$1" --layout "$2" --poll-interval-secs 0.2
  pids=()
  logs=()
  for w in $(seq 1 "$workers"); do
    logs+=("$workdir/worker-$w.io")
    (io "worker $w" "$bin" worker --job-dir "$job" --threads 1 >"$workdir/worker-$w.io") &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p"; done
  cat "${logs[@]}"
  rm -f "${logs[@]}"
  out="$job.merged"
  [ "$2" = file ] && out="$job.merged.jsonl"
  io "merge" "$bin" merge --job-dir "$job" --output "$out" --layout "$2"
  du -sb "$job" | awk -v s="$size" '{ printf "  job directory after the job: %.1f MB (%.3f of the corpus)\n", $1 / 1e6, $1 / s }'
done
a=$(cat "$workdir/job-copy.merged.jsonl" | sha256sum)
b=$(python3 -c 'import json,sys; [sys.stdout.buffer.write(open(sys.argv[1] + "/" + p["file"], "rb").read()) for p in json.load(open(sys.argv[1] + "/_manifest.json"))["parts"]]' "$workdir/job-reference.merged" | sha256sum)
echo "parts concatenated equal the copy job's merged file: $([ "$a" = "$b" ] && echo yes || echo NO)"
rm -rf "$workdir/job-copy" "$workdir/job-reference" "$workdir/job-copy.merged.jsonl"* "$workdir/job-reference.merged"

# --- 2. the whole job -----------------------------------------------------------
# dlc with the default copy shards and file layout, then reference shards and
# parts, then run, alternated; best of --rounds.
# Each timed command starts with nothing left to write back (`fresh`, untimed):
# the 3 GB a copy job writes would otherwise land in the next one's fsyncs.
fresh() {
  rm -rf "$workdir/dlc-job" "$workdir/.dlc-job."* "$workdir/single.jsonl"*
  sync
}
dlc_job() {
  "$bin" dlc --job-dir "$workdir/dlc-job" --config "$1" --dataset-path "$corpus" --nodes 1 \
    --num-shards 64 --threads 2 --run-id "bench" --poll-interval-secs 0.2 "${@:2}" >/dev/null 2>&1
}
for name in refine demo; do
  rec="$root/bench/recipes/$name.yaml"
  copy="" ref="" single=""
  for rep in $(seq 1 "$rounds"); do
    fresh
    t0=$(now)
    dlc_job "$rec"
    copy=$(least "$copy" "$t0" "$(now)")
    fresh
    t0=$(now)
    dlc_job "$rec" --shards reference --layout parts
    ref=$(least "$ref" "$t0" "$(now)")
    fresh
    t0=$(now)
    "$bin" run --config "$rec" --dataset-path "$corpus" --export-path "$workdir/single.jsonl" \
      --threads 2 >/dev/null
    single=$(least "$single" "$t0" "$(now)")
  done
  awk -v name="$name" -v copy="$copy" -v ref="$ref" -v single="$single" -v mb="$size" 'BEGIN {
    printf "whole job (%.0f MB, 64 shards, %s): run --threads 2 %.2f s; dlc --nodes 1 --threads 2: copy/file %.2f s (%.2fx run), reference/parts %.2f s (%.2fx run)\n", \
      mb / 1e6, name, single, copy, copy / single, ref, ref / single
  }'
done
rm -rf "$workdir/dlc-job" "$workdir/.dlc-job."* "$workdir/single.jsonl"*

# --- 3. every instance prepares and merges -------------------------------------
for mode in "reference parts" "reference file" "copy file"; do
  set -- $mode
  python3 "$root/bench/dlc_instances_io.py" --bin "$bin" --recipe "$recipe" --corpus "$corpus" \
    --workdir "$workdir" --instances "$instances" --shards 64 --threads 1 -- \
    --shards "$1" --layout "$2"
done
