# Sourced by bench/checkpoint_bench.sh and bench/takeover_bench.sh after their
# options are parsed: checks the binary and gen_corpus.py, makes the output
# directory (beside the corpus, on the real disk users write to: tmpfs would
# hide the writes and fsyncs they pay; removed on exit), and generates the
# corpus once per size and seed.
#   in:  root workdir outdir shared mb seed name
#   out: bin gen outdir corpus
bin="$root/build/bin/djshard"
[ -x "$bin" ] || { echo "build djshard first: scripts/build.sh" >&2; exit 2; }
gen="$shared/data/gen_corpus.py"
[ -f "$gen" ] || { echo "gen_corpus.py not found at $gen (pass --shared)" >&2; exit 2; }

mkdir -p "$workdir"
[ -n "$outdir" ] || outdir=$workdir/out-$name-$$
mkdir -p "$outdir"
trap 'rm -rf "$outdir"' EXIT
corpus="$workdir/corpus-${mb}mb-seed${seed}.jsonl"
[ -f "$corpus" ] || python3 "$gen" "$corpus" --mb "$mb" --seed "$seed" >&2
