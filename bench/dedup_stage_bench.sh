#!/usr/bin/env bash
# The dedup stage of an elastic job, as one command: `djshard dlc --nodes 1
# --threads 2` with the refine recipe plus a deduplicator, against the same job
# without it, on a gen_corpus.py corpus (--mb, seed 3) in 64 shards, rounds
# alternated, best of each. Target: the job with document_simhash_deduplicator
# costs at most 1.5x the job without it. Also checks that the merged output of
# the dedup job equals `djshard run` over the job's normalized shards.
# gen_corpus.py writes no duplicates; with --dup-percent P, P% more rows are
# inserted, each a copy of an earlier row picked at random (fixed seed), so
# that the deduplicator removes rows all over every shard.
#
#   bench/dedup_stage_bench.sh [--workdir DIR] [--shared ../shared] [--mb 1024] [--rounds 2]
#       [--dedup document_simhash_deduplicator] [--dup-percent 0]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
workdir=/var/tmp/djshard-dedup-stage-bench
shared="$root/../shared"
mb=1024
rounds=2
dedup=document_simhash_deduplicator
dup_percent=0
while [ $# -gt 0 ]; do
  case "$1" in
    --workdir) workdir=$2; shift 2 ;;
    --shared) shared=$2; shift 2 ;;
    --mb) mb=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --dedup) dedup=$2; shift 2 ;;
    --dup-percent) dup_percent=$2; shift 2 ;;
    *) echo "usage: $0 [--workdir DIR] [--shared DIR] [--mb N] [--rounds N] [--dedup OP] [--dup-percent P]" >&2; exit 2 ;;
  esac
done
bin="$root/build/bin/djshard"
[ -x "$bin" ] || { echo "build djshard first: scripts/build.sh" >&2; exit 2; }
mkdir -p "$workdir"
echo "filesystem of $workdir: $(df -T "$workdir" | awk 'NR == 2 { print $2 }')"
now() { date +%s.%N; }
least() { awk -v f="$1" -v a="$2" -v b="$3" 'BEGIN { n = b - a; if (f != "" && f < n) n = f; print n }'; }

corpus="$workdir/c$mb.jsonl"
[ -f "$corpus" ] || python3 "$shared/data/gen_corpus.py" "$corpus" --mb "$mb" --seed 3 >/dev/null
if [ "$dup_percent" != 0 ]; then
  with_dups="$workdir/c$mb-dup$dup_percent.jsonl"
  [ -f "$with_dups" ] || python3 - "$corpus" "$with_dups" "$dup_percent" <<'PY'
import random, sys
src, dst, percent = sys.argv[1], sys.argv[2], float(sys.argv[3])
rng = random.Random(3)
with open(src, "rb") as f:
    lines = f.readlines()
out, seen = [], []
for line in lines:
    out.append(line)
    seen.append(line)
    if rng.random() < percent / 100:
        out.append(seen[rng.randrange(len(seen))])
with open(dst, "wb") as f:
    f.writelines(out)
PY
  corpus=$with_dups
fi
plain="$root/bench/recipes/refine.yaml"
with="$workdir/refine-dedup.yaml"
cp "$plain" "$with"
echo "  - $dedup:" >>"$with"

# job RECIPE NAME: one dlc run, started after a sync (so that it does not pay
# for the previous job's writeback); prints its wall seconds, peak RSS (KB)
# and CPU seconds (user + system).
job() {
  rm -rf "$workdir/$2" "$workdir/.$2."*
  sync
  local t0 rss cpu
  t0=$(now)
  /usr/bin/time -f '%M %U %S' -o "$workdir/rss" "$bin" dlc --job-dir "$workdir/$2" --config "$1" \
    --dataset-path "$corpus" --nodes 1 --num-shards 64 --threads 2 --run-id "bench" \
    --poll-interval-secs 0.2 >/dev/null 2>&1
  read -r rss cpu < <(tail -1 "$workdir/rss" | awk '{ print $1, $2 + $3 }')
  echo "$(awk -v a="$t0" -v b="$(now)" 'BEGIN { print b - a }') $rss $cpu"
}
best_plain="" best_with="" rss_plain=0 rss_with=0 cpu_plain="" cpu_with=""
for rep in $(seq "$rounds"); do
  read -r s r c < <(job "$plain" plain-job)
  best_plain=$(least "$best_plain" 0 "$s"); rss_plain=$(( r > rss_plain ? r : rss_plain ))
  cpu_plain=$(least "$cpu_plain" 0 "$c")
  read -r s r c < <(job "$with" dedup-job)
  best_with=$(least "$best_with" 0 "$s"); rss_with=$(( r > rss_with ? r : rss_with ))
  cpu_with=$(least "$cpu_with" 0 "$c")
  echo "round $rep: without ${best_plain} s (${cpu_plain} CPU-s), with ${best_with} s (${cpu_with} CPU-s) (best so far)"
done
rows_in=$(python3 -c "import json;print(json.load(open('$workdir/dedup-job/manifest.json'))['total_rows'])")
rows_plain=$(wc -l <"$workdir/plain-job/merged.jsonl")
rows_with=$(wc -l <"$workdir/dedup-job/merged.jsonl")
awk -v mb="$(stat -c %s "$corpus")" -v a="$best_plain" -v b="$best_with" -v ra="$rss_plain" -v rb="$rss_with" \
    -v n="$rows_in" -v ka="$rows_plain" -v kb="$rows_with" -v op="$dedup" \
    -v ca="$cpu_plain" -v cb="$cpu_with" 'BEGIN {
  printf "dlc --nodes 1 --threads 2, 64 shards, %.0f MB, %d rows\n", mb / 1e6, n
  printf "  refine:                %7.2f s  %6.1f MB/s  %8.0f rows/s  peak RSS %d MB  kept %d rows\n", a, mb / 1e6 / a, n / a, ra / 1024, ka
  printf "  refine + %s: %7.2f s  %6.1f MB/s  %8.0f rows/s  peak RSS %d MB  kept %d rows\n", op, b, mb / 1e6 / b, n / b, rb / 1024, kb
  printf "  ratio %.2fx (target <= 1.5x); CPU seconds %.2f / %.2f: %.2fx\n", b / a, cb, ca, cb / ca
}'
# The dedup job's output is what `djshard run` makes of the same normalized rows.
cat "$workdir"/dedup-job/shards/*.jsonl >"$workdir/normalized.jsonl"
"$bin" run --config "$with" --dataset-path "$workdir/normalized.jsonl" \
  --export-path "$workdir/run.jsonl" --threads 2 >/dev/null 2>&1
if cmp -s "$workdir/run.jsonl" "$workdir/dedup-job/merged.jsonl"; then
  echo "  merged output equals djshard run's: yes"
else
  echo "  merged output equals djshard run's: NO" >&2
  exit 1
fi
rm -rf "$workdir/plain-job" "$workdir/dedup-job" "$workdir"/.plain-job.* "$workdir"/.dedup-job.* \
  "$workdir/normalized.jsonl" "$workdir/run.jsonl"*
