#!/usr/bin/env bash
# Deduplicator signatures on one thread: djshard's Signer::Sign (the disabled
# unit test DedupBench.SignaturesPerCpuSecond, best of 3) versus Data-Juicer's
# compute_hash run from its own files (bench/ops_bench_dedup_dj.py), on the
# same gen_corpus.py rows. Reports MB/s of text per CPU second and the ratio.
# Only the per-record signature is timed; grouping is not.
#
#   bench/ops_bench_dedup.sh --dj DJ_ROOT --simhash SIMHASH_DIR [--workdir DIR]
#       [--shared ../shared] [--mb 3]
#
# DJ_ROOT: a Data-Juicer 1.4.3 source tree; SIMHASH_DIR: a directory holding
# simhash-pybind's `simhash` package (see tests/data/ops-vectors-README.md).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
workdir=/tmp/djshard-dedup-bench
shared="$root/../shared"
mb=3
dj="" simhash=""
while [ $# -gt 0 ]; do
  case "$1" in
    --dj) dj=$2; shift 2 ;;
    --simhash) simhash=$2; shift 2 ;;
    --workdir) workdir=$2; shift 2 ;;
    --shared) shared=$2; shift 2 ;;
    --mb) mb=$2; shift 2 ;;
    *) echo "usage: $0 --dj DIR --simhash DIR [--workdir DIR] [--shared DIR] [--mb N]" >&2; exit 2 ;;
  esac
done
[ -n "$dj" ] && [ -n "$simhash" ] || { echo "--dj and --simhash are required" >&2; exit 2; }
tests="$root/build/tests/djshard_unit_tests"
[ -x "$tests" ] || { echo "build djshard_unit_tests first" >&2; exit 2; }
mkdir -p "$workdir"
corpus="$workdir/corpus-${mb}mb.jsonl"
[ -f "$corpus" ] || /usr/bin/python3 "$shared/data/gen_corpus.py" "$corpus" --mb "$mb" --seed 1 >&2
sp="$root/tests/data/sentencepiece/en.sp.model"
variants=(
  'document_deduplicator'
  'document_deduplicator:{"lowercase":true,"ignore_non_character":true}'
  'document_simhash_deduplicator'
  'document_simhash_deduplicator:{"tokenization":"character"}'
  'document_simhash_deduplicator:{"tokenization":"punctuation"}'
  'document_minhash_deduplicator'
  'document_minhash_deduplicator:{"tokenization":"character"}'
  "document_minhash_deduplicator:{\"tokenization\":\"sentencepiece\",\"tokenizer_model\":\"$sp\"}"
)
joined=$(IFS=';'; echo "${variants[*]}")
DJSHARD_DEDUP_BENCH_INPUT="$corpus" DJSHARD_DEDUP_BENCH_VARIANTS="$joined" \
  "$tests" --gtest_also_run_disabled_tests --gtest_filter='DedupBench.*' | grep ' MB/s$' \
  > "$workdir/djshard.txt"
/usr/bin/python3 "$root/bench/ops_bench_dedup_dj.py" "$dj" "$simhash" "$corpus" "${variants[@]}" \
  > "$workdir/dj.txt"
printf '%-70s %12s %12s %8s\n' variant "djshard MB/s" "DJ MB/s" ratio
paste -d'\t' "$workdir/djshard.txt" "$workdir/dj.txt" | while IFS=$'\t' read -r ours theirs; do
  name=$(echo "$ours" | awk '{print $1, $2}')
  a=$(echo "$ours" | awk '{print $(NF-1)}')
  b=$(echo "$theirs" | awk '{print $(NF-1)}')
  printf '%-70s %12s %12s %8.1f\n' "${name:0:70}" "$a" "$b" "$(echo "$a / $b" | bc -l)"
done
