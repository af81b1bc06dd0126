"""A statement that writes on several data nodes is applied on every node or on none (proxy.execution.atomic).

Generated: each statement below fails on exactly one of its parts (a duplicate key, an out-of-range value, a
trigger that SIGNALs on one node only), in every mode a client runs it (autocommit, inside BEGIN, under
autocommit=0), under LOCAL and XA transactions, as text and as a prepared statement. After each, every node's
rows are read directly from the servers: the failed statement left nothing anywhere, what the transaction did
before it is still there and commits, and the session goes on.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mysql.connector
import pymysql
import pytest

from proxy.sandbox import MariaDBServer
from tests.integration.faults import CuttingRelay, abort
from tests.integration.harness import RunningProxy, start_proxy, write_conf

RULES = """\
- !SHARDING
  tables:
    t_order:
      actualDataNodes: ds_${0..1}.t_order_${0..1}
      databaseStrategy: {standard: {shardingColumn: user_id, shardingAlgorithmName: db_inline}}
      tableStrategy: {standard: {shardingColumn: order_id, shardingAlgorithmName: tbl_inline}}
  broadcastTables: [t_addr]
  shardingAlgorithms:
    db_inline: {type: INLINE, props: {algorithm-expression: 'ds_${user_id % 2}'}}
    tbl_inline: {type: INLINE, props: {algorithm-expression: 't_order_${order_id % 2}'}}
"""
TABLES = {"ds_0": ("t_order_0", "t_order_1"), "ds_1": ("t_order_0", "t_order_1")}
# t_addr: broadcast, one copy per data source; ds_1's copy refuses the name 'boom'
ADDR_SEED = ((1, "home"),)
# (order_id, user_id, amount, status): order 10 on ds_0.t_order_0, 11 on ds_0.t_order_1, 17 and 31 on
# ds_1.t_order_1, 30 on ds_1.t_order_0
SEED = ((10, 10, 5, "new"), (11, 10, 5, "new"), (17, 17, 5, "keep"), (30, 1, 5, "new"), (31, 3, 5, "new"))
# ds_1's t_order_1 refuses some rows, so that a statement fails on that node only
TRIGGERS = (
    "CREATE TRIGGER no_boom_ins BEFORE INSERT ON t_order_1 FOR EACH ROW "
    "IF NEW.status = 'boom' THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'boom refused'; END IF",
    "CREATE TRIGGER no_boom_upd BEFORE UPDATE ON t_order_1 FOR EACH ROW "
    "IF NEW.status = 'boom' THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'boom refused'; END IF",
    "CREATE TRIGGER keep_del BEFORE DELETE ON t_order_1 FOR EACH ROW "
    "IF OLD.status = 'keep' THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'kept'; END IF",
    "CREATE TRIGGER no_boom_addr BEFORE INSERT ON t_addr FOR EACH ROW "
    "IF NEW.name = 'boom' THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'boom refused'; END IF",
)


@dataclass(frozen=True)
class Failing:
    """A statement that fails on one part; `sql` with %s for the prepared form's parameters."""

    name: str
    sql: str
    params: tuple[Any, ...]
    errno: int


FAILING = (
    # duplicate key on ds_1 (order 30); order 40 would go to ds_0
    Failing("insert dup other node", "INSERT INTO t_order (order_id, user_id, amount, status) VALUES "
            "(%s, %s, 0, 'new'), (%s, %s, 0, 'new')", (40, 2, 30, 1), 1062),
    # both rows on ds_0, in its two tables: order 10 exists
    Failing("insert dup same node", "INSERT INTO t_order (order_id, user_id, amount, status) VALUES "
            "(%s, %s, 0, 'new'), (%s, %s, 0, 'new')", (41, 2, 10, 10), 1062),
    Failing("insert trigger", "INSERT INTO t_order (order_id, user_id, amount, status) VALUES "
            "(%s, %s, 0, 'new'), (%s, %s, 0, %s)", (42, 2, 43, 3, "boom"), 1644),
    # strict mode: user 17's amount overflows INT on ds_1; user 10's rows on ds_0 would change
    Failing("update out of range", "UPDATE t_order SET amount = amount + IF(user_id = 17, 2147483647, 1) "
            "WHERE user_id IN (%s, %s)", (10, 17), 1264),
    Failing("update trigger", "UPDATE t_order SET status = IF(user_id = 17, 'boom', 'ok') WHERE user_id IN (%s, %s)",
            (10, 17), 1644),
    Failing("delete trigger", "DELETE FROM t_order WHERE user_id IN (%s, %s)", (10, 17), 1644),
    # a broadcast table's copies: ds_1's refuses the row, ds_0's must not keep it
    Failing("broadcast insert trigger", "INSERT INTO t_addr (id, name) VALUES (%s, %s)", (2, "boom"), 1644),
    # the unique key (order_id) lacks the data-source column: the upsert looks the keys up first
    # (proxy.execution.upsert); order 17 exists on ds_1, its update trips the trigger; order 44 would go to ds_0
    Failing("upsert lookup trigger", "INSERT INTO t_order (order_id, user_id, amount, status) VALUES "
            "(%s, %s, 0, 'new'), (%s, %s, 0, 'x') ON DUPLICATE KEY UPDATE status = 'boom'", (44, 2, 17, 17), 1644),
    # statements run in steps (proxy.execution.stepwise)
    Failing("insert select trigger", "INSERT INTO t_order (order_id, user_id, amount, status) SELECT order_id + %s, "
            "user_id, amount, IF(user_id = 17, 'boom', 'copy') FROM t_order", (1000,), 1644),
    Failing("update order by limit trigger", "UPDATE t_order SET status = IF(user_id = 17, 'boom', 'ok') "
            "ORDER BY order_id LIMIT %s", (10,), 1644),
    Failing("delete order by limit trigger", "DELETE FROM t_order ORDER BY order_id LIMIT %s", (10,), 1644),
)
# what a transaction does before the failing statement (multi-node too): it must survive and commit
BEFORE = ("INSERT INTO t_order (order_id, user_id, amount, status) VALUES (50, 2, 1, 'before'), (51, 3, 1, 'before')",
          ((50, 2, 1, "before"), (51, 3, 1, "before")))
MODES = ("autocommit", "begin", "autocommit0")
PROTOCOLS = ("text", "prepared")

_NAMES = itertools.count()


class Env:
    def __init__(self, servers: list[MariaDBServer], tmp_path: Path, transaction: str, *, relay: bool = False,
                 pool: int = 4) -> None:
        self.servers = servers
        n = next(_NAMES)
        self.dbs = {f"ds_{i}": f"atom{n}_{i}" for i in range(2)}
        for server, db in zip(servers, self.dbs.values(), strict=True):
            server.execute(f"CREATE DATABASE {db}")
        self.relay = CuttingRelay(servers[1]) if relay else None
        hosts: list[Any] = [servers[0], self.relay or servers[1]]
        conf = write_conf(tmp_path / f"conf{n}",
                          {"atom_db": {ds: (hosts[int(ds[-1])], db) for ds, db in self.dbs.items()}},
                          rules_yaml={"atom_db": RULES}, max_pool_size=pool,
                          transaction={"defaultType": transaction, "providerType": "Atomikos"})
        self.proxy: RunningProxy = start_proxy(conf)
        with self.connect() as conn, conn.cursor() as cur:
            cur.execute("CREATE TABLE t_order (order_id BIGINT PRIMARY KEY, user_id INT NOT NULL, "
                        "amount INT NOT NULL, status VARCHAR(20))")
            cur.execute("CREATE TABLE t_addr (id BIGINT PRIMARY KEY, name VARCHAR(20))")
        for sql in TRIGGERS:
            self.direct("ds_1", sql)

    def connect(self, **kw: Any) -> pymysql.connections.Connection[Any]:
        kw.setdefault("autocommit", True)
        kw.setdefault("read_timeout", 30)
        return self.proxy.connect("atom_db", **kw)

    def connect_prepared(self) -> Any:
        return mysql.connector.connect(host=self.proxy.host, port=self.proxy.port, user="root", password="root",
                                       database="atom_db", use_pure=True, ssl_disabled=True, autocommit=True)

    def direct(self, ds: str, sql: str) -> list[tuple[Any, ...]]:
        return [tuple(r) for r in self.servers[int(ds[-1])].execute(sql, self.dbs[ds])]

    def rows(self) -> dict[tuple[str, str], list[tuple[Any, ...]]]:
        """Every physical table's committed rows, read directly."""
        out = {(ds, t): sorted(self.direct(ds, f"SELECT order_id, user_id, amount, status FROM {t}"))
               for ds, tables in TABLES.items() for t in tables}
        for ds in TABLES:
            out[(ds, "t_addr")] = sorted(self.direct(ds, "SELECT id, name FROM t_addr"))
        return out

    def seed(self, rows: tuple[tuple[Any, ...], ...] = SEED) -> dict[tuple[str, str], list[tuple[Any, ...]]]:
        for ds, tables in TABLES.items():
            for t in tables:
                self.direct(ds, f"TRUNCATE TABLE {t}")  # (fires no DELETE trigger)
        for ds in TABLES:
            self.direct(ds, "TRUNCATE TABLE t_addr")
            for addr_id, name in ADDR_SEED:
                self.direct(ds, f"INSERT INTO t_addr VALUES ({addr_id}, '{name}')")
        for order_id, user_id, amount, status in rows:
            self.direct(f"ds_{user_id % 2}", f"INSERT INTO t_order_{order_id % 2} VALUES "
                                             f"({order_id}, {user_id}, {amount}, '{status}')")
        return self.rows()

    def open_transactions(self) -> list[tuple[Any, ...]]:
        return [r for ds in TABLES for r in self.direct(ds, "SELECT trx_mysql_thread_id, trx_state, trx_query "
                                                             "FROM information_schema.INNODB_TRX")]


@pytest.fixture(scope="module", params=("LOCAL", "XA"))
def env(request: pytest.FixtureRequest, mariadb_shards: list[MariaDBServer],
        tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    e = Env(mariadb_shards, tmp_path_factory.mktemp("atomicity"), request.param)
    yield e
    e.proxy.stop()


@pytest.fixture(scope="module", params=("LOCAL", "XA"))
def relay_env(request: pytest.FixtureRequest, mariadb_shards: list[MariaDBServer],
              tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    e = Env(mariadb_shards, tmp_path_factory.mktemp("atomicity"), request.param, relay=True)
    yield e
    e.proxy.stop()
    assert e.relay is not None
    e.relay.close()


class Client:
    """One session, text (PyMySQL) or prepared (mysql.connector's COM_STMT_PREPARE / EXECUTE)."""

    def __init__(self, env: Env, protocol: str) -> None:
        self.protocol = protocol
        self.conn: Any = env.connect() if protocol == "text" else env.connect_prepared()

    def run(self, sql: str, params: tuple[Any, ...] = ()) -> None:
        if self.protocol == "text":
            with self.conn.cursor() as cur:
                cur.execute(sql, params or None)
            return
        cur = self.conn.cursor(prepared=True)
        try:
            cur.execute(sql.replace("%s", "?"), params)
            if cur.with_rows:
                cur.fetchall()
        finally:
            cur.close()

    def failure(self, sql: str, params: tuple[Any, ...]) -> tuple[int, str]:
        try:
            self.run(sql, params)
        except (pymysql.MySQLError, mysql.connector.Error) as exc:
            if isinstance(exc, mysql.connector.Error):
                return int(exc.errno), str(exc.msg)
            return int(exc.args[0]), str(exc.args[1])
        raise AssertionError(f"{sql!r} {params} succeeded")

    def close(self) -> None:
        self.conn.close()


def _expected(seed: dict[tuple[str, str], list[tuple[Any, ...]]], extra: tuple[tuple[Any, ...], ...]
              ) -> dict[tuple[str, str], list[tuple[Any, ...]]]:
    out = {k: list(v) for k, v in seed.items()}
    for row in extra:
        out[(f"ds_{row[1] % 2}", f"t_order_{row[0] % 2}")].append(row)
    return {k: sorted(v) for k, v in out.items()}


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", FAILING, ids=lambda c: c.name)
def test_a_statement_failing_on_one_node_leaves_nothing(env: Env, case: Failing, mode: str, protocol: str) -> None:
    seed = env.seed()
    client = Client(env, protocol)
    try:
        if mode == "begin":
            client.run("BEGIN")
        elif mode == "autocommit0":
            client.run("SET autocommit = 0")
        if mode != "autocommit":
            client.run(BEFORE[0])
        errno, message = client.failure(case.sql, case.params)
        assert errno == case.errno, message
        assert "nothing of the statement was applied" in message, message
        if mode == "autocommit":
            assert env.rows() == seed, "the failed statement's parts on the other nodes were kept"
            assert env.open_transactions() == []
            expected = seed
        else:
            assert env.rows() == seed, "nothing is committed before COMMIT"
            client.run("COMMIT")
            expected = _expected(seed, BEFORE[1])
            assert env.rows() == expected, "COMMIT kept the failed statement's parts, or lost what came before"
        # the session goes on: a multi-node write now succeeds whole
        client.run("UPDATE t_order SET amount = amount + 1 WHERE user_id IN (10, 17)")
        if mode == "autocommit0":
            client.run("COMMIT")
        after = env.rows()
        bumped = {k: v if k[1] == "t_addr" else sorted((o, u, a + 1 if u in (10, 17) else a, s) for o, u, a, s in v)
                  for k, v in expected.items()}
        assert after == bumped
    finally:
        client.close()


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_statement_succeeding_everywhere_commits_everywhere(env: Env, protocol: str) -> None:
    seed = env.seed()
    client = Client(env, protocol)
    try:
        client.run("INSERT INTO t_order (order_id, user_id, amount, status) VALUES (%s, 2, 0, 'a'), (%s, 3, 0, 'b'), "
                   "(%s, 4, 0, 'c')", (60, 61, 62))
        assert env.rows() == _expected(seed, ((60, 2, 0, "a"), (61, 3, 0, "b"), (62, 4, 0, "c")))
        assert env.open_transactions() == []
    finally:
        client.close()


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("mode", ("autocommit", "begin"))
@pytest.mark.parametrize("forward", (False, True), ids=("cut before the part", "cut before the part's OK"))
def test_a_connection_lost_under_one_part_leaves_nothing(relay_env: Env, forward: bool, mode: str,
                                                          protocol: str) -> None:
    """ds_1's connection dies under the statement's part there (before the server sees it, or after it ran,
    its answer lost): the part on ds_0 is taken back too. Inside a transaction the part lost with ds_1 makes the
    transaction unable to commit: COMMIT takes back everything and says so."""
    env = relay_env
    assert env.relay is not None
    seed = env.seed()
    client = Client(env, protocol)
    try:
        if mode == "begin":
            client.run("BEGIN")
            client.run(BEFORE[0])
        env.relay.cut_at_text("cutme", forward=forward)
        errno, message = client.failure("INSERT INTO t_order (order_id, user_id, amount, status) VALUES "
                                        "(%s, %s, 0, 'x'), (%s, %s, 0, %s)", (70, 2, 71, 3, "cutme"))
        assert env.relay.cuts and errno == 1158, message  # ER_NET_READ_ERROR: the data source was lost
        assert env.rows() == seed
        if mode == "begin":
            assert client.failure("COMMIT", ())[0] == 1180
            assert env.rows() == seed
        deadline = time.monotonic() + 2
        while env.open_transactions() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert env.open_transactions() == []
        client.run("INSERT INTO t_order (order_id, user_id, amount, status) VALUES (72, 2, 0, 'y'), (73, 3, 0, 'y')")
        assert env.rows() == _expected(seed, ((72, 2, 0, "y"), (73, 3, 0, "y")))
    finally:
        env.relay.uncut()
        client.close()


CLIENTS = 12
ROUNDS = 8


@pytest.mark.parametrize("transaction", ("LOCAL", "XA"))
def test_many_clients_on_a_small_pool_each_statement_whole(mariadb_shards: list[MariaDBServer],
                                                           tmp_path_factory: pytest.TempPathFactory,
                                                           transaction: str) -> None:
    """12 clients on pools of 2 connections, each in turn writing over both nodes: a statement that succeeds, one
    that fails on one node (a duplicate key), in autocommit and inside BEGIN ... COMMIT; every third client leaves
    without a word in the middle of a transaction. Afterwards every node holds exactly the successful statements'
    rows of the clients that committed, nothing of the failed ones, and no transaction is left open."""
    env = Env(mariadb_shards, tmp_path_factory.mktemp("atomicity-many"), transaction, pool=2)
    try:
        seeded = env.seed(tuple((900_000 + c, 1, 0, "dup") for c in range(CLIENTS)))  # each client's duplicate
        expected: list[tuple[Any, ...]] = []
        lock = threading.Lock()
        errors: list[BaseException] = []

        def client(c: int) -> None:
            try:
                conn = env.connect(read_timeout=60)
                with conn.cursor() as cur:
                    for r in range(ROUNDS):
                        base = 100_000 + c * 1_000 + r * 10
                        inside = r % 2 == 1
                        if inside:
                            cur.execute("BEGIN")
                        cur.execute("INSERT INTO t_order (order_id, user_id, amount, status) VALUES "
                                    f"({base}, 2, 0, 'ok'), ({base + 1}, 3, 0, 'ok')")
                        with pytest.raises(pymysql.MySQLError) as failed:
                            cur.execute("INSERT INTO t_order (order_id, user_id, amount, status) VALUES "
                                        f"({base + 2}, 4, 0, 'no'), ({900_000 + c}, 1, 0, 'no')")
                        assert failed.value.args[0] == 1062, failed.value.args
                        if inside and c % 3 == 0 and r == ROUNDS - 1:
                            abort(conn)  # gone mid-transaction (a RST): the proxy rolls its part back everywhere
                            return
                        if inside:
                            cur.execute("COMMIT")
                        with lock:
                            expected.extend([(base, 2, 0, "ok"), (base + 1, 3, 0, "ok")])
                conn.close()
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=client, args=(c,)) for c in range(CLIENTS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert not errors, errors[:3]
        want = _expected(seeded, tuple(expected))
        deadline = time.monotonic() + 5
        while env.rows() != want and time.monotonic() < deadline:
            time.sleep(0.2)  # (a client that left: its server rolls it back once it sees it gone)
        assert env.rows() == want
        while env.open_transactions() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert env.open_transactions() == []
    finally:
        env.proxy.stop()
