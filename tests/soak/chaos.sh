#!/usr/bin/env bash
# Soak test of elastic workers under random kill -9 and SIGTERM (not part of
# ctest: it runs for minutes).
#
#   tests/soak/chaos.sh [--shards 60] [--rows-per-shard 4000] [--workers 6] [--rounds 0]
#                       [--workdir DIR]
#
# Prepares a job of --shards shards, keeps --workers workers running with
# a 2 s lease, and every 0.1-0.3 s kills a random one (kill -9 four times out
# of five, SIGTERM otherwise) and starts a new one in its place, until the job
# is done. Then it checks what a user relies on: merge succeeds, the merged
# sha256 equals a single-process `djshard run` of the same recipe on the job's
# normalized input, every shard
# has exactly one done record and nothing else is in state/done, no lock is left, no attempt is still marked
# running, and verify passes.
# --rounds N repeats the whole test N times (0: once). Exit 0 when all hold.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bin="$root/build/bin/djshard"
shards=60
rows_per_shard=4000
workers=6
rounds=0
workdir=/tmp/djshard-chaos
while [ $# -gt 0 ]; do
  case "$1" in
    --shards) shards=$2; shift 2 ;;
    --rows-per-shard) rows_per_shard=$2; shift 2 ;;
    --workers) workers=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --workdir) workdir=$2; shift 2 ;;
    *) echo "usage: $0 [--shards N] [--rows-per-shard N] [--workers N] [--rounds N]" \
         "[--workdir DIR]" >&2
       exit 2 ;;
  esac
done
[ -x "$bin" ] || { echo "build djshard first: scripts/build.sh" >&2; exit 2; }

fail() { echo "FAIL: $*" >&2; exit 1; }

one_round() {
  rm -rf "$workdir"
  mkdir -p "$workdir"
  cd "$workdir"
  # Rows with work for the mappers and filters, some of them dropped.
  python3 - "$shards" "$rows_per_shard" <<'PY' >data.jsonl
import json, random, sys
random.seed(int(sys.argv[1]))
words = ["data", "shard\t", "node\u3000", "lease", "x" * 40, "https://ex.com/a", "a@b.org"]
for i in range(int(sys.argv[1]) * int(sys.argv[2])):
    text = " ".join(random.choice(words) for _ in range(random.randint(0, 60)))
    print(json.dumps({"id": i, "text": text, "meta": {"n": i % 7}}))
PY
  cat >recipe.yaml <<'YAML'
process:
  - whitespace_normalization_mapper:
  - clean_links_mapper:
  - clean_email_mapper:
  - words_num_filter:
      min_num: 3
  - character_repetition_filter:
      rep_len: 5
      max_ratio: 0.8
YAML
  "$bin" prepare --config recipe.yaml --dataset-path data.jsonl --job-dir job \
    --num-shards "$shards" >/dev/null
  # The reference: one process over the job's normalized input (prepare writes
  # records compact), in shard order.
  cat job/shards/*.jsonl >normalized.jsonl
  "$bin" run --config recipe.yaml --dataset-path normalized.jsonl --export-path reference.jsonl \
    --threads 1 >/dev/null 2>&1
  local -a pids=()
  start_worker() {
    "$bin" worker --job-dir job --lease-secs 2 --heartbeat-secs 1 --poll-interval-secs 1 \
      --threads 1 --max-retries 1000 >>workers.log 2>&1 &
    pids+=($!)
  }
  for _ in $(seq "$workers"); do start_worker; done
  local kills=0 terms=0 deadline=$((SECONDS + 600))
  records() { find job/state/done -name '*.json' | wc -l; }
  while [ "$(records)" -lt "$shards" ]; do
    [ $SECONDS -lt $deadline ] || fail "the job did not finish in 600 s"
    sleep "0.$((RANDOM % 3 + 1))"
    local k=$((RANDOM % ${#pids[@]}))
    if kill -0 "${pids[$k]}" 2>/dev/null; then
      if [ $((RANDOM % 5)) -eq 0 ]; then
        kill -TERM "${pids[$k]}" 2>/dev/null || true
        terms=$((terms + 1))
      else
        kill -KILL "${pids[$k]}" 2>/dev/null || true
        kills=$((kills + 1))
      fi
      wait "${pids[$k]}" 2>/dev/null || true
    fi
    unset 'pids[k]'
    pids=("${pids[@]}")
    start_worker
  done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  [ "$(records)" -eq "$shards" ] || fail "done records: $(records)"
  [ -z "$(ls job/state/locks)" ] || fail "locks left: $(ls job/state/locks)"
  local litter
  litter=$(find job/state/done job/state/failed -type f ! -name '*.json')
  [ -z "$litter" ] || fail "files other than records in state/: $litter"
  [ -z "$(ls job/state/failed)" ] || fail "failed shards: $(ls job/state/failed)"
  local running
  running=$(grep -l '"status": "running"' job/attempts/*/*/attempt.json 2>/dev/null || true)
  [ -z "$running" ] || fail "attempts still marked running: $running"
  "$bin" merge --job-dir job --output merged.jsonl >/dev/null 2>&1 || fail "merge"
  "$bin" verify --job-dir job >/dev/null 2>&1 || fail "verify"
  local want got attempts
  want=$(sha256sum <reference.jsonl | cut -d' ' -f1)
  got=$(sha256sum <merged.jsonl | cut -d' ' -f1)
  [ "$want" = "$got" ] || fail "merged sha256 $got != single run $want"
  attempts=$(find job/attempts -mindepth 2 -maxdepth 2 -type d | wc -l)
  echo "PASS: $shards shards, $kills kill -9, $terms SIGTERM, $attempts attempts;" \
    "merged $(wc -l <merged.jsonl) rows, sha256 equals the single run"
  cd - >/dev/null
}

one_round
for _ in $(seq 2 "$rounds"); do one_round; done
