"""Many clients on small pools, each running a seeded random mix of every statement class the proxy handles.

`test_stress.py` runs a fixed mix; this one draws each client's next statement from every kind of work the
proxy does differently (single node, scatter merge and concatenation, aggregates with DISTINCT / ROLLUP /
computed items, binding joins, federation, stepwise writes, prepared statements, read-only cursors,
multi-statement queries, LOCAL and XA transactions with errors inside them, read/write-split reads,
session variables, KILL QUERY of the client's own other connection, clients that vanish mid-result),
so that a defect that needs two different kinds of statement to meet on one pool shows up.

Layout: two servers and two logical databases over the same physical ones. In `sgen_db` every data source
is a read/write group (`rw_i`: primary `ds_i`, read member `ds_ir`, the same physical database, so
replica reads are never stale); `sgen_plain_db` shards over the primaries themselves (reads share the
pools with writes, as in most deployments). `t_order` and `t_order_item` are sharded by user_id % 2
(database) and order_id % 2 (table) and bound; `t_user` is a single table on the second data source. Two
proxies over the same databases, one LOCAL and one XA by default (the transaction type is a global rule),
`maxPoolSize: 2` per data source. The mixed test runs once per logical database.

Every answer is checkable: client `c` owns users 2c (rw_0) and 2c+1 (rw_1), tags its rows
`status = 'c<c>'`, gives them ids in its own range and keeps a model of what it committed; every statement
reads only its own rows (its tag, its users) and carries a nonce where it can. Afterwards: every client
finished, no session stuck, no connection leaked (pool stats and the servers' processlist), no open
transaction and no prepared XA branch on the servers, nothing logged as an error.

`ENABLED` lists the kinds the mixed test runs: every kind, federation and stepwise writes included (each
takes all its data sources' connections in sorted order before it waits for anything).
`SHARDPROXY_STRESS_KINDS=a,b` and `SHARDPROXY_STRESS_SECONDS` override the mix by hand (one kind alone).
"""

from __future__ import annotations

import contextlib
import os
import random
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mysql.connector
import pymysql
import pymysql.cursors
import pytest
from pymysql.constants import CLIENT

from proxy.sandbox import MariaDBServer
from tests.integration.faults import abort
from tests.integration.harness import RunningProxy, start_proxy, write_conf
from tests.integration.stress_support import (
    assert_pools_quiet,
    backend_connections,
    capture,
    fresh_client_check,
    run_load,
    unknown_backend_threads,
    wait_pools_quiet,
)

CLIENTS = int(os.environ.get("SHARDPROXY_STRESS_CLIENTS", "48"))
POOL = 2
SECONDS = float(os.environ.get("SHARDPROXY_STRESS_SECONDS", "5"))
ORDERS_PER_USER = 3
DB = "sgen_db"  # sharded over read/write splitting groups
PLAIN_DB = "sgen_plain_db"  # the same tables, sharded over the primaries themselves
PHYSICAL = ("sgen_0", "sgen_1")
XA_PREFIX = "sp-sgen"

def _sharding_rules(ds: str) -> str:
    """The same sharded tables over data sources (or read/write splitting groups) named <ds>_0, <ds>_1."""
    return f"""\
- !SHARDING
  tables:
    t_order:
      actualDataNodes: {ds}_${{0..1}}.t_order_${{0..1}}
      databaseStrategy: {{standard: {{shardingColumn: user_id, shardingAlgorithmName: db_inline}}}}
      tableStrategy: {{standard: {{shardingColumn: order_id, shardingAlgorithmName: t_order_inline}}}}
    t_order_item:
      actualDataNodes: {ds}_${{0..1}}.t_order_item_${{0..1}}
      databaseStrategy: {{standard: {{shardingColumn: user_id, shardingAlgorithmName: db_inline}}}}
      tableStrategy: {{standard: {{shardingColumn: order_id, shardingAlgorithmName: t_item_inline}}}}
  bindingTables: [t_order,t_order_item]
  shardingAlgorithms:
    db_inline: {{type: INLINE, props: {{algorithm-expression: '{ds}_${{user_id % 2}}'}}}}
    t_order_inline: {{type: INLINE, props: {{algorithm-expression: 't_order_${{order_id % 2}}'}}}}
    t_item_inline: {{type: INLINE, props: {{algorithm-expression: 't_order_item_${{order_id % 2}}'}}}}
- !SINGLE
  tables: [{ds}_1.t_user]
"""


RULES = """\
- !READWRITE_SPLITTING
  dataSourceGroups:
    rw_0: {writeDataSourceName: ds_0, readDataSourceNames: [ds_0r], readAfterWrite: TRANSACTION,
           loadBalancerName: lb, healthCheckIntervalMilliseconds: 60000}
    rw_1: {writeDataSourceName: ds_1, readDataSourceNames: [ds_1r], readAfterWrite: TRANSACTION,
           loadBalancerName: lb, healthCheckIntervalMilliseconds: 60000}
  loadBalancers:
    lb: {type: ROUND_ROBIN}
""" + _sharding_rules("rw")

# `status` (each client's tag) is indexed: a locking statement on one client's rows (the stepwise UPDATE's
# key read, federation's INSERT ... SELECT into its copy) then locks those rows, not every row it scans.
# Without the index each one row-locks the whole table, and a transaction that holds row locks on ds_0
# while it waits for a connection of ds_1 meets one that holds ds_1's connection while it waits for those
# locks: a deadlock across the lock manager and the pool that only the timeouts end.
PLAIN_RULES = _sharding_rules("ds")

DDL = (
    "CREATE TABLE t_order (order_id BIGINT PRIMARY KEY, user_id INT NOT NULL, status VARCHAR(20) NOT NULL, "
    "note VARCHAR(20) NOT NULL DEFAULT '', amount INT NOT NULL, KEY (status))",
    "CREATE TABLE t_order_item (item_id BIGINT PRIMARY KEY, order_id BIGINT NOT NULL, user_id INT NOT NULL, "
    "status VARCHAR(20) NOT NULL, qty INT NOT NULL, KEY (status))",
)
USER_DDL = "CREATE TABLE t_user (user_id INT PRIMARY KEY, name VARCHAR(20) NOT NULL)"

# Federation and stepwise writes took one connection while holding another, out of the sorted order
# (clients ended in 2013 or 1040 '... in use, ... waiting'); the fed_* and step_* kinds run since that was fixed.
WEIGHTS: dict[str, int] = {
    "single": 4, "scatter_merge": 2, "scatter_concat": 2, "aggregate": 2, "join_bound": 1, "replica_read": 2,
    "prepared": 2, "cursor": 1, "multi": 1, "txn_local": 2, "txn_xa": 2, "txn_errors": 1, "session_vars": 1,
    "kill_query": 1, "abandon": 1,
    "fed_subquery": 1, "fed_union": 1, "fed_window": 1, "fed_join_single": 1,
    "step_update": 1, "step_delete": 1, "insert_select": 1, "shard_update": 1, "upsert": 1,
}
ENABLED = frozenset(WEIGHTS)


class Mismatch(AssertionError):
    pass


MISSED_KILLS: list[int] = []  # clients whose first KILL QUERY found nothing to stop (see Client.k_kill_query)


class Proxies:
    def __init__(self, local: RunningProxy, xa: RunningProxy, servers: list[MariaDBServer]) -> None:
        self.local, self.xa, self.servers = local, xa, servers


# --- a read-only cursor over the raw protocol (no client library here opens one) -------------------------

def _lenenc(data: bytes, i: int) -> tuple[int, int]:
    first = data[i]
    if first < 0xFB:
        return first, i + 1
    size = {0xFC: 2, 0xFD: 3, 0xFE: 8}[first]
    return int.from_bytes(data[i + 1:i + 1 + size], "little"), i + 1 + size


class CursorClient:
    """COM_STMT_PREPARE / EXECUTE (CURSOR_TYPE_READ_ONLY) / FETCH / CLOSE of a statement without
    parameters whose columns are all BIGINT (decoded here)."""

    def __init__(self, proxy: RunningProxy, db: str) -> None:
        self.conn = proxy.connect(db)

    def _send(self, payload: bytes) -> None:
        self.conn._next_seq_id = 0  # type: ignore[attr-defined]
        self.conn._write_bytes(struct.pack("<I", len(payload))[:3] + b"\x00" + payload)  # type: ignore[attr-defined]
        self.conn._next_seq_id = 1  # type: ignore[attr-defined]

    def _read(self) -> bytes:
        packet = self.conn._read_packet()  # type: ignore[attr-defined]
        return bytes(packet.get_all_data())

    def _eof(self, payload: bytes) -> bool:
        return payload[:1] == b"\xfe" and len(payload) < 9

    def rows(self, sql: str, fetch: int) -> list[tuple[int, ...]]:
        self._send(b"\x16" + sql.encode())
        head = self._read()
        if head[:1] == b"\xff":
            raise Mismatch(f"cursor prepare failed: {head[3:]!r}")
        stmt_id, ncols, nparams = struct.unpack_from("<IHH", head, 1)
        for _ in range(nparams + (1 if nparams else 0) + ncols + (1 if ncols else 0)):
            self._read()
        try:
            self._send(b"\x17" + struct.pack("<IBI", stmt_id, 1, 1))
            first = self._read()
            if first[:1] == b"\xff":
                raise Mismatch(f"cursor execute failed: {first[3:]!r}")
            n, _ = _lenenc(first, 0)
            for _ in range(n):
                self._read()
            eof = self._read()  # the EOF after the columns: CURSOR_EXISTS, no rows yet
            status = struct.unpack_from("<H", eof, 3)[0]
            out: list[tuple[int, ...]] = []
            if not status & 0x40:  # SERVER_STATUS_CURSOR_EXISTS: else the rows follow at once
                raise Mismatch(f"no cursor opened (status {status:#x})")
            while True:
                self._send(b"\x1c" + struct.pack("<II", stmt_id, fetch))
                while True:
                    p = self._read()
                    if p[:1] == b"\xff":
                        raise Mismatch(f"fetch failed: {p[3:]!r}")
                    if self._eof(p):
                        status = struct.unpack_from("<H", p, 3)[0]
                        break
                    nullmap = (n + 7 + 2) // 8
                    values = []
                    at = 1 + nullmap
                    for col in range(n):
                        if p[1 + (col + 2) // 8] & (1 << ((col + 2) % 8)):
                            values.append(None)
                            continue
                        values.append(struct.unpack_from("<q", p, at)[0])
                        at += 8
                    out.append(tuple(values))  # type: ignore[arg-type]
                if status & 0x80:  # SERVER_STATUS_LAST_ROW_SENT
                    return out
        finally:
            self._send(b"\x19" + struct.pack("<I", stmt_id))  # COM_STMT_CLOSE: no answer

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.conn.close()


# --- one client ---------------------------------------------------------------------------------------------

class Client:
    """Client `c`: users 2c (rw_0) and 2c+1 (rw_1), tag 'c<c>', order ids c * 1_000_000 + n (n < 100_000),
    item ids order id + 500_000 + 1000 * k. `orders`: order id -> [user, note, amount] as committed."""

    def __init__(self, proxies: Proxies, c: int, seed: int, kinds: frozenset[str], db: str = DB) -> None:
        self.p = proxies
        self.db = db
        self.c = c
        self.rng = random.Random(seed)
        self.users = (2 * c, 2 * c + 1)
        self.tag = f"c{c}"
        self.orders: dict[int, list[Any]] = {}
        self.items: dict[int, list[int]] = {}  # item id -> [order id, user, qty]
        self.next_order = c * 1_000_000
        self.item_batch = 0
        self.multi = c % 2 == 1  # half the clients speak multi-statements
        self.precision = c % 7
        self.kinds = sorted(kinds)
        self.weights = [WEIGHTS[k] for k in self.kinds]
        self.conn: pymysql.connections.Connection[Any] | None = None
        self.xconn: pymysql.connections.Connection[Any] | None = None
        self.other: pymysql.connections.Connection[Any] | None = None
        self.prepared: Any = None
        self.cursor: CursorClient | None = None
        self.counts: dict[str, int] = {}

    # -- plumbing --

    def _main(self) -> pymysql.connections.Connection[Any]:
        if self.conn is None or not self.conn.open:
            flag = CLIENT.MULTI_STATEMENTS if self.multi else 0
            self.conn = self.p.local.connect(self.db, read_timeout=30, write_timeout=30, client_flag=flag)
            with self.conn.cursor() as cur:
                cur.execute(f"SET SESSION div_precision_increment = {self.precision}")
                cur.execute(f"SET @marker = {self.c}")
        return self.conn

    def _xa(self) -> pymysql.connections.Connection[Any]:
        if self.xconn is None or not self.xconn.open:
            self.xconn = self.p.xa.connect(self.db, read_timeout=30, write_timeout=30)
        return self.xconn

    def rows(self, sql: str, args: Any = None, conn: Any = None) -> list[tuple[Any, ...]]:
        with (conn or self._main()).cursor() as cur:
            cur.execute(sql, args)
            return [tuple(r) for r in cur.fetchall()]

    def affected(self, sql: str, args: Any = None, conn: Any = None) -> int:
        with (conn or self._main()).cursor() as cur:
            return int(cur.execute(sql, args))

    def check(self, what: str, got: Any, want: Any) -> None:
        if got != want:
            raise Mismatch(f"client {self.c} {what}: got {got!r}, want {want!r}")

    def nonce(self) -> int:
        return self.rng.randrange(1 << 30)

    def new_order(self) -> int:
        self.next_order += 1
        assert self.next_order < self.c * 1_000_000 + 100_000
        return self.next_order

    def _order_values(self, oid: int, user: int, amount: int) -> str:
        return f"({oid}, {user}, '{self.tag}', '', {amount})"

    def mine(self, user: int | None = None) -> list[int]:
        return sorted(o for o, (u, _n, _a) in self.orders.items() if user is None or u == user)

    # -- seeding --

    def seed(self) -> None:
        for u in self.users:
            values = []
            for _ in range(ORDERS_PER_USER):
                oid, amount = self.new_order(), self.rng.randint(1, 50)
                values.append(self._order_values(oid, u, amount))
                self.orders[oid] = [u, "", amount]
            self.affected("INSERT INTO t_order (order_id, user_id, status, note, amount) VALUES " + ", ".join(values))
            items = [(o + 500_000, o, u, self.rng.randint(1, 9)) for o in self.mine(u)]
            self.affected("INSERT INTO t_order_item (item_id, order_id, user_id, status, qty) VALUES "
                          + ", ".join(f"({i}, {o}, {uu}, '{self.tag}', {q})" for i, o, uu, q in items))
            for i, o, uu, q in items:
                self.items[i] = [o, uu, q]
        self.affected(f"INSERT INTO t_user (user_id, name) VALUES ({self.users[0]}, 'u{self.users[0]}'), "
                      f"({self.users[1]}, 'u{self.users[1]}')")

    # -- the kinds ----------------------------------------------------------------------------------------

    def k_single(self) -> None:
        u = self.rng.choice(self.users)
        n = self.nonce()
        got = self.rows(f"SELECT {self.c}, {n}, COUNT(*), SUM(amount) FROM t_order WHERE user_id = {u} "
                        f"AND status = '{self.tag}'")
        want = self.mine(u)
        self.check("single aggregate", [tuple(int(v or 0) for v in r) for r in got],
                   [(self.c, n, len(want), sum(self.orders[o][2] for o in want))])
        oid = self.rng.choice(want)
        got = self.rows(f"SELECT order_id, user_id, status, note, {n} FROM t_order WHERE user_id = {u} AND "
                        f"order_id = {oid}")
        self.check("single row", got, [(oid, u, self.tag, self.orders[oid][1], n)])

    def k_scatter_merge(self) -> None:
        n = self.nonce()
        got = self.rows(f"SELECT order_id, user_id, {n} FROM t_order WHERE status = '{self.tag}' "
                        f"ORDER BY order_id DESC LIMIT 3")
        self.check("scatter ORDER BY LIMIT", got, [(o, self.orders[o][0], n) for o in self.mine()[::-1][:3]])
        got = self.rows(f"SELECT {self.c} AS m, COUNT(*), MAX(order_id), SUM(amount) FROM t_order "
                        f"WHERE status = '{self.tag}'")
        every = self.mine()
        self.check("scatter aggregate", [tuple(int(v) for v in r) for r in got],
                   [(self.c, len(every), max(every), sum(self.orders[o][2] for o in every))])

    def k_scatter_concat(self) -> None:
        n = self.nonce()
        got = self.rows(f"SELECT order_id, user_id, note, {n} FROM t_order WHERE status = '{self.tag}'")
        self.check("scatter concatenation", sorted(got),
                   [(o, self.orders[o][0], self.orders[o][1], n) for o in self.mine()])

    def k_aggregate(self) -> None:
        got = self.rows(f"SELECT user_id, COUNT(*), SUM(amount), COUNT(DISTINCT amount), "
                        f"IFNULL(MAX(amount), 0) + 1 FROM t_order WHERE status = '{self.tag}' "
                        f"GROUP BY user_id WITH ROLLUP")
        want = []
        for u in self.users:
            am = [self.orders[o][2] for o in self.mine(u)]
            if am:
                want.append((u, len(am), sum(am), len(set(am)), max(am) + 1))
        am = [self.orders[o][2] for o in self.mine()]
        want.append((None, len(am), sum(am), len(set(am)), max(am) + 1))
        self.check("GROUP BY WITH ROLLUP", [tuple(None if v is None else int(v) for v in r) for r in got], want)
        got = self.rows(f"SELECT COUNT(DISTINCT user_id), COUNT(DISTINCT user_id, amount), "
                        f"SUM(DISTINCT amount) FROM t_order WHERE status = '{self.tag}'")
        pairs = {(self.orders[o][0], self.orders[o][2]) for o in self.mine()}
        self.check("DISTINCT aggregates", [tuple(int(v) for v in r) for r in got],
                   [(len({u for u, _ in pairs}), len(pairs), sum(set(am)))])

    def k_join_bound(self) -> None:
        got = self.rows(f"SELECT o.order_id, i.item_id, i.qty FROM t_order o JOIN t_order_item i "
                        f"ON i.order_id = o.order_id AND i.user_id = o.user_id WHERE o.status = '{self.tag}' "
                        f"ORDER BY i.item_id")
        want = sorted((o, i, q) for i, (o, u, q) in self.items.items() if o in self.orders and self.orders[o][0] == u)
        self.check("binding join", got, [(o, i, q) for o, i, q in sorted(want, key=lambda t: t[1])])

    def k_replica_read(self) -> None:
        """Autocommit reads of a read/write group go to its read member (the same database)."""
        u = self.rng.choice(self.users)
        got = self.rows(f"SELECT order_id FROM t_order WHERE user_id = {u} AND status = '{self.tag}' "
                        f"ORDER BY order_id")
        self.check("replica read", [r[0] for r in got], self.mine(u))

    def k_prepared(self) -> None:
        if self.prepared is None:
            self.prepared = mysql.connector.connect(
                host=self.p.local.host, port=self.p.local.port, user="root", password="root", database=self.db,
                use_pure=True, ssl_disabled=True, autocommit=True, connection_timeout=30,
            )
        u = self.rng.choice(self.users)
        cur = self.prepared.cursor(prepared=True)
        try:
            cur.execute("SELECT order_id, user_id FROM t_order WHERE user_id = ? AND status = ? ORDER BY order_id",
                        (u, self.tag))
            got = [tuple(int(v) for v in r) for r in cur.fetchall()]
            self.check("prepared single", got, [(o, u) for o in self.mine(u)])
            cur.execute("SELECT COUNT(*), SUM(amount) FROM t_order WHERE status = ?", (self.tag,))
            got = [tuple(int(v) for v in r) for r in cur.fetchall()]
            self.check("prepared scatter", got, [(len(self.mine()), sum(self.orders[o][2] for o in self.mine()))])
        finally:
            cur.close()

    def k_cursor(self) -> None:
        if self.cursor is None:
            self.cursor = CursorClient(self.p.local, self.db)
        got = self.cursor.rows(f"SELECT order_id, CAST(user_id AS SIGNED) FROM t_order WHERE status = '{self.tag}' "
                               f"ORDER BY order_id", fetch=self.rng.randint(1, 3))
        self.check("cursor", got, [(o, self.orders[o][0]) for o in self.mine()])

    def k_multi(self) -> None:
        if not self.multi:
            return self.k_single()
        n = self.nonce()
        conn = self._main()
        with conn.cursor() as cur:
            cur.execute(f"SELECT {self.c}, {n}; SELECT COUNT(*) FROM t_order WHERE status = '{self.tag}'; "
                        f"SELECT order_id FROM t_order WHERE user_id = {self.users[1]} AND status = '{self.tag}'")
            first = [tuple(int(v) for v in r) for r in cur.fetchall()]
            assert cur.nextset()
            second = [int(r[0]) for r in cur.fetchall()]
            assert cur.nextset()
            third = sorted(int(r[0]) for r in cur.fetchall())
            assert not cur.nextset()
        self.check("multi-statement", (first, second, third),
                   ([(self.c, n)], [len(self.mine())], self.mine(self.users[1])))
        return None

    def _txn(self, conn: Any, what: str, errors: bool) -> None:
        commit = self.rng.random() < 0.6
        new = {u: self.new_order() for u in self.users}
        amounts = {u: self.rng.randint(1, 50) for u in self.users}
        with conn.cursor() as cur:
            cur.execute("BEGIN")
            for u in self.users:  # rw_0 then rw_1
                cur.execute("INSERT INTO t_order (order_id, user_id, status, note, amount) VALUES "
                            + self._order_values(new[u], u, amounts[u]))
            if errors:
                dup = self.rng.choice(self.mine())
                try:
                    cur.execute("INSERT INTO t_order (order_id, user_id, status, note, amount) VALUES "
                                + self._order_values(dup, self.orders[dup][0], 1))
                    raise Mismatch(f"client {self.c} {what}: a duplicate key was accepted")
                except pymysql.err.IntegrityError as exc:
                    self.check(f"{what} duplicate key errno", exc.args[0], 1062)
                try:
                    cur.execute(f"SELECT @v := order_id FROM t_order WHERE status = '{self.tag}'")
                    cur.fetchall()
                    raise Mismatch(f"client {self.c} {what}: a refused statement was answered")
                except pymysql.err.MySQLError as exc:
                    self.check(f"{what} refusal errno", exc.args[0], 1235)
            cur.execute(f"SELECT COUNT(*) FROM t_order WHERE status = '{self.tag}'")
            inside = int(cur.fetchone()[0])
            cur.execute("COMMIT" if commit else "ROLLBACK")
        self.check(f"{what} count inside", inside, len(self.orders) + 2)
        if commit:
            for u in self.users:
                self.orders[new[u]] = [u, "", amounts[u]]
        got = self.rows(f"SELECT COUNT(*) FROM t_order WHERE status = '{self.tag}'", conn=conn)
        self.check(f"{what} count after", int(got[0][0]), len(self.orders))

    def k_txn_local(self) -> None:
        self._txn(self._main(), "LOCAL transaction", errors=False)

    def k_txn_xa(self) -> None:
        self._txn(self._xa(), "XA transaction", errors=self.rng.random() < 0.3)

    def k_txn_errors(self) -> None:
        self._txn(self._main(), "LOCAL transaction with errors", errors=True)

    def k_session_vars(self) -> None:
        """The client's own settings, on every backend connection a scatter read uses (connections are
        shared between sessions: no other session's state may show)."""
        got = self.rows(f"SELECT order_id, @marker, 1 / 3 FROM t_order WHERE status = '{self.tag}'")
        want_div = "0." + "3" * self.precision if self.precision else "0"
        self.check("session variables", sorted((int(r[0]), None if r[1] is None else int(r[1]), str(r[2]))
                                               for r in got),
                   [(o, self.c, want_div) for o in self.mine()])
        if self.rng.random() < 0.3:
            self.precision = (self.precision + 1) % 7
            self.affected(f"SET SESSION div_precision_increment = {self.precision}")

    def k_kill_query(self) -> None:
        """KILL QUERY of the client's own other connection while it sleeps on a backend."""
        if self.other is None or not self.other.open:
            self.other = self.p.local.connect(self.db, read_timeout=20)
        victim = self.other
        u = self.rng.choice(self.users)
        oid = self.rng.choice(self.mine(u))
        outcome: list[Any] = []

        def sleeper() -> None:
            started = time.monotonic()
            try:
                with victim.cursor() as cur:
                    cur.execute(f"SELECT SLEEP(5), order_id FROM t_order WHERE user_id = {u} AND order_id = {oid}")
                    outcome.append(("rows", cur.fetchall()))
            except pymysql.err.MySQLError as exc:
                outcome.append(("error", exc.args[0]))
            outcome.append(time.monotonic() - started)

        t = threading.Thread(target=sleeper, daemon=True)
        t.start()
        for _ in range(100):  # KILL QUERY of a session between statements stops nothing: wait for it to run
            if any(r[0] == victim.thread_id() and r[4] == "Query" for r in self.rows("SHOW PROCESSLIST")):
                break
            time.sleep(0.03)
        self.affected(f"KILL QUERY {victim.thread_id()}")
        t.join(1.5)
        if t.is_alive():
            # a KILL that lands after the statement took its connections and before it sent itself to them
            # finds nothing running (the proxy now ends the statement when the kill lands while its
            # connections are taken or join the transaction; MISSED_KILLS counts any window left); a
            # second one must stop it
            MISSED_KILLS.append(self.c)
            self.affected(f"KILL QUERY {victim.thread_id()}")
        t.join(10)
        if t.is_alive():
            raise Mismatch(f"client {self.c} KILL QUERY: the killed statement still runs after 10 s")
        result, seconds = outcome
        if seconds > 4.5:
            raise Mismatch(f"client {self.c} KILL QUERY: the statement ran {seconds:.1f} s ({result})")
        if result[0] == "error":
            self.check("KILL QUERY errno", result[1], 1317)
        else:
            self.check("killed SLEEP", [(int(a), int(b)) for a, b in result[1]], [(1, oid)])
        got = self.rows(f"SELECT {self.c}, COUNT(*) FROM t_order WHERE user_id = {u} AND status = '{self.tag}'",
                        conn=victim)
        self.check("after KILL QUERY", [tuple(int(v) for v in r) for r in got], [(self.c, len(self.mine(u)))])

    def k_abandon(self) -> None:
        """A scatter read left after the first rows: the socket is closed under it."""
        conn = self.p.local.connect(self.db, cursorclass=pymysql.cursors.SSCursor)
        cur = conn.cursor()
        cur.execute("SELECT a.order_id, a.status, REPEAT('x', 3000) FROM t_order a")
        cur.fetchmany(2)
        unread = cur._result  # type: ignore[attr-defined]
        abort(conn)
        unread.unbuffered_active = False
        cur._result = None  # type: ignore[attr-defined]

    # -- federation (known to exhaust the pools under load) --

    def k_fed_subquery(self) -> None:
        got = self.rows(f"SELECT item_id, order_id FROM t_order_item WHERE order_id IN "
                        f"(SELECT order_id FROM t_order WHERE status = '{self.tag}') ORDER BY item_id")
        self.check("federated IN subquery", got,
                   sorted((i, o) for i, (o, _u, _q) in self.items.items() if o in self.orders))

    def k_fed_union(self) -> None:
        got = self.rows(f"SELECT order_id FROM t_order WHERE status = '{self.tag}' UNION "
                        f"SELECT order_id FROM t_order_item WHERE status = '{self.tag}' ORDER BY 1")
        self.check("federated UNION", [r[0] for r in got],
                   sorted(set(self.orders) | {o for o, _u, _q in self.items.values()}))

    def k_fed_window(self) -> None:
        got = self.rows(f"SELECT order_id, ROW_NUMBER() OVER (ORDER BY order_id) FROM t_order "
                        f"WHERE status = '{self.tag}' ORDER BY order_id")
        self.check("federated window", got, [(o, n + 1) for n, o in enumerate(self.mine())])

    def k_fed_join_single(self) -> None:
        got = self.rows(f"SELECT o.order_id, u.name FROM t_order o JOIN t_user u ON u.user_id = o.user_id "
                        f"WHERE o.status = '{self.tag}' ORDER BY o.order_id")
        self.check("cross data source join", got, [(o, f"u{self.orders[o][0]}") for o in self.mine()])

    # -- stepwise writes (known to exhaust the pools under load) --

    def k_step_update(self) -> None:
        n = self.rng.randint(1, 4)
        note = f"n{self.rng.randint(0, 3)}"
        first = self.mine()[:n]
        got = self.affected(f"UPDATE t_order SET note = '{note}' WHERE status = '{self.tag}' "
                            f"ORDER BY order_id LIMIT {n}")
        self.check("UPDATE ORDER BY LIMIT affected", got, sum(1 for o in first if self.orders[o][1] != note))
        for o in first:
            self.orders[o][1] = note

    def k_step_delete(self) -> None:
        if len(self.orders) <= 2 * ORDERS_PER_USER:  # keep enough rows: add one first
            u = self.rng.choice(self.users)
            oid, amount = self.new_order(), self.rng.randint(1, 50)
            self.affected("INSERT INTO t_order (order_id, user_id, status, note, amount) VALUES "
                          + self._order_values(oid, u, amount))
            self.orders[oid] = [u, "", amount]
        last = self.mine()[-1]
        got = self.affected(f"DELETE FROM t_order WHERE status = '{self.tag}' ORDER BY order_id DESC LIMIT 1")
        self.check("DELETE ORDER BY LIMIT affected", got, 1)
        del self.orders[last]

    def k_insert_select(self) -> None:
        self.item_batch += 1
        assert self.item_batch < 500
        off = 500_000 + 1000 * self.item_batch
        qty = self.rng.randint(1, 9)
        got = self.affected(f"INSERT INTO t_order_item (item_id, order_id, user_id, status, qty) "
                            f"SELECT order_id + {off}, order_id, user_id, status, {qty} FROM t_order "
                            f"WHERE status = '{self.tag}'")
        self.check("INSERT ... SELECT affected", got, len(self.orders))
        for o, (u, _n, _a) in self.orders.items():
            self.items[o + off] = [o, u, qty]

    def k_upsert(self) -> None:
        """INSERT ... ON DUPLICATE KEY UPDATE: the order id may exist on the other data source too, so the
        proxy checks every node under named locks (proxy.execution.upsert) before it writes."""
        u = self.rng.choice(self.users)
        if self.rng.random() < 0.5:
            oid, amount = self.new_order(), self.rng.randint(1, 50)
            self.affected("INSERT INTO t_order (order_id, user_id, status, note, amount) VALUES "
                          + self._order_values(oid, u, amount) + " ON DUPLICATE KEY UPDATE note = 'dup'")
            self.orders[oid] = [u, "", amount]
        else:
            oid = self.rng.choice(self.mine(u))
            note = f"u{self.rng.randint(0, 3)}"
            self.affected("INSERT INTO t_order (order_id, user_id, status, note, amount) VALUES "
                          + self._order_values(oid, u, self.orders[oid][2])
                          + f" ON DUPLICATE KEY UPDATE note = '{note}'")
            self.orders[oid][1] = note
        got = self.rows(f"SELECT order_id, user_id, note FROM t_order WHERE order_id = {oid}")
        self.check("upsert", got, [(oid, u, self.orders[oid][1])])

    def k_shard_update(self) -> None:
        oid = self.rng.choice(self.mine())
        u = self.orders[oid][0]
        if self.rng.random() < 0.5:  # Django's save(): the sharding column set to its own value
            got = self.affected(f"UPDATE t_order SET user_id = {u}, amount = amount WHERE order_id = {oid}")
            self.check("sharding-column UPDATE, same value", got, 0)
            return
        to = self.users[1] if u == self.users[0] else self.users[0]  # moves to the other data source
        got = self.affected(f"UPDATE t_order SET user_id = {to} WHERE order_id = {oid} AND status = '{self.tag}'")
        self.check("sharding-column UPDATE that moves the row", got, 1)
        self.orders[oid][0] = to

    # -- driving --

    def step(self) -> None:
        kind = self.rng.choices(self.kinds, weights=self.weights, k=1)[0]
        getattr(self, f"k_{kind}")()
        self.counts[kind] = self.counts.get(kind, 0) + 1

    def close(self) -> None:
        for conn in (self.conn, self.xconn, self.other, self.prepared):
            if conn is not None:
                with contextlib.suppress(Exception):
                    conn.close()
        if self.cursor is not None:
            self.cursor.close()


# --- fixtures -----------------------------------------------------------------------------------------

def _conf(dir_: Path, servers: list[MariaDBServer], transaction: dict[str, Any] | None) -> Path:
    sources = {}
    for i, s in enumerate(servers):
        sources[f"ds_{i}"] = (s, PHYSICAL[i])
        sources[f"ds_{i}r"] = (s, PHYSICAL[i])
    plain = {f"ds_{i}": (s, PHYSICAL[i]) for i, s in enumerate(servers)}
    return write_conf(dir_, {DB: sources, PLAIN_DB: plain}, rules_yaml={DB: RULES, PLAIN_DB: PLAIN_RULES},
                      max_pool_size=POOL,
                      props={"proxy-frontend-max-connections": 0}, transaction=transaction,
                      data_source_props={"connectionTimeoutMilliseconds": 8000})


@pytest.fixture(scope="module")
def proxies(mariadb_shards: list[MariaDBServer], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Proxies]:
    servers = mariadb_shards
    for i, s in enumerate(servers):
        s.execute(f"DROP DATABASE IF EXISTS {PHYSICAL[i]}")
        s.execute(f"CREATE DATABASE {PHYSICAL[i]}")
        for sql in DDL:  # the actual tables, before the proxies load the metadata of both logical databases
            for n in (0, 1):
                table = sql.split()[2]
                s.execute(sql.replace(f"TABLE {table} ", f"TABLE {table}_{n} ", 1), PHYSICAL[i])
    servers[1].execute(USER_DDL, PHYSICAL[1])
    base = tmp_path_factory.mktemp("stress-generated")
    local = start_proxy(_conf(base / "local", servers, None))
    try:
        xa = start_proxy(_conf(base / "xa", servers, {
            "defaultType": "XA", "props": {"xa-log-dir": str(base / "xa-log"), "xa-instance-id": "sgen"}}))
        try:
            yield Proxies(local, xa, servers)
        finally:
            xa.stop()
    finally:
        local.stop()


def _clean(proxies: Proxies) -> None:
    with proxies.local.connect(DB) as conn, conn.cursor() as cur:
        for table in ("t_order", "t_order_item", "t_user"):
            cur.execute(f"DELETE FROM {table}")


def _kinds() -> frozenset[str]:
    chosen = os.environ.get("SHARDPROXY_STRESS_KINDS")
    if chosen:
        kinds = frozenset(k.strip() for k in chosen.split(",") if k.strip())
        unknown = kinds - set(WEIGHTS)
        assert not unknown, f"unknown kinds {sorted(unknown)}; known: {sorted(WEIGHTS)}"
        return kinds
    return ENABLED


def run_mix(proxies: Proxies, kinds: frozenset[str], seconds: float, clients: int = CLIENTS,
            seed: int = 0, db: str = DB) -> dict[str, int]:
    """The load on logical database `db` and every check after it; returns the statements run per kind."""
    _clean(proxies)
    population = [Client(proxies, c, seed=seed * 10_000 + c, kinds=kinds, db=db) for c in range(clients)]
    for client in population:
        client.seed()
    with capture() as logs:
        result = run_load(population, seconds)
        for client in population:
            client.close()
        fresh = {name: fresh_client_check(p, db, "SELECT COUNT(*) FROM t_order WHERE user_id = 0")
                 for name, p in (("local", proxies.local), ("xa", proxies.xa))}
    result.logs = logs
    internal = result.internal()
    assert not result.stuck, f"clients stuck: {result.stuck}; {result.failures[:5]}"
    assert not result.failures, "\n".join(result.failures[:20]) + f"\nlogged: {internal[:5]}"
    for name, (seconds_, busy) in fresh.items():
        assert seconds_ < 1.0, (name, seconds_)
        assert not busy, (name, busy)
    assert not internal, internal[:5]
    pools = {name: wait_pools_quiet(p) for name, p in (("local", proxies.local), ("xa", proxies.xa))}
    for report in pools.values():
        assert_pools_quiet(report)
    for i, server in enumerate(proxies.servers):
        total, in_trx, prepared = backend_connections(server, [PHYSICAL[i]], XA_PREFIX)
        assert in_trx == 0, (i, in_trx)
        assert prepared == 0, (i, prepared)
        leaked = unknown_backend_threads(server, [PHYSICAL[i]], [proxies.local, proxies.xa])
        assert not leaked, (i, total, leaked, pools)  # every connection on the server is one a proxy owns
    done: dict[str, int] = {}
    for client in population:
        for k, v in client.counts.items():
            done[k] = done.get(k, 0) + v
    print(f"stress mix on {db}: {result.statements} statements by {clients} clients in {seconds:.0f} s; {done}; "
          f"first KILL QUERY missed by clients {MISSED_KILLS}")
    MISSED_KILLS.clear()
    return done


@pytest.mark.parametrize("db", [DB, PLAIN_DB])
def test_generated_mix_of_every_enabled_kind(proxies: Proxies, db: str) -> None:
    kinds = _kinds()
    done = run_mix(proxies, kinds, SECONDS, db=db)
    missing = sorted(k for k in kinds if not done.get(k))
    assert not missing, f"kinds never drawn: {missing}"


# --- the defects the mix found, each in its smallest form ------------------------------------------------

def test_a_refused_statement_does_not_pin_the_sessions_connections(proxies: Proxies) -> None:
    """`@v := ...` over several nodes is refused before it runs anywhere. It used to make the session
    sticky all the same (the text matches what leaves state on a connection), so the session kept one
    connection of each pool for good: `POOL` such sessions and every other session waited until ERR 1040."""
    _clean(proxies)
    pinned = [proxies.local.connect(DB) for _ in range(POOL)]
    try:
        for conn in pinned:
            with conn.cursor() as cur:
                # a write: the session now holds a connection of each primary
                cur.execute("UPDATE t_order SET note = 'x' WHERE user_id IN (0, 1) AND status = 'none'")
                with pytest.raises(pymysql.err.MySQLError) as refused:
                    cur.execute("SELECT @v := order_id FROM t_order")
                assert refused.value.args[0] == 1235
                cur.execute("SELECT note FROM t_order WHERE status = 'temporary' AND user_id = 0")  # data, no state
        other = proxies.local.connect(DB, read_timeout=5)
        try:
            with other.cursor() as cur:
                cur.execute("BEGIN")  # the primaries: the connections the sessions above hold idle
                cur.execute("INSERT INTO t_order (order_id, user_id, status, amount) VALUES (1, 0, 'x', 1), "
                            "(3, 0, 'x', 1)")
                cur.execute("INSERT INTO t_order (order_id, user_id, status, amount) VALUES (2, 1, 'x', 1)")
                cur.execute("ROLLBACK")
        finally:
            other.close()
    finally:
        for conn in pinned:
            conn.close()


def test_kill_query_stops_a_statement_waiting_for_a_connection(proxies: Proxies) -> None:
    """KILL QUERY of a session whose statement waits for a full pool used to find nothing running on a
    backend and do nothing: the statement ran once it got a connection, long after the KILL answered OK."""
    _clean(proxies)
    holders = [proxies.local.connect(DB) for _ in range(POOL)]
    victim = proxies.local.connect(DB, read_timeout=30)
    killer = proxies.local.connect(DB)
    outcome: list[Any] = []
    try:
        for n, conn in enumerate(holders):  # transactions hold every connection of ds_0
            with conn.cursor() as cur:
                cur.execute("BEGIN")
                cur.execute(f"INSERT INTO t_order (order_id, user_id, status, amount) VALUES ({10 + n}, 0, 'h', 1)")

        def run() -> None:
            started = time.monotonic()
            try:
                with victim.cursor() as cur:
                    outcome.append(cur.execute("INSERT INTO t_order (order_id, user_id, status, amount) "
                                               "VALUES (20, 0, 'v', 1)"))
            except pymysql.err.MySQLError as exc:
                outcome.append(exc.args[0])
            outcome.append(time.monotonic() - started)

        t = threading.Thread(target=run, daemon=True)
        t.start()
        time.sleep(0.5)
        with killer.cursor() as cur:
            cur.execute(f"KILL QUERY {victim.thread_id()}")
        t.join(3)
        assert not t.is_alive(), "the killed statement still waits for a connection"
        assert outcome[0] == 1317, outcome
        assert outcome[1] < 2.0, outcome
    finally:
        for conn in holders:
            with contextlib.suppress(Exception):
                conn.rollback()
            conn.close()
        t.join(25)
        victim.close()
        killer.close()
    assert proxies.local.query("SELECT COUNT(*) FROM t_order", DB) == [(0,)]  # the killed INSERT never ran


def test_a_transaction_lends_the_connections_it_has_not_joined(proxies: Proxies) -> None:
    """A session in a transaction kept every connection it held, also those of data sources the transaction
    had not touched yet. Sessions whose transactions wrote ds_0 then ds_1 deadlocked (until ERR 1040) with
    sessions whose open transactions held an idle ds_1 while they waited for ds_0 (found with 8 clients
    on pools of 2)."""
    _clean(proxies)
    idle_in_txn = [proxies.local.connect(DB) for _ in range(POOL)]
    writers = [proxies.local.connect(DB, read_timeout=5) for _ in range(POOL)]
    try:
        for conn in idle_in_txn:  # each holds an idle connection of ds_1's primary, then opens a transaction
            with conn.cursor() as cur:
                cur.execute("UPDATE t_order SET note = 'x' WHERE user_id = 1 AND status = 'none'")
                cur.execute("BEGIN")
        for n, conn in enumerate(writers):  # transactions holding every connection of ds_0's primary
            with conn.cursor() as cur:
                cur.execute("BEGIN")
                cur.execute(f"INSERT INTO t_order (order_id, user_id, status, amount) VALUES ({2 * n + 10}, 0, 'w', 1)")
        with writers[0].cursor() as cur:  # needs ds_1: the idle connections the transactions above hold
            cur.execute("INSERT INTO t_order (order_id, user_id, status, amount) VALUES (11, 1, 'w', 1)")
            cur.execute("SELECT COUNT(*) FROM t_order WHERE status = 'w'")
            assert cur.fetchall() == ((2,),)  # its own two rows (the other writer has not committed)
            cur.execute("COMMIT")
        for conn in idle_in_txn:  # and they still work: their transactions take a connection when they need one
            with conn.cursor() as cur:
                cur.execute("SELECT COUNT(*) FROM t_order WHERE user_id = 1 AND status = 'w'")
                assert cur.fetchall() == ((1,),)
                cur.execute("ROLLBACK")
    finally:
        for conn in [*idle_in_txn, *writers]:
            with contextlib.suppress(Exception):
                conn.rollback()
            conn.close()


def test_a_transaction_lends_the_replica_connections_of_its_earlier_reads(proxies: Proxies) -> None:
    """Replica connections never join a transaction (under PRIMARY its reads go to the primary), yet a
    session kept those of its autocommit reads for as long as a transaction was open: with federated
    statements holding ds_0 while they read ds_1's replica, and those transactions waiting for ds_0,
    the pools deadlocked until ERR 1040 (found by the mix of fed_subquery and txn_local)."""
    _clean(proxies)
    in_txn = [proxies.local.connect(DB) for _ in range(POOL)]
    reader = proxies.local.connect(DB, read_timeout=5)
    try:
        for conn in in_txn:  # each holds an idle connection of ds_1's replica, then opens a transaction
            with conn.cursor() as cur:
                cur.execute("SELECT COUNT(*) FROM t_order WHERE user_id = 1")
                cur.execute("BEGIN")
        with reader.cursor() as cur:  # needs ds_1's replica: the idle connections the transactions hold
            cur.execute("SELECT COUNT(*) FROM t_order WHERE user_id = 1")
            assert cur.fetchall() == ((0,),)
        for conn in in_txn:
            with conn.cursor() as cur:
                cur.execute("SELECT COUNT(*) FROM t_order WHERE user_id = 1")
                assert cur.fetchall() == ((0,),)
                cur.execute("COMMIT")
    finally:
        for conn in [*in_txn, reader]:
            conn.close()
