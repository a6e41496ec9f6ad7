#!/usr/bin/env bash
# perplexity_filter on one thread: djshard against Data-Juicer 1.4.3's own
# operator code with the real sentencepiece and kenlm Python modules, on a
# gen_corpus.py corpus, with tests/data/sentencepiece/en.sp.model and the
# order-5 probing test model tests/data/kenlm/o5.probing as en.arpa.bin.
#
#   bench/ops_bench_perplexity.sh DJ_ROOT KENLM_MODULE_DIR [--mb 5] [--workdir DIR]
#
# DJ_ROOT: an extracted Data-Juicer 1.4.3 tree (data_juicer/ops, data_juicer/utils).
# KENLM_MODULE_DIR: where the kenlm Python module (built from github.com/kpu/kenlm,
# see tests/data/make_ops_perplexity.py) is. Needs build/bin/djshard_perplexity_bench.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dj_root=$1 kenlm_dir=$2
shift 2
mb=5
workdir=/tmp/djshard-perplexity-bench
while [ $# -gt 0 ]; do
  case "$1" in
    --mb) mb=$2; shift 2 ;;
    --workdir) workdir=$2; shift 2 ;;
    *) echo "usage: $0 DJ_ROOT KENLM_MODULE_DIR [--mb N] [--workdir DIR]" >&2; exit 2 ;;
  esac
done
mkdir -p "$workdir/models"
corpus="$workdir/corpus-${mb}mb.jsonl"
[ -s "$corpus" ] || /usr/bin/python3 "$root/../shared/data/gen_corpus.py" --mb "$mb" --seed 3 "$corpus" >&2
cp "$root/tests/data/sentencepiece/en.sp.model" "$workdir/models/en.sp.model"
zstd -q -dcf "$root/tests/data/kenlm/o5.probing.zst" > "$workdir/models/en.arpa.bin"
echo "== djshard (C++), one thread"
DJSHARD_MODEL_HOME="$workdir/models" "$root/build/bin/djshard_perplexity_bench" "$corpus" en 2
echo "== Data-Juicer 1.4.3 operator (Python, sentencepiece + kenlm), one thread"
OMP_NUM_THREADS=1 /usr/bin/python3 "$root/bench/perplexity_bench_dj.py" "$dj_root" "$kenlm_dir" \
  "$workdir/models" "$corpus" en
