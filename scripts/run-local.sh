#!/usr/bin/env bash
# Sets everything up and runs one etcd-wrapper member locally on examples/etcd.conf.yaml,
# serving etcdctl on 127.0.0.1:2379 (data in /tmp/etcd-wrapper-local). Stop it with Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh release etcd-wrapper
echo "etcd-wrapper: serving on 127.0.0.1:2379; try: ETCDCTL_API=3 etcdctl --endpoints=127.0.0.1:2379 put foo bar" >&2
exec build/release/bin/etcd-wrapper --config examples/etcd.conf.yaml "$@"
