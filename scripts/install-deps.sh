#!/usr/bin/env bash
# Installs every build, test and runtime dependency of etcd-wrapper from Debian bookworm packages.
# Idempotent: packages already present are skipped by apt. Must run as root (or via sudo).
set -euo pipefail

packages=(
  # toolchain
  build-essential cmake ninja-build ccache pkg-config git clang-format
  # libraries
  libboost-dev libboost-system-dev libssl-dev librocksdb-dev
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libspdlog-dev libfmt-dev nlohmann-json3-dev libyaml-cpp-dev libcli11-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  # test dependencies: the reference etcd and its client, certificates, HTTP probes
  etcd-server etcd-client openssl curl procps
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
# The Debian etcd-server package starts a system etcd on 127.0.0.1:2379 when systemd is running;
# our tests and the local run need that port, so the packaged service is stopped and disabled.
if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet etcd 2>/dev/null; then
  $SUDO systemctl disable --now etcd || true
fi
