#!/usr/bin/env bash
# Builds djshard and runs the demo job end to end on the bundled data:
# prepare data/demo-dataset.jsonl with configs/demo.yaml, start two local
# workers, merge, verify, and print the PASS line.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/build.sh"
bin="$root/build/bin/djshard"
job="$root/build/demo/demo-job"
rm -rf "$job"
mkdir -p "$(dirname "$job")"
"$bin" version
"$bin" prepare --config "$root/configs/demo.yaml" --job-dir "$job" --num-shards 4 \
  --poll-interval-secs 1
echo
echo "Two workers drain the job (each would run on its own node):"
"$bin" worker --job-dir "$job" --threads 1 &
first=$!
"$bin" worker --job-dir "$job" --threads 1
wait "$first"
"$bin" status --job-dir "$job" --all
"$bin" merge --job-dir "$job" --overwrite
"$bin" verify --job-dir "$job"
