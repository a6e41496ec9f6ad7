#!/usr/bin/env bash
# Installs every Debian package djshard needs to build, test and benchmark.
# Idempotent: packages already present are not reinstalled, and apt-get update
# runs only when something is missing.
set -euo pipefail

PACKAGES=(
  build-essential cmake pkg-config git
  libcli11-dev nlohmann-json3-dev libyaml-cpp-dev libssl-dev
  libsimdjson-dev zlib1g-dev libzstd-dev zstd libgtest-dev libgmock-dev
  libtorch-dev libpcre2-dev libfasttext-dev fasttext libutf8proc-dev libsentencepiece-dev libopencc-dev libgumbo-dev
  python3 python3-regex python3-yaml python3-fusepy
  python3-torch python3-numpy libopenblas0-pthread
  util-linux time bc faketime openmpi-bin
  clang libclang-rt-14-dev
  libspdlog-dev libxxhash-dev xxhash
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ "${#missing[@]}" -eq 0 ]; then
  echo "setup: all ${#PACKAGES[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
