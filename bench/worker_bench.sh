#!/usr/bin/env bash
# Benchmarks of elastic workers on this machine (2 workers, 1 executor thread each).
#
#   bench/worker_bench.sh [--workdir DIR] [--shared ../shared] [--mb 1024] [--skip-e2e]
#
# 1. Per-shard overhead: 2,000 shards of 20 rows; reports shards/s for both
#    workers together and the median claim-to-done time of a shard.
#    Target: >= 200 shards/s in total.
# 2. End to end: a gen_corpus.py corpus (--mb, seed 3) in 64 shards with the
#    refine recipe; prepare, 2 workers and merge versus one
#    `djshard run --threads 2` on the same input. Target: elastic overhead <= 10%.
#    The merged output must equal the single run's output byte for byte.
# 3. The whole elastic job as one command: `djshard dlc --nodes 1 --threads 2`
#    (prepare, a worker, verified merge) versus `djshard run --threads 2` on the
#    same input and recipe, for refine and demo, beside the physical floor
#    (reading the input once and writing as many bytes once, fsynced).
#    Target (refine): dlc <= 1.3x run.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
workdir=/tmp/djshard-worker-bench
shared="$root/../shared"
mb=1024
e2e=1
while [ $# -gt 0 ]; do
  case "$1" in
    --workdir) workdir=$2; shift 2 ;;
    --shared) shared=$2; shift 2 ;;
    --mb) mb=$2; shift 2 ;;
    --skip-e2e) e2e=0; shift ;;
    *) echo "usage: $0 [--workdir DIR] [--shared DIR] [--mb N] [--skip-e2e]" >&2; exit 2 ;;
  esac
done
bin="$root/build/bin/djshard"
[ -x "$bin" ] || { echo "build djshard first: scripts/build.sh" >&2; exit 2; }
mkdir -p "$workdir"
now() { date +%s.%N; }
# least BEST START END: the smaller of BEST (empty: none yet) and END - START.
least() { awk -v f="$1" -v a="$2" -v b="$3" 'BEGIN { n = b - a; if (f != "" && f < n) n = f; print n }'; }
# Two workers (one executor thread each, as two nodes would) drain job dir $1.
two_workers() {
  "$bin" worker --job-dir "$1" --threads 1 2>/dev/null &
  local first=$!
  "$bin" worker --job-dir "$1" --threads 1 2>/dev/null
  wait "$first"
}

# --- 1. per-shard overhead ---------------------------------------------------
small="$workdir/small.jsonl"
python3 - "$small" <<'PY'
import json, sys
with open(sys.argv[1], "w") as f:
    for i in range(40000):
        f.write(json.dumps({"id": i, "text": "row %d with a little text" % i}, separators=(",", ":")) + "\n")
PY
printf 'process:\n  - whitespace_normalization_mapper:\n  - text_length_filter:\n      min_len: 1\n' >"$workdir/small.yaml"
rm -rf "$workdir/small-job"
"$bin" prepare --config "$workdir/small.yaml" --dataset-path "$small" --job-dir "$workdir/small-job" \
  --num-shards 2000 --poll-interval-secs 1 >/dev/null
t0=$(now)
two_workers "$workdir/small-job"
t1=$(now)
python3 - "$workdir/small-job" "$t0" "$t1" <<'PY'
import datetime, glob, json, os, statistics, sys
job, t0, t1 = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
def ts(s):
    return datetime.datetime.strptime(s, "%Y-%m-%dT%H:%M:%S.%fZ").timestamp()
spans, owners = [], set()
for path in glob.glob(os.path.join(job, "state/done/*.json")):
    d = json.load(open(path))
    attempt = json.load(open(os.path.join(job, os.path.dirname(d["output_path"]), "attempt.json")))
    spans.append(ts(d["completed_at"]) - ts(attempt["claimed_at"]))
    owners.add(d["pid"])
n = len(spans)
print("per-shard overhead: %d shards of 20 rows, %d workers: %.2f s, %.0f shards/s in total (target >= 200)"
      % (n, len(owners), t1 - t0, n / (t1 - t0)))
print("claim-to-done per shard: median %.1f ms, p90 %.1f ms"
      % (statistics.median(spans) * 1e3, sorted(spans)[int(0.9 * n)] * 1e3))
PY
rm -rf "$workdir/small-job"

[ "$e2e" = 1 ] || exit 0

# --- 2. end to end -----------------------------------------------------------
gen="$shared/data/gen_corpus.py"
[ -f "$gen" ] || { echo "gen_corpus.py not found at $gen (pass --shared)" >&2; exit 2; }
corpus="$workdir/corpus-${mb}mb-seed3.jsonl"
[ -f "$corpus" ] || python3 "$gen" "$corpus" --mb "$mb" --seed 3 >&2
recipe="$root/bench/recipes/refine.yaml"
cat "$corpus" >/dev/null
# The reference: one process, 2 threads, on the input as prepare normalizes it
# (the job's shards concatenated), so that the bytes can be compared.
rm -rf "$workdir/job" "$workdir/single.jsonl"*
t0=$(now)
"$bin" prepare --config "$recipe" --dataset-path "$corpus" --job-dir "$workdir/job" --num-shards 64 \
  --poll-interval-secs 1 >/dev/null
prep=$(awk -v a="$t0" -v b="$(now)" 'BEGIN{print b - a}')
# Workers and the single run alternate, best of 3 each: other tenants of this
# machine add noise of 10-20% to single measurements.
work="" merge="" single=""
for rep in 1 2 3; do
  # Back to the freshly prepared state: no attempts, no records.
  rm -rf "$workdir/job/attempts/"* "$workdir/job/state/done/"* "$workdir/job/state/locks/"* \
    "$workdir/job/merged.jsonl" "$workdir/job/merge.json"
  t1=$(now)
  two_workers "$workdir/job"
  t2=$(now)
  "$bin" merge --job-dir "$workdir/job" --overwrite >/dev/null
  t3=$(now)
  rm -f "$workdir/single.jsonl"*
  "$bin" run --config "$recipe" --dataset-path "$workdir/job/shards" --export-path "$workdir/single.jsonl" \
    --threads 2 >/dev/null
  t4=$(now)
  read -r work merge single < <(awk -v a="$t1" -v b="$t2" -v c="$t3" -v d="$t4" -v w="$work" -v m="$merge" -v s="$single" 'BEGIN {
    nw = b - a; nm = c - b; ns = d - c
    if (w != "" && w < nw) nw = w; if (m != "" && m < nm) nm = m; if (s != "" && s < ns) ns = s
    print nw, nm, ns }')
done
same=no
cmp -s "$workdir/job/merged.jsonl" "$workdir/single.jsonl" && same=yes
awk -v prep="$prep" -v work="$work" -v merge="$merge" -v single="$single" -v mb="$(stat -c %s "$corpus")" -v same="$same" 'BEGIN {
  printf "end to end (%.0f MB, 64 shards, refine): prepare %.2f s, 2 workers %.2f s, merge %.2f s\n", mb / 1e6, prep, work, merge
  printf "djshard run --threads 2 on the same normalized input: %.2f s\n", single
  printf "elastic overhead of the worker phase vs run: %+.1f%% (target <= 10%%)\n", work / single * 100 - 100
  printf "with merge: %+.1f%%; with prepare and merge: %+.1f%%\n", \
    (work + merge) / single * 100 - 100, (prep + work + merge) / single * 100 - 100
  printf "merged output identical to the single run: %s\n", same
}'
rm -rf "$workdir/job" "$workdir/single.jsonl"*

# --- 3. the whole job as one command --------------------------------------------
floor=""
for rep in 1 2 3; do
  rm -f "$workdir/floor.jsonl"
  t0=$(now)
  cat "$corpus" >"$workdir/floor.jsonl"
  sync "$workdir/floor.jsonl"
  floor=$(least "$floor" "$t0" "$(now)")
done
rm -f "$workdir/floor.jsonl"
for name in refine demo; do
  rec="$root/bench/recipes/$name.yaml"
  dlc="" single=""
  for rep in 1 2 3; do
    rm -rf "$workdir/dlc-job" "$workdir/.dlc-job."* "$workdir/single.jsonl"*
    t0=$(now)
    "$bin" dlc --job-dir "$workdir/dlc-job" --config "$rec" --dataset-path "$corpus" --nodes 1 \
      --num-shards 64 --threads 2 --run-id "bench-$rep" --poll-interval-secs 0.2 >/dev/null 2>&1
    t1=$(now)
    "$bin" run --config "$rec" --dataset-path "$corpus" --export-path "$workdir/single.jsonl" \
      --threads 2 >/dev/null
    dlc=$(least "$dlc" "$t0" "$t1")
    single=$(least "$single" "$t1" "$(now)")
  done
  awk -v name="$name" -v dlc="$dlc" -v single="$single" -v floor="$floor" -v mb="$(stat -c %s "$corpus")" 'BEGIN {
    printf "whole job (%.0f MB, 64 shards, %s): djshard dlc --nodes 1 --threads 2 %.2f s (%.0f MB/s), run --threads 2 %.2f s: %.2fx run (target for refine <= 1.3x)\n", \
      mb / 1e6, name, dlc, mb / 1e6 / dlc, single, dlc / single
    printf "physical floor (read the input once, write it once, fsync): %.2f s; dlc is %.1fx the floor, run %.1fx\n", \
      floor, dlc / floor, single / floor
  }'
done
rm -rf "$workdir/dlc-job" "$workdir/.dlc-job."* "$workdir/single.jsonl"*
