"""Prepared statements (COM_STMT_*) end to end: real MariaDB servers, real drivers (issue 5).

One proxy, of its own, in front of the two session servers of ``mariadb_shards``, with four logical
databases:

* ``ps_prep`` and ``ps_text``: the shipped ShardingSphere example (``conf/database-sharding.yaml``: t_order /
  t_order_item by ``user_id % 2`` and ``order_id % 2``, bound; t_address broadcast; SNOWFLAKE keys), each on
  physical databases of its own. The same corpus runs on ``ps_prep`` through mysql-connector-python's
  ``cursor(prepared=True)`` (pure Python: COM_STMT_PREPARE / EXECUTE / CLOSE) and on ``ps_text`` through the
  text protocol (the same client, not prepared), and the answers must be identical;
* ``ps_pass``: one database passed through (the corpus runs there prepared too);
* ``ps_types``: ``t_types`` sharded by ``id % 2`` over the two servers, one table each, for the type round trips.

``ps_oracle`` on server 0 is a plain database, never behind the proxy: where a statement's answer does not
depend on generated keys, the proxy's answers must also equal MariaDB's own.

Raw-protocol cases (statement ids, COM_STMT_RESET / CLOSE, MariaDB's last-statement id, read-only cursors)
speak through `RawClient` with the project's codec, and compare with the same bytes sent to MariaDB directly.
"""

from __future__ import annotations

import datetime
import decimal
import hashlib
import io
import re
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import mysql.connector
import pytest

from protocol.binary import (
    CURSOR_TYPE_READ_ONLY,
    LAST_STATEMENT_ID,
    ComStmtClose,
    ComStmtExecute,
    ComStmtFetch,
    ComStmtPrepare,
    ComStmtReset,
    ComStmtSendLongData,
    ParamType,
    PrepareResponse,
    StmtPrepareOK,
    decode_binary_row,
)
from protocol.constants import ColumnType, ServerStatus
from protocol.packets import ColumnDefinition41, EOFPacket, ERRPacket, OKPacket, is_eof, is_err
from proxy.sandbox import MariaDBServer
from tests.integration.harness import RunningProxy, start_proxy, write_conf
from tests.integration.sharding_fixtures import SHARDING_DDL, shipped_rules_yaml
from tests.integration.test_malformed import RawClient

pytestmark = pytest.mark.integration

DATA_SOURCES = ("ds_0", "ds_1")
SHARDED = ("ps_prep", "ps_text")
PHYSICAL: dict[str, dict[str, str]] = {
    "ps_prep": {"ds_0": "ps_prep_ds_0", "ds_1": "ps_prep_ds_1"},
    "ps_text": {"ds_0": "ps_text_ds_0", "ds_1": "ps_text_ds_1"},
    "ps_types": {"ds_0": "ps_types_ds_0", "ds_1": "ps_types_ds_1"},
}
PASS_PHYSICAL = "ps_pass_ds"  # on server 0
ORACLE = "ps_oracle"  # on server 0, never behind the proxy

TYPES_RULES = """\
- !SHARDING
  tables:
    t_types:
      actualDataNodes: ds_${0..1}.t_types
      databaseStrategy: {standard: {shardingColumn: id, shardingAlgorithmName: by_id}}
    t_kv:
      actualDataNodes: ds_${0..1}.t_kv
      databaseStrategy: {standard: {shardingColumn: k, shardingAlgorithmName: by_k}}
  shardingAlgorithms:
    by_id:
      type: INLINE
      props: {algorithm-expression: 'ds_${id % 2}', allow-range-query-with-inline-sharding: true}
    by_k:
      type: INLINE
      props: {algorithm-expression: 'ds_${k % 2}', allow-range-query-with-inline-sharding: true}
"""
KV_DDL = "CREATE TABLE t_kv (k INT NOT NULL PRIMARY KEY, v VARCHAR(20))"
KV_ROWS = [(k, f"v{k}") for k in range(1, 11)]

TYPES_DDL = """CREATE TABLE t_types (
    id INT NOT NULL PRIMARY KEY,
    ti TINYINT, uti TINYINT UNSIGNED, si SMALLINT, usi SMALLINT UNSIGNED, mi MEDIUMINT, umi MEDIUMINT UNSIGNED,
    i INT, ui INT UNSIGNED, bi BIGINT, ubi BIGINT UNSIGNED,
    dc DECIMAL(65,30), dc2 DECIMAL(10,2), f FLOAT, d DOUBLE,
    vc VARCHAR(100), tx LONGTEXT, ch CHAR(10),
    dt DATE, dtm DATETIME(6), dtm0 DATETIME, tm TIME(6), yr YEAR,
    bl LONGBLOB, vb VARBINARY(300)
) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci"""
TYPE_COLUMNS = ("id", "ti", "uti", "si", "usi", "mi", "umi", "i", "ui", "bi", "ubi", "dc", "dc2", "f", "d", "vc",
                "tx", "ch", "dt", "dtm", "dtm0", "tm", "bl", "vb")
# (`yr YEAR` is left out of what mysql-connector reads: its binary-protocol parser has no case for YEAR and
# reads its 2 bytes as a length-coded string. It and negative TIMEs are checked with the project's own codec.)


@dataclass
class PsEnv:
    proxy: RunningProxy
    servers: list[MariaDBServer]

    def connector(self, database: str, *, direct: MariaDBServer | None = None) -> Any:
        """mysql-connector-python, pure Python, through the proxy (or straight to `direct`)."""
        host, port = (direct.host, direct.port) if direct else (self.proxy.host, self.proxy.port)
        return mysql.connector.connect(host=host, port=port, user="root", password="root", database=database,
                                       use_pure=True, ssl_disabled=True, autocommit=True)

    def oracle(self) -> Any:
        return self.connector(ORACLE, direct=self.servers[0])

    def backend(self, logical: str, ds: str, sql: str) -> list[tuple[Any, ...]]:
        return self.servers[DATA_SOURCES.index(ds)].execute(sql, PHYSICAL[logical][ds])

    def raw(self, database: str, *, direct: bool = False) -> RawClient:
        """A logged-in raw client: to the proxy, or to server 0 (`database` is then a physical one)."""
        if direct:
            server = self.servers[0]
            c = RawClient(server.host, server.port)
            answer = c.login("root", server.password, database=database)
        else:
            c = RawClient(self.proxy.host, self.proxy.port)
            answer = c.login("root", "root", database=database)
        assert answer[:1] == b"\x00", answer
        return c


@pytest.fixture(scope="module")
def ps(mariadb_shards: list[MariaDBServer], tmp_path_factory: pytest.TempPathFactory) -> Iterator[PsEnv]:
    s0, s1 = mariadb_shards
    for names in PHYSICAL.values():
        for ds, server in zip(DATA_SOURCES, (s0, s1), strict=True):
            server.execute(f"DROP DATABASE IF EXISTS {names[ds]}")
            server.execute(f"CREATE DATABASE {names[ds]}")
    for name in (PASS_PHYSICAL, ORACLE):
        s0.execute(f"DROP DATABASE IF EXISTS {name}")
        s0.execute(f"CREATE DATABASE {name}")
    databases: dict[str, dict[str, tuple[MariaDBServer, str]]] = {
        logical: {ds: (server, names[ds]) for ds, server in zip(DATA_SOURCES, (s0, s1), strict=True)}
        for logical, names in PHYSICAL.items()
    }
    databases["ps_pass"] = {"ds_0": (s0, PASS_PHYSICAL)}
    rules = {"ps_prep": shipped_rules_yaml(), "ps_text": shipped_rules_yaml(), "ps_types": TYPES_RULES}
    proxy = start_proxy(Path(write_conf(tmp_path_factory.mktemp("prepared-conf"), databases, rules_yaml=rules)))
    env = PsEnv(proxy, [s0, s1])
    try:
        for logical in (*SHARDED, "ps_pass"):
            with proxy.connect(logical) as conn, conn.cursor() as cur:
                for sql in SHARDING_DDL:
                    cur.execute(sql)
        for sql in SHARDING_DDL:
            s0.execute(sql, ORACLE)
        for logical in ("ps_types", "ps_pass"):
            with proxy.connect(logical) as conn, conn.cursor() as cur:
                cur.execute(TYPES_DDL)
                cur.execute(KV_DDL)
                cur.executemany("INSERT INTO t_kv (k, v) VALUES (%s, %s)", KV_ROWS)
        s0.execute(TYPES_DDL, ORACLE)
        s0.execute(KV_DDL, ORACLE)
        s0.execute("INSERT INTO t_kv (k, v) VALUES " + ", ".join(f"({k}, '{v}')" for k, v in KV_ROWS), ORACLE)
        yield env
    finally:
        proxy.stop()


def _norm(value: Any) -> Any:
    return bytes(value) if isinstance(value, bytearray) else value


def _rows(rows: Sequence[Sequence[Any]]) -> list[tuple[Any, ...]]:
    return [tuple(_norm(v) for v in row) for row in rows]


def _sort_key(row: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple((v is None, "" if v is None else str(type(v)), v if v is not None else 0) for v in row)


@dataclass(frozen=True)
class Step:
    """One statement of the corpus. `ordered`: its ORDER BY fixes the row order (else rows compare as a bag);
    `oracle`: MariaDB's own answer on the unsharded copy must match too; `refused`: the proxy must refuse it
    on the sharded databases (same errno both ways), while pass-through and the oracle run it."""

    sql: str
    params: tuple[Any, ...] = ()
    ordered: bool = True
    oracle: bool = True
    refused: bool = False

    @property
    def id(self) -> str:
        return f"{self.sql} {self.params}"


def S(sql: str, *params: Any, ordered: bool = True, oracle: bool = True, refused: bool = False) -> Step:
    return Step(sql, tuple(params), ordered, oracle, refused)


INSERT_ORDER = "INSERT INTO t_order (order_id, user_id, status) VALUES (%s, %s, %s)"
INSERT_ORDERS_4 = "INSERT INTO t_order (order_id, user_id, status) VALUES (%s, %s, %s), (%s, %s, %s), " \
                  "(%s, %s, %s), (%s, %s, %s)"
INSERT_ITEMS_3 = "INSERT INTO t_order_item (order_item_id, order_id, user_id, status) VALUES " \
                 "(%s, %s, %s, %s), (%s, %s, %s, %s), (%s, %s, %s, %s)"
JOIN = "SELECT o.order_id, o.user_id, i.order_item_id, i.status FROM t_order o JOIN t_order_item i " \
       "ON o.order_id = i.order_id"

CORPUS: list[Step] = [
    # -- INSERT: single rows (one node each), then multi-row statements spread over all four nodes --------
    S(INSERT_ORDER, 1, 1, "init"),
    S(INSERT_ORDER, 2, 1, "init"),
    S(INSERT_ORDER, 3, 2, "paid"),
    S(INSERT_ORDER, 4, 2, None),
    S(INSERT_ORDER, 5, 3, "многобайтовый ☃ 漢字 😀"),
    S(INSERT_ORDERS_4, 6, 3, "paid", 7, 4, "init", 8, 5, None, 9, 6, "shipped"),
    S(INSERT_ORDERS_4, 10, 7, "paid", 11, 7, "paid", 12, 8, "init", 13, 9, "shipped"),
    S(INSERT_ITEMS_3, 101, 1, 1, "a", 102, 1, 1, "b", 103, 2, 1, "c"),
    S(INSERT_ITEMS_3, 104, 3, 2, "d", 105, 6, 3, None, 106, 7, 4, "f"),
    S(INSERT_ITEMS_3, 107, 10, 7, "g", 108, 11, 7, "h", 109, 13, 9, "i"),
    S("INSERT INTO t_address (address_id, address_name) VALUES (%s, %s), (%s, %s), (%s, %s)",
      1, "paris", 2, "tokyo", 3, "москва"),
    S("INSERT INTO t_address (address_id, address_name) VALUES (%s, %s)", 4, "lima"),
    # a duplicate key is refused by the backend the row routes to, the same way both ways
    S(INSERT_ORDER, 1, 1, "dup", refused=True),
    # -- point selects ---------------------------------------------------------------------------------
    S("SELECT * FROM t_order WHERE user_id = %s AND order_id = %s", 1, 1),
    S("SELECT * FROM t_order WHERE user_id = %s AND order_id = %s", 2, 3),
    S("SELECT * FROM t_order WHERE user_id = %s AND order_id = %s", 2, 999),
    S("SELECT * FROM t_order WHERE order_id = %s", 5),
    S("SELECT status, order_id FROM t_order WHERE user_id = %s", 7, ordered=False),
    S("SELECT * FROM t_order WHERE user_id = %s", 3, ordered=False),
    S("SELECT order_id FROM t_order WHERE user_id = %s AND status = %s", 7, "paid", ordered=False),
    S("SELECT * FROM t_order WHERE status = %s", "многобайтовый ☃ 漢字 😀", ordered=False),
    # -- IN lists, rewritten per node like their literal forms -------------------------------------------
    S("SELECT * FROM t_order WHERE order_id IN (%s, %s, %s) ORDER BY order_id", 1, 6, 11),
    S("SELECT * FROM t_order WHERE order_id IN (%s, %s, %s) ORDER BY order_id", 2, 4, 998),
    S("SELECT * FROM t_order WHERE user_id IN (%s, %s) ORDER BY order_id DESC", 2, 7),
    S("SELECT * FROM t_order WHERE user_id IN (%s, %s, %s) AND order_id IN (%s, %s) ORDER BY order_id",
      1, 2, 3, 2, 3),
    S("SELECT COUNT(*) FROM t_order_item WHERE order_id IN (%s, %s, %s)", 1, 2, 10),
    # -- ranges: on a non-sharding column they fan out; INLINE refuses a range on its own column ----------
    S("SELECT order_id, status FROM t_order WHERE status > %s ORDER BY order_id", "m"),
    S("SELECT * FROM t_order WHERE status BETWEEN %s AND %s ORDER BY order_id", "init", "paid"),
    S("SELECT * FROM t_order WHERE status IS NULL ORDER BY order_id"),
    S("SELECT * FROM t_order WHERE order_id BETWEEN %s AND %s ORDER BY order_id", 2, 6, refused=True),
    S("SELECT * FROM t_order WHERE user_id > %s ORDER BY order_id", 5, refused=True),
    S("SELECT * FROM t_address WHERE address_id BETWEEN %s AND %s ORDER BY address_id", 2, 3),
    # -- ORDER BY / LIMIT ?, ? --------------------------------------------------------------------------
    S("SELECT * FROM t_order ORDER BY order_id LIMIT %s, %s", 0, 3),
    S("SELECT * FROM t_order ORDER BY order_id LIMIT %s, %s", 4, 5),
    S("SELECT * FROM t_order ORDER BY order_id LIMIT %s, %s", 12, 5),
    S("SELECT * FROM t_order ORDER BY order_id DESC LIMIT %s", 4),
    S("SELECT * FROM t_order ORDER BY user_id DESC, order_id LIMIT %s OFFSET %s", 3, 2),
    S("SELECT order_id, user_id FROM t_order WHERE user_id IN (%s, %s) ORDER BY order_id LIMIT %s, %s",
      1, 2, 1, 2),
    S("SELECT * FROM t_order ORDER BY order_id"),
    # -- aggregates, GROUP BY, HAVING, DISTINCT -------------------------------------------------------------
    S("SELECT COUNT(*), SUM(order_id), MIN(user_id), MAX(user_id), AVG(user_id) FROM t_order"),
    S("SELECT COUNT(*), SUM(order_id), MAX(status) FROM t_order WHERE user_id = %s", 7),
    S("SELECT COUNT(status), COUNT(DISTINCT user_id) FROM t_order"),
    S("SELECT user_id, COUNT(*), SUM(order_id) FROM t_order GROUP BY user_id ORDER BY user_id"),
    S("SELECT user_id, COUNT(*) AS n FROM t_order GROUP BY user_id ORDER BY n DESC, user_id LIMIT %s", 100),
    S("SELECT status, COUNT(*) FROM t_order WHERE order_id IN (%s, %s, %s, %s) GROUP BY status ORDER BY status",
      1, 2, 3, 6),
    S("SELECT user_id, COUNT(*) AS n FROM t_order GROUP BY user_id HAVING n > 1 ORDER BY user_id"),
    S("SELECT DISTINCT user_id FROM t_order ORDER BY user_id"),
    S("SELECT DISTINCT status FROM t_order WHERE user_id IN (%s, %s) ORDER BY status", 1, 7),
    # -- binding join (t_order / t_order_item), broadcast table ------------------------------------------------
    S(JOIN + " WHERE o.user_id = %s ORDER BY i.order_item_id", 1),
    S(JOIN + " WHERE o.order_id IN (%s, %s) ORDER BY i.order_item_id", 1, 10),
    S(JOIN + " ORDER BY i.order_item_id"),
    S("SELECT o.user_id, COUNT(*) FROM t_order o JOIN t_order_item i ON o.order_id = i.order_id "
      "GROUP BY o.user_id ORDER BY o.user_id"),
    S("SELECT * FROM t_address ORDER BY address_id"),
    S("SELECT o.order_id, a.address_name FROM t_order o JOIN t_address a ON a.address_id = o.user_id "
      "WHERE o.user_id = %s ORDER BY o.order_id", 2),
    S("SELECT o.order_id, a.address_name FROM t_order o JOIN t_address a ON a.address_id = o.user_id "
      "ORDER BY o.order_id"),
    # -- UPDATE / DELETE ------------------------------------------------------------------------------------
    S("UPDATE t_order SET status = %s WHERE user_id = %s AND order_id = %s", "done", 1, 1),
    S("UPDATE t_order SET status = %s WHERE order_id = %s", "done", 2),
    S("UPDATE t_order SET status = %s WHERE order_id IN (%s, %s, %s)", "bulk", 3, 4, 13),
    S("UPDATE t_order SET status = CONCAT(COALESCE(status, %s), %s) WHERE user_id = %s", "", "+", 7),
    S("UPDATE t_order SET status = %s WHERE user_id = %s AND order_id = %s", "none", 2, 999),
    S("UPDATE t_order_item SET status = %s WHERE order_id = %s", "item-upd", 1),
    S("UPDATE t_address SET address_name = %s WHERE address_id = %s", "berlin", 2),
    S("SELECT * FROM t_order ORDER BY order_id"),
    S("SELECT * FROM t_order_item ORDER BY order_item_id"),
    S("SELECT * FROM t_address ORDER BY address_id"),
    S("DELETE FROM t_order WHERE user_id = %s AND order_id = %s", 9, 13),
    S("DELETE FROM t_order WHERE order_id = %s", 12),
    S("DELETE FROM t_order WHERE order_id IN (%s, %s)", 8, 998),
    S("DELETE FROM t_order_item WHERE user_id = %s", 9),
    S("DELETE FROM t_address WHERE address_id = %s", 4),
    S("SELECT * FROM t_order ORDER BY order_id"),
    S("SELECT * FROM t_order_item ORDER BY order_item_id"),
    S("SELECT * FROM t_address ORDER BY address_id"),
    S("SELECT COUNT(*), SUM(order_id) FROM t_order_item"),
]


@dataclass
class Outcome:
    rows: list[tuple[Any, ...]] | None = None
    rowcount: int | None = None
    errno: int | None = None
    message: str = field(default="", compare=False)

    def comparable(self, step: Step) -> tuple[Any, ...]:
        rows = self.rows
        if rows is not None and not step.ordered:
            rows = sorted(rows, key=_sort_key)
        return rows, self.rowcount if rows is None else None, self.errno


def _run(cur: Any, step: Step) -> Outcome:
    try:
        cur.execute(step.sql, step.params)
        if step.sql.startswith("SELECT"):  # (the prepared cursor keeps a stale description after DML)
            return Outcome(rows=_rows(cur.fetchall()))
        return Outcome(rowcount=cur.rowcount)
    except mysql.connector.Error as exc:
        return Outcome(errno=exc.errno, message=str(exc.msg))


def test_corpus_prepared_equals_text_and_oracle(ps: PsEnv) -> None:
    """Every statement: prepared on the sharded database == text on the sharded database == prepared on the
    pass-through database == MariaDB itself (text, unsharded copy), rows and affected-row counts."""
    prep, text, passed, oracle = (ps.connector("ps_prep"), ps.connector("ps_text"), ps.connector("ps_pass"),
                                  ps.oracle())
    try:
        pcur, tcur, ppcur, ocur = prep.cursor(prepared=True), text.cursor(), passed.cursor(prepared=True), \
            oracle.cursor()
        mismatches: list[str] = []
        for step in CORPUS:
            p, t, pp, o = (_run(c, step) for c in (pcur, tcur, ppcur, ocur))
            if step.refused:
                if p.errno is None or p.errno != t.errno:
                    mismatches.append(f"{step.id}: refusal prepared {p} vs text {t}")
                if step.sql.startswith("SELECT") and (pp.comparable(step) != o.comparable(step) or o.errno):
                    mismatches.append(f"{step.id}: pass-through {pp} vs oracle {o}")
                continue
            if p.errno is not None:
                mismatches.append(f"{step.id}: prepared failed with {p.errno}")
            if p.comparable(step) != t.comparable(step):
                mismatches.append(f"{step.id}:\n  prepared {p}\n  text     {t}")
            if pp.comparable(step) != o.comparable(step):
                mismatches.append(f"{step.id}:\n  pass-through {pp}\n  oracle       {o}")
            if step.oracle and p.comparable(step) != o.comparable(step):
                mismatches.append(f"{step.id}:\n  prepared {p}\n  oracle   {o}")
        assert not mismatches, "\n".join(mismatches)
    finally:
        for c in (prep, text, passed, oracle):
            c.close()


def _node_of(logical_table: str, user_id: int, order_id: int) -> tuple[str, str]:
    return f"ds_{user_id % 2}", f"{logical_table}_{order_id % 2}"


def _actual(ps: PsEnv, logical: str, table: str) -> dict[tuple[str, str], list[tuple[Any, ...]]]:
    out = {}
    for ds in DATA_SOURCES:
        for n in (0, 1):
            out[(ds, f"{table}_{n}")] = sorted(ps.backend(logical, ds, f"SELECT * FROM {table}_{n}"))
    return out


def test_generated_keys(ps: PsEnv) -> None:
    """INSERTs without the key column: the proxy generates SNOWFLAKE keys, cursor.lastrowid has the (first)
    generated key, prepared or not, and the rows are where the rules put them."""
    for logical, prepared in (("ps_prep", True), ("ps_text", False)):
        conn = ps.connector(logical)
        try:
            cur = conn.cursor(prepared=prepared)
            cur.execute("INSERT INTO t_order (user_id, status) VALUES (%s, %s)", (1001, "gen"))
            assert cur.rowcount == 1
            first = cur.lastrowid
            assert isinstance(first, int) and first > 0, (logical, first)
            cur.execute("INSERT INTO t_order (user_id, status) VALUES (%s, %s), (%s, %s), (%s, %s)",
                        (1002, "gen2", 1003, "gen2", 1004, "gen2"))
            assert cur.rowcount == 3
            multi = cur.lastrowid
            assert isinstance(multi, int) and multi > first, (logical, first, multi)
            cur.execute("INSERT INTO t_order_item (order_id, user_id, status) VALUES (%s, %s, %s)",
                        (first, 1001, "gen-item"))
            item_id = cur.lastrowid
            assert isinstance(item_id, int) and item_id > 0
            cur.execute("SELECT order_id, user_id, status FROM t_order WHERE user_id = %s AND order_id = %s",
                        (1001, first))
            assert _rows(cur.fetchall()) == [(first, 1001, "gen")]
            cur.execute("SELECT order_id, user_id FROM t_order WHERE user_id IN (%s, %s, %s, %s) ORDER BY user_id",
                        (1001, 1002, 1003, 1004))
            rows = _rows(cur.fetchall())
            assert [r[1] for r in rows] == [1001, 1002, 1003, 1004]
            assert rows[1][0] == multi, "lastrowid of a multi-row INSERT is the first row's generated key"
            assert len({r[0] for r in rows}) == 4
            for order_id, user_id in rows:
                ds, table = _node_of("t_order", user_id, order_id)
                found = ps.backend(logical, ds, f"SELECT user_id FROM {table} WHERE order_id = {int(order_id)}")
                assert found == [(user_id,)], (logical, order_id, user_id, ds, table)
            ds, table = _node_of("t_order_item", 1001, first)
            assert ps.backend(logical, ds, f"SELECT order_id FROM {table} WHERE order_item_id = {item_id}") == \
                [(first,)]
            cur.execute(JOIN + " WHERE o.user_id = %s AND o.order_id = %s", (1001, first))
            assert _rows(cur.fetchall()) == [(first, 1001, item_id, "gen-item")]
            # leave the corpus tables as the oracle has them
            cur.execute("DELETE FROM t_order_item WHERE user_id = %s AND order_id = %s", (1001, first))
            assert cur.rowcount == 1
            cur.execute("DELETE FROM t_order WHERE user_id IN (%s, %s, %s, %s)", (1001, 1002, 1003, 1004))
            assert cur.rowcount == 4
        finally:
            conn.close()


def test_rows_sit_where_the_rules_demand(ps: PsEnv) -> None:
    """After the corpus, read the backends directly: every t_order / t_order_item row is in
    ds_{user_id % 2}.<table>_{order_id % 2}, t_address is complete on both data sources, and the prepared
    database holds exactly what the text database holds."""
    oracle_orders = sorted(ps.servers[0].execute("SELECT * FROM t_order", ORACLE))
    oracle_items = sorted(ps.servers[0].execute("SELECT * FROM t_order_item", ORACLE))
    oracle_address = sorted(ps.servers[0].execute("SELECT * FROM t_address", ORACLE))
    assert oracle_orders and oracle_items and oracle_address
    for logical in SHARDED:
        orders = _actual(ps, logical, "t_order")
        for (ds, table), rows in orders.items():
            for order_id, user_id, _status in rows:
                assert _node_of("t_order", user_id, order_id) == (ds, table), (logical, ds, table, order_id)
        items = _actual(ps, logical, "t_order_item")
        for (ds, table), rows in items.items():
            for _item_id, order_id, user_id, _status in rows:
                assert _node_of("t_order_item", user_id, order_id) == (ds, table), (logical, ds, table, order_id)
        assert sorted(r for rows in orders.values() for r in rows) == oracle_orders, logical
        assert sorted(r for rows in items.values() for r in rows) == oracle_items, logical
        for ds in DATA_SOURCES:
            assert sorted(ps.backend(logical, ds, "SELECT * FROM t_address")) == oracle_address, (logical, ds)
    assert _actual(ps, "ps_prep", "t_order") == _actual(ps, "ps_text", "t_order")
    assert _actual(ps, "ps_prep", "t_order_item") == _actual(ps, "ps_text", "t_order_item")


def test_having_parameter(ps: PsEnv) -> None:
    conn, oracle = ps.connector("ps_prep"), ps.oracle()
    try:
        cur, ocur = conn.cursor(prepared=True), oracle.cursor()
        for threshold in (1, 0):
            step = S("SELECT user_id, COUNT(*) AS n FROM t_order GROUP BY user_id HAVING n > %s ORDER BY user_id",
                     threshold)
            assert _run(cur, step).comparable(step) == _run(ocur, step).comparable(step)
    finally:
        conn.close()
        oracle.close()


def test_sharding_value_bound_as_string(ps: PsEnv) -> None:
    conn = ps.connector("ps_types")
    try:
        cur = conn.cursor(prepared=True)
        cur.execute("SELECT k, v FROM t_kv WHERE k = %s", ("3",))
        assert _rows(cur.fetchall()) == [(3, "v3")]
    finally:
        conn.close()


# --- every type, NULLs, long data ------------------------------------------------------------------------

_DEC65 = "9" * 35 + "." + "9" * 30
TYPE_ROWS: list[tuple[Any, ...]] = [
    (1, -128, 0, -32768, 0, -8388608, 0, -(2**31), 0, -(2**63), 0, Decimal("-" + _DEC65), Decimal("-99999999.99"),
     -3.4e38, -1.7976931348623157e308, "漢字 かな 한글 😀 ☃ ü", "é" * 1000 + "x", "ab",
     datetime.date(1000, 1, 1), datetime.datetime(1000, 1, 1), datetime.datetime(1000, 1, 1),
     datetime.timedelta(0), bytes(range(256)), bytes(range(255, -1, -1))),
    (2, 127, 255, 32767, 65535, 8388607, 16777215, 2**31 - 1, 2**32 - 1, 2**63 - 1, 2**64 - 1, Decimal(_DEC65),
     Decimal("99999999.99"), 3.4e38, 1.7976931348623157e308, "", "", "",
     datetime.date(9999, 12, 31), datetime.datetime(9999, 12, 31, 23, 59, 59, 999999),
     datetime.datetime(9999, 12, 31, 23, 59, 59), datetime.timedelta(hours=838, minutes=59, seconds=59),
     b"", b"\x00"),
    (3, *([None] * 23)),
    (4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, Decimal("0." + "0" * 29 + "1"), Decimal("-0.01"), 0.1, 0.1,
     "a'b\"c\\d\n\x00e", "line1\r\nline2\t", "x", datetime.date(2024, 2, 29),
     datetime.datetime(2024, 2, 29, 12, 34, 56, 123456), datetime.datetime(1970, 1, 1, 0, 0, 1),
     datetime.timedelta(seconds=1, microseconds=500000), b"\x00\xff\x00", b"\\'\"\x00"),
    (5, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1, Decimal("-1.5"), Decimal("1.50"), -2.5, 1e-300, "ñ", "😀" * 10, "😀 z",
     datetime.date(1, 1, 1), datetime.datetime(1, 1, 1, 0, 0, 0, 1), datetime.datetime(2038, 1, 19, 3, 14, 8),
     datetime.timedelta(microseconds=1), bytes(range(256)) * 100, b"\xff" * 300),
    (6, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, Decimal("12345.678900000000000000000000000001"), Decimal("-12.30"),
     1.5e-38, -2.2250738585072014e-308, "😀" * 100, None, None, datetime.date(1999, 12, 31),
     datetime.datetime(1999, 12, 31, 23, 59, 59, 500000), None, datetime.timedelta(days=3, hours=4, microseconds=7),
     None, b""),
]
INSERT_TYPES = f"INSERT INTO t_types ({', '.join(TYPE_COLUMNS)}) VALUES ({', '.join(['%s'] * len(TYPE_COLUMNS))})"
SELECT_TYPES = f"SELECT {', '.join(TYPE_COLUMNS)} FROM t_types"


def _float32(x: float) -> float:
    return float(struct.unpack("<f", struct.pack("<f", x))[0])


def _as_stored(row: tuple[Any, ...]) -> tuple[Any, ...]:
    """What a binary-protocol read gives back for an inserted row: FLOAT holds a 32-bit float, CHAR drops
    trailing spaces, DECIMAL has the column's scale."""
    out = list(row)
    f = TYPE_COLUMNS.index("f")
    if out[f] is not None:
        out[f] = _float32(out[f])
    for col, scale in (("dc", 30), ("dc2", 2)):
        i = TYPE_COLUMNS.index(col)
        if out[i] is not None:
            out[i] = out[i].quantize(Decimal(1).scaleb(-scale), context=decimal.Context(prec=80))
    return tuple(out)


def _diff(got: Sequence[tuple[Any, ...]], want: Sequence[tuple[Any, ...]]) -> str:
    """The differing cells of two row lists, by row index and column position, values abbreviated."""
    if len(got) != len(want):
        return f"{len(got)} rows instead of {len(want)}"
    out = []
    for n, (g, w) in enumerate(zip(got, want, strict=True)):
        for i, (a, b) in enumerate(zip(g, w, strict=False)):
            if a != b or type(a) is not type(b):
                out.append(f"row {n} col {i}: {a!r:.80} ({type(a).__name__}) != {b!r:.80} ({type(b).__name__})")
        if len(g) != len(w):
            out.append(f"row {n}: {len(g)} columns instead of {len(w)}")
    return "\n".join(out)


def _exec(conn: Any, sql: str, params: tuple[Any, ...] = ()) -> int:
    cur = conn.cursor(prepared=True)
    try:
        cur.execute(sql, params)
        return int(cur.rowcount)
    finally:
        cur.close()


def _fetch(conn: Any, sql: str, params: tuple[Any, ...] = (), *, prepared: bool = True) -> list[tuple[Any, ...]]:
    cur = conn.cursor(prepared=prepared)
    try:
        cur.execute(sql, params)
        return _rows(cur.fetchall())
    finally:
        cur.close()


TYPE_QUERIES: list[tuple[str, tuple[Any, ...]]] = [
    (SELECT_TYPES + " ORDER BY id", ()),  # several nodes, merged: binary rows re-encoded from merged values
    (SELECT_TYPES + " ORDER BY id DESC LIMIT %s, %s", (1, 3)),
    (SELECT_TYPES + " WHERE id IN (%s, %s, %s) ORDER BY id", (1, 2, 3)),
    ("SELECT id FROM t_types WHERE dtm = %s", (datetime.datetime(2024, 2, 29, 12, 34, 56, 123456),)),
    ("SELECT id FROM t_types WHERE dt = %s", (datetime.date(1000, 1, 1),)),
    ("SELECT id FROM t_types WHERE tm = %s", (datetime.timedelta(seconds=1, microseconds=500000),)),
    ("SELECT id FROM t_types WHERE tm < %s ORDER BY id", (datetime.timedelta(hours=1),)),
    ("SELECT id FROM t_types WHERE dc = %s", (Decimal("-" + _DEC65),)),
    ("SELECT id FROM t_types WHERE dc2 = %s", (Decimal("-0.01"),)),
    ("SELECT id FROM t_types WHERE ubi = %s", (2**64 - 1,)),
    ("SELECT id FROM t_types WHERE bi = %s", (-(2**63),)),
    ("SELECT id FROM t_types WHERE d = %s", (1e-300,)),
    ("SELECT id FROM t_types WHERE vc = %s", ("漢字 かな 한글 😀 ☃ ü",)),
    ("SELECT id FROM t_types WHERE bl = %s", (bytes(range(256)),)),
    ("SELECT id FROM t_types WHERE vb = %s", (b"\\'\"\x00",)),
    ("SELECT id FROM t_types WHERE vc IS NULL AND dc <=> %s", (None,)),
    ("SELECT MIN(ti), MAX(ubi), SUM(ubi), MIN(dc), MAX(dc), SUM(dc2), MIN(f), MAX(d), MIN(dt), MAX(dtm), MIN(tm), "
     "MAX(tm), MIN(vc), MAX(vb), COUNT(bl), AVG(i) FROM t_types", ()),
    ("SELECT uti, COUNT(*), MAX(dtm), MIN(tm), SUM(dc) FROM t_types GROUP BY uti ORDER BY uti", ()),
    ("SELECT %s, %s, %s, %s, %s FROM t_types WHERE id = %s",
     (Decimal("-1.25"), datetime.date(2001, 2, 3), datetime.timedelta(hours=1), "ü", b"\x00\xff", 6)),
]


@pytest.mark.parametrize("logical", ["ps_types", "ps_pass"])
def test_types_round_trip(ps: PsEnv, logical: str) -> None:
    """Every type, extremes and NULLs, inserted through prepared statements, read back exactly: through the
    proxy prepared (one node relayed, several nodes concatenated or merged) and as text, each equal to the
    same client on MariaDB directly holding the same rows."""
    conn, oracle = ps.connector(logical), ps.oracle()
    try:
        for c in (conn, oracle):
            _exec(c, "DELETE FROM t_types WHERE id < %s", (100,))
            cur = c.cursor(prepared=True)
            for row in TYPE_ROWS:
                cur.execute(INSERT_TYPES, row)
                assert cur.rowcount == 1
            cur.close()
        expected = [_as_stored(r) for r in TYPE_ROWS]
        for row in expected:
            got = _fetch(conn, SELECT_TYPES + " WHERE id = %s", (row[0],))
            assert got == [row], _diff(got, [row])
        assert sorted(_fetch(conn, SELECT_TYPES + " WHERE id < %s", (100,)), key=lambda r: r[0]) == expected
        assert _fetch(conn, SELECT_TYPES + " ORDER BY id") == expected
        assert _fetch(conn, SELECT_TYPES + " ORDER BY id") == _fetch(oracle, SELECT_TYPES + " ORDER BY id")
        mismatches = []
        for sql, params in TYPE_QUERIES:
            for prepared in (True, False):
                got = _fetch(conn, sql, params, prepared=prepared)
                want = _fetch(oracle, sql, params, prepared=prepared)
                if got != want:
                    mismatches.append(f"{'prepared' if prepared else 'text'} {sql} {params}:\n  {got}\n  {want}")
        assert not mismatches, "\n".join(mismatches)
        if logical == "ps_types":  # each row is on the data source its id names
            for ds in DATA_SOURCES:
                ids = [r[0] for r in ps.backend("ps_types", ds, "SELECT id FROM t_types WHERE id < 100 ORDER BY id")]
                assert ids == [r[0] for r in TYPE_ROWS if f"ds_{r[0] % 2}" == ds]
    finally:
        conn.close()
        oracle.close()


@pytest.mark.parametrize("logical", ["ps_types", "ps_pass"])
def test_text_written_prepared_read_and_back(ps: PsEnv, logical: str) -> None:
    """Rows written as text read back identically through prepared statements, and the other way round."""
    conn = ps.connector(logical)
    try:
        _exec(conn, "DELETE FROM t_types WHERE id >= %s AND id < %s", (100, 300))
        text, prep = conn.cursor(), conn.cursor(prepared=True)
        for row in TYPE_ROWS:
            text.execute(INSERT_TYPES, (row[0] + 100, *row[1:]))
            prep.execute(INSERT_TYPES, (row[0] + 200, *row[1:]))
        for sql in (SELECT_TYPES + " WHERE id >= %s AND id < %s ORDER BY id", ):
            by_text = [r[1:] for r in _fetch(conn, sql, (100, 200))]
            by_prep = [r[1:] for r in _fetch(conn, sql, (200, 300))]
            assert by_text == by_prep == [_as_stored(r)[1:] for r in TYPE_ROWS]
            assert [r[1:] for r in _fetch(conn, sql, (100, 200), prepared=False)] == \
                [r[1:] for r in _fetch(conn, sql, (200, 300), prepared=False)]
    finally:
        conn.close()


@pytest.mark.parametrize("logical", ["ps_types", "ps_pass"])
def test_long_data(ps: PsEnv, logical: str) -> None:
    """File-like parameters go as COM_STMT_SEND_LONG_DATA (mysql-connector sends them in chunks): a few MB of
    every byte value into a LONGBLOB and multibyte text (chunks split characters) into a LONGTEXT, on an
    INSERT and an UPDATE; read back byte for byte."""
    blob = bytes(range(256)) * (3 * 4096)  # 3 MB
    text = ("漢字😀ü" * 150_000)[:400_000]
    blob2 = bytes(reversed(blob[: 2 * 1024 * 1024 + 7]))
    conn = ps.connector(logical)
    try:
        _exec(conn, "DELETE FROM t_types WHERE id >= %s AND id < %s", (300, 400))
        cur = conn.cursor(prepared=True)
        for id_ in (301, 302):
            cur.execute("INSERT INTO t_types (id, bl, tx, vc) VALUES (%s, %s, %s, %s)",
                        (id_, io.BytesIO(blob), io.BytesIO(text.encode()), "after long data"))
            assert cur.rowcount == 1
        cur.execute("UPDATE t_types SET bl = %s WHERE id = %s", (io.BytesIO(blob2), 302))
        assert cur.rowcount == 1
        for id_, want in ((301, blob), (302, blob2)):
            rows = _fetch(conn, "SELECT bl, tx, vc FROM t_types WHERE id = %s", (id_,))
            assert len(rows) == 1
            bl, tx, vc = rows[0]
            assert (len(bl), hashlib.sha256(bl).hexdigest()) == (len(want), hashlib.sha256(want).hexdigest())
            assert tx == text and vc == "after long data"
        # the same values checked by MariaDB itself, on the node that holds them
        rows = _fetch(conn, "SELECT id, LENGTH(bl), SHA2(bl, 256), CHAR_LENGTH(tx) FROM t_types "
                            "WHERE id IN (%s, %s) ORDER BY id", (301, 302))
        assert rows == [(301, len(blob), hashlib.sha256(blob).hexdigest(), len(text)),
                        (302, len(blob2), hashlib.sha256(blob2).hexdigest(), len(text))]
        # and the statement is reusable with ordinary parameters afterwards
        cur.execute("UPDATE t_types SET bl = %s WHERE id = %s", (b"small", 301))
        assert _fetch(conn, "SELECT bl FROM t_types WHERE id = %s", (301,)) == [(b"small",)]
    finally:
        conn.close()


# --- the protocol itself, on raw sockets, against MariaDB ---------------------------------------------------
#
# Each scenario writes a transcript of what it saw (statement ids, decoded rows, errors, cursor flags); the
# transcript through the proxy must equal the transcript of the same bytes sent to MariaDB directly (the
# oracle database holds the same t_kv rows).

RAW_TARGETS = ["ps_types", "ps_pass"]
_STATUS_BITS = int(ServerStatus.CURSOR_EXISTS | ServerStatus.LAST_ROW_SENT)


@dataclass
class RawResult:
    columns: list[str] = field(default_factory=list)
    rows: list[bytes] = field(default_factory=list)  # binary row payloads, as sent
    status: int = 0  # CURSOR_EXISTS / LAST_ROW_SENT bits of the last EOF
    affected: int | None = None
    err: tuple[int, str, str] | None = None

    def values(self, types: Sequence[ColumnDefinition41]) -> list[tuple[Any, ...]]:
        return [decode_binary_row(p, types) for p in self.rows]


def _err(payload: bytes) -> tuple[int, str, str]:
    """errno, SQLSTATE, message; a statement id in the message is left out: MariaDB numbers statements
    server-wide (23, 24, ... on a connection's first PREPAREs), the proxy per session (1, 2, ...)."""
    e = ERRPacket.decode(payload)
    return e.errno, e.sqlstate, re.sub(r"(handler|statement) \(\d+\)", r"\1 (#)", e.message)


def _raw_prepare(c: RawClient, sql: str) -> PrepareResponse | tuple[int, str, str]:
    c.send(ComStmtPrepare(sql.encode()).encode())
    first = c.read()[1]
    if is_err(first):
        return _err(first)
    ok = StmtPrepareOK.decode(first)
    return PrepareResponse.decode([first, *(c.read()[1] for _ in range(ok.following_packets(False)))], False)


def _prepared(c: RawClient, sql: str) -> PrepareResponse:
    answer = _raw_prepare(c, sql)
    assert isinstance(answer, PrepareResponse), answer
    return answer


def _read_rows(c: RawClient, out: RawResult) -> RawResult:
    while True:
        p = c.read()[1]
        if is_err(p):
            out.err = _err(p)
            return out
        if is_eof(p):
            out.status = int(EOFPacket.decode(p).status) & _STATUS_BITS
            return out
        out.rows.append(p)


def _raw_execute(c: RawClient, stmt_id: int, values: Sequence[Any] = (), *, flags: int = 0,
                 payload: bytes | None = None) -> RawResult:
    c.send(payload if payload is not None else ComStmtExecute(stmt_id, flags, 1, tuple(values), (), True).encode())
    first = c.read()[1]
    if is_err(first):
        return RawResult(err=_err(first))
    if first[0] == 0:
        return RawResult(affected=OKPacket.decode(first).affected_rows)
    assert first[0] < 251, first
    out = RawResult(columns=[ColumnDefinition41.decode(c.read()[1]).name for _ in range(first[0])])
    eof = c.read()[1]
    assert is_eof(eof), eof
    out.status = int(EOFPacket.decode(eof).status) & _STATUS_BITS
    if out.status & ServerStatus.CURSOR_EXISTS:
        return out
    return _read_rows(c, out)


def _raw_fetch(c: RawClient, stmt_id: int, n: int) -> RawResult:
    c.send(ComStmtFetch(stmt_id, n).encode())
    return _read_rows(c, RawResult())


def _raw_simple(c: RawClient, payload: bytes) -> str | tuple[int, str, str]:
    """A command answered by one OK or ERR (COM_STMT_RESET, COM_PING)."""
    c.send(payload)
    p = c.read()[1]
    return _err(p) if is_err(p) else "OK" if p[:1] == b"\x00" else f"? {p!r}"


def _both(ps: PsEnv, logical: str, scenario: Any) -> tuple[list[Any], list[Any]]:
    """The scenario's transcript through the proxy and against MariaDB directly."""
    transcripts = []
    for direct in (False, True):
        clients: list[RawClient] = []

        def client(clients: list[RawClient] = clients, direct: bool = direct) -> RawClient:
            c = ps.raw(ORACLE if direct else logical, direct=direct)
            clients.append(c)
            return c

        try:
            transcripts.append(scenario(client))
        finally:
            for c in clients:
                c.close()
    return transcripts[0], transcripts[1]


def _kv(result: RawResult) -> list[tuple[Any, ...]]:
    """(k, v) rows of a result (or of a COM_STMT_FETCH page, which has no column definitions)."""
    return [tuple(v.decode() if isinstance(v, bytes) else v for v in decode_binary_row(p, _KV_COLUMNS))
            for p in result.rows]


_KV_COLUMNS: list[ColumnDefinition41] = []


@pytest.fixture(scope="module")
def kv_columns(ps: PsEnv) -> list[ColumnDefinition41]:
    c = ps.raw(ORACLE, direct=True)
    try:
        _KV_COLUMNS[:] = list(_prepared(c, "SELECT k, v FROM t_kv").columns)
    finally:
        c.close()
    return _KV_COLUMNS


class _LongData:
    """A parameter whose value went as COM_STMT_SEND_LONG_DATA: typed as a string, no bytes in the
    EXECUTE (as libmysqlclient sends it)."""


LONG_DATA = _LongData()


def _kv_rows(c: RawClient, stmt_id: int, *values: Any, flags: int = 0) -> Any:
    if any(v is LONG_DATA for v in values):
        types = tuple(ParamType(ColumnType.VAR_STRING) if v is LONG_DATA else ParamType.of(v) for v in values)
        request = ComStmtExecute(stmt_id, flags, 1, tuple(None if v is LONG_DATA else v for v in values), types, True)
        r = _raw_execute(c, stmt_id, payload=request.encode())
    else:
        r = _raw_execute(c, stmt_id, values, flags=flags)
    return r.err or (r.columns, _kv(r), r.status)


@pytest.mark.parametrize("logical", RAW_TARGETS)
def test_statement_ids_are_per_session(ps: PsEnv, logical: str, kv_columns: Any) -> None:
    def scenario(client: Any) -> list[Any]:
        a, b = client(), client()
        ids_a = [_prepared(a, f"SELECT k, v FROM t_kv WHERE k = ? + {n}").ok.statement_id for n in range(3)]
        ids_b = [_prepared(b, "SELECT k, v FROM t_kv WHERE k = ?").ok.statement_id]
        return [ids_a, ids_b, _kv_rows(a, ids_a[2], 1), _kv_rows(b, ids_b[0], 1),
                _kv_rows(b, ids_a[2], 1), _kv_rows(a, ids_a[0], 1)]  # b does not know a's statement

    via, direct = _both(ps, logical, scenario)
    # the proxy numbers each session's statements 1, 2, ...; MariaDB numbers them server-wide
    assert via[0] == [1, 2, 3] and via[1] == [1]
    assert via[2:] == direct[2:]
    assert via[2][1] == [(3, "v3")] and via[3][1] == [(1, "v1")] and via[4][0] == 1243


@pytest.mark.parametrize("logical", RAW_TARGETS)
def test_close_then_execute_is_1243(ps: PsEnv, logical: str, kv_columns: Any) -> None:
    def scenario(client: Any) -> list[Any]:
        c = client()
        sid = _prepared(c, "SELECT k, v FROM t_kv WHERE k = ?").ok.statement_id
        out = [_kv_rows(c, sid, 3)]
        c.send(ComStmtClose(sid).encode())  # no answer: the next command's answer comes next
        out.append(_raw_simple(c, b"\x0e"))  # COM_PING
        out.append(_kv_rows(c, sid, 3))
        out.append(_raw_simple(c, ComStmtReset(sid).encode()))
        c.send(ComStmtClose(sid).encode())  # closing twice: still no answer
        out.append(_raw_fetch(c, sid, 1).err)
        again = _prepared(c, "SELECT k, v FROM t_kv WHERE k = ?").ok.statement_id
        out.append((again != sid, _kv_rows(c, again, 4)))
        return out

    via, direct = _both(ps, logical, scenario)
    assert via == direct
    assert via[1] == "OK" and via[2][0] == 1243 and via[3][0] == 1243


@pytest.mark.parametrize("logical", RAW_TARGETS)
def test_mariadb_last_statement_id(ps: PsEnv, logical: str, kv_columns: Any) -> None:
    """0xFFFFFFFF names the statement prepared last on the connection (MariaDB's prepare-and-execute
    pipelining), for EXECUTE, SEND_LONG_DATA, RESET and CLOSE."""
    last = LAST_STATEMENT_ID

    def scenario(client: Any) -> list[Any]:
        c = client()
        by_k = _prepared(c, "SELECT k, v FROM t_kv WHERE k = ?").ok.statement_id
        by_v = _prepared(c, "SELECT k, v FROM t_kv WHERE v = ?").ok.statement_id
        out: list[Any] = [_kv_rows(c, last, "v5")]
        c.send(ComStmtSendLongData(last, 0, b"v7").encode())
        out.append(_kv_rows(c, last, LONG_DATA))
        c.send(ComStmtSendLongData(last, 0, b"v8").encode())
        out.append(_raw_simple(c, ComStmtReset(last).encode()))
        out.append(_kv_rows(c, last, "v2"))
        c.send(ComStmtClose(last).encode())
        out.append(_kv_rows(c, by_v, "v2"))
        out.append(_kv_rows(c, by_k, 6))
        # pipelined: PREPARE and EXECUTE(last) sent at once, answers read after
        c.send(ComStmtPrepare(b"SELECT k, v FROM t_kv WHERE k IN (?, ?) ORDER BY k").encode())
        c.send(ComStmtExecute(last, 0, 1, (1, 10), (), True).encode())
        ok = StmtPrepareOK.decode(c.read()[1])
        for _ in range(ok.following_packets(False)):
            c.read()
        first = c.read()[1]
        cols = [c.read()[1] for _ in range(first[0])]
        assert is_eof(c.read()[1])
        out.append((ok.statement_id not in (by_k, by_v), len(cols), _kv(_read_rows(c, RawResult()))))
        return out

    via, direct = _both(ps, logical, scenario)
    assert via == direct
    assert via[0][1] == [(5, "v5")] and via[1][1] == [(7, "v7")] and via[3][1] == [(2, "v2")]
    assert via[-1][2] == [(1, "v1"), (10, "v10")]


@pytest.mark.parametrize("logical", RAW_TARGETS)
def test_long_data_and_reset(ps: PsEnv, logical: str, kv_columns: Any) -> None:
    """Long data (in several chunks) replaces the parameter's value once; COM_STMT_RESET discards it; an
    EXECUTE that does not re-bind types reuses the previous ones."""

    def scenario(client: Any) -> list[Any]:
        c = client()
        sid = _prepared(c, "SELECT k, v FROM t_kv WHERE v = ? OR k = ? ORDER BY k").ok.statement_id
        for chunk in (b"v", b"3"):
            c.send(ComStmtSendLongData(sid, 0, chunk).encode())
        out: list[Any] = [_kv_rows(c, sid, LONG_DATA, 0)]  # v3 (long data) or k = 0
        out.append(_kv_rows(c, sid, "v9", 0))  # long data used up: v9
        c.send(ComStmtSendLongData(sid, 0, b"v4").encode())
        out.append(_raw_simple(c, ComStmtReset(sid).encode()))
        out.append(_kv_rows(c, sid, "v9", 1))
        # the same values again without types (new-params-bound = 0): LONGLONG 6 and VAR_STRING 'v8'
        no_types = struct.pack("<BIBI", 0x17, sid, 0, 1) + b"\x00" + b"\x00" + bytes([2]) + b"v8" \
            + struct.pack("<q", 6)
        r = _raw_execute(c, sid, payload=no_types)
        out.append(r.err or _kv(r))
        out.append(_raw_simple(c, ComStmtReset(12345).encode()))
        return out

    via, direct = _both(ps, logical, scenario)
    assert via == direct
    assert via[0][1] == [(3, "v3")] and via[1][1] == [(9, "v9")] and via[2] == "OK"
    assert via[3][1] == [(1, "v1"), (9, "v9")] and via[4] == [(6, "v6"), (8, "v8")] and via[5][0] == 1243


def _cursor_scenario(client: Any) -> list[Any]:
    c = client()
    sid = _prepared(c, "SELECT k, v FROM t_kv WHERE k > ? ORDER BY k").ok.statement_id
    opened = _raw_execute(c, sid, (0,), flags=CURSOR_TYPE_READ_ONLY)
    out: list[Any] = [(opened.columns, opened.rows, opened.status)]
    for _ in range(4):
        page = _raw_fetch(c, sid, 4)
        out.append((_kv(page), page.status, page.err))
    out.append(_raw_simple(c, ComStmtReset(sid).encode()))  # closes the cursor
    out.append(_raw_fetch(c, sid, 1).err)
    out.append(_kv_rows(c, sid, 8))  # and the statement still runs without one
    return out


@pytest.mark.parametrize("logical", ["ps_pass", "ps_types"])
def test_read_only_cursor(ps: PsEnv, kv_columns: Any, logical: str) -> None:
    """CURSOR_TYPE_READ_ONLY, pass-through and sharded: EXECUTE answers the columns with CURSOR_EXISTS and
    no rows; COM_STMT_FETCH pages through them until LAST_ROW_SENT — exactly as MariaDB does. (On a sharded
    table the proxy runs and merges the statement at EXECUTE and keeps the rows for the fetches.)"""
    via, direct = _both(ps, logical, _cursor_scenario)
    assert via == direct
    assert via[0] == (["k", "v"], [], int(ServerStatus.CURSOR_EXISTS))
    assert [len(p[0]) for p in via[1:4]] == [4, 4, 2]
    assert via[3][1] & ServerStatus.LAST_ROW_SENT


# negative TIMEs, YEAR and friends with the project's codec (mysql-connector cannot: see TYPE_COLUMNS)
CODEC_COLUMNS = ("id", "tm", "yr", "dtm", "dtm0", "dt", "dc", "ubi", "bi", "f", "d", "vc", "bl")
CODEC_ROWS: list[tuple[Any, ...]] = [
    (501, -datetime.timedelta(hours=838, minutes=59, seconds=59), 1901, datetime.datetime(1000, 1, 1),
     datetime.datetime(2000, 1, 1, 0, 0, 0), datetime.date(1000, 1, 1), Decimal("-" + _DEC65), 0, -(2**63),
     -3.4e38, -1.7976931348623157e308, "漢字 😀", bytes(range(256))),
    (502, -datetime.timedelta(seconds=1, microseconds=500000), 2155,
     datetime.datetime(9999, 12, 31, 23, 59, 59, 999999),
     datetime.datetime(2024, 2, 29, 23, 59, 59), datetime.date(9999, 12, 31), Decimal(_DEC65), 2**64 - 1, 2**63 - 1,
     0.1, 0.1, "", b""),
    (503, -datetime.timedelta(days=3, hours=4, microseconds=7), 0, None, None, None, None, None, None, None, None,
     None, None),
    (504, -datetime.timedelta(microseconds=1), 1970, datetime.datetime(2024, 2, 29, 12, 34, 56, 123456),
     datetime.datetime(1970, 1, 1, 0, 0, 1), datetime.date(2024, 2, 29), Decimal("-0.000000000000000000000000000001"),
     1, -1, 1.5e-38, 5e-324, "ñ", b"\x00"),
    (505, datetime.timedelta(hours=838, minutes=59, seconds=59, microseconds=999999), None,
     datetime.datetime(1, 1, 1, 0, 0, 0, 1), None, datetime.date(1, 1, 1), Decimal("1.5"), None, 0, 0.0, -0.0,
     None, b"\xff" * 10),
]


def _codec_stored(column: str, value: Any) -> Any:
    """A written value as `decode_binary_row` gives it back (strings as bytes, FLOAT as 32 bits)."""
    if value is None:
        return None
    if column == "f":
        return _float32(value)
    if column == "dc":
        return value.quantize(Decimal(1).scaleb(-30), context=decimal.Context(prec=80))
    return value.encode() if isinstance(value, str) else value


@pytest.mark.parametrize("logical", RAW_TARGETS)
def test_codec_types_byte_for_byte(ps: PsEnv, logical: str) -> None:
    """Rows written and read with COM_STMT_EXECUTE: the binary row payloads through the proxy (one node
    relayed; several nodes merged and re-encoded) are byte for byte MariaDB's, and decode to the values
    written (negative TIMEs, YEAR, extremes, NULLs)."""
    cols = ", ".join(CODEC_COLUMNS)
    marks = ", ".join("?" * len(CODEC_COLUMNS))

    def scenario(client: Any) -> list[Any]:
        c = client()
        delete = _prepared(c, "DELETE FROM t_types WHERE id IN (501, 502, 503, 504, 505)")
        _raw_execute(c, delete.ok.statement_id)
        insert = _prepared(c, f"INSERT INTO t_types ({cols}) VALUES ({marks})")
        out: list[Any] = [_raw_execute(c, insert.ok.statement_id, row).affected for row in CODEC_ROWS]
        select = _prepared(c, f"SELECT {cols} FROM t_types WHERE id IN (?, ?, ?, ?, ?) ORDER BY id")
        merged = _raw_execute(c, select.ok.statement_id, [r[0] for r in CODEC_ROWS])
        one = _prepared(c, f"SELECT {cols} FROM t_types WHERE id = ?")
        single = [_raw_execute(c, one.ok.statement_id, (r[0],)).rows for r in CODEC_ROWS]
        text = _prepared(c, "SELECT id, CAST(tm AS CHAR), yr FROM t_types WHERE id IN (?, ?, ?, ?, ?) ORDER BY id")
        as_text = _raw_execute(c, text.ok.statement_id, [r[0] for r in CODEC_ROWS])
        return [out, merged.err, merged.rows, single, as_text.values(text.columns),
                [(c.name, c.type, c.flags, c.decimals, c.character_set) for c in select.columns],
                merged.values(select.columns)]

    via, direct = _both(ps, logical, scenario)
    assert via[0] == [1] * len(CODEC_ROWS) and via[1] is None
    for i, (a, b) in enumerate(zip(via, direct, strict=True)):
        assert a == b, f"transcript item {i}"
    assert via[6] == [tuple(_codec_stored(CODEC_COLUMNS[n], v) for n, v in enumerate(row)) for row in CODEC_ROWS]
    assert [r[1] for r in via[4]] == [b"-838:59:59.000000", b"-00:00:01.500000", b"-76:00:00.000007",
                                      b"-00:00:00.000001", b"838:59:59.999999"]


# --- SQL-level PREPARE / EXECUTE / DEALLOCATE ---------------------------------------------------------------

SQL_PREPARED_SCRIPT: list[str] = [
    "PREPARE s FROM 'SELECT k, v FROM t_kv WHERE k IN (?, ?) ORDER BY k'",
    "SET @a = 3, @b = 4",
    "EXECUTE s USING @a, @b",
    "SET @a = 9",
    "EXECUTE s USING @b, @a",
    "PREPARE s FROM 'SELECT k, v FROM t_kv WHERE k = ?'",  # re-prepared under the same name
    "EXECUTE s USING @a",
    "SET @sql = 'SELECT COUNT(*), MAX(v) FROM t_kv WHERE k > ?'",
    "PREPARE `c 1` FROM @sql",
    "SET @lo = 2",
    "EXECUTE `c 1` USING @lo",
    "PREPARE ins FROM \"INSERT INTO t_kv (k, v) VALUES (?, ?)\"",
    "SET @k = 21, @v = 'ü😀''x'",
    "EXECUTE ins USING @k, @v",
    "SET @k = 22, @v = NULL",
    "EXECUTE ins USING @k, @v",
    "SELECT k, v FROM t_kv WHERE k IN (21, 22) ORDER BY k",
    "PREPARE upd FROM 'UPDATE t_kv SET v = CONCAT(COALESCE(v, ?), ?) WHERE k IN (?, ?)'",
    "SET @p = '-', @q = '+'",
    "EXECUTE upd USING @p, @q, @k, @a",
    "SELECT k, v FROM t_kv WHERE k IN (9, 21, 22) ORDER BY k",
    "PREPARE del FROM 'DELETE FROM t_kv WHERE k IN (?, ?)'",
    "SET @x = 21",
    "EXECUTE del USING @x, @k",
    "UPDATE t_kv SET v = 'v9' WHERE k = 9",
    "DEALLOCATE PREPARE s",
    "EXECUTE s USING @a",
    "DROP PREPARE `c 1`",
    "EXECUTE `c 1` USING @lo",
    "DEALLOCATE PREPARE nothing",
    "SELECT COUNT(*) FROM t_kv",
]


def _sql_outcome(cur: Any, sql: str) -> Any:
    try:
        cur.execute(sql)
        if cur.description:
            return [tuple(_norm(v) for v in row) for row in cur.fetchall()]
        return ("affected", cur.rowcount)
    except mysql.connector.Error as exc:
        return ("error", exc.errno)


@pytest.mark.parametrize("logical", ["ps_types", "ps_pass"])
def test_sql_level_prepare(ps: PsEnv, logical: str) -> None:
    """PREPARE name FROM '...' / @var, EXECUTE name USING @vars, DEALLOCATE | DROP PREPARE as SQL: on the
    pass-through database they simply pass; on the sharded one the statement routes with the variables'
    values (here to one or both data sources). Every answer equals MariaDB's own on the same rows."""
    conn, oracle = ps.connector(logical), ps.oracle()
    try:
        cur, ocur = conn.cursor(), oracle.cursor()
        transcript = [(sql, _sql_outcome(cur, sql)) for sql in SQL_PREPARED_SCRIPT]
        expected = [(sql, _sql_outcome(ocur, sql)) for sql in SQL_PREPARED_SCRIPT]
        assert transcript == expected
        assert dict(transcript)["EXECUTE s USING @a, @b"] == [(3, "v3"), (4, "v4")]
        assert dict(transcript)["SELECT k, v FROM t_kv WHERE k IN (21, 22) ORDER BY k"] == [(21, "ü😀'x"), (22, None)]
        other = ps.connector(logical)  # statements belong to their session
        try:
            assert _sql_outcome(other.cursor(), "EXECUTE ins USING @k, @v") == ("error", 1243)
        finally:
            other.close()
        assert sorted(r for ds in DATA_SOURCES for r in ps.backend("ps_types", ds, "SELECT k, v FROM t_kv")) \
            == KV_ROWS
    finally:
        conn.close()
        oracle.close()


# --- transactions controlled through prepared statements ---------------------------------------------------


@pytest.mark.parametrize("logical", ["ps_types", "ps_pass"])
def test_prepared_begin_commit_rollback(ps: PsEnv, logical: str) -> None:
    """BEGIN / ROLLBACK / COMMIT / SET autocommit sent as prepared statements (sysbench --db-ps-mode=auto
    prepares BEGIN and COMMIT) open and end the transaction on every data source the statements touch:
    a rolled-back INSERT on both data sources leaves nothing, uncommitted rows stay invisible to others."""
    conn, other = ps.connector(logical), ps.connector(logical)
    try:
        cur, ocur = conn.cursor(prepared=True), other.cursor(prepared=True)
        insert = "INSERT INTO t_kv (k, v) VALUES (%s, %s), (%s, %s)"
        count = "SELECT COUNT(*) FROM t_kv WHERE k IN (%s, %s)"
        cur.execute("BEGIN")
        cur.execute(insert, (31, "tx", 32, "tx"))  # one row on each data source
        ocur.execute(count, (31, 32))
        assert ocur.fetchall() == [(0,)]
        cur.execute(count, (31, 32))
        assert cur.fetchall() == [(2,)]
        cur.execute("ROLLBACK")
        ocur.execute(count, (31, 32))
        assert ocur.fetchall() == [(0,)]
        cur.execute("START TRANSACTION")
        cur.execute(insert, (33, "tx", 34, "tx"))
        cur.execute("COMMIT")
        ocur.execute(count, (33, 34))
        assert ocur.fetchall() == [(2,)]
        cur.execute("SET autocommit = 0")
        cur.execute("DELETE FROM t_kv WHERE k IN (%s, %s)", (33, 34))
        ocur.execute(count, (33, 34))
        assert ocur.fetchall() == [(2,)]
        cur.execute("ROLLBACK")
        cur.execute("SET autocommit = 1")
        ocur.execute(count, (33, 34))
        assert ocur.fetchall() == [(2,)]
        cur.execute("DELETE FROM t_kv WHERE k IN (%s, %s)", (33, 34))
        assert cur.rowcount == 2
        rows = sorted(r for ds in DATA_SOURCES for r in ps.backend("ps_types", ds, "SELECT k, v FROM t_kv")) \
            if logical == "ps_types" else sorted(ps.servers[0].execute("SELECT k, v FROM t_kv", PASS_PHYSICAL))
        assert rows == KV_ROWS
    finally:
        conn.close()
        other.close()
