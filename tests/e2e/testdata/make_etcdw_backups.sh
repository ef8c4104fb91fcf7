#!/bin/bash
# Makes tests/e2e/testdata/etcdw_backups_v1.tar.gz: Local snapshot stores written by
# `etcdbrctl snapshot` of the first pinned build against etcd-wrapper, pinned so that every
# later build must restore them (PinnedBackupFormatsTest in tests/e2e/pinned_formats_test.cc): a full
# snapshot and delta snapshots, uncompressed (store "plain") and gzip-compressed (store "gzip").
# Run it with the binaries to pin:
#   tests/e2e/testdata/make_etcdw_backups.sh build/release/bin
# What the member held at the end goes beside it: etcdw_backups_expected_<store>.json
# (`etcdctl get <store>/ --prefix -w json`). Never regenerate it to make a failing test pass.
set -euo pipefail
bin="$(realpath "${1:?usage: $0 DIR-WITH-etcd-wrapper-AND-etcdbrctl}")"
out="$(cd "$(dirname "$0")" && pwd)"
work="$(mktemp -d)"
trap 'kill -9 "${pid:-0}" "${sidecar:-0}" 2>/dev/null || true; rm -rf "$work"' EXIT
ep=127.0.0.1:23989
cat >"$work/etcd.yaml" <<YAML
name: backups
data-dir: $work/etcdw
listen-client-urls: http://$ep
advertise-client-urls: http://$ep
listen-peer-urls: http://127.0.0.1:23990
initial-advertise-peer-urls: http://127.0.0.1:23990
initial-cluster: backups=http://127.0.0.1:23990
YAML
"$bin/etcd-wrapper" --config "$work/etcd.yaml" >"$work/etcdw.log" 2>&1 &
pid=$!
ctl() { ETCDCTL_API=3 etcdctl --endpoints="$ep" "$@"; }
for _ in $(seq 100); do ctl endpoint health >/dev/null 2>&1 && break; sleep 0.1; done
count() { find "$work/stores/$1" -type f -name "$2*" 2>/dev/null | wc -l; }
wait_for() {  # store, file prefix, how many
  for _ in $(seq 200); do [ "$(count "$1" "$2")" -ge "$3" ] && return 0; sleep 0.1; done
  echo "no $3 $2 snapshot(s) in store $1" >&2
  exit 1
}
n=0
for store in plain gzip; do
  flags=(--compress-snapshots=false)
  [ "$store" = gzip ] && flags=(--compress-snapshots=true --compression-policy=gzip)
  for i in 1 2 3; do n=$((n + 1)); ctl put "$store/before/$i" "v$n" >/dev/null; done
  "$bin/etcdbrctl" snapshot --endpoints="http://$ep" --storage-provider=Local \
    --store-container="$work/stores/$store" --store-prefix=golden --schedule="0 0 1 1 *" \
    --delta-snapshot-period=1s --garbage-collection-period=1h \
    --snapstore-temp-directory="$work/tmp-$store" "${flags[@]}" >"$work/sidecar-$store.log" 2>&1 &
  sidecar=$!
  wait_for "$store" Full 1
  # Two bursts a delta period apart: two delta snapshots, with puts, a delete and a lease.
  ctl put "$store/delta/a" 1 >/dev/null
  ctl put "$store/delta/a" 2 >/dev/null
  ctl del "$store/before/1" >/dev/null
  wait_for "$store" Incr 1
  lease=$(ctl lease grant 3600 | awk '{print $2}')
  ctl put "$store/delta/leased" x --lease="$lease" >/dev/null
  ctl txn <<TXN >/dev/null
value("$store/delta/a") = "2"

put $store/delta/b 3
del $store/before/2


TXN
  wait_for "$store" Incr 2
  kill -TERM "$sidecar"
  wait "$sidecar" || true
done
for store in plain gzip; do
  ctl get "$store/" --prefix -w json >"$out/etcdw_backups_expected_$store.json"
done
find "$work/stores" -type f | sed "s|$work/||" | sort >&2
tar -C "$work" -czf "$out/etcdw_backups_v1.tar.gz" stores
kill -TERM "$pid"
wait "$pid" || true
ls -la "$out"
