#!/usr/bin/env bash
# Installs dependencies (scripts/setup.sh) and builds djshard into build/.
# Extra arguments go to CMake's configure step, e.g. -DDJSHARD_WITH_TORCH=OFF.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh"
cmake -S "$root" -B "$root/build" -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build "$root/build" -j "$(nproc)"
