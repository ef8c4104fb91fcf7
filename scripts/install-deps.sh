#!/usr/bin/env bash
# Installs every build, test and runtime dependency of etcd-wrapper from Debian bookworm packages,
# plus the object-store emulators of the store tests (s3rver and Azurite, from npm) into
# build/node. Idempotent: packages already present are skipped by apt, the emulators when their
# versions are there.
# Must run as root (or via sudo).
set -euo pipefail

packages=(
  # toolchain
  build-essential cmake ninja-build ccache pkg-config git clang-format clang-tidy
  # clang and libFuzzer for the fuzzing harnesses (fuzz/, scripts/fuzz.sh)
  clang libfuzzer-14-dev
  # libraries
  libboost-dev libboost-system-dev libssl-dev librocksdb-dev
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libspdlog-dev libfmt-dev nlohmann-json3-dev libyaml-cpp-dev libcli11-dev
  libgtest-dev libgmock-dev libbenchmark-dev zlib1g-dev
  # HTTP/2 for the client API server (src/client_api)
  libnghttp2-dev
  # bcrypt password hashes for authentication (src/common/password_hash.cc)
  libcrypt-dev
  # the binaries' memory allocator (docs/performance.md)
  libjemalloc-dev
  # test dependencies: the reference etcd and its client, certificates, HTTP probes
  etcd-server etcd-client openssl curl procps
  # clients that speak only the gRPC gateway (tests/e2e/gateway_client_test.cc,
  # tests/e2e/patroni_client_test.cc): etcd3gw, and Patroni (its etcd3 DCS driver imports
  # python3-etcd's module, one of patroni's alternative dependencies, named here explicitly)
  python3-etcd3gw patroni python3-etcd
)
# Node.js and npm, for the emulators (below): Debian's packages, unless node and npm are installed
# already (NodeSource's nodejs bundles npm and conflicts with Debian's npm package).
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  packages+=(nodejs npm)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#packages[@]} packages present"
else
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
  # The Debian etcd-server package starts a system etcd on 127.0.0.1:2379 when systemd is running;
  # our tests and the local run need that port, so the packaged service is stopped and disabled.
  if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet etcd 2>/dev/null; then
    $SUDO systemctl disable --now etcd || true
  fi
fi

# The object-store emulators of the store tests, from npm into build/node (which git ignores):
# s3rver for s3_test (tests/support/s3rver.h; ETCDW_S3RVER overrides) and Azurite's blob service
# for abs_test (tests/support/azurite.h; ETCDW_AZURITE overrides). Exact versions, without a lock
# file; installed as the user who called sudo, so that the build area stays theirs. Azurite
# 3.35.0 is the newest that runs on Debian's Node.js 18 (3.36 wants Node 21). Both are installed
# by one npm command: a later `npm install --no-save` of one package would prune the other.
s3rver_version=3.7.1
azurite_version=3.35.0
node_dir="$(cd "$(dirname "$0")/.." && pwd)/build/node"
installed_version() {
  node -p "require('$node_dir/node_modules/$1/package.json').version" 2>/dev/null || true
}
if [ "$(installed_version s3rver)" = "$s3rver_version" ] &&
  [ "$(installed_version azurite)" = "$azurite_version" ]; then
  echo "install-deps: s3rver $s3rver_version and azurite $azurite_version present in $node_dir"
else
  as_user=()
  if [ "$(id -u)" -eq 0 ] && [ -n "${SUDO_USER:-}" ]; then as_user=(sudo -u "$SUDO_USER"); fi
  echo "install-deps: installing s3rver $s3rver_version and azurite $azurite_version into $node_dir"
  "${as_user[@]}" mkdir -p "$node_dir"
  "${as_user[@]}" npm install --prefix "$node_dir" --no-save --no-package-lock --no-audit \
    --no-fund --loglevel=error "s3rver@$s3rver_version" "azurite@$azurite_version"
fi
