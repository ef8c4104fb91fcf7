#!/bin/bash
# Makes tests/data_dir/testdata/etcd34_datadir_killed.tar.gz: a data directory written by etcd
# 3.4 (/usr/bin/etcd) and left by `kill -9`, for the takeover tests (tests/data_dir).
#
# --snapshot-count 40 makes etcd write a .snap file (and commit its backend) after the first
# writes; --backend-batch-interval 1h then keeps the backend from committing again, so the
# writes after the snapshot are only in the WAL when etcd is killed: the takeover must replay
# them. What etcd answered before the kill goes beside the tarball:
#   expected_get.json       `etcdctl get "" --prefix -w json` (current revision)
#   expected_get_rev.json   the same at revision 45 (after the compaction to 30)
#   expected_status.json    `etcdctl endpoint status -w json`
#   expected_members.json   `etcdctl member list -w json`
# The WAL's preallocated zeros become holes (cp --sparse=always) and the tarball is sparse,
# so it stays a few KiB; extracted, the files read exactly as etcd left them.
set -euo pipefail
out="$(cd "$(dirname "$0")" && pwd)"
work="$(mktemp -d)"
trap 'kill -9 "${pid:-0}" 2>/dev/null || true; rm -rf "$work"' EXIT
ep=127.0.0.1:23879
etcd --name fixture --data-dir "$work/etcd" --listen-client-urls "http://$ep" \
  --advertise-client-urls "http://$ep" --listen-peer-urls http://127.0.0.1:23880 \
  --initial-advertise-peer-urls http://127.0.0.1:23880 \
  --initial-cluster fixture=http://127.0.0.1:23880 --initial-cluster-token fixture-token \
  --snapshot-count 40 --backend-batch-interval 1h --backend-batch-limit 100000 \
  >"$work/etcd.log" 2>&1 &
pid=$!
ctl() { etcdctl --endpoints="$ep" "$@"; }
for _ in $(seq 100); do ctl endpoint health >/dev/null 2>&1 && break; sleep 0.1; done
# Before the snapshot: into the backend.
ctl put a 1; ctl put b 2; ctl put a 3; ctl del b
for i in $(seq 1 40); do ctl put "k$i" "v$i" >/dev/null; done
sleep 1
ls "$work/etcd/member/snap" | grep -q '\.snap$' || { echo "no .snap file" >&2; exit 1; }
# After the snapshot: only in the WAL.
lease=$(ctl lease grant 600 | awk '{print $2}')
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
ctl compaction 30
for i in $(seq 41 50); do ctl put "k$i" "w$i" >/dev/null; done
ctl put --prev-kv k2 again
ctl get "" --prefix -w json >"$out/expected_get.json"
ctl get "" --prefix --rev=45 -w json >"$out/expected_get_rev.json"
ctl endpoint status -w json >"$out/expected_status.json"
ctl member list -w json >"$out/expected_members.json"
kill -9 "$pid"
wait "$pid" 2>/dev/null || true
for f in "$work"/etcd/member/wal/*; do
  cp --sparse=always --preserve=mode "$f" "$f.sparse" && mv "$f.sparse" "$f"
done
tar --sparse -C "$work" -czf "$out/etcd34_datadir_killed.tar.gz" etcd
ls -la "$out"
