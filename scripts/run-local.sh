#!/usr/bin/env bash
# Sets everything up and runs an etcd pod locally: `etcdbrctl server` (the backup-restore
# sidecar, backups in a Local store under /tmp/etcd-wrapper-pod/home/backups) and
# `etcd-wrapper start-etcd` bootstrapped by it, serving etcdctl on 127.0.0.1:2379, the sidecar's
# API on 127.0.0.1:8080 and /readyz on 127.0.0.1:9095. Stop both with Ctrl-C.
#   scripts/run-local.sh --config   runs one member from examples/etcd.conf.yaml instead
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh release etcd-wrapper etcdbrctl
bin=build/release/bin
if [[ "${1:-}" == "--config" ]]; then
  shift
  echo "etcd-wrapper: serving on 127.0.0.1:2379; try: ETCDCTL_API=3 etcdctl --endpoints=127.0.0.1:2379 put foo bar" >&2
  exec "$bin/etcd-wrapper" --config examples/etcd.conf.yaml "$@"
fi

pod=/tmp/etcd-wrapper-pod
mkdir -p "$pod/home" "$pod/data"
export HOME="$pod/home" ETCD_CONF="$PWD/examples/pod-etcd.conf.yaml" POD_NAME=etcd-main-0
"$bin/etcdbrctl" server --server-port=8080 --endpoints=http://127.0.0.1:2379 \
  --data-dir="$pod/data/new.etcd" --restoration-temp-snapshots-dir="$pod/data/restoration.tmp" \
  --snapstore-temp-directory="$pod/data/temp" --storage-provider=Local \
  --store-container=backups --store-prefix=etcd-main --schedule="*/30 * * * *" \
  --delta-snapshot-period=20s --garbage-collection-period=5m \
  --garbage-collection-policy=LimitBased --max-backups=5 --use-etcd-wrapper=true &
sidecar=$!
trap 'kill -TERM $sidecar 2>/dev/null; wait $sidecar 2>/dev/null' EXIT
echo "etcd pod: etcdctl on 127.0.0.1:2379, sidecar API on 127.0.0.1:8080, /readyz on 127.0.0.1:9095" >&2
echo "  try: ETCDCTL_API=3 etcdctl --endpoints=127.0.0.1:2379 put foo bar; curl 127.0.0.1:8080/snapshot/latest" >&2
"$bin/etcd-wrapper" start-etcd --backup-restore-host-port=127.0.0.1:8080 \
  --etcd-server-name=127.0.0.1 --etcd-client-port=2379 --etcd-wrapper-port=9095 \
  --exit-code-file="$pod/data/exit_code" "$@"
