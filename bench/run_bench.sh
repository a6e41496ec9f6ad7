#!/usr/bin/env bash
# Benchmark of `djshard run` against pyref (plain Python, one process).
#
#   bench/run_bench.sh [--mb 256] [--workdir DIR] [--outdir DIR] [--shared ../shared] [--repeat 5]
#
# Generates gen_corpus.py --mb N --seed 3, then in one run times, for the
# recipes demo and refine (bench/recipes): djshard run with 1 and 2 threads
# (best of --repeat runs, alternating) and, when <shared>/pyref exists, pyref.py once.
# Prints wall seconds, MB/s, rows/s, peak RSS, the ratio to pyref and the
# 2-thread scaling, and checks that djshard and pyref produced the same records.
# The input is read from the page cache and outputs go to --outdir (default:
# a directory in /dev/shm), so that the figures measure djshard's work, not the
# disk: a VM disk that writes ~300 MB/s would cap the faster runs. With
# taskset, each round also runs 1 thread pinned to CPU 0 and to CPU 1: the
# CPUs of a shared VM can differ in speed for minutes at a time, and the two
# together bound what 2 threads can reach.
# Targets (1 thread): demo >= 250 MB/s and >= 13x pyref; refine >= 40 MB/s and
# >= 20x pyref; 2 threads >= 1.7x one thread; peak RSS <= 300 MB.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
mb=256
workdir=/tmp/djshard-bench
outdir=""
shared="$root/../shared"
repeat=5
while [ $# -gt 0 ]; do
  case "$1" in
    --mb) mb=$2; shift 2 ;;
    --workdir) workdir=$2; shift 2 ;;
    --outdir) outdir=$2; shift 2 ;;
    --shared) shared=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    *) echo "usage: $0 [--mb N] [--workdir DIR] [--outdir DIR] [--shared DIR] [--repeat N]" >&2
       exit 2 ;;
  esac
done
bin="$root/build/bin/djshard"
[ -x "$bin" ] || { echo "build djshard first: scripts/build.sh" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "/usr/bin/time is needed (scripts/setup.sh installs it)" >&2; exit 2; }
gen="$shared/data/gen_corpus.py"
[ -f "$gen" ] || { echo "gen_corpus.py not found at $gen (pass --shared)" >&2; exit 2; }
pyref="$shared/pyref/pyref.py"
have_pyref=0
if [ -f "$pyref" ] && /usr/bin/python3 -c 'import regex, yaml' 2>/dev/null; then
  have_pyref=1
else
  echo "pyref comparison skipped: $pyref or Debian's python3-regex/python3-yaml missing"
fi

mkdir -p "$workdir"
if [ -z "$outdir" ]; then
  outdir=$workdir
  [ -d /dev/shm ] && [ -w /dev/shm ] && outdir=/dev/shm/djshard-bench-$$
fi
mkdir -p "$outdir"
[ "$outdir" = "$workdir" ] || trap 'rm -rf "$outdir"' EXIT
corpus="$workdir/corpus-${mb}mb-seed3.jsonl"
[ -f "$corpus" ] || python3 "$gen" "$corpus" --mb "$mb" --seed 3 >&2
bytes=$(stat -c %s "$corpus")
cat "$corpus" >/dev/null

# measure CMD...: prints "seconds peak_kb" of one run.
measure() {
  /usr/bin/time -f '%e %M' -o "$workdir/time.log" "$@" >/dev/null 2>"$workdir/cmd.err" || {
    cat "$workdir/cmd.err" >&2; exit 1; }
  cat "$workdir/time.log"
}

rows=$(wc -l <"$corpus")
printf 'corpus: %s (%.1f MB, %d rows)\n' "$corpus" "$(echo "$bytes / 1000000" | bc -l)" "$rows"
printf 'outputs: %s (%s)\n\n' "$outdir" "$(df --output=fstype "$outdir" | tail -1)"
printf '%-7s %-18s %8s %9s %10s %9s %8s\n' recipe runner seconds MB/s rows/s "RSS MB" "x pyref"
for recipe in demo refine; do
  conf="$root/bench/recipes/$recipe.yaml"
  # 1 and 2 threads alternate, so that noise from other tenants hits both
  # alike; with taskset, 1 thread pinned to CPU 0 and to CPU 1 joins the round.
  t1="" t2="" p0="" p1="" kb1=0 kb2=0
  kinds="1 2"
  pin=0
  if command -v taskset >/dev/null && [ "$(nproc)" -ge 2 ]; then
    pin=1
    kinds="1 2 p0 p1"
  fi
  min() { if [ -z "$1" ] || awk -v a="$2" -v b="$1" 'BEGIN{exit !(a<b)}'; then echo "$2"; else echo "$1"; fi; }
  for _ in $(seq "$repeat"); do
    for t in $kinds; do
      out="$outdir/$recipe.t$t.jsonl"
      rm -f "$out" "$out.stats.json" "$out.errors.jsonl"
      case "$t" in
        p0 | p1) prefix=(taskset -c "${t#p}") threads=1 ;;
        *) prefix=() threads=$t ;;
      esac
      read -r s kb < <(measure "${prefix[@]}" "$bin" run --config "$conf" \
        --dataset-path "$corpus" --export-path "$out" --threads "$threads")
      case "$t" in
        1) t1=$(min "$t1" "$s"); [ "$kb" -gt "$kb1" ] && kb1=$kb ;;
        2) t2=$(min "$t2" "$s"); [ "$kb" -gt "$kb2" ] && kb2=$kb ;;
        p0) p0=$(min "$p0" "$s"); rm -f "$out"* ;;
        p1) p1=$(min "$p1" "$s"); rm -f "$out"* ;;
      esac
    done
  done
  py_s=""
  if [ "$have_pyref" = 1 ]; then
    read -r py_s py_kb < <(measure /usr/bin/python3 "$pyref" --recipe "$conf" --input "$corpus" \
      --output "$outdir/$recipe.pyref.jsonl")
  fi
  for row in "djshard 1 thread|$t1|$kb1" "djshard 2 threads|$t2|$kb2" ${py_s:+"pyref|$py_s|$py_kb"}; do
    IFS='|' read -r name s kb <<<"$row"
    awk -v r="$recipe" -v n="$name" -v s="$s" -v kb="$kb" -v b="$bytes" -v rows="$rows" -v py="$py_s" 'BEGIN {
      ratio = (py != "" && s > 0) ? sprintf("%.1f", py / s) : "-"
      printf "%-7s %-18s %8.2f %9.1f %10.0f %9.1f %8s\n", r, n, s, b / 1e6 / s, rows / s, kb / 1024, ratio }'
  done
  awk -v a="$t1" -v b="$t2" -v r="$recipe" 'BEGIN { printf "%-7s 2 threads / 1 thread: %.2fx\n", r, a / b }'
  if [ "$pin" = 1 ]; then
    # Two CPUs of different speed cap what 2 threads can reach: at best they
    # finish together, in 1 / (1/p0 + 1/p1).
    awk -v a="$p0" -v b="$p1" -v t1="$t1" -v t2="$t2" -v r="$recipe" 'BEGIN {
      bound = 1 / (1 / a + 1 / b)
      printf "%-7s 1 thread pinned: CPU 0 %.2f s, CPU 1 %.2f s; 2 threads can take %.2f s at best,\n", r, a, b, bound
      printf "%-7s i.e. %.2fx the best 1-thread run; they took %.2f s (%.0f%% of that bound)\n", r, t1 / bound, t2, 100 * bound / t2 }'
  fi
  cmp -s "$outdir/$recipe.t1.jsonl" "$outdir/$recipe.t2.jsonl" &&
    echo "$recipe: 1-thread and 2-thread outputs are byte-identical" ||
    echo "$recipe: 1-thread and 2-thread outputs DIFFER"
  if [ "$have_pyref" = 1 ]; then
    printf '%s: djshard vs pyref: ' "$recipe"
    python3 "$root/bench/compare_outputs.py" "$outdir/$recipe.t1.jsonl" "$outdir/$recipe.pyref.jsonl" || true
  fi
  rm -f "$outdir/$recipe".*
  echo
done
echo "targets (1 thread): demo >= 250 MB/s and >= 13x pyref; refine >= 40 MB/s and >= 20x pyref;"
echo "                    2 threads >= 1.7x one thread; peak RSS <= 300 MB"
