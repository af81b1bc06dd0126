"""The resharding window alone (no migration job), against real MariaDB and an unsharded oracle.

The seed's expansion: order rows all on `datasource-name`; the rule now places them on four data sources by
CONSISTENT_HASH on user_id, `oldDatabaseStrategy` still naming `datasource-name`. Rows are in every state a
half-done move leaves: only on the old node, copied to the new node (newer there, or older there), moved
(only on the new node). Every read through the proxy must equal the same read on one plain database
holding each logical row once; dual update / dual delete reach both copies; single insert lands on the new
node only. Literal and prepared (binary protocol), inside transactions too.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from typing import Any

import mysql.connector
import pytest

from proxy.sandbox import MariaDBServer
from routing.config import load_database_rules, load_yaml
from routing.route import precise_group, route_table
from tests.integration.harness import RunningProxy, start_proxy, write_conf
from tests.integration.resharding_fixtures import COLUMNS, RULES, SOURCES

pytestmark = pytest.mark.integration

PHYSICAL = {ds: f"dr_ds_{i}" for i, ds in enumerate(SOURCES)}
ORACLE = "dr_oracle"

DDL = ("CREATE TABLE t_order_info (id VARCHAR(32) NOT NULL PRIMARY KEY, user_id VARCHAR(32) NOT NULL, "
       "update_time DATETIME(3) NOT NULL, amount INT NOT NULL, status VARCHAR(16) NULL)")


def _home(user: str) -> str:
    rules = load_database_rules(load_yaml(f"databaseName: x\nrules:\n{RULES}"), SOURCES)
    assert rules.sharding is not None
    return route_table(rules.sharding.tables["t_order_info"], [precise_group({"user_id": user})])[0].data_source


USERS = [f"U{i:010d}" for i in range(1, 25)]
HOMES = {u: _home(u) for u in USERS}
T0 = datetime.datetime(2026, 1, 1, 12, 0, 0)


def _rows() -> list[tuple[str, str, datetime.datetime, int, str | None, str]]:
    """(id, user, time, amount, status, state): state old | copied_newer | copied_older | moved."""
    states = ("old", "copied_newer", "copied_older", "moved")
    out = []
    for i in range(120):
        user = USERS[i % len(USERS)]
        state = states[i % 4] if HOMES[user] != SOURCES[0] else "old"
        out.append((f"O{i:05d}", user, T0 + datetime.timedelta(seconds=i), i % 17, ("new", "paid", None)[i % 3],
                    state))
    return out


@pytest.fixture(scope="module")
def window(mariadb_shards: list[MariaDBServer], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    s0, s1 = mariadb_shards[0], mariadb_shards[1]
    servers = {ds: (s0 if i < 2 else s1) for i, ds in enumerate(SOURCES)}
    for ds, server in servers.items():
        server.execute(f"DROP DATABASE IF EXISTS {PHYSICAL[ds]}")
        server.execute(f"CREATE DATABASE {PHYSICAL[ds]}")
        server.execute(DDL, PHYSICAL[ds])
    s0.execute(f"DROP DATABASE IF EXISTS {ORACLE}")
    s0.execute(f"CREATE DATABASE {ORACLE}")
    s0.execute(DDL, ORACLE)
    insert = f"INSERT INTO t_order_info ({COLUMNS}) VALUES (%s, %s, %s, %s, %s)"
    for oid, user, t, amount, status, state in _rows():
        old = (oid, user, t, amount, status)
        newer = (oid, user, t + datetime.timedelta(hours=1), amount + 100, "moved")
        older = (oid, user, t - datetime.timedelta(hours=1), amount + 200, "stale")
        home = servers[HOMES[user]]
        if state in ("old", "copied_newer", "copied_older"):
            servers[SOURCES[0]].execute(insert, PHYSICAL[SOURCES[0]], args=old)
        if state == "copied_newer":
            home.execute(insert, PHYSICAL[HOMES[user]], args=newer)
        elif state == "copied_older":
            home.execute(insert, PHYSICAL[HOMES[user]], args=older)
        elif state == "moved":
            home.execute(insert, PHYSICAL[HOMES[user]], args=old)
        s0.execute(insert, ORACLE, args=newer if state == "copied_newer" else old)
    conf = write_conf(tmp_path_factory.mktemp("dual-conf"),
                      {"order_db": {ds: (servers[ds], PHYSICAL[ds]) for ds in SOURCES}},
                      rules_yaml={"order_db": RULES})
    proxy = start_proxy(conf)
    try:
        yield _Env(proxy, servers, s0)
    finally:
        proxy.stop()


class _Env:
    def __init__(self, proxy: RunningProxy, servers: dict[str, MariaDBServer], oracle: MariaDBServer) -> None:
        self.proxy = proxy
        self.servers = servers
        self.oracle_server = oracle

    def proxied(self, sql: str, params: tuple[Any, ...] | None = None) -> list[tuple[Any, ...]]:
        """Through the proxy: text protocol without params, binary protocol (COM_STMT_EXECUTE) with them."""
        conn = mysql.connector.connect(host=self.proxy.host, port=self.proxy.port, user="root", password="root",
                                       database="order_db", use_pure=True, ssl_disabled=True, autocommit=True)
        try:
            cur = conn.cursor(prepared=params is not None)
            cur.execute(sql, params)
            return [tuple(r) for r in cur.fetchall()] if cur.description else []
        finally:
            conn.close()

    def oracle(self, sql: str, params: tuple[Any, ...] | None = None) -> list[tuple[Any, ...]]:
        o = self.oracle_server
        conn = mysql.connector.connect(host=o.host, port=o.port, user=o.user, password=o.password,
                                       database=ORACLE, use_pure=True, ssl_disabled=True, autocommit=True)
        try:
            cur = conn.cursor(prepared=params is not None)
            cur.execute(sql, params)
            return [tuple(r) for r in cur.fetchall()] if cur.description else []
        finally:
            conn.close()

    def copies(self, oid: str) -> list[str]:
        """The data sources holding a row with this id, read directly."""
        return [ds for ds in SOURCES
                if self.servers[ds].execute("SELECT 1 FROM t_order_info WHERE id = %s", PHYSICAL[ds], args=(oid,))]


def _norm(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    return [tuple(v.decode() if isinstance(v, bytes | bytearray) else v for v in r) for r in rows]


U1, U2 = "U0000000001", "U0000000002"  # new homes: datasource-name-1 and datasource-name (old = new)
READS: list[tuple[str, tuple[Any, ...] | None, bool]] = [  # (sql, params, ordered)
    (f"SELECT {COLUMNS} FROM t_order_info WHERE user_id = '{U1}'", None, False),
    (f"SELECT {COLUMNS} FROM t_order_info WHERE user_id = ?", (U1,), False),
    (f"SELECT {COLUMNS} FROM t_order_info WHERE user_id = ?", (U2,), False),
    (f"SELECT {COLUMNS} FROM t_order_info ORDER BY id", None, True),
    (f"SELECT {COLUMNS} FROM t_order_info ORDER BY update_time DESC, id LIMIT 7", None, True),
    (f"SELECT {COLUMNS} FROM t_order_info ORDER BY id LIMIT ?, ?", (5, 10), True),
    ("SELECT COUNT(*) FROM t_order_info", None, True),
    ("SELECT COUNT(*), SUM(amount), MAX(update_time) FROM t_order_info WHERE user_id IN (?, ?)", (U1, U2), True),
    ("SELECT user_id, COUNT(*), SUM(amount) FROM t_order_info GROUP BY user_id ORDER BY user_id", None, True),
    ("SELECT status, COUNT(*) AS n FROM t_order_info GROUP BY status HAVING n > 3 ORDER BY n DESC, status", None,
     True),
    ("SELECT DISTINCT status FROM t_order_info ORDER BY status", None, True),
    # the winning copy decides whether a row matches: the stale copies (amount + 200) must not leak in
    ("SELECT id, amount FROM t_order_info WHERE amount >= 200 ORDER BY id", None, True),
    ("SELECT id FROM t_order_info WHERE status = 'stale' ORDER BY id", None, True),
    ("SELECT id, amount FROM t_order_info WHERE amount BETWEEN ? AND ? ORDER BY amount, id", (100, 150), True),
    ("SELECT id, RANK() OVER (PARTITION BY user_id ORDER BY amount DESC) FROM t_order_info ORDER BY id", None,
     True),
]


@pytest.mark.parametrize(("sql", "params", "ordered"), READS)
def test_dual_read_equals_the_oracle(window: _Env, sql: str, params: tuple[Any, ...] | None, ordered: bool) -> None:
    got, want = _norm(window.proxied(sql, params)), _norm(window.oracle(sql, params))
    if not ordered:
        got, want = sorted(got), sorted(want)
    assert got == want


def test_preview_shows_old_and_new_nodes(window: _Env) -> None:
    rows = window.proxy.query(f"PREVIEW SELECT * FROM t_order_info WHERE user_id = '{U1}'", "order_db")
    assert [r[0] for r in rows] == ["datasource-name", "datasource-name-1"]
    rows = window.proxy.query(f"PREVIEW DELETE FROM t_order_info WHERE user_id = '{U1}'", "order_db")
    assert [r[0] for r in rows] == ["datasource-name", "datasource-name-1"]
    rows = window.proxy.query(f"PREVIEW INSERT INTO t_order_info ({COLUMNS}) VALUES "
                              f"('X1', '{U1}', NOW(3), 1, NULL)", "order_db")
    assert [r[0] for r in rows] == ["datasource-name-1"]


def test_show_sharding_table_rules_shows_the_window(window: _Env) -> None:
    with window.proxy.connect("order_db") as conn, conn.cursor() as cur:
        cur.execute("SHOW SHARDING TABLE RULES t_order_info")
        row = dict(zip([d[0] for d in cur.description], cur.fetchone(), strict=True))
    assert row["old_database_strategy_type"] == "STANDARD"
    assert row["old_database_sharding_algorithm_type"] == "INLINE"
    assert row["database_sharding_algorithm_type"] == "CONSISTENT_HASH"
    assert (row["dual_routing_key_column"], row["dual_routing_version_column"]) == ("id", "update_time")


def _user_with(state: str) -> str:
    return next(u for oid, u, *_, s in _rows() if s == state)


def _both(env: _Env, sql: str, params: tuple[Any, ...] | None = None) -> None:
    env.proxied(sql, params)
    env.oracle(sql, params)


def test_dual_update_dual_delete_single_insert(window: _Env) -> None:
    user = _user_with("copied_older")
    oid = next(o for o, u, *_, s in _rows() if u == user and s == "copied_older")
    assert window.copies(oid) == sorted({SOURCES[0], HOMES[user]})
    # dual update: both copies change, so whichever wins the read is right
    _both(window, "UPDATE t_order_info SET amount = amount + 1000, update_time = ? WHERE user_id = ?",
          (datetime.datetime(2026, 6, 1), user))
    _both(window, f"UPDATE t_order_info SET status = 'upd' WHERE user_id = '{user}' AND amount > 1010")
    for sql, params, ordered in READS:
        got, want = _norm(window.proxied(sql, params)), _norm(window.oracle(sql, params))
        assert (got if ordered else sorted(got)) == (want if ordered else sorted(want)), sql
    # dual delete: no copy is left to be read back
    _both(window, "DELETE FROM t_order_info WHERE id = ? AND user_id = ?", (oid, user))
    assert window.copies(oid) == []
    # single insert: the new node only
    _both(window, f"INSERT INTO t_order_info ({COLUMNS}) VALUES (?, ?, ?, ?, ?)",
          ("N00001", U1, datetime.datetime(2026, 6, 2), 5, "new"))
    _both(window, f"INSERT INTO t_order_info ({COLUMNS}) VALUES ('N00002', '{U1}', '2026-06-02 00:00:01', 6, NULL)")
    assert window.copies("N00001") == window.copies("N00002") == ["datasource-name-1"]
    for sql, params, ordered in READS:
        got, want = _norm(window.proxied(sql, params)), _norm(window.oracle(sql, params))
        assert (got if ordered else sorted(got)) == (want if ordered else sorted(want)), sql


def test_dual_read_inside_a_transaction_sees_its_own_writes(window: _Env) -> None:
    user = _user_with("copied_newer")
    sql = f"SELECT {COLUMNS} FROM t_order_info WHERE user_id = ? ORDER BY id"

    def run(host: str, port: int, database: str, login: str, password: str) -> tuple[list[Any], list[Any]]:
        conn = mysql.connector.connect(host=host, port=port, user=login, password=password,
                                       database=database, use_pure=True, ssl_disabled=True)
        try:
            conn.start_transaction()
            cur = conn.cursor(prepared=True)
            cur.execute("UPDATE t_order_info SET amount = -1 WHERE user_id = ?", (user,))
            cur.execute(sql, (user,))
            inside = _norm([tuple(r) for r in cur.fetchall()])
            conn.rollback()
            cur.execute(sql, (user,))
            after = _norm([tuple(r) for r in cur.fetchall()])
            return inside, after
        finally:
            conn.close()

    o = window.oracle_server
    proxied = run(window.proxy.host, window.proxy.port, "order_db", "root", "root")
    oracle = run(o.host, o.port, ORACLE, o.user, o.password)
    assert proxied == oracle, (user, proxied, oracle)
    assert proxied[0] and all(r[3] == -1 for r in proxied[0]), (user, proxied)


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("SELECT * FROM t_order_info a JOIN t_order_info b ON a.user_id = b.user_id", "resharding window"),
        ("SELECT * FROM t_order_info FOR UPDATE", "locking clause"),
    ],
)
def test_window_refusals_are_errors(window: _Env, sql: str, message: str) -> None:
    with pytest.raises(mysql.connector.Error) as info:
        window.proxied(sql)
    assert message in str(info.value.msg)
    assert "t_order_info" in str(info.value.msg)
