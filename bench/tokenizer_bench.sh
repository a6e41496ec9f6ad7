#!/usr/bin/env bash
# Tokenizer throughput on one thread: djshard's C++ tokenizer versus Hugging
# Face's tokenizers (the Rust library through its Node binding, npm package
# `tokenizers`), RoBERTa and BERT, on a gen_corpus.py corpus. Reports MB/s and
# rows/s of encoding (reading and parsing the corpus are not timed), and
# checks that both give byte-for-byte identical ids. Node is used here only.
#
#   bench/tokenizer_bench.sh [--workdir DIR] [--shared ../shared] [--mb 100] [--repeats 2]
#                            [--families "roberta-base bert-base-uncased"]
#
# --families: tokenizers of tests/data/tokenizers/ to measure (mistral-bpe is
# the one token_num_filter's benchmark uses).
#
# Target: djshard at least as fast as the Rust library, ids identical.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
workdir=/tmp/djshard-tokenizer-bench
shared="$root/../shared"
mb=100
repeats=2
families="roberta-base bert-base-uncased"
while [ $# -gt 0 ]; do
  case "$1" in
    --workdir) workdir=$2; shift 2 ;;
    --shared) shared=$2; shift 2 ;;
    --mb) mb=$2; shift 2 ;;
    --repeats) repeats=$2; shift 2 ;;
    --families) families=$2; shift 2 ;;
    *) echo "usage: $0 [--workdir DIR] [--shared DIR] [--mb N] [--repeats N] [--families LIST]" >&2
       exit 2 ;;
  esac
done
bench="$root/build/bin/djshard_tokenizer_bench"
[ -x "$bench" ] || {
  echo "build it first: cmake --build build --target djshard_tokenizer_bench" >&2; exit 2; }
command -v node >/dev/null || { echo "node is needed for the comparison" >&2; exit 2; }
mkdir -p "$workdir/node"
corpus="$workdir/corpus-${mb}mb.jsonl"
[ -s "$corpus" ] || python3 "$shared/data/gen_corpus.py" --mb "$mb" --seed 5 "$corpus" >&2
if [ ! -d "$workdir/node/node_modules/tokenizers" ]; then
  (cd "$workdir/node" && npm init -y >/dev/null && npm install --no-audit --no-fund \
    tokenizers@0.23.2 >&2)
fi
cp "$root/bench/tokenizer_bench.js" "$workdir/node/"
printf '| tokenizer | runner | seconds | MB/s | rows/s | ids identical |\n'
printf '| --- | --- | --- | --- | --- | --- |\n'
for family in $families; do
  tok="$workdir/$family.json"
  zstd -q -dc "$root/tests/data/tokenizers/$family/tokenizer.json.zst" > "$tok"
  cpp=$("$bench" "$tok" "$corpus" "$workdir/ids-djshard-$family.txt" "$repeats")
  rust=$(cd "$workdir/node" && RAYON_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false \
    node tokenizer_bench.js "$tok" "$corpus" "$workdir/ids-hf-$family.txt" "$repeats")
  same=no
  cmp -s "$workdir/ids-djshard-$family.txt" "$workdir/ids-hf-$family.txt" && same=yes
  for line in "djshard C++|$cpp" "HF tokenizers 0.23.2 (Rust, node)|$rust"; do
    name=${line%%|*}
    vals=${line#*|}
    s=$(sed -E 's/.*seconds=([0-9.]+).*/\1/' <<<"$vals")
    m=$(sed -E 's/.*mb_per_s=([0-9.]+).*/\1/' <<<"$vals")
    r=$(sed -E 's/.*rows_per_s=([0-9]+).*/\1/' <<<"$vals")
    printf '| %s | %s | %s | %s | %s | %s |\n' "$family" "$name" "$s" "$m" "$r" "$same"
  done
  [ "$same" = yes ] || { echo "ids differ for $family" >&2; exit 1; }
done
echo "corpus: $(wc -l < "$corpus") rows, $(du -m "$corpus" | cut -f1) MB file ($corpus), best of $repeats" >&2
