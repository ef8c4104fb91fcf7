#!/usr/bin/python3
"""Drives a server with Patroni's etcd3 DCS driver (Debian's patroni 3.0.2, patroni.dcs.etcd3), a
client that speaks only etcd's gRPC gateway: JSON over HTTP/1.1 under /v3/, a /v3/watch stream that
feeds its cluster cache, leases granted and kept alive through /v3/lease/keepalive, compare-and-set
transactions. Two instances, "a" and "b", race for the leader key the way two Patroni nodes do.

Usage: patroni_dcs.py SCOPE URL [URL...]
  SCOPE  the Patroni cluster name; every key it writes lies under /patroni-e2e/SCOPE/.
  URL    client URLs of the server's members (http://127.0.0.1:PORT). With two or more, "a" is
         pinned to the first and "b" to the second, so that each sees the other's writes through
         its own member's watch.
Prints one line per observation (no revisions, lease IDs or times, so that the transcript of
etcd 3.4 and of etcd-wrapper can be compared verbatim), then "ok", and exits 0 when every check
passes; prints "FAILED: ..." and exits 1 at the first failed check."""
import json
import logging
import sys
import time

from patroni.dcs.etcd3 import Etcd3

TTL = 5  # seconds: the leader lease, kept short to keep the expiry step short
NAMESPACE = "/patroni-e2e"


def note(what, value):
    """Prints an observation: one line of the transcript."""
    print("%s: %r" % (what, value), flush=True)


def check(cond, what):
    if not cond:
        print("FAILED: " + what, flush=True)
        sys.exit(1)


class Warnings(logging.Handler):
    """Keeps Patroni's log records of level WARNING and above."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


def dcs(name, scope, urls):
    """A Patroni etcd3 DCS for member `name`; its config dict as Patroni builds it from YAML."""
    hosts = [u[len("http://"):] for u in urls]
    return Etcd3({"name": name, "scope": scope, "namespace": NAMESPACE, "ttl": TTL,
                  "loop_wait": 1, "retry_timeout": 10, "hosts": hosts})


def wait_cluster(instance, pred, what, timeout=10):
    """Polls instance.get_cluster() (served from its watch-fed cache) until pred holds."""
    deadline = time.time() + timeout
    while True:
        cluster = instance.get_cluster()
        if pred(cluster):
            return cluster
        check(time.time() < deadline, "%s (last seen: leader %r, members %r)" %
              (what, cluster.leader and cluster.leader.name, sorted(m.name for m in cluster.members)))
        time.sleep(0.1)


def member_data(name):
    return {"conn_url": "postgres://%s:5432/postgres" % name,
            "api_url": "http://%s:8008/patroni" % name, "state": "running", "role": "replica"}


def main():
    scope, urls = sys.argv[1], sys.argv[2:]
    check(len(urls) >= 1, "usage: patroni_dcs.py SCOPE URL [URL...]")
    warnings = Warnings()
    logging.getLogger("patroni").addHandler(warnings)
    logging.getLogger("patroni").setLevel(logging.INFO)

    a = dcs("a", scope, urls)
    b = dcs("b", scope, urls)
    if len(urls) > 1:
        # What Patroni does when it fails over to another etcd member: its watch restarts there.
        a._client.set_base_uri(urls[0])
        b._client.set_base_uri(urls[1])
    note("version prefix", a._client.version_prefix)

    note("a initializes", a.initialize(create_new=True, sysid="7000000000000000001"))
    note("b initializes", b.initialize(create_new=True, sysid="7000000000000000002"))
    note("a sets the config", a.set_config_value(json.dumps({"ttl": TTL, "loop_wait": 1})))

    note("a touches its member", a.touch_member(member_data("a")))
    note("b touches its member", b.touch_member(member_data("b")))

    note("a acquires the leader key", a.attempt_to_acquire_leader())
    note("b acquires the leader key", b.attempt_to_acquire_leader())
    note("a updates the leader key", a.update_leader(last_lsn=100))

    c = wait_cluster(b, lambda c: c.leader and c.last_lsn == 100 and len(c.members) == 2,
                     "b sees a's leadership")
    note("b sees the leader", c.leader.name)
    note("b sees the members", sorted(m.name for m in c.members))
    note("b sees the initialize key", c.initialize)
    note("b sees the config", c.config.data)
    note("b sees the leader's lsn", c.last_lsn)
    note("b sees a's member data", c.get_member("a").data)
    note("the leader key is bound to a lease", bool(c.leader.session))
    note("b sees the leader's lease as a's", c.leader.session == a._lease)

    # Compare-and-set on the config key: the current index wins, a stale one loses.
    ca = a.get_cluster()
    note("a sets the config at its index", a.set_config_value(json.dumps({"ttl": TTL}),
                                                              index=ca.config.index))
    note("a sets the config at a stale index", a.set_config_value(json.dumps({"ttl": 1}),
                                                                  index=ca.config.index))
    c = wait_cluster(b, lambda c: c.config.data == {"ttl": TTL}, "b sees the new config")
    note("b sees the new config", c.config.data)

    # a steps down; b's watch wakes it, and b takes over.
    a.get_cluster()
    b.event.clear()
    note("a deletes the leader key", a.delete_leader(last_lsn=200))
    note("b's watch wakes on the leader key's deletion", b.watch(None, 10))
    c = wait_cluster(b, lambda c: c.leader is None, "b sees no leader")
    note("b sees the leader's last lsn", c.last_lsn)
    # b renews its lease here unless it did within loop_wait (1 s) before: it cannot expire
    # before b_renewed + TTL - 1.
    b_renewed = time.time()
    note("b acquires the leader key", b.attempt_to_acquire_leader())
    note("a acquires the leader key", a.attempt_to_acquire_leader())
    c = wait_cluster(a, lambda c: c.leader and c.leader.name == "b", "a sees b's leadership")
    note("a sees the leader", c.leader.name)

    # b stops renewing (as a Patroni node that died): its lease expires with its keys, and a wins.
    a.touch_member(member_data("a"))
    started = time.time()
    acquired = False
    while not acquired and time.time() < started + 3 * TTL:
        acquired = a.attempt_to_acquire_leader()
        if not acquired:
            time.sleep(0.2)
    note("a acquires the leader key once b's lease expires", acquired)
    waited = time.time() - b_renewed
    check(waited >= TTL - 1, "a acquired %.1f s after b renewed, before b's lease (TTL %d s) "
          "could expire" % (waited, TTL))
    c = wait_cluster(a, lambda c: c.leader and c.leader.name == "a" and len(c.members) == 1,
                     "a sees itself leader and b's member key gone")
    note("a sees the leader", c.leader.name)
    note("a sees the members", sorted(m.name for m in c.members))

    # b comes back: keeping its expired lease alive fails, so it is granted a new one.
    note("b touches its member again", b.touch_member(member_data("b")))
    note("b acquires the leader key", b.attempt_to_acquire_leader())
    c = wait_cluster(a, lambda c: len(c.members) == 2, "a sees b again")
    note("a sees the members", sorted(m.name for m in c.members))

    # a's lease vanishes (revoked through b's client) while a believes it was just renewed: the
    # put fails with "lease not found", and Patroni takes a new lease and tries again.
    b._client.call_rpc("/lease/revoke", {"ID": a._lease})
    c = wait_cluster(b, lambda c: c.leader is None and len(c.members) == 1, "b sees a's keys gone")
    note("b sees the members", sorted(m.name for m in c.members))
    a._last_lease_refresh = time.time()
    note("a acquires the leader key with a lost lease", a.attempt_to_acquire_leader())
    note("a touches its member", a.touch_member(member_data("a")))
    note("b touches its member", b.touch_member(member_data("b")))  # renews b's lease
    c = wait_cluster(b, lambda c: c.leader and len(c.members) == 2, "b sees a back")
    note("b sees the leader", c.leader.name)
    note("b sees the leader's lease as a's", c.leader.session == a._lease)

    note("a deletes the cluster", a.delete_cluster())
    c = wait_cluster(a, lambda c: c.leader is None and not c.members, "the cluster is gone")
    note("a sees no initialize key", c.initialize)

    for m in warnings.messages:
        print("patroni warning: " + m, file=sys.stderr)
    # A watch broken by the pinning above is restarted by Patroni, the lease revoked above is
    # replaced (both logged); any other warning (a request failed, say) is a failure.
    expected = ("watchprefix failed", "Our lease disappeared from Etcd.")
    unexpected = [m for m in warnings.messages if not m.startswith(expected)]
    check(not unexpected, "Patroni warned: %r" % unexpected)
    print("ok", flush=True)


if __name__ == "__main__":
    main()
