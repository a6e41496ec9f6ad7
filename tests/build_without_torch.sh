#!/usr/bin/env bash
# Builds djshard with -DDJSHARD_WITH_TORCH=OFF in its own build directory and
# checks that the binary runs and says that model operators are absent.
set -euo pipefail
source_dir=$1
build_dir=$2
cmake -S "$source_dir" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release -DDJSHARD_WITH_TORCH=OFF \
  -DDJSHARD_BUILD_TESTS=OFF >/dev/null
cmake --build "$build_dir" --target djshard_cli -j "$(nproc)" >/dev/null
out=$("$build_dir/bin/djshard" version)
echo "$out"
grep -q "libtorch: not built in (model operators absent)" <<<"$out"
test ! -e "$build_dir/bin/libdjshard_torch.so"
