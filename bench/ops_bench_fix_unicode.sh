#!/usr/bin/env bash
# fix_unicode_mapper throughput on one thread: djshard (`djshard run --threads 1`
# on a recipe with only this operator) versus Data-Juicer's operator code with
# the real ftfy 6.3.1 in Python, on clean text (gen_corpus.py) and on the same
# rows turned into mojibake. Reports MB/s of input text and checks that both
# give the same texts.
#
#   bench/ops_bench_fix_unicode.sh --dj DJ_ROOT --ftfy FTFY_ROOT [--workdir DIR]
#       [--shared ../shared] [--mb 10]
#
# DJ_ROOT: a Data-Juicer 1.4.3 source tree (data_juicer/ops/mapper/
# fix_unicode_mapper.py); FTFY_ROOT: a python-ftfy v6.3.1 checkout (needs
# python3-wcwidth). Both figures are CPU seconds (user + sys), which a shared
# machine's other tenants disturb less than wall time: djshard's for the whole
# run (start, reading, parsing and writing JSON included, best of 3),
# Python's for the operator's calls alone (time.process_time).
# Target: djshard at least 20x Data-Juicer per core on both corpora.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
workdir=/tmp/djshard-fix-unicode-bench
shared="$root/../shared"
mb=10
dj="" ftfy=""
while [ $# -gt 0 ]; do
  case "$1" in
    --dj) dj=$2; shift 2 ;;
    --ftfy) ftfy=$2; shift 2 ;;
    --workdir) workdir=$2; shift 2 ;;
    --shared) shared=$2; shift 2 ;;
    --mb) mb=$2; shift 2 ;;
    *) echo "usage: $0 --dj DIR --ftfy DIR [--workdir DIR] [--shared DIR] [--mb N]" >&2; exit 2 ;;
  esac
done
[ -n "$dj" ] && [ -n "$ftfy" ] || { echo "--dj and --ftfy are required" >&2; exit 2; }
bin="$root/build/bin/djshard"
[ -x "$bin" ] || { echo "build djshard first" >&2; exit 2; }
py=/usr/bin/python3
mkdir -p "$workdir"
clean="$workdir/clean-${mb}mb.jsonl"
moji="$workdir/mojibake-${mb}mb.jsonl"
[ -s "$clean" ] || python3 "$shared/data/gen_corpus.py" --mb "$mb" --seed 5 "$clean" >&2
[ -s "$moji" ] || FTFY="$ftfy" "$py" "$root/bench/ops_bench_fix_unicode.py" mojibake "$clean" "$moji"
cat > "$workdir/recipe.yaml" <<'YAML'
np: 1
text_keys: 'text'
process:
  - fix_unicode_mapper:
YAML
text_mb() {
  "$py" -c 'import json,sys; print(sum(len(json.loads(l)["text"].encode()) for l in open(sys.argv[1], encoding="utf-8")) / 1e6)' "$1"
}
printf '| corpus | MB of text | runner | CPU seconds | MB/s | same texts |\n| --- | --- | --- | --- | --- | --- |\n'
for corpus in "$clean" "$moji"; do
  name=$(basename "$corpus" .jsonl)
  size=$(text_mb "$corpus")
  out="$workdir/$name.djshard.jsonl"
  best=""
  for _ in 1 2 3; do
    rm -f "$out" "$out".*
    /usr/bin/time -f '%U %S' -o "$workdir/time.log" "$bin" run --config "$workdir/recipe.yaml" \
      --dataset-path "$corpus" --export-path "$out" --threads 1 >/dev/null 2>"$workdir/djshard.err" \
      || { cat "$workdir/djshard.err" >&2; exit 1; }
    s=$(awk '{ printf "%.2f", $1 + $2 }' "$workdir/time.log")
    if [ -z "$best" ] || awk -v a="$s" -v b="$best" 'BEGIN { exit !(a < b) }'; then best=$s; fi
  done
  pyres=$("$py" "$root/bench/ops_bench_fix_unicode.py" ftfy "$dj" "$ftfy" "$corpus" \
    "$workdir/$name.ftfy.jsonl")
  pys=$(sed -E 's/.*seconds=([0-9.]+).*/\1/' <<<"$pyres")
  same=$("$py" -c '
import json, sys
a = [json.loads(l)["text"] for l in open(sys.argv[1], encoding="utf-8")]
b = [json.loads(l)["text"] for l in open(sys.argv[2], encoding="utf-8")]
print("yes" if a == b else "NO (%d of %d differ)" % (sum(x != y for x, y in zip(a, b)), len(a)))
' "$out" "$workdir/$name.ftfy.jsonl")
  for row in "djshard 1 thread|$best" "Data-Juicer + ftfy 6.3.1|$pys"; do
    printf '| %s | %.1f | %s | %s | %.2f | %s |\n' "$name" "$size" "${row%%|*}" "${row#*|}" \
      "$(awk -v m="$size" -v s="${row#*|}" 'BEGIN { print m / s }')" "$same"
  done
done
