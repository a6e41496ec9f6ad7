#!/usr/bin/env bash
# Takeover resume of shards (SPEC-checkpoints §7): what a worker that takes
# over a killed shard saves, and what checkpointing costs a worker.
#
#   bench/takeover_bench.sh [--mb 64] [--workdir DIR] [--outdir DIR] [--shared ../shared]
#                           [--repeat 3] [--threads 2] [--partitions 64]
#
# Generates gen_corpus.py --mb N --seed 5 (in --workdir, default /tmp) and
# prepares it as ONE shard with the refine recipe (bench/recipes), then times
# the shard's attempt ("finished <shard> in S s" of the worker), best of
# --repeat rounds:
#   plain     the recipe without partition:/checkpoint: (the shard as one stream)
#   fresh     partition.mode manual, --partitions partitions, checkpoint every_n_ops
#             (default n_ops 5): a first attempt with nothing to resume
#   takeover  the same job after kill -9 of its first worker once 75% of the
#             partitions have their final commit; the next worker takes the
#             stale shard over and computes only the rest
# and prints the ratios fresh/plain (checkpointing overhead in a worker) and
# takeover/fresh (target <= 0.35) of the best times, and takeover/fresh within
# each round with its median (a noisy machine makes rounds differ). Job directories go to --outdir (default: a
# directory beside the corpus, on the disk users write to).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
mb=64
workdir=/tmp/djshard-bench
outdir=""
shared="$root/../shared"
repeat=3
threads=2
partitions=64
while [ $# -gt 0 ]; do
  case "$1" in
    --mb) mb=$2; shift 2 ;;
    --workdir) workdir=$2; shift 2 ;;
    --outdir) outdir=$2; shift 2 ;;
    --shared) shared=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --partitions) partitions=$2; shift 2 ;;
    *) echo "usage: $0 [--mb N] [--workdir DIR] [--outdir DIR] [--shared DIR] [--repeat N]" \
         "[--threads N] [--partitions P]" >&2
       exit 2 ;;
  esac
done
seed=5 name=takeover-bench
. "$root/bench/corpus_setup.sh"
cat "$corpus" >/dev/null

# The recipes: refine as it is, and with one partition set per shard.
{ echo "dataset_path: $corpus"; cat "$root/bench/recipes/refine.yaml"; } >"$outdir/plain.yaml"
{
  echo "dataset_path: $corpus"
  printf 'partition:\n  mode: manual\n  num_of_partitions: %s\n' "$partitions"
  printf 'checkpoint:\n  strategy: every_n_ops\n  keep_after_done: false\n'
  cat "$root/bench/recipes/refine.yaml"
} >"$outdir/ckpt.yaml"
final_op=$(printf '%04d' "$(($(grep -c '^  - ' "$root/bench/recipes/refine.yaml") - 1))")
kill_after=$((partitions * 3 / 4))

prepare() { # RECIPE JOB
  "$bin" prepare --config "$1" --job-dir "$2" --num-shards 1 --lease-secs 1 \
    --heartbeat-secs 0.25 --poll-interval-secs 0.1 >/dev/null 2>&1
}
# attempt_secs LOG: the seconds the worker reports for the shard's attempt.
attempt_secs() { sed -n 's/.*finished part-[0-9-]*of-[0-9]* in \([0-9.]*\) s.*/\1/p' "$1" | tail -1; }

best_plain=""; best_fresh=""; best_take=""; ratios=""
for round in $(seq "$repeat"); do
  job="$outdir/plain-$round"
  prepare "$outdir/plain.yaml" "$job"
  "$bin" worker --job-dir "$job" --threads "$threads" 2>"$outdir/plain.log"
  plain=$(attempt_secs "$outdir/plain.log")
  rm -rf "$job"

  job="$outdir/fresh-$round"
  prepare "$outdir/ckpt.yaml" "$job"
  "$bin" worker --job-dir "$job" --threads "$threads" 2>"$outdir/fresh.log"
  fresh=$(attempt_secs "$outdir/fresh.log")
  rm -rf "$job"

  job="$outdir/take-$round"
  prepare "$outdir/ckpt.yaml" "$job"
  ck="$job/checkpoints/part-00000-of-00001"
  "$bin" worker --job-dir "$job" --threads "$threads" 2>"$outdir/killed.log" &
  pid=$!
  while [ "$(ls "$ck" 2>/dev/null | grep -c "^checkpoint_op_${final_op}_.*commit.json$")" \
    -lt "$kill_after" ]; do
    kill -0 "$pid" 2>/dev/null || { echo "the first worker ended before the kill" >&2; exit 1; }
    sleep 0.005
  done
  kill -9 "$pid"
  wait "$pid" 2>/dev/null || true
  committed=$(ls "$ck" | grep -c "^checkpoint_op_${final_op}_.*commit.json$")
  "$bin" worker --job-dir "$job" --threads "$threads" 2>"$outdir/take.log"
  take=$(attempt_secs "$outdir/take.log")
  resumed=$(python3 -c "import json,glob; a=json.load(open(sorted(glob.glob('$job/attempts/*/0002-*/attempt.json'))[0])); print(a['partitions']['resumed'])")
  rm -rf "$job"
  echo "round $round: plain ${plain} s, fresh ${fresh} s, takeover ${take} s" \
    "(killed after ${committed}/${partitions} final commits, resumed ${resumed})" >&2
  ratios="$ratios $(python3 -c "print($take / $fresh)")"
  best_plain=$(python3 -c "print(min(x for x in [$plain, ${best_plain:-1e9}]))")
  best_fresh=$(python3 -c "print(min(x for x in [$fresh, ${best_fresh:-1e9}]))")
  best_take=$(python3 -c "print(min(x for x in [$take, ${best_take:-1e9}]))")
done
python3 - "$best_plain" "$best_fresh" "$best_take" "$partitions" $ratios <<'EOF'
import statistics, sys
plain, fresh, take, parts = float(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
ratios = [float(r) for r in sys.argv[5:]]
print("| attempt | seconds | ratio |")
print("| --- | --- | --- |")
print(f"| plain shard (no partitions) | {plain:.2f} | |")
print(f"| fresh, {parts} partitions, every_n_ops | {fresh:.2f} | {fresh / plain:.2f} of plain |")
print(f"| takeover after 75% committed | {take:.2f} | {take / fresh:.2f} of fresh (target <= 0.35) |")
print(f"\ntakeover/fresh within each round: {', '.join(f'{r:.2f}' for r in ratios)}; "
      f"median {statistics.median(ratios):.2f}")
EOF
