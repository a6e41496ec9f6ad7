#!/usr/bin/env bash
# CPU speed of query_sentiment_detection_mapper (SPEC-models, issue target):
# a distilroberta-sized classifier (6 layers, 768 wide, seeded random weights,
# the real RoBERTa tokenizer) on 2,000 queries, `djshard run --threads 2`
# versus eager PyTorch (Debian's python3-torch; tools/tiny_models.py's plain
# PyTorch implementation) with the same weights, the same token ids (from
# `djshard tokenize`), batch size 64 and 2 threads, both on OpenBLAS.
# Reports rows/s, peak RSS and the ratio, and checks that labels are identical
# and scores within 1e-5.
#
#   bench/model_bench.sh [--workdir DIR] [--rows 2000] [--threads 2]
#
# Target: djshard >= 1.2x eager PyTorch.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
workdir=/tmp/djshard-model-bench
rows=2000
threads=2
while [ $# -gt 0 ]; do
  case "$1" in
    --workdir) workdir=$2; shift 2 ;;
    --rows) rows=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    *) echo "usage: $0 [--workdir DIR] [--rows N] [--threads N]" >&2; exit 2 ;;
  esac
done
bin="$root/build/bin/djshard"
[ -x "$bin" ] || { echo "build it first: scripts/build.sh" >&2; exit 2; }
. "$root/bench/model_bench_input.sh"
cat >"$workdir/recipe.yaml" <<YAML
process:
  - query_sentiment_detection_mapper:
      hf_model: $model
      zh_to_en_hf_model: null
      batch_size: 64
YAML
/usr/bin/time -f "%e %M" -o "$workdir/djshard.time" "$bin" run --config "$workdir/recipe.yaml" \
  --dataset-path "$workdir/queries.jsonl" --export-path "$workdir/djshard.jsonl" \
  --threads "$threads" --device cpu >/dev/null
read -r dj_secs dj_rss <"$workdir/djshard.time"
# The same ids for eager PyTorch.
"$bin" tokenize --tokenizer "$model" --text-key query "$workdir/queries.jsonl" |
  $py -c 'import json,sys
for line in sys.stdin: print(json.dumps({"ids": json.loads(line)["ids"]}))' >"$workdir/ids.jsonl"
OPENBLAS_NUM_THREADS=$threads /usr/bin/time -f "%e %M" -o "$workdir/eager.time" \
  $py "$root/tools/tiny_models.py" reference --model "$model" --ids "$workdir/ids.jsonl" \
  --batch-size 64 --threads "$threads" --time >"$workdir/eager.jsonl" 2>"$workdir/eager.log"
read -r eager_secs eager_rss <"$workdir/eager.time"
cat "$workdir/eager.log"
$py - "$workdir" "$rows" "$dj_secs" "$dj_rss" "$eager_secs" "$eager_rss" <<'PY'
import json, re, sys
work, rows = sys.argv[1], int(sys.argv[2])
dj_secs, dj_rss, eager_secs, eager_rss = map(float, sys.argv[3:7])
dj = [json.loads(l)["__dj__meta__"] for l in open(work + "/djshard.jsonl")]
ref = [json.loads(l) for l in open(work + "/eager.jsonl")]
same = sum(a["query_sentiment_label"] == b["label"] for a, b in zip(dj, ref))
err = max(abs(a["query_sentiment_label_score"] - b["score"]) for a, b in zip(dj, ref))
log = open(work + "/eager.log").read()
fwd = re.search(r"([0-9.]+) rows/s", log)
eager_fwd = float(fwd.group(1)) if fwd else float("nan")
print("| run | rows/s | seconds | peak RSS MB |")
print("|---|---|---|---|")
print("| djshard run (load, read, tokenize, model, write) | %.1f | %.2f | %.0f |" % (rows / dj_secs, dj_secs, dj_rss / 1024))
print("| eager PyTorch, whole process | %.1f | %.2f | %.0f |" % (rows / eager_secs, eager_secs, eager_rss / 1024))
print("| eager PyTorch, forward passes only | %.1f | | |" % eager_fwd)
print("ratio djshard / eager forward-only: %.2fx (target >= 1.2x)" % ((rows / dj_secs) / eager_fwd))
print("labels identical: %d/%d; largest score difference: %.2g (target <= 1e-5)" % (same, len(dj), err))
PY
