#!/usr/bin/env bash
# Configures and builds etcd-wrapper with CMake and Ninja.
#   scripts/build.sh [release] [TARGET...]   Release build (assertions kept) in build/release
#                                            (everything, or just the named targets)
#   scripts/build.sh asan                    unit tests under AddressSanitizer+UBSan in build/asan
set -euo pipefail
cd "$(dirname "$0")/.."
kind="${1:-release}"
shift || true
jobs="$(nproc)"
targets=()
for t in "$@"; do targets+=(--target "$t"); done
case "$kind" in
  release)
    cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
    cmake --build build/release -j "$jobs" "${targets[@]}"
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
