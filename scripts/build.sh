#!/usr/bin/env bash
# Configures and builds etcd-wrapper with CMake and Ninja.
#   scripts/build.sh            Release build (assertions kept) in build/release
#   scripts/build.sh asan       unit tests under AddressSanitizer+UBSan in build/asan
set -euo pipefail
cd "$(dirname "$0")/.."
kind="${1:-release}"
jobs="$(nproc)"
case "$kind" in
  release)
    cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
    cmake --build build/release -j "$jobs"
    ;;
  asan)
    cmake -S . -B build/asan -G Ninja -DCMAKE_BUILD_TYPE=Release -DETCDW_SANITIZE=ON \
      -DETCDW_INTEGRATION=OFF >/dev/null
    cmake --build build/asan -j "$jobs"
    ;;
  *)
    echo "usage: $0 [release|asan]" >&2
    exit 2
    ;;
esac
