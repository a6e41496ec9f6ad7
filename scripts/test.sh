#!/usr/bin/env bash
# Builds djshard and runs every test (unit and CLI) with ctest, in three steps
# that each say what they do and how long they took:
#   1. setup and the build (with libtorch) into build/;
#   2. every test but the slow ones, in parallel;
#   3. the slow ones: two more builds that keep other configurations working
#      (without libtorch, and the fuzz harnesses with clang, ASan and UBSan).
# On a fresh 2-core machine the whole takes about 30 minutes; a second run
# rebuilds only what changed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
started=$SECONDS
step() { echo "test: [$1/3] $2 ($(((SECONDS - started) / 60)) min so far)"; }

step 1 "installing dependencies and building djshard into build/ (fresh machine: about 12 min)"
"$root/scripts/build.sh"
cd "$root/build"

# Tests labelled gpu need a CUDA device (ctest -L gpu on a GPU machine).
exclude="slow"
if ! "$root/build/bin/djshard" version | grep -q "cuda x"; then
  echo "test: this djshard sees no CUDA device: the tests labelled gpu are left out"
  exclude="slow|gpu"
fi
step 2 "running every test but the slow builds, $(nproc) at a time (about 7 min)"
status=0
ctest --output-on-failure -j "$(nproc)" --timeout 600 -LE "$exclude" || status=$?

step 3 "the slow tests: djshard built again without libtorch, then the fuzz harnesses (about 12 min)"
ctest --output-on-failure --timeout 1800 -L slow || status=$?
echo "test: done in $(((SECONDS - started) / 60)) min"
exit "$status"
