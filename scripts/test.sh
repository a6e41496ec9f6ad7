#!/usr/bin/env bash
# Builds djshard and runs every test (unit and CLI) with ctest.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/build.sh"
cd "$root/build"
# Tests labelled gpu need a CUDA device (ctest -L gpu on a GPU machine).
if "$root/build/bin/djshard" version | grep -q "cuda x"; then
  ctest --output-on-failure -j "$(nproc)" --timeout 600
else
  echo "test: skipping the tests labelled gpu: this djshard sees no CUDA device"
  ctest --output-on-failure -j "$(nproc)" --timeout 600 -LE gpu
fi
