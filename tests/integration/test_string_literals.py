"""String literals routed by the value MariaDB reads from them: `'a\\_b'` is the four characters a, \\, _, b (MySQL
keeps the backslash of \\% and \\_ outside LIKE too), so a row written with that literal is found by the same value
bound as a parameter, and the other way round, on a table sharded by a hash of the string (HASH_MOD over three
tables: the backslash moves the hash to another table). The oracle: one MariaDB table holding the same rows."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mysql.connector
import pytest

from proxy.sandbox import MariaDBServer
from tests.integration.harness import RunningProxy, start_proxy, write_conf

RULES = """- !SHARDING
  tables:
    t_name:
      actualDataNodes: ds_0.t_name_${0..2}
      tableStrategy:
        standard: {shardingColumn: name, shardingAlgorithmName: name_hash}
  shardingAlgorithms:
    name_hash: {type: HASH_MOD, props: {sharding-count: 3}}
"""
TABLE = "CREATE TABLE {name} (name VARCHAR(40) PRIMARY KEY, v INT)"
# (literal as written in the text, the value a parameter binds for the same string)
VALUES = [
    ("'a\\_b'", "a\\_b"),
    ("'a\\%b'", "a\\%b"),
    ("'x\\\\_1'", "x\\_1"),
    ("'it''s \\_'", "it's \\_"),
    ("'tab\\there'", "tab\there"),
    ("'plain'", "plain"),
]


@pytest.fixture(scope="module")
def proxy(mariadb: MariaDBServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningProxy]:
    for db in ("strlit_ds", "strlit_oracle"):
        mariadb.execute(f"DROP DATABASE IF EXISTS {db}")
        mariadb.execute(f"CREATE DATABASE {db}")
    for i in range(3):
        mariadb.execute(TABLE.format(name=f"t_name_{i}"), "strlit_ds")
    mariadb.execute(TABLE.format(name="t_name"), "strlit_oracle")
    conf = write_conf(tmp_path_factory.mktemp("strlit"), {"strlit": {"ds_0": (mariadb, "strlit_ds")}},
                      rules_yaml={"strlit": RULES})
    running = start_proxy(Path(conf))
    try:
        yield running
    finally:
        running.stop()
        for db in ("strlit_ds", "strlit_oracle"):
            mariadb.execute(f"DROP DATABASE IF EXISTS {db}")


def _connect(host: str, port: int, password: str, db: str) -> Any:
    return mysql.connector.connect(host=host, port=port, user="root", password=password, database=db,
                                   use_pure=True, ssl_disabled=True, autocommit=True)


def _run(conn: Any, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    cur = conn.cursor(prepared=bool(params))
    try:
        cur.execute(sql, params or None)
        return [tuple(r) for r in cur.fetchall()] if cur.with_rows else []
    finally:
        cur.close()


@pytest.mark.parametrize(("literal", "value"), VALUES, ids=[v[1] for v in VALUES])
@pytest.mark.parametrize("written", ["text", "prepared"])
def test_a_string_is_routed_by_the_value_mariadb_reads(
    proxy: RunningProxy, mariadb: MariaDBServer, literal: str, value: str, written: str
) -> None:
    conns = [_connect(proxy.host, proxy.port, "root", "strlit"),
             _connect(mariadb.host, mariadb.port, mariadb.password, "strlit_oracle")]
    answers = []
    try:
        for conn in conns:
            _run(conn, "DELETE FROM t_name")
            if written == "text":
                _run(conn, f"INSERT INTO t_name (name, v) VALUES ({literal}, 1)")
            else:
                _run(conn, "INSERT INTO t_name (name, v) VALUES (%s, 1)", (value,))
            answers.append([
                _run(conn, f"SELECT name, v FROM t_name WHERE name = {literal}"),
                _run(conn, "SELECT name, v FROM t_name WHERE name = %s", (value,)),
                _run(conn, f"SELECT name FROM t_name WHERE name IN ({literal}, 'other')"),
                _run(conn, "SELECT name, v FROM t_name"),
            ])
    finally:
        for conn in conns:
            conn.close()
    got, want = answers
    assert got == want
    assert want[0] == [(value, 1)]
