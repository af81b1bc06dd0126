"""Many clients at once on small pools: every answer belongs to the client that asked, nobody gets stuck,
no backend connection leaks, nothing internal goes wrong.

64 clients run a mix for a bounded time against a sharded database whose data sources have
`maxPoolSize: 4`: single-node reads, scatter merges (aggregates, ORDER BY), scatter concatenations,
transactions across both data sources (committed or rolled back), server-side prepared statements, and
scatter reads the client abandons mid-result by closing its socket. Every statement carries the client's
marker and a nonce, and every answer is checked against what that client knows it wrote.
"""

from __future__ import annotations

import contextlib
import random
import time
from pathlib import Path
from typing import Any

import mysql.connector
import pymysql
import pymysql.cursors
import pytest

from proxy.backends.pool import Lease
from proxy.execution.fastcommit import FAN_STATS
from proxy.execution.multipath import MULTI_STATS
from tests.conftest import ServerFactory
from tests.integration.faults import abort
from tests.integration.harness import RunningProxy, start_proxy, write_conf
from tests.integration.stress_support import (
    assert_pools_quiet,
    backend_connections,
    capture,
    fresh_client_check,
    run_load,
    wait_pools_quiet,
)

CLIENTS = 64
POOL = 4
SECONDS = 8.0
ROWS_PER_USER = 6

RULES = """\
- !SHARDING
  tables:
    t_order:
      actualDataNodes: ds_${0..1}.t_order_${0..1}
      databaseStrategy: {standard: {shardingColumn: user_id, shardingAlgorithmName: db_inline}}
      tableStrategy: {standard: {shardingColumn: order_id, shardingAlgorithmName: t_inline}}
  shardingAlgorithms:
    db_inline: {type: INLINE, props: {algorithm-expression: 'ds_${user_id % 2}'}}
    t_inline: {type: INLINE, props: {algorithm-expression: 't_order_${order_id % 2}'}}
"""


class Mismatch(AssertionError):
    pass


class Client:
    """One client's view of its rows: users 2c (on ds_0) and 2c+1 (on ds_1), tag 'c<c>'."""

    def __init__(self, proxy: RunningProxy, c: int, seed: int) -> None:
        self.proxy = proxy
        self.c = c
        self.rng = random.Random(seed)
        self.users = (2 * c, 2 * c + 1)
        self.tag = f"c{c}"
        # order ids this client has committed, per user (ids are unique per client: c * 1_000_000 + n)
        self.orders: dict[int, set[int]] = {u: set() for u in self.users}
        self.next_id = c * 1_000_000
        self.conn: pymysql.connections.Connection[Any] | None = None
        self.prepared: Any = None
        self.counts: dict[str, int] = {}
        self.errors: list[str] = []

    def _conn(self) -> pymysql.connections.Connection[Any]:
        if self.conn is None or not self.conn.open:
            self.conn = self.proxy.connect("stress_db", read_timeout=30, write_timeout=30)
        return self.conn

    def _rows(self, sql: str, args: Any = None) -> list[tuple[Any, ...]]:
        with self._conn().cursor() as cur:
            cur.execute(sql, args)
            return list(cur.fetchall())

    def new_id(self) -> int:
        self.next_id += 1
        return self.next_id

    def check(self, what: str, got: Any, want: Any) -> None:
        if got != want:
            raise Mismatch(f"client {self.c} {what}: got {got!r}, want {want!r}")

    # -- the statements ------------------------------------------------------------------------------

    def seed(self) -> None:
        for u in self.users:
            for _ in range(ROWS_PER_USER):
                oid = self.new_id()
                self._rows("INSERT INTO t_order (order_id, user_id, status) VALUES (%s, %s, %s)", (oid, u, self.tag))
                self.orders[u].add(oid)

    def single_node(self) -> None:
        u = self.rng.choice(self.users)
        nonce = self.rng.randrange(1 << 30)
        rows = self._rows(f"SELECT {self.c}, {nonce}, COUNT(*), SUM(order_id) FROM t_order WHERE user_id = {u}")
        self.check("one data source", [tuple(int(v) for v in r) for r in rows],
                   [(self.c, nonce, len(self.orders[u]), sum(self.orders[u]))])
        oid = self.rng.choice(sorted(self.orders[u]))
        rows = self._rows(f"SELECT order_id, user_id, status, {nonce} FROM t_order "
                          f"WHERE user_id = {u} AND order_id = {oid}")
        self.check("single node", rows, [(oid, u, self.tag, nonce)])

    def scatter_aggregate(self) -> None:
        nonce = self.rng.randrange(1 << 30)
        rows = self._rows(f"SELECT {self.c} AS m, {nonce} AS n, COUNT(*), MAX(order_id) FROM t_order "
                          f"WHERE status = '{self.tag}'")
        every = self.orders[self.users[0]] | self.orders[self.users[1]]
        self.check("scatter aggregate", [tuple(int(v) for v in r) for r in rows],
                   [(self.c, nonce, len(every), max(every))])

    def scatter_ordered(self) -> None:
        nonce = self.rng.randrange(1 << 30)
        rows = self._rows(f"SELECT order_id, user_id, {nonce} FROM t_order WHERE status = '{self.tag}' "
                          f"ORDER BY order_id DESC LIMIT 5")
        every = sorted(((o, u) for u in self.users for o in self.orders[u]), reverse=True)[:5]
        self.check("scatter ORDER BY LIMIT", rows, [(o, u, nonce) for o, u in every])

    def scatter_concatenated(self) -> None:
        nonce = self.rng.randrange(1 << 30)
        rows = self._rows(f"SELECT order_id, user_id, '{self.tag}', {nonce} FROM t_order WHERE status = '{self.tag}'")
        want = sorted((o, u, self.tag, nonce) for u in self.users for o in self.orders[u])
        self.check("scatter concatenation", sorted(rows), want)

    def transaction(self) -> None:
        conn = self._conn()
        commit = self.rng.random() < 0.5
        new = {u: self.new_id() for u in self.users}
        with conn.cursor() as cur:
            cur.execute("BEGIN")
            for u in self.users:  # ds_0 then ds_1
                cur.execute("INSERT INTO t_order (order_id, user_id, status) VALUES (%s, %s, %s)",
                            (new[u], u, self.tag))
            cur.execute(f"SELECT COUNT(*) FROM t_order WHERE status = '{self.tag}'")
            inside = cur.fetchone()[0]
            cur.execute("COMMIT" if commit else "ROLLBACK")
        total = sum(len(s) for s in self.orders.values())
        self.check("count inside a transaction", inside, total + 2)
        if commit:
            for u in self.users:
                self.orders[u].add(new[u])
        self.scatter_aggregate()

    def prepared_read(self) -> None:
        if self.prepared is None:
            self.prepared = mysql.connector.connect(
                host=self.proxy.host, port=self.proxy.port, user="root", password="root", database="stress_db",
                use_pure=True, ssl_disabled=True, autocommit=True, connection_timeout=30,
            )
        u = self.rng.choice(self.users)
        cur = self.prepared.cursor(prepared=True)
        try:
            cur.execute("SELECT order_id, user_id FROM t_order WHERE user_id = ? ORDER BY order_id", (u,))
            rows = [tuple(int(v) for v in r) for r in cur.fetchall()]
        finally:
            cur.close()
        # what this client saw committed (another statement of it may run meanwhile on its other connection:
        # it does not, each client runs one statement at a time)
        self.check("prepared", rows, [(o, u) for o in sorted(self.orders[u])])

    def abandon_mid_result(self) -> None:
        """A scatter read over every row, left after the first rows: the socket is closed under it."""
        conn = self.proxy.connect("stress_db", cursorclass=pymysql.cursors.SSCursor)
        cur = conn.cursor()
        cur.execute("SELECT a.order_id, a.status, REPEAT('x', 2000) FROM t_order a")
        cur.fetchmany(3)
        unread = cur._result  # type: ignore[attr-defined]
        abort(conn)
        unread.unbuffered_active = False  # nothing more to read from a socket that is gone
        cur._result = None  # type: ignore[attr-defined]

    def stepwise(self) -> None:
        """UPDATE ... ORDER BY ... LIMIT over several nodes: run in steps inside a transaction of its own."""
        with self._conn().cursor() as cur:
            changed = cur.execute(f"UPDATE t_order SET status = '{self.tag}' WHERE status = '{self.tag}' "
                                  "ORDER BY order_id LIMIT 3")
        self.check("stepwise UPDATE ... LIMIT (rows changed)", changed, 0)

    def federated(self) -> None:
        """A subquery over several nodes, answered by federation (copies on one data source)."""
        nonce = self.rng.randrange(1 << 30)
        rows = self._rows(f"SELECT {self.c}, {nonce}, COUNT(*) FROM t_order WHERE order_id IN "
                          f"(SELECT order_id FROM t_order WHERE status = '{self.tag}')")
        every = self.orders[self.users[0]] | self.orders[self.users[1]]
        self.check("federated subquery", [tuple(int(v) for v in r) for r in rows], [(self.c, nonce, len(every))])

    def step(self) -> None:
        kinds = (self.single_node, self.single_node, self.scatter_aggregate, self.scatter_ordered,
                 self.scatter_concatenated, self.transaction, self.prepared_read, self.abandon_mid_result,
                 self.stepwise, self.federated)
        weights = (4, 0, 2, 2, 2, 2, 2, 1, 1, 1)
        action = self.rng.choices(kinds, weights=weights, k=1)[0]
        action()
        self.counts[action.__name__] = self.counts.get(action.__name__, 0) + 1

    def close(self) -> None:
        for conn in (self.conn, self.prepared):
            if conn is not None:
                with contextlib.suppress(Exception):
                    conn.close()


@pytest.fixture
def stress_proxy(mariadb_factory: ServerFactory, tmp_path: Path) -> Any:
    servers = mariadb_factory.many(2)
    for i, s in enumerate(servers):
        s.execute(f"CREATE DATABASE stress_{i}")
    conf = write_conf(
        tmp_path / "conf",
        {"stress_db": {f"ds_{i}": (s, f"stress_{i}") for i, s in enumerate(servers)}},
        rules_yaml={"stress_db": RULES}, max_pool_size=POOL,
        props={"proxy-frontend-max-connections": 0},
    )
    proxy = start_proxy(conf)
    try:
        with proxy.connect("stress_db") as conn, conn.cursor() as cur:
            cur.execute("CREATE TABLE t_order (order_id BIGINT PRIMARY KEY, user_id INT NOT NULL, status VARCHAR(20))")
        yield proxy, servers
    finally:
        proxy.stop()


def test_64_clients_on_pools_of_4_get_only_their_own_answers(stress_proxy: Any) -> None:
    proxy, servers = stress_proxy
    clients = [Client(proxy, c, seed=1000 + c) for c in range(CLIENTS)]
    for client in clients:
        client.seed()
    fanned, whole = FAN_STATS.taken, MULTI_STATS.whole
    with capture() as logs:
        result = run_load(clients, SECONDS)
        for c in clients:
            c.close()
        # nobody is stuck: a fresh client answers at once, and no proxy session stays in a command
        fresh_seconds, busy = fresh_client_check(proxy, "stress_db", "SELECT COUNT(*) FROM t_order WHERE user_id = 0")
    result.logs = logs
    internal = result.internal()
    assert not result.stuck, f"clients stuck: {result.stuck}"
    assert not result.failures, "\n".join(result.failures[:20]) + f"\nlogged: {internal[:5]}"
    assert fresh_seconds < 1.0, fresh_seconds
    assert not busy, busy
    assert not internal, internal[:5]

    # no backend connection leaked: once the last client is gone, every connection is back in its pool
    # (idle or being reset), none is in a transaction, and the servers count no more than the pools hold
    pools = wait_pools_quiet(proxy)
    assert_pools_quiet(pools)
    for i, server in enumerate(servers):
        total, in_trx, _prepared = backend_connections(server, [f"stress_{i}"])
        assert in_trx == 0
        assert total <= POOL + 1, (total, pools)  # the pool, plus the admin connection for KILL QUERY
        assert total >= pools[f"ds_{i}"].idle

    done = {}
    for c in clients:
        for k, v in c.counts.items():
            done[k] = done.get(k, 0) + v
    print(f"stress: {result.statements} statements by {CLIENTS} clients in {SECONDS:.0f} s; {done}; "
          f"fresh client answered in {fresh_seconds * 1000:.0f} ms; pools {pools}")
    # the transactions' COMMITs and ROLLBACKs went through proxy.execution.fastcommit too (not only the coroutine)
    assert FAN_STATS.taken > fanned
    # and multi-node SELECTs were answered in one step (proxy.execution.multipath.MultiAnswer._whole)
    assert MULTI_STATS.whole > whole
    assert all(done.get(k, 0) > 0 for k in ("single_node", "scatter_aggregate", "scatter_ordered",
                                            "scatter_concatenated", "transaction", "prepared_read",
                                            "abandon_mid_result", "stepwise", "federated"))


def test_pool_leases_are_consistent_after_the_load(stress_proxy: Any) -> None:
    """Idle connections are IDLE and owned by nobody, right after start and after a few sessions."""
    proxy, _servers = stress_proxy
    for _ in range(3):
        with proxy.connect("stress_db") as conn, conn.cursor() as cur:
            cur.execute("SELECT COUNT(*) FROM t_order")

    def leases() -> list[tuple[str, Lease]]:
        return [(name, c.lease) for (_d, name), s in proxy.server.sources.items() for c in s.pool.connections()]

    time.sleep(0.3)
    assert all(lease is Lease.IDLE for _name, lease in proxy.call(leases))
