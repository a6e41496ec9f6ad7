#!/usr/bin/env bash
# Per-operator speed of djshard against Data-Juicer 1.4.3's own Python operator
# code, one thread each, for the text operators of the published recipes.
#
#   bench/ops_bench.sh --dj DATA_JUICER_CHECKOUT [--djshard BIN] [--mb 8]
#                      [--workdir DIR] [--only OP] [--shared ../shared]
#
# DATA_JUICER_CHECKOUT: an extracted Data-Juicer 1.4.3 tree (data_juicer/ops,
# data_juicer/utils), e.g.
#   git -C /work/.mirror/modelscope+data-juicer/repo archive HEAD data_juicer | tar -x -C /tmp/dj-src
# BIN defaults to build/bin/djshard.
#
# Corpora (in --workdir, on the real disk: default /var/tmp): web =
# gen_corpus.py --mb N --seed 3; latex = the same rows wrapped as LaTeX
# sources (\documentclass, \newcommand/\def macros used in the text, % comments,
# \section headers, \bibliography) for the four LaTeX mappers; zh = two rows in
# three replaced by Simplified Chinese text, for chinese_convert_mapper (s2t)
# and remove_non_chinese_character_mapper. The operator table and the corpus
# generators are in bench/ops_bench_dj.py.
# For each operator, in one run and alternating the two sides (djshard,
# Data-Juicer, djshard, Data-Juicer, djshard) so that noise from other tenants
# hits both alike:
# - djshard run --threads 1 with a one-operator recipe, best of 3: the wall
#   time of the whole command (start, JSONL parse, the operator, writing the
#   output to --workdir) and the operator's own seconds (OUT.stats.json);
# - bench/ops_bench_dj.py run (Debian's /usr/bin/python3), best of 2: only
#   the operator calls, batches of 1000 rows as Data-Juicer's framework makes
#   them, JSON load and the dataset layer left out.
# MB/s = corpus file bytes / seconds on both sides; the ratio is Data-Juicer's
# time over djshard's wall time (and over its operator time). The second
# Data-Juicer run also checks djshard's output: the same texts (mappers), the
# same kept ids (filters). `uptime` before and after: over a load of 2 on this
# 2-core VM the figures come from a loaded machine.
# Target: djshard >= 20x Data-Juicer per core for every one of these operators.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dj=""
bin="$root/build/bin/djshard"
mb=8
workdir=/var/tmp/djshard-ops-bench
only=""
shared="$root/../shared"
usage() {
  echo "usage: $0 --dj DATA_JUICER_CHECKOUT [--djshard BIN] [--mb N] [--workdir DIR] [--only OP] [--shared DIR]" >&2
  exit 2
}
while [ $# -gt 0 ]; do
  case "$1" in
    --dj) dj=$2; shift 2 ;;
    --djshard) bin=$2; shift 2 ;;
    --mb) mb=$2; shift 2 ;;
    --workdir) workdir=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --shared) shared=$2; shift 2 ;;
    *) usage ;;
  esac
done
[ -n "$dj" ] || usage
[ -f "$dj/data_juicer/ops/base_op.py" ] || { echo "no Data-Juicer tree at $dj" >&2; exit 2; }
[ -x "$bin" ] || { echo "djshard not found at $bin (scripts/build.sh, or pass --djshard)" >&2; exit 2; }
gen="$shared/data/gen_corpus.py"
[ -f "$gen" ] || { echo "gen_corpus.py not found at $gen (pass --shared)" >&2; exit 2; }
py=/usr/bin/python3
djpy="$root/bench/ops_bench_dj.py"
assets="$root/tests/data/assets"

mkdir -p "$workdir/out" "$workdir/recipes" "$workdir/tokenizer"
web="$workdir/web-${mb}mb-seed3.jsonl"
[ -s "$web" ] || $py "$gen" "$web" --mb "$mb" --seed 3 >&2
for kind in latex zh; do
  f="$workdir/$kind-${mb}mb-seed3.jsonl"
  [ -s "$f" ] || $py "$djpy" corpus "$kind" "$web" "$f"
done
tok="$workdir/tokenizer"
[ -s "$tok/tokenizer.json" ] ||
  zstd -q -dcf "$root/tests/data/tokenizers/mistral-bpe/tokenizer.json.zst" >"$tok/tokenizer.json"

now() { date +%s.%N; }
min() { if [ -z "$1" ] || awk -v a="$2" -v b="$1" 'BEGIN{exit !(a<b)}'; then echo "$2"; else echo "$1"; fi; }

echo "load before: $(uptime)"
echo "djshard: $bin ($("$bin" version 2>/dev/null | head -1))"
echo "Data-Juicer: $dj; Python: $($py -V 2>&1)"
echo
results=()
while read -r op kind; do
  [ -z "$only" ] || [ "$only" = "$op" ] || continue
  corpus="$workdir/$kind-${mb}mb-seed3.jsonl"
  [ "$kind" = web ] && corpus=$web
  bytes=$(stat -c %s "$corpus")
  rows=$(wc -l <"$corpus")
  cat "$corpus" >/dev/null
  conf="$workdir/recipes/$op.yaml"
  $py "$djpy" recipe "$op" --assets "$assets" --tokenizer "$tok" >"$conf"
  out="$workdir/out/$op.jsonl"
  ds_wall="" ds_op="" ds_kept="" dj_s="" dj_kept="" check="" skipped=""
  for round in 1 2 3; do
    rm -f "$out" "$out.stats.json" "$out.errors.jsonl"
    t0=$(now)
    "$bin" run --config "$conf" --dataset-path "$corpus" --export-path "$out" --threads 1 \
      >"$workdir/ds.log" 2>"$workdir/ds.err" || { cat "$workdir/ds.log" "$workdir/ds.err" >&2; exit 1; }
    t1=$(now)
    ds_wall=$(min "$ds_wall" "$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.4f", b - a}')")
    # the operator's own seconds, unrounded, from the run's stats file
    ds_op=$(min "$ds_op" "$($py -c 'import json, sys
print("%.4f" % json.load(open(sys.argv[1]))["operators"][0]["seconds"])' "$out.stats.json")")
    ds_kept=$(awk '/^Kept /{print $2}' "$workdir/ds.log")
    [ "$round" = 3 ] && break
    [ -n "$skipped" ] && continue
    extra=()
    [ "$round" = 2 ] && extra=(--check "$out")
    $py "$djpy" run "$dj" "$op" "$corpus" --assets "$assets" --tokenizer "$tok" "${extra[@]}" \
      >"$workdir/dj.log" 2>"$workdir/dj.err" || { cat "$workdir/dj.log" "$workdir/dj.err" >&2; exit 1; }
    if grep -q '^skipped' "$workdir/dj.log"; then
      skipped=$(sed -n 's/^skipped: //p' "$workdir/dj.log")
      continue
    fi
    read -r _ s _ _ _ k < <(grep '^seconds' "$workdir/dj.log")
    dj_s=$(min "$dj_s" "$s")
    dj_kept=$k
    [ "$round" = 2 ] && check=$(sed -n 's/^check: //p' "$workdir/dj.log")
  done
  line=$(awk -v op="$op" -v b="$bytes" -v w="$ds_wall" -v o="$ds_op" -v d="$dj_s" -v rows="$rows" \
    -v kd="$ds_kept" -v kj="$dj_kept" 'BEGIN {
      mw = b / 1e6 / w; mo = (o > 0) ? sprintf("%.1f", b / 1e6 / o) : "-"
      if (d == "") { md = "-"; r = "-"; ro = "-"; met = "n/a" }
      else { md = sprintf("%.2f", b / 1e6 / d); r = sprintf("%.1f", d / w)
             ro = (o > 0) ? sprintf("%.1f", d / o) : "-"; met = (d / w >= 20) ? "yes" : "no" }
      printf "%-46s %8.1f %8s %8s %7s %7s %4s %6s/%-6s %s\n", op, mw, mo, md, r, ro, met, kd, (kj == "" ? "-" : kj), rows }')
  results+=("$line")
  echo "$line"
  [ -n "$skipped" ] && echo "    Data-Juicer side skipped: $skipped"
  [ -n "$check" ] && echo "    check: $check"
  rm -f "$out" "$out.stats.json" "$out.errors.jsonl"
done < <($py "$djpy" list)
echo
echo "load after: $(uptime)"
echo
printf '%-46s %8s %8s %8s %7s %7s %4s %13s %s\n' operator "ds MB/s" "ds op" "DJ MB/s" ratio "ratio/op" ">=20" "kept ds/DJ" rows
printf '%s\n' "${results[@]}"
echo "ds MB/s: djshard run, whole command, 1 thread, best of 3; ds op: its operator's own seconds;"
echo "DJ MB/s: Data-Juicer's operator calls only, best of 2; ratio = DJ time / djshard wall time."
echo "target: >= 20x per core for every operator"
load=$(awk '{print $1}' /proc/loadavg)
awk -v l="$load" 'BEGIN{exit !(l > 2)}' && echo "NOTE: load average $load > 2: figures from a loaded machine"
exit 0
