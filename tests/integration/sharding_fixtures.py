"""One sharded proxy for the whole session, in front of the two sandbox servers of ``mariadb_shards``.

Logical databases:

* ``sharding_db``: the ShardingSphere example, with the ``rules:`` part read verbatim from the shipped
  ``conf/database-sharding.yaml`` (t_order / t_order_item: ds = user_id % 2, table = order_id % 2, bound;
  t_address broadcast; SNOWFLAKE keys). Physical databases ``sht_demo_ds_0`` (server 0) / ``sht_demo_ds_1``
  (server 1): own names, so another suite's tables in ``demo_ds_*`` on the same session servers cannot meet ours.
* ``extra_db``: rule types the example lacks (an expression that can target a missing table, hint strategies,
  unbound tables sharded by different columns, a range-tolerant INLINE, MOD and CONSISTENT_HASH auto tables,
  a single table on ds_0). Physical databases ``sht_extra_ds_0`` / ``sht_extra_ds_1``.

``sht_oracle_db`` on server 0 is a plain database, never behind the proxy: merge results are compared with what
MariaDB itself answers for the same rows there.

Tests read the rows back directly from the backends (``ShardedEnv.backend``), never only through the proxy.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mysql.connector
import pymysql
import pytest

from proxy.sandbox import MariaDBServer
from tests.integration.harness import RunningProxy, start_proxy, write_conf

REPO = Path(__file__).resolve().parents[2]
SHIPPED_SHARDING_YAML = REPO / "conf" / "database-sharding.yaml"

DATA_SOURCES = ("ds_0", "ds_1")
ORACLE_DB = "sht_oracle_db"

# The schema of `proxy.demo.SHARDING_SCHEMA`, created through the proxy by the session fixture.
SHARDING_DDL = (
    "CREATE TABLE t_order (order_id BIGINT NOT NULL, user_id INT NOT NULL, status VARCHAR(45) NULL, "
    "PRIMARY KEY (order_id))",
    "CREATE TABLE t_order_item (order_item_id BIGINT NOT NULL, order_id BIGINT NOT NULL, user_id INT NOT NULL, "
    "status VARCHAR(45) NULL, PRIMARY KEY (order_item_id))",
    "CREATE TABLE t_address (address_id BIGINT NOT NULL, address_name VARCHAR(100) NOT NULL, "
    "PRIMARY KEY (address_id))",
)

EXTRA_RULES = """\
- !SHARDING
  tables:
    t_bad:
      actualDataNodes: ds_${0..1}.t_bad_${0..1}
      databaseStrategy: {standard: {shardingColumn: user_id, shardingAlgorithmName: user_inline}}
      tableStrategy: {standard: {shardingColumn: id, shardingAlgorithmName: bad_inline}}
    t_hint:
      actualDataNodes: ds_${0..1}.t_hint_${0..1}
      databaseStrategy: {hint: {shardingAlgorithmName: hint_db}}
      tableStrategy: {hint: {shardingAlgorithmName: hint_table}}
    t_user:
      actualDataNodes: ds_${0..1}.t_user
      databaseStrategy: {standard: {shardingColumn: user_id, shardingAlgorithmName: user_inline}}
    t_acct:
      actualDataNodes: ds_${0..1}.t_acct
      databaseStrategy: {standard: {shardingColumn: acct_id, shardingAlgorithmName: acct_inline}}
    t_range:
      actualDataNodes: ds_${0..1}.t_range
      databaseStrategy: {standard: {shardingColumn: id, shardingAlgorithmName: range_inline}}
  autoTables:
    t_log:
      actualDataSources: ds_0,ds_1
      shardingStrategy: {standard: {shardingColumn: id, shardingAlgorithmName: mod4}}
    t_ring:
      actualDataSources: ds_0,ds_1
      shardingStrategy: {standard: {shardingColumn: code, shardingAlgorithmName: ring4}}
  shardingAlgorithms:
    user_inline: {type: INLINE, props: {algorithm-expression: 'ds_${user_id % 2}'}}
    acct_inline: {type: INLINE, props: {algorithm-expression: 'ds_${acct_id % 2}'}}
    # no modulo: id 5 computes t_bad_5, which is no actual table
    bad_inline: {type: INLINE, props: {algorithm-expression: 't_bad_${id}'}}
    range_inline:
      type: INLINE
      props: {algorithm-expression: 'ds_${id % 2}', allow-range-query-with-inline-sharding: true}
    hint_db: {type: HINT_INLINE, props: {algorithm-expression: 'ds_${value % 2}'}}
    hint_table: {type: HINT_INLINE, props: {algorithm-expression: 't_hint_${value % 2}'}}
    mod4: {type: MOD, props: {sharding-count: 4}}
    ring4: {type: CONSISTENT_HASH, props: {sharding-count: 4, virtual-nodes: 4}}
- !SINGLE
  tables: [ds_0.t_single]
  defaultDataSource: ds_0
"""

EXTRA_DDL = (
    "CREATE TABLE t_bad (id INT NOT NULL, user_id INT NOT NULL, v VARCHAR(10))",
    "CREATE TABLE t_hint (id INT NOT NULL, v VARCHAR(10))",
    "CREATE TABLE t_user (user_id INT NOT NULL, name VARCHAR(10))",
    "CREATE TABLE t_acct (acct_id INT NOT NULL, user_id INT NOT NULL)",
    "CREATE TABLE t_range (id INT NOT NULL)",
    "CREATE TABLE t_log (id INT NOT NULL, msg VARCHAR(10))",
    "CREATE TABLE t_ring (code VARCHAR(20) NOT NULL, n INT)",
    "CREATE TABLE t_single (id INT NOT NULL, v VARCHAR(10))",
)

# logic table -> its actual tables per data source (what the rules above and the shipped example demand)
ACTUAL_TABLES: dict[str, dict[str, tuple[str, ...]]] = {
    "t_order": {ds: ("t_order_0", "t_order_1") for ds in DATA_SOURCES},
    "t_order_item": {ds: ("t_order_item_0", "t_order_item_1") for ds in DATA_SOURCES},
    "t_address": {ds: ("t_address",) for ds in DATA_SOURCES},
    "t_bad": {ds: ("t_bad_0", "t_bad_1") for ds in DATA_SOURCES},
    "t_hint": {ds: ("t_hint_0", "t_hint_1") for ds in DATA_SOURCES},
    "t_user": {ds: ("t_user",) for ds in DATA_SOURCES},
    "t_acct": {ds: ("t_acct",) for ds in DATA_SOURCES},
    "t_range": {ds: ("t_range",) for ds in DATA_SOURCES},
    "t_log": {"ds_0": ("t_log_0", "t_log_2"), "ds_1": ("t_log_1", "t_log_3")},
    "t_ring": {"ds_0": ("t_ring_0", "t_ring_2"), "ds_1": ("t_ring_1", "t_ring_3")},
    "t_single": {"ds_0": ("t_single",), "ds_1": ()},
}
EXTRA_TABLES = ("t_bad", "t_hint", "t_user", "t_acct", "t_range", "t_log", "t_ring", "t_single")


def shipped_rules_yaml() -> str:
    """The `rules:` list of the shipped example, verbatim."""
    text = SHIPPED_SHARDING_YAML.read_text(encoding="utf-8")
    match = re.search(r"^rules:[ \t]*\n", text, re.M)
    assert match is not None, f"{SHIPPED_SHARDING_YAML} has no top-level rules:"
    return text[match.end() :]


@dataclass(frozen=True)
class Refusal:
    errno: int
    sqlstate: str | None
    message: str


@dataclass
class ShardedEnv:
    proxy: RunningProxy
    servers: list[MariaDBServer]
    physical: dict[str, dict[str, str]]  # logical db -> data source -> physical database
    oracle_db: str = ORACLE_DB
    _direct: dict[tuple[str, str], pymysql.connections.Connection[Any]] = field(default_factory=dict)
    _proxied: dict[str, pymysql.connections.Connection[Any]] = field(default_factory=dict)

    def close(self) -> None:
        for conn in [*self._direct.values(), *self._proxied.values()]:
            with contextlib.suppress(Exception):
                conn.close()
        self._direct.clear()
        self._proxied.clear()

    # -- the backends, read directly --

    def server(self, ds: str) -> MariaDBServer:
        return self.servers[DATA_SOURCES.index(ds)]

    def backend(self, ds: str, sql: str, db: str = "sharding_db", args: Any = None) -> list[tuple[Any, ...]]:
        """Run one statement directly on a backend (autocommit: each read sees what is committed now)."""
        physical = db if db == self.oracle_db else self.physical[db][ds]
        conn = self._direct.get((ds, physical))
        if conn is None:
            conn = self._direct[(ds, physical)] = self.server(ds).connect(physical)
        with conn.cursor() as cur:
            cur.execute(sql, args)
            return list(cur.fetchall()) if cur.description else []

    def oracle(self, sql: str) -> tuple[list[str], list[tuple[Any, ...]]]:
        """The same statement on the plain, unsharded database."""
        with self.servers[0].connect(self.oracle_db) as conn, conn.cursor() as cur:
            cur.execute(sql)
            return [d[0] for d in cur.description or ()], list(cur.fetchall())

    def tables_on(self, ds: str, db: str = "sharding_db") -> set[str]:
        return {str(r[0]) for r in self.backend(ds, "SHOW TABLES", db)}

    def actual_rows(self, logic: str, db: str = "sharding_db", columns: str = "*") -> dict[tuple[str, str], list[Any]]:
        """(data source, actual table) -> its rows, for every actual table of `logic`."""
        out: dict[tuple[str, str], list[Any]] = {}
        for ds, tables in ACTUAL_TABLES[logic].items():
            for table in tables:
                rows = self.backend(ds, f"SELECT {columns} FROM {table}", db)
                out[(ds, table)] = sorted(rows, key=lambda r: tuple((v is not None, v) for v in r))
        return out

    def where_is(self, logic: str, key_column: str, key: Any, db: str = "sharding_db") -> list[tuple[str, str]]:
        """Every (data source, actual table) holding a row with key_column = key."""
        found = []
        for ds, tables in ACTUAL_TABLES[logic].items():
            for table in tables:
                rows = self.backend(ds, f"SELECT COUNT(*) FROM {table} WHERE {key_column} = %(k)s", db, {"k": key})
                found.extend([(ds, table)] * int(rows[0][0]))
        return sorted(found)

    def clean(self, *logic: str, db: str = "sharding_db") -> None:
        for name in logic:
            for ds, tables in ACTUAL_TABLES[name].items():
                for table in tables:
                    self.backend(ds, f"DELETE FROM {table}", db)

    # -- through the proxy --

    def connect(self, db: str = "sharding_db", **kw: Any) -> pymysql.connections.Connection[Any]:
        kw.setdefault("autocommit", True)
        return self.proxy.connect(db, **kw)

    def _session(self, db: str) -> pymysql.connections.Connection[Any]:
        """One autocommit proxy session per logical database, kept for the test session."""
        conn = self._proxied.get(db)
        if conn is None or not conn.open:
            conn = self._proxied[db] = self.connect(db)
        return conn

    def run(self, sql: str, db: str = "sharding_db") -> tuple[int, int | None, list[tuple[Any, ...]]]:
        """(affected or row count, lastrowid, rows) of one statement through the proxy."""
        with self._session(db).cursor() as cur:
            count = cur.execute(sql)
            return count, cur.lastrowid, list(cur.fetchall())

    def query(self, sql: str, db: str = "sharding_db") -> tuple[list[str], list[tuple[Any, ...]]]:
        with self._session(db).cursor() as cur:
            cur.execute(sql)
            return [d[0] for d in cur.description or ()], list(cur.fetchall())

    def preview(self, sql: str, db: str = "sharding_db") -> list[tuple[str, str]]:
        return [(str(ds), str(actual)) for ds, actual in self.run(f"PREVIEW {sql}", db)[2]]

    def refusal(self, sql: str, db: str = "sharding_db") -> Refusal:
        """The ERR packet a statement gets (errno, SQLSTATE, message), as a client library sees it."""
        conn = mysql.connector.connect(
            host=self.proxy.host, port=self.proxy.port, user="root", password="root", database=db,
            use_pure=True, ssl_disabled=True, autocommit=True,
        )
        try:
            cur = conn.cursor()
            try:
                cur.execute(sql)
                cur.fetchall()
            except mysql.connector.Error as exc:
                return Refusal(int(exc.errno), exc.sqlstate, str(exc.msg))
            raise AssertionError(f"the proxy accepted {sql!r}")
        finally:
            conn.close()


def start_sharded_env(servers: Sequence[MariaDBServer], conf_dir: Path) -> ShardedEnv:
    s0, s1 = servers[0], servers[1]
    physical = {
        "sharding_db": {"ds_0": "sht_demo_ds_0", "ds_1": "sht_demo_ds_1"},
        "extra_db": {"ds_0": "sht_extra_ds_0", "ds_1": "sht_extra_ds_1"},
    }
    for db in physical.values():
        for ds, server in zip(DATA_SOURCES, (s0, s1), strict=True):
            server.execute(f"CREATE DATABASE IF NOT EXISTS {db[ds]}")
    s0.execute(f"CREATE DATABASE IF NOT EXISTS {ORACLE_DB}")
    conf = write_conf(
        conf_dir,
        {
            db: {ds: (server, physical[db][ds]) for ds, server in zip(DATA_SOURCES, (s0, s1), strict=True)}
            for db in physical
        },
        rules_yaml={"sharding_db": shipped_rules_yaml(), "extra_db": EXTRA_RULES},
    )
    proxy = start_proxy(conf)
    env = ShardedEnv(proxy, [s0, s1], physical)
    try:
        with env.connect("sharding_db") as conn, conn.cursor() as cur:
            for sql in SHARDING_DDL:
                cur.execute(sql)
        with env.connect("extra_db") as conn, conn.cursor() as cur:
            for sql in EXTRA_DDL:
                cur.execute(sql)
        for sql in SHARDING_DDL[:2]:
            s0.execute(sql, ORACLE_DB)
    except BaseException:
        proxy.stop()
        raise
    return env


@pytest.fixture(scope="session")
def sharded_env(mariadb_shards: list[MariaDBServer], tmp_path_factory: pytest.TempPathFactory) -> Iterator[ShardedEnv]:
    env = start_sharded_env(mariadb_shards, tmp_path_factory.mktemp("sharding-conf"))
    yield env
    env.close()
    # let the proxy finish those sessions (returning their backend connections) before it shuts down: a
    # session cancelled halfway through its release keeps its connections, and closing the pools then waits
    # 5 s per data source for them
    time.sleep(0.3)
    env.proxy.stop()


def order_node(user_id: int, order_id: int, table: str = "t_order") -> tuple[str, str]:
    """Where the shipped rules put a t_order / t_order_item row."""
    return (f"ds_{user_id % 2}", f"{table}_{order_id % 2}")
