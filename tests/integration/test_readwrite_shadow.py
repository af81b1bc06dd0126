"""A `!SHADOW` data source as a read/write splitting group's write data source, against real MariaDB servers.

The e2e `readwrite_splitting_and_shadow` scenario of ShardingSphere 5.5.2: group `write-read-ds` writes to
`shadowDataSource` (production `write_db`, shadow `write_db_shadow`) and reads from `read_0`, `read_1`.
ShardingSphere splits reads from writes first, then the shadow rule picks production or shadow for the write
side: a shadow write lands on the shadow database, a read goes to a replica whatever its shadow values, and a
read that goes to the primary (in a transaction) reads the shadow database when it is shadow. The four
databases hold different rows (as the scenario's dataset), so where a statement ran shows in what it read;
rows written are read on the physical databases themselves.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mysql.connector
import pytest

from proxy.sandbox import MariaDBServer
from tests.integration.harness import RunningProxy, start_proxy, write_conf

RULES = """\
- !SINGLE
  tables: ["*.*"]
- !READWRITE_SPLITTING
  dataSourceGroups:
    write-read-ds:
      writeDataSourceName: shadowDataSource
      readDataSourceNames: [read_0, read_1]
- !SHADOW
  dataSources:
    shadowDataSource: {productionDataSourceName: write_db, shadowDataSourceName: write_db_shadow}
  tables:
    t_shadow:
      dataSourceNames: [shadowDataSource]
      shadowAlgorithmNames: [insert-match, update-match, delete-match, select-match, sql-hint]
  shadowAlgorithms:
    insert-match: {type: VALUE_MATCH, props: {operation: insert, column: user_id, value: 0}}
    update-match: {type: VALUE_MATCH, props: {operation: update, column: user_id, value: 0}}
    delete-match: {type: VALUE_MATCH, props: {operation: delete, column: user_id, value: 0}}
    select-match: {type: VALUE_MATCH, props: {operation: select, column: user_id, value: 0}}
    sql-hint: {type: SQL_HINT}
"""
DDL = "CREATE TABLE t_shadow (order_id BIGINT PRIMARY KEY, user_id INT NOT NULL, order_name VARCHAR(32) NOT NULL)"
# physical database -> (its name in the proxy's dataSources, the seeded rows' user_id and order_name)
DATABASES = {
    "rws_write": ("write_db", 1, "pro_order"),
    "rws_shadow": ("write_db_shadow", 0, "shadow_order"),
    "rws_read_0": ("read_0", 1, "read_order"),
    "rws_read_1": ("read_1", 1, "read_order"),
}
SEEDED = range(1, 6)


@pytest.fixture(scope="module")
def env(mariadb_shards: list[MariaDBServer], tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningProxy]:
    server = mariadb_shards[0]
    for name, (_ds, user_id, order_name) in DATABASES.items():
        server.execute(f"DROP DATABASE IF EXISTS {name}")
        server.execute(f"CREATE DATABASE {name}")
        server.execute(DDL, name)
        for order_id in SEEDED:
            server.execute("INSERT INTO t_shadow VALUES (%s, %s, %s)", name, args=(order_id, user_id, order_name))
    databases = {"rws": {ds: (server, name) for name, (ds, _u, _o) in DATABASES.items()}}
    conf = write_conf(tmp_path_factory.mktemp("rw-shadow-conf"), databases, rules_yaml={"rws": RULES})
    proxy = start_proxy(Path(conf))
    try:
        yield proxy
    finally:
        proxy.stop()


def _run(proxy: RunningProxy, statements: list[str], prepared: bool) -> list[tuple[Any, ...]]:
    """The statements on one fresh connection; the rows of the last."""
    conn = mysql.connector.connect(
        host=proxy.host, port=proxy.port, user="root", password="root", database="rws", autocommit=True
    )
    try:
        cur = conn.cursor(prepared=prepared)
        rows: list[tuple[Any, ...]] = []
        for sql in statements:
            cur.execute(sql)
            rows = list(cur.fetchall()) if cur.with_rows else []
        conn.rollback()
        return [tuple(v.decode() if isinstance(v, bytes | bytearray) else v for v in r) for r in rows]
    finally:
        conn.close()


def _where(server: MariaDBServer, order_id: int) -> dict[str, list[tuple[Any, ...]]]:
    """Per physical database, its rows of that order_id (user_id, order_name)."""
    return {
        name: [
            tuple(r)
            for r in server.execute(f"SELECT user_id, order_name FROM t_shadow WHERE order_id = {order_id}", name)
        ]
        for name in DATABASES
    }


# statements, the database whose rows the last one reads (by its seeded order_name)
READS = [
    (["SELECT DISTINCT order_name FROM t_shadow WHERE user_id = 1"], "read_order"),
    (["SELECT DISTINCT order_name FROM t_shadow WHERE user_id = 0"], None),  # a replica: no user_id 0 rows there
    (["SELECT DISTINCT order_name FROM t_shadow"], "read_order"),
    (["/* SHARDINGSPHERE_HINT: SHADOW=true */ SELECT DISTINCT order_name FROM t_shadow"], "read_order"),
    (["BEGIN", "SELECT DISTINCT order_name FROM t_shadow WHERE user_id = 0"], "shadow_order"),  # primary: shadow
    (["BEGIN", "SELECT DISTINCT order_name FROM t_shadow WHERE user_id = 1"], "pro_order"),
    (["BEGIN", "/* SHARDINGSPHERE_HINT: SHADOW=true */ SELECT DISTINCT order_name FROM t_shadow"], "shadow_order"),
]


@pytest.mark.parametrize("prepared", [False, True], ids=["text", "prepared"])
@pytest.mark.parametrize(("statements", "reads"), READS, ids=[" ; ".join(c[0])[:70] for c in READS])
def test_reads(env: RunningProxy, statements: list[str], reads: str | None, prepared: bool) -> None:
    assert _run(env, statements, prepared) == ([(reads,)] if reads else [])


# the statement, the order_id it writes, the physical database where its row must be afterwards (user_id,
# order_name), the seeded rows elsewhere untouched
WRITES = [
    ("INSERT INTO t_shadow VALUES (100, 0, 'w')", 100, {"rws_shadow": [(0, "w")]}),
    ("INSERT INTO t_shadow VALUES (101, 1, 'w')", 101, {"rws_write": [(1, "w")]}),
    (
        "/* SHARDINGSPHERE_HINT: SHADOW=true */ INSERT INTO t_shadow VALUES (102, 1, 'w')",
        102,
        {"rws_shadow": [(1, "w")]},
    ),
    (
        "UPDATE t_shadow SET order_name = 'u' WHERE order_id = 3 AND user_id = 0",
        3,
        {"rws_write": [(1, "pro_order")], "rws_shadow": [(0, "u")]},
    ),
    (
        "UPDATE t_shadow SET order_name = 'u' WHERE order_id = 3 AND user_id = 1",
        3,
        {"rws_write": [(1, "u")], "rws_shadow": [(0, "shadow_order")]},
    ),
    ("DELETE FROM t_shadow WHERE order_id = 4 AND user_id = 0", 4, {"rws_write": [(1, "pro_order")]}),
    ("DELETE FROM t_shadow WHERE order_id = 4 AND user_id = 1", 4, {"rws_shadow": [(0, "shadow_order")]}),
]


@pytest.mark.parametrize("prepared", [False, True], ids=["text", "prepared"])
@pytest.mark.parametrize(("sql", "order_id", "lands"), WRITES, ids=[c[0][:70] for c in WRITES])
def test_writes_land(
    env: RunningProxy,
    mariadb_shards: list[MariaDBServer],
    sql: str,
    order_id: int,
    lands: dict[str, list[tuple[Any, ...]]],
    prepared: bool,
) -> None:
    server = mariadb_shards[0]
    before = _where(server, order_id)
    try:
        _run(env, [sql], prepared)
        expected = {name: lands.get(name, []) for name in DATABASES}
        for name in ("rws_read_0", "rws_read_1"):  # replicas are never written
            expected[name] = before[name]
        assert _where(server, order_id) == expected
    finally:
        for name, (_ds, user_id, order_name) in DATABASES.items():
            server.execute(f"DELETE FROM t_shadow WHERE order_id = {order_id}", name)
            if order_id in SEEDED:
                server.execute("INSERT INTO t_shadow VALUES (%s, %s, %s)", name, args=(order_id, user_id, order_name))
