#!/usr/bin/env bash
# Builds the libFuzzer harnesses of tests/fuzz with clang, ASan and UBSan into
# build-fuzz/, and runs each for --seconds (default 20) from its seeds in
# tests/fuzz/corpus/<name>/. Exit 0 when no harness found a crash, a leak or
# undefined behaviour; otherwise the failing input is in build-fuzz/artifacts/.
#
#   scripts/fuzz.sh [--seconds 20] [--jobs 1] [--only NAME]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
seconds=20
jobs=1
only=""
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    *) echo "usage: $0 [--seconds N] [--jobs N] [--only NAME]" >&2; exit 2 ;;
  esac
done
"$root/scripts/setup.sh" >/dev/null
build="$root/build-fuzz"
CC=clang CXX=clang++ cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DDJSHARD_FUZZ=ON -DDJSHARD_WITH_TORCH=OFF -DDJSHARD_BUILD_TESTS=OFF >/dev/null
harnesses=(record json_string records recipe text_ops weights kenlm sentencepiece html dedup)
targets=()
for h in "${harnesses[@]}"; do targets+=("${h}_fuzz"); done
cmake --build "$build" -j "$(nproc)" --target "${targets[@]}" >/dev/null
mkdir -p "$build/artifacts"
failed=0
for h in "${harnesses[@]}"; do
  [ -n "$only" ] && [ "$only" != "$h" ] && continue
  work="$build/corpus/$h"
  mkdir -p "$work"
  start=$(date +%s)
  # With --jobs N, N fuzzing processes share the corpus; their output goes to
  # build-fuzz/fuzz-<i>.log.
  parallel=()
  [ "$jobs" -gt 1 ] && parallel=(-jobs="$jobs" -workers="$jobs")
  if (cd "$build" && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
    "$build/fuzz/${h}_fuzz" "$work" "$root/tests/fuzz/corpus/$h" -max_total_time="$seconds" \
    "${parallel[@]}" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$build/artifacts/${h}-" >"$build/${h}.log" 2>&1); then
    runs=$(cat "$build/${h}.log" "$build"/fuzz-*.log 2>/dev/null |
      grep -o 'stat::number_of_executed_units: *[0-9]*' | awk '{s += $2} END {print s + 0}' || true)
    echo "fuzz $h: ok, $runs inputs in $(($(date +%s) - start)) s, corpus $(ls "$work" | wc -l) files"
    rm -f "$build"/fuzz-*.log
  else
    echo "fuzz $h: FAILED (see $build/${h}.log and $build/artifacts/)"
    tail -30 "$build/${h}.log"
    failed=1
  fi
done
exit "$failed"
