#!/usr/bin/python3
"""Drives a server through etcd's gRPC gateway with python3-etcd3gw (a client that speaks only
the gateway): puts and gets, a prefix, a transaction, a lease with a key, a watch, the lock.
Usage: etcd3gw_client.py HOST PORT PREFIX (the keys it writes start with PREFIX). Prints "ok" and exits 0 when every check passes."""
import sys
import threading
import time

from etcd3gw.client import Etcd3Client
from etcd3gw.lock import Lock


def check(cond, what):
    if not cond:
        print("FAILED: " + what)
        sys.exit(1)


def main():
    host, port, p = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    # etcd 3.4 serves the gateway under /v3/ (etcd3gw defaults to the older /v3alpha/).
    c = Etcd3Client(host=host, port=port, api_path="/v3/", timeout=10)
    check(c.status()["version"].startswith("3."), "status")
    check(len(c.members()) >= 1, "members")

    check(c.put(p + "/a", "1"), "put")
    check(c.get(p + "/a") == [b"1"] or c.get(p + "/a") == ["1"], "get %r" % c.get(p + "/a"))
    c.put(p + "/b", "2")
    check(sorted(v for v, _ in c.get_prefix(p + "/")) in ([b"1", b"2"], ["1", "2"]), "get_prefix")
    check(c.create(p + "/new", "x"), "create")
    check(not c.create(p + "/new", "y"), "create of an existing key fails")
    check(c.replace(p + "/a", "1", "3"), "replace")
    check(not c.replace(p + "/a", "1", "4"), "replace with a stale value fails")
    check(c.delete(p + "/b"), "delete")
    check(c.get(p + "/b") == [], "deleted")

    lease = c.lease(ttl=30)
    check(lease.ttl() > 0, "lease ttl")
    c.put(p + "/leased", "v", lease=lease)
    check(len(lease.keys()) == 1, "lease keys %r" % lease.keys())
    check(lease.refresh() > 0, "lease refresh (keepalive stream)")
    check(lease.revoke(), "lease revoke")
    check(c.get(p + "/leased") == [], "revoked lease's key gone")

    # A watch on its own connection; a put from this thread must arrive.
    events, cancel = c.watch(p + "/w")
    got = []

    def reader():
        for e in events:
            got.append(e)
            return

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    deadline = time.time() + 10
    while not got and time.time() < deadline:
        c.put(p + "/w", "event")
        t.join(0.3)
    cancel()
    check(got and got[0]["kv"]["value"] in (b"event", "event"), "watch event %r" % got)

    lock = Lock(p + "-lock", ttl=30, client=c)
    check(lock.acquire(), "lock acquire")
    other = Lock(p + "-lock", ttl=30, client=c)
    check(not other.acquire(), "a held lock is not acquired twice")
    check(lock.is_acquired(), "lock held")
    check(lock.release(), "lock release")
    check(other.acquire(), "the released lock is acquired")
    check(other.release(), "second release")
    print("ok")


if __name__ == "__main__":
    main()
