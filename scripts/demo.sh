#!/usr/bin/env bash
# Builds djshard and runs the demo job on the bundled data: prepare the job
# directory from configs/demo.yaml, then show its status and where the shards are.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/build.sh"
bin="$root/build/bin/djshard"
job="$root/build/demo/demo-job"
rm -rf "$job"
mkdir -p "$(dirname "$job")"
"$bin" version
"$bin" prepare --config "$root/configs/demo.yaml" --job-dir "$job" --num-shards 4
set +e
"$bin" status --job-dir "$job" --all
code=$?
set -e
# status exits 1 while shards are pending: that is the expected state here.
if [ "$code" -ne 1 ]; then echo "demo: unexpected status exit code $code" >&2; exit 1; fi
echo
echo "Shards are in $job/shards:"
ls -l "$job/shards"
echo
echo "The same recipe on one machine (djshard run):"
"$bin" run --config "$root/configs/demo.yaml" --export-path "$root/build/demo/demo-processed.jsonl"
