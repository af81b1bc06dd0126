"""Cluster mode's XA: a proxy SIGKILLed between its commit decision and the second phase (or before the
decision) leaves branches prepared; another proxy of the cluster finishes them within seconds, from the
decisions the dead one kept in the registry; the data is all-or-nothing.

Proxy A is a `shardproxy serve` process (so that it can be SIGKILLed), B runs in this process; both reach the
two data sources through test_xa_faults' relays, which kill A when its first `XA COMMIT` (right after the
decision) or its `XA PREPARE` (before it) comes by. The lease is 2 s, as in the other cluster tests.
"""

from __future__ import annotations

import asyncio
import itertools
import shutil
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pymysql
import pytest
import yaml

from proxy.cluster.etcd import EtcdClient
from proxy.sandbox import MariaDBServer
from tests.integration.etcd_server import EtcdServer, ensure_etcd
from tests.integration.harness import RunningProxy, start_proxy, write_conf
from tests.integration.test_xa_faults import (
    RULES,
    ProxyProcess,
    XARelay,
    XaRows,
    commit_expecting_loss,
    run,
    transaction,
)

pytestmark = pytest.mark.integration
SETTLE = 15.0  # seconds the takeover may take at most here (lease 2 s, then a sweep and a recovery pass)


class Cluster(XaRows):
    def __init__(self, servers: list[MariaDBServer], etcd: EtcdServer, tmp: Path) -> None:
        self.servers = servers
        self.etcd = etcd
        tag = uuid.uuid4().hex[:6]
        self.dbs = [f"cxa_{tag}_{i}" for i in range(2)]
        for server, db in zip(servers, self.dbs, strict=True):
            server.execute(f"CREATE DATABASE {db}")
            server.execute(f"CREATE TABLE {db}.t_xa (id BIGINT PRIMARY KEY, v VARCHAR(40))")
        self.relays = [XARelay(s) for s in servers]
        self.namespace = f"cxa_{tag}"
        self.confs = [self._conf(tmp / name) for name in ("a", "b")]
        self.a = ProxyProcess(self.confs[0])
        self.a.start()  # seeds the registry
        self.b: RunningProxy = start_proxy(self.confs[1])
        self._keys = itertools.count(1)

    def _conf(self, conf: Path) -> Path:
        write_conf(conf, {"xa_db": {"ds_0": (self.relays[0], self.dbs[0]), "ds_1": (self.relays[1], self.dbs[1])}},
                   rules_yaml={"xa_db": RULES}, data_source_props={"connectionTimeoutMilliseconds": 5000},
                   transaction={"defaultType": "XA", "props": {"xa-recovery-interval-seconds": 0.3}})
        gdoc = yaml.safe_load((conf / "global.yaml").read_text())
        gdoc["mode"] = {"type": "Cluster", "repository": {"type": "etcd", "props": {
            "namespace": self.namespace, "server-lists": self.etcd.endpoint, "timeToLiveSeconds": 2,
            "connectionTimeout": 2}}}
        (conf / "global.yaml").write_text(yaml.safe_dump(gdoc))
        return conf

    def settle(self) -> float:
        """Seconds until nothing is prepared on either server (B's takeover, A being dead)."""
        start = time.monotonic()
        while self.prepared(0) or self.prepared(1):
            assert time.monotonic() - start < SETTLE, f"not settled: {self.prepared(0)} {self.prepared(1)}"
            time.sleep(0.05)
        return time.monotonic() - start

    def registry(self, prefix: str) -> list[str]:
        """Keys under the namespace's `prefix`, relative to it."""
        host, port = self.etcd.endpoint.split(":")
        full = f"/{self.namespace}/{prefix}"
        kvs, _rev = asyncio.run(EtcdClient([(host, int(port))]).get_prefix(full))
        return [kv.key.removeprefix(full) for kv in kvs]

    def close(self) -> None:
        for relay in self.relays:
            relay.disarm()
        self.a.stop()
        self.b.stop()
        for relay in self.relays:
            relay.close()


@pytest.fixture(scope="module")
def cluster(mariadb_shards: list[MariaDBServer], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    ensure_etcd()
    tmp = tmp_path_factory.mktemp("cluster-xa")
    etcd = EtcdServer(tmp / "etcd-data").start()
    c: Cluster | None = None
    try:
        c = Cluster(mariadb_shards, etcd, tmp)
        yield c
    finally:
        if c is not None:
            c.close()
        etcd.stop()
        shutil.rmtree(tmp / "etcd-data", ignore_errors=True)  # (its data must not stay in the temp directory)


def _fresh_a(c: Cluster) -> pymysql.connections.Connection[Any]:
    if not c.a.alive():
        c.a.start()
    return c.a.connect()


def test_a_proxy_killed_after_the_decision_is_committed_by_another(cluster: Cluster) -> None:
    c = cluster
    a, b = c.pair()
    conn = _fresh_a(c)
    transaction(conn, a, b)
    c.relays[0].arm("XA COMMIT", lambda: (c.a.kill(), ("drop", None))[1])
    commit_expecting_loss(conn)
    assert len(c.prepared(0)) == 1 and not c.has(a)  # ds_0's branch waits, prepared; A is dead
    seconds = c.settle()
    assert c.has(a) and c.has(b), "the decision was COMMIT: both rows"
    print(f"\ntaken over and committed in {seconds:.2f}s after the kill")
    deadline = time.monotonic() + 5  # the dead owner's decisions are gone once done
    while c.registry("xa/log/") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert c.registry("xa/log/") == []
    with c.b.connect("xa_db") as other:  # and the rows read back through B
        assert sorted(run(other, f"SELECT id FROM t_xa WHERE id IN ({a}, {b})")) == [(a,), (b,)]


def test_a_proxy_killed_before_the_decision_is_rolled_back_by_another(cluster: Cluster) -> None:
    c = cluster

    def hold_then_kill() -> tuple[str, None]:
        time.sleep(0.3)  # ds_0's PREPARE goes through meanwhile: its branch is prepared
        c.a.kill()
        return "drop", None

    a, b = c.pair()
    conn = _fresh_a(c)
    transaction(conn, a, b)
    c.relays[1].arm("XA PREPARE", hold_then_kill)
    commit_expecting_loss(conn)
    assert len(c.prepared(0)) == 1  # prepared, and no decision anywhere
    c.settle()
    assert not c.has(a) and not c.has(b), "no decision: rolled back everywhere"
    live = [c.b.call(lambda: c.b.server.cluster.node.xa_owner[0])]
    deadline = time.monotonic() + SETTLE
    while c.registry("xa/owners/") != live and time.monotonic() < deadline:  # dead owners are cleaned up
        time.sleep(0.1)
    assert c.registry("xa/owners/") == live and c.registry("claims/xa/") == []


def test_a_live_proxy_commits_through_the_registry(cluster: Cluster) -> None:
    """No fault: the decision goes to the registry and is deleted once both branches committed."""
    c = cluster
    a, b = c.pair()
    conn = _fresh_a(c)
    transaction(conn, a, b)
    run(conn, "COMMIT")
    assert c.has(a) and c.has(b)
    deadline = time.monotonic() + 5
    while c.registry("xa/log/") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert c.registry("xa/log/") == []
    assert not (c.confs[0] / "xa-log" / "decisions.log").exists()  # Cluster mode: no local log
    conn.close()


def test_a_standalone_proxys_decisions_are_finished_when_it_restarts_in_cluster_mode(cluster: Cluster,
                                                                                    tmp_path: Path) -> None:
    """Moving a proxy from Standalone to Cluster mode does not lose what its local XA log holds: killed after
    its decision as a Standalone proxy, started again in Cluster mode, it commits the branch from that log."""
    c = cluster
    conf = c._conf(tmp_path / "standalone")
    gdoc = yaml.safe_load((conf / "global.yaml").read_text())
    del gdoc["mode"]
    (conf / "global.yaml").write_text(yaml.safe_dump(gdoc))
    alone = ProxyProcess(conf)
    alone.start()
    try:
        a, b = c.pair()
        conn = alone.connect()
        transaction(conn, a, b)
        c.relays[0].arm("XA COMMIT", lambda: (alone.kill(), ("drop", None))[1])
        commit_expecting_loss(conn)
        assert len(c.prepared(0)) == 1 and not c.has(a)
        assert (conf / "xa-log" / "decisions.log").stat().st_size > 0  # the decision, on its disk only
        time.sleep(1.0)
        assert len(c.prepared(0)) == 1  # no proxy of the cluster may touch it: not one of its owners
        c._conf(conf)  # the same directory, now in Cluster mode
        alone.start()
        c.settle()
        assert c.has(a) and c.has(b)
    finally:
        alone.stop()


def test_without_etcd_a_two_branch_commit_is_refused_at_once_and_one_branch_commits(cluster: Cluster) -> None:
    """etcd stopped: a decision cannot be kept where another proxy would find it, so a transaction that wrote
    to both data sources is rolled back with an error naming the registry, at once (nothing reached etcd:
    nothing to settle); one that wrote to one data source commits in one phase. Back: XA commits again."""
    c = cluster
    c.etcd.stop()
    try:
        a, b = c.pair()
        with c.b.connect("xa_db") as conn:
            run(conn, "BEGIN")
            run(conn, f"INSERT INTO t_xa VALUES ({a}, 'one')")
            run(conn, "COMMIT")  # one branch: XA COMMIT ... ONE PHASE, no decision needed
            assert c.has(a)
            a2, b2 = c.pair()
            transaction(conn, a2, b2)
            started = time.monotonic()
            with pytest.raises(pymysql.err.MySQLError) as refused:
                run(conn, "COMMIT")
            assert time.monotonic() - started < 1.5
            assert "registry" in refused.value.args[1] and "nothing was committed" in refused.value.args[1]
            assert not c.has(a2) and not c.has(b2) and not c.prepared(0) and not c.prepared(1)
    finally:
        c.etcd.start()
    a, b = c.pair()

    def commits() -> bool:
        with c.b.connect("xa_db") as conn:
            try:
                transaction(conn, a, b)
                run(conn, "COMMIT")
                return True
            except pymysql.err.MySQLError:
                return False

    deadline = time.monotonic() + 15
    while not commits():
        assert time.monotonic() < deadline, "XA does not commit again once etcd is back"
        time.sleep(0.2)
    assert c.has(a) and c.has(b)
