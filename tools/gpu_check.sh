#!/usr/bin/env bash
# The GPU check of SPEC-models §8, for a machine with an NVIDIA GPU, PyTorch
# (CUDA wheel) and transformers, and djshard's Debian build dependencies
# (scripts/setup.sh). Builds djshard against the wheel's libtorch with Ninja
# (only djshard, its torch module and the CLI tests), runs `ctest -L gpu`, then
# tools/gpu_check.py: agreement with transformers, speed against eager PyTorch
# and transformers.pipeline, GPU busy %, peak memory. Writes gpu_check.json and
# gpu_check.md to $OUT (default build-gpu/out). Every step prints its time.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$root/build-gpu/out}
py=${PYTHON:-python3}
mkdir -p "$out"
t0=$(date +%s.%N)
step() { printf '[%6.1f s] %s\n' "$(echo "$(date +%s.%N) - $t0" | bc)" "$*"; }

step "torch: $($py -c 'import torch; print(torch.__version__, torch.cuda.is_available(), torch.cuda.device_count())')"
prefix=$($py -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
step "configure against $prefix"
cmake "${generator[@]}" -S "$root" -B "$root/build-gpu" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$prefix" -DDJSHARD_BUILD_TESTS=ON >"$out/configure.log" 2>&1 ||
  { tail -30 "$out/configure.log"; exit 2; }
step "build djshard, libdjshard_torch.so, the CLI tests"
cmake --build "$root/build-gpu" -j "$(nproc)" --target djshard_cli djshard_torch djshard_cli_tests \
  >"$out/build.log" 2>&1 || { tail -40 "$out/build.log"; exit 2; }
"$root/build-gpu/bin/djshard" version | tee "$out/version.txt"
step "ctest -L gpu"
(cd "$root/build-gpu" && ctest -L gpu --output-on-failure --timeout 300) >"$out/ctest_gpu.log" 2>&1 &&
  ctest_rc=0 || ctest_rc=$?
tail -5 "$out/ctest_gpu.log"
step "tools/gpu_check.py"
$py "$root/tools/gpu_check.py" --djshard "$root/build-gpu/bin/djshard" --out "$out" \
  --work "$root/build-gpu/gpu-check" --ctest-rc "$ctest_rc"
step "done: $out/gpu_check.json, $out/gpu_check.md"
