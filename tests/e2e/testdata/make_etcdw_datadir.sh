#!/bin/bash
# Makes tests/e2e/testdata/etcdw_datadir_v1.tar.gz: a data directory written by etcd-wrapper
# and left by `kill -9`, and etcdw_datadir_v1_stopped.tar.gz: the same started again and
# stopped (the store flushed, the key index saved), pinned so that every later build must read it (PinnedFormatsTest in
# tests/e2e/pinned_formats_test.cc). It holds each record kind of our store: keys with history,
# deletions, a compaction, leases (one revoked), a Txn, users, roles and permissions with
# authentication enabled; part of it in the store's table files (flushed by a defragmentation),
# the rest only in the Raft log and the store's log. Run it with the binary to pin:
#   tests/e2e/testdata/make_etcdw_datadir.sh build/release/bin/etcd-wrapper
# What the member answered before the kill goes beside the tarball:
#   etcdw_expected_get.json       `etcdctl get "" --prefix -w json` as root (current revision)
#   etcdw_expected_get_rev.json   the same at revision 30 (after the compaction to 25)
#   etcdw_expected_status.json    `etcdctl endpoint status -w json`
#   etcdw_expected_auth.txt       `etcdctl user list`, `role list`, `role get r1`, `user get alice`
#                                 and `lease list`
# A format change must keep reading this directory (or migrate it, with a test): never
# regenerate it to make a failing test pass.
set -euo pipefail
bin="$(realpath "${1:?usage: $0 PATH/TO/etcd-wrapper}")"
out="$(cd "$(dirname "$0")" && pwd)"
work="$(mktemp -d)"
trap 'kill -9 "${pid:-0}" 2>/dev/null || true; rm -rf "$work"' EXIT
ep=127.0.0.1:23979
cat >"$work/etcd.yaml" <<YAML
name: golden
data-dir: $work/etcdw
listen-client-urls: http://$ep
advertise-client-urls: http://$ep
listen-peer-urls: http://127.0.0.1:23980
initial-advertise-peer-urls: http://127.0.0.1:23980
initial-cluster: golden=http://127.0.0.1:23980
initial-cluster-token: golden-token
snapshot-count: 20
YAML
"$bin" --config "$work/etcd.yaml" >"$work/etcdw.log" 2>&1 &
pid=$!
ctl() { ETCDCTL_API=3 etcdctl --endpoints="$ep" "$@"; }
for _ in $(seq 100); do ctl endpoint health >/dev/null 2>&1 && break; sleep 0.1; done
ctl put a 1; ctl put b 2; ctl put a 3; ctl del b
for i in $(seq 1 20); do ctl put "k$i" "v$i" >/dev/null; done
lease=$(ctl lease grant 3600 | awk '{print $2}')
ctl put leased lv --lease="$lease"
lease2=$(ctl lease grant 900 | awk '{print $2}')
ctl put gone gv --lease="$lease2"
ctl lease revoke "$lease2"
ctl put a 4
ctl del k1 k5
ctl txn <<'TXN'
value("a") = "4"

put a 5
put t1 x
del k7


TXN
ctl compaction 25
# Defragmentation flushes the store: what came before is in its table files, what follows only
# in the Raft log and the store's own log.
ctl defrag
ctl put bin "$(printf 'line1\nline2\ttab')"
ctl user add root:rootpw
ctl role add root
ctl user grant-role root root
ctl user add alice:alicepw
ctl role add r1
ctl role grant-permission r1 readwrite /a/ --prefix=true
ctl role grant-permission r1 read k2
ctl user grant-role alice r1
ctl auth enable
for i in $(seq 21 30); do ctl --user=root:rootpw put "k$i" "w$i" >/dev/null; done
root() { ctl --user=root:rootpw "$@"; }
root get "" --prefix -w json >"$out/etcdw_expected_get.json"
root get "" --prefix --rev=30 -w json >"$out/etcdw_expected_get_rev.json"
root endpoint status -w json >"$out/etcdw_expected_status.json"
{ root user list; root role list; root role get r1; root user get alice; root lease list; } \
  >"$out/etcdw_expected_auth.txt"
kill -9 "$pid"
wait "$pid" 2>/dev/null || true
pack() {
  # The Raft log's preallocated zeros become holes, so the tarball stays small.
  for f in "$work"/etcdw/member/wal/*; do
    cp --sparse=always --preserve=mode "$f" "$f.sparse" && mv "$f.sparse" "$f"
  done
  rm -f "$work"/etcdw/member/store/LOCK "$work"/etcdw/member/store/LOG*
  tar --sparse -C "$work" -czf "$out/$1" etcdw
}
pack etcdw_datadir_v1.tar.gz
# Started again and stopped (SIGTERM): the store flushed and the key index saved.
"$bin" --config "$work/etcd.yaml" >>"$work/etcdw.log" 2>&1 &
pid=$!
for _ in $(seq 100); do ctl endpoint health >/dev/null 2>&1 && break; sleep 0.1; done
kill -TERM "$pid"
wait "$pid"
pack etcdw_datadir_v1_stopped.tar.gz
ls -la "$out"
