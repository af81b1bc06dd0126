"""Issue 34 item 2: statements are read by the session's sql_mode, through the proxy as MariaDB reads them.

Under NO_BACKSLASH_ESCAPES a backslash in a string is itself (``'a\\'`` is the two characters ``a\\``); under
ANSI_QUOTES ``"n"`` is a name, not a string. Each statement runs through the proxy in a session that SET its
sql_mode, and on the oracle database (``sht_oracle_db``, plain MariaDB) in a session with the same sql_mode; the
answers must be equal. Text and prepared (mysql.connector's binary protocol) statements alike.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import mysql.connector
import pytest

from tests.integration.sharding_fixtures import ORACLE_DB, ShardedEnv

pytestmark = pytest.mark.integration

LO, HI = 934000, 934999  # this module's t_order rows
NBE = "NO_BACKSLASH_ESCAPES"
ANSI = "ANSI_QUOTES"

# (order_id, user_id, status as written under NO_BACKSLASH_ESCAPES)
ROWS = [
    (934001, 1, "'a\\'"),
    (934002, 2, "'a\\'"),
    (934003, 3, "'b\\\\'"),
    (934004, 4, "'it''s\\'"),
    (934005, 5, "'c\\nd'"),
    (934006, 5, "'plain'"),
    (934007, 7, "'a\\'"),
]


def _connector(host: str, port: int, password: str, db: str) -> Any:
    return mysql.connector.connect(host=host, port=port, user="root", password=password, database=db,
                                   use_pure=True, ssl_disabled=True, autocommit=True)


class Pair:
    """A proxy session and an oracle session under one sql_mode."""

    def __init__(self, env: ShardedEnv, mode: str) -> None:
        s0 = env.servers[0]
        self.proxy = _connector(env.proxy.host, env.proxy.port, "root", "sharding_db")
        self.oracle = _connector(s0.host, s0.port, s0.password, ORACLE_DB)
        for conn in (self.proxy, self.oracle):
            cur = conn.cursor()
            cur.execute(f"SET sql_mode = '{mode}'")
            cur.close()

    def both(self, sql: str, params: tuple[Any, ...] | None = None, *, prepared: bool = False
             ) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
        out = []
        for conn in (self.proxy, self.oracle):
            cur = conn.cursor(prepared=True) if prepared else conn.cursor()
            cur.execute(sql, params)
            rows = [tuple(v.decode() if isinstance(v, bytes | bytearray) else v for v in r)
                    for r in (cur.fetchall() if cur.description else [])]
            cur.close()
            out.append(rows)
        return out[0], out[1]

    def same(self, sql: str, params: tuple[Any, ...] | None = None, *, prepared: bool = False
             ) -> list[tuple[Any, ...]]:
        got, expected = self.both(sql, params, prepared=prepared)
        assert got == expected, f"{sql}: proxy {got!r}, oracle {expected!r}"
        return got

    def close(self) -> None:
        self.proxy.close()
        self.oracle.close()


def _clean(env: ShardedEnv) -> None:
    for ds in ("ds_0", "ds_1"):
        for table in ("t_order_0", "t_order_1"):
            env.backend(ds, f"DELETE FROM {table} WHERE order_id BETWEEN {LO} AND {HI}")
    env.backend("ds_0", f"DELETE FROM t_order WHERE order_id BETWEEN {LO} AND {HI}", ORACLE_DB)


@pytest.fixture
def rows(sharded_env: ShardedEnv) -> Iterator[ShardedEnv]:
    """ROWS written through the proxy and on the oracle, each in a NO_BACKSLASH_ESCAPES session."""
    _clean(sharded_env)
    pair = Pair(sharded_env, NBE)
    try:
        values = ", ".join(f"({o}, {u}, {s})" for o, u, s in ROWS)
        pair.same(f"INSERT INTO t_order (order_id, user_id, status) VALUES {values}")
    finally:
        pair.close()
    yield sharded_env
    _clean(sharded_env)


# (order_id, user_id, status), written in the default sql_mode for the ANSI_QUOTES cases
PLAIN_ROWS = [(934011, 1, "x"), (934012, 2, "x"), (934013, 3, "y"), (934015, 5, "z"), (934016, 5, 'q"q'),
              (934017, 7, "x")]


@pytest.fixture
def plain_rows(sharded_env: ShardedEnv) -> Iterator[ShardedEnv]:
    _clean(sharded_env)
    pair = Pair(sharded_env, "")
    try:
        for conn in (pair.proxy, pair.oracle):
            cur = conn.cursor()
            cur.executemany("INSERT INTO t_order (order_id, user_id, status) VALUES (%s, %s, %s)", PLAIN_ROWS)
            cur.close()
    finally:
        pair.close()
    yield sharded_env
    _clean(sharded_env)


@pytest.fixture
def pair_of(sharded_env: ShardedEnv) -> Iterator[Any]:
    pairs: list[Pair] = []

    def make(mode: str) -> Pair:
        pairs.append(Pair(sharded_env, mode))
        return pairs[-1]

    yield make
    for p in pairs:
        p.close()


def test_no_backslash_escapes_rows_stored_as_written(rows: ShardedEnv) -> None:
    """The INSERT under NO_BACKSLASH_ESCAPES: each row on its node, its string as MariaDB reads it there."""
    stored = sorted(r for ds in ("ds_0", "ds_1") for t in ("t_order_0", "t_order_1") for r in rows.backend(
        ds, f"SELECT order_id, user_id, status FROM {t} WHERE order_id BETWEEN {LO} AND {HI}"))
    expected = sorted(rows.backend("ds_0", f"SELECT order_id, user_id, status FROM t_order "
                                         f"WHERE order_id BETWEEN {LO} AND {HI}", ORACLE_DB))
    assert stored == expected
    assert (934001, 1, "a\\") in stored and (934003, 3, "b\\\\") in stored and (934005, 5, "c\\nd") in stored
    for order_id, user_id, _ in ROWS:  # each where the rules put it
        assert rows.where_is("t_order", "order_id", order_id) == [(f"ds_{user_id % 2}", f"t_order_{order_id % 2}")]


@pytest.mark.parametrize("sql", [
    "SELECT order_id, status FROM t_order WHERE status = 'a\\' AND order_id DIV 1000 = 934 ORDER BY order_id",
    "SELECT order_id FROM t_order WHERE user_id = 1 AND status = 'a\\'",
    "SELECT order_id FROM t_order WHERE user_id = 3 AND order_id = 934003 AND status = 'b\\\\'",
    "SELECT order_id, CONCAT(status, '\\') AS s FROM t_order WHERE order_id IN (934004, 934005) ORDER BY order_id",
    "SELECT status, COUNT(*) AS n FROM t_order WHERE order_id DIV 1000 = 934 AND status <> 'x\\' "
    "GROUP BY status ORDER BY n DESC, status",
    "SELECT order_id FROM t_order WHERE status IN ('a\\', 'it''s\\') AND order_id DIV 1000 = 934 "
    "ORDER BY order_id DESC LIMIT 2",
])
def test_no_backslash_escapes_text(rows: ShardedEnv, pair_of: Any, sql: str) -> None:
    assert pair_of(NBE).same(sql)


def test_no_backslash_escapes_update_by_key(rows: ShardedEnv, pair_of: Any) -> None:
    pair = pair_of(NBE)
    pair.same("UPDATE t_order SET status = 'new\\' WHERE user_id = 2 AND order_id = 934002 AND status = 'a\\'")
    assert pair.same("SELECT status FROM t_order WHERE order_id = 934002") == [("new\\",)]


@pytest.mark.parametrize(("sql", "params"), [
    ("SELECT order_id FROM t_order WHERE status = 'a\\' AND user_id = ? ORDER BY order_id", (1,)),
    ("SELECT order_id, status FROM t_order WHERE status <> 'a\\' AND order_id DIV 1000 = ? ORDER BY order_id",
     (934,)),
    ("SELECT order_id FROM t_order WHERE status = ? AND order_id DIV 1000 = ? ORDER BY order_id",
     ("a\\", 934)),
    # a string after the backslash one: read with backslash escapes, the ? would be inside a string
    ("SELECT order_id FROM t_order WHERE status = 'a\\' AND user_id = ? AND status <> 'zz'", (1,)),
])
def test_no_backslash_escapes_prepared(rows: ShardedEnv, pair_of: Any, sql: str, params: tuple[Any, ...]) -> None:
    pair = pair_of(NBE)
    assert pair.same(sql, params, prepared=True)
    assert pair.same(sql, params, prepared=True)  # again: the statement's kept plan


@pytest.mark.parametrize("value", [
    "'it''s\\'",  # it's\ : a quote and a backslash, written into the statement's text by the proxy
    "'a\\'",
    "CONCAT('c', CHAR(92), 'nd')",  # c\nd, not a newline
])  # fmt: skip
def test_no_backslash_escapes_sql_level_execute(rows: ShardedEnv, pair_of: Any, value: str) -> None:
    """EXECUTE ... USING @v: the proxy writes the variable's value into the statement, as the session reads it."""
    pair = pair_of(NBE)
    pair.same(f"SET @v = {value}")
    pair.same("PREPARE s FROM 'SELECT order_id, status FROM t_order WHERE status = ? AND order_id DIV 1000 = 934 "
              "ORDER BY order_id'")
    assert pair.same("EXECUTE s USING @v")


ISSUE = 'SELECT "user_id", COUNT(*) AS "n" FROM "t_order" GROUP BY "user_id" ORDER BY "n" DESC'


@pytest.mark.parametrize("sql", [
    'SELECT "user_id", COUNT(*) AS "n" FROM "t_order" WHERE "order_id" DIV 1000 = 934 '
    'GROUP BY "user_id" ORDER BY "n" DESC, "user_id"',
    'SELECT "status", COUNT(*) AS "c" FROM "t_order" WHERE "order_id" DIV 1000 = 934 GROUP BY "status" '
    'ORDER BY "c" DESC, "status"',
])
def test_ansi_quotes_text(plain_rows: ShardedEnv, pair_of: Any, sql: str) -> None:
    assert pair_of(ANSI).same(sql)


def test_both_modes_insert(plain_rows: ShardedEnv, pair_of: Any) -> None:
    pair = pair_of(f"{ANSI},{NBE}")
    pair.same('INSERT INTO "t_order" ("order_id", "user_id", "status") '
              'VALUES (934021, 1, \'w"w\'), (934022, 2, \'w\\\')')
    assert plain_rows.where_is("t_order", "order_id", 934021) == [("ds_1", "t_order_1")]
    assert plain_rows.where_is("t_order", "order_id", 934022) == [("ds_0", "t_order_0")]
    assert pair.same('SELECT "order_id", "status" FROM "t_order" WHERE "status" LIKE \'w%\' '
                     'AND "order_id" DIV 1000 = 934 ORDER BY "order_id"') == [(934021, 'w"w'), (934022, "w\\")]


def test_ansi_quotes_issue_example(plain_rows: ShardedEnv, pair_of: Any) -> None:
    """The issue's statement over the whole table: the proxy's answer is the oracle's (both hold the same rows
    here only in this module's range, so the counts are compared for those users)."""
    got, _ = pair_of(ANSI).both(ISSUE)
    assert got, "no rows"
    counts = dict(got)
    for user, n in ((1, 1), (2, 1), (3, 1), (5, 2), (7, 1)):
        assert counts[user] >= n
    assert [n for _, n in got] == sorted((n for _, n in got), reverse=True)


@pytest.mark.parametrize(("sql", "params"), [
    ('SELECT "user_id", COUNT(*) AS "n" FROM "t_order" WHERE "order_id" DIV 1000 = ? '
     'GROUP BY "user_id" ORDER BY "n" DESC, "user_id"', (934,)),
    ('SELECT "status", COUNT(*) AS "c" FROM "t_order" WHERE "order_id" DIV 1000 = ? GROUP BY "status" '
     'ORDER BY "c" DESC, "status"', (934,)),
])
def test_ansi_quotes_prepared(plain_rows: ShardedEnv, pair_of: Any, sql: str, params: tuple[Any, ...]) -> None:
    pair = pair_of(ANSI)
    assert pair.same(sql, params, prepared=True)
    assert pair.same(sql, params, prepared=True)


@pytest.mark.parametrize("prepared", [False, True])
def test_both_modes(rows: ShardedEnv, pair_of: Any, prepared: bool) -> None:
    pair = pair_of(f"{ANSI},{NBE}")
    sql = ('SELECT "order_id", "status" FROM "t_order" WHERE "status" = \'a\\\' AND "user_id" = ? '
           'ORDER BY "order_id"')
    if prepared:
        assert pair.same(sql, (1,), prepared=True) == [(934001, "a\\")]
    else:
        assert pair.same(sql.replace("?", "1")) == [(934001, "a\\")]


def test_string_sharding_key_with_backslash(sharded_env: ShardedEnv) -> None:
    """t_ring is sharded by a string (CONSISTENT_HASH on code): the row written under NO_BACKSLASH_ESCAPES as
    'r\\' is the one a default-mode session finds by 'r\\\\' (the same value: routed to the same node)."""
    env = sharded_env
    conn = _connector(env.proxy.host, env.proxy.port, "root", "extra_db")
    plain = _connector(env.proxy.host, env.proxy.port, "root", "extra_db")
    try:
        cur = conn.cursor()
        cur.execute(f"SET sql_mode = '{NBE}'")
        cur.execute("DELETE FROM t_ring WHERE code IN ('r\\', 'r')")
        cur.execute("INSERT INTO t_ring (code, n) VALUES ('r\\', 934)")
        cur.execute("SELECT n FROM t_ring WHERE code = 'r\\'")
        assert cur.fetchall() == [(934,)]
        pcur = plain.cursor()
        pcur.execute("SELECT n, code FROM t_ring WHERE code = 'r\\\\'")
        assert pcur.fetchall() == [(934, "r\\")]
        pcur.execute("DELETE FROM t_ring WHERE code = 'r\\\\'")
        assert pcur.rowcount == 1
    finally:
        conn.close()
        plain.close()


def test_multi_statements_split_by_mode(rows: ShardedEnv) -> None:
    """A multi-statement query is split where the session's sql_mode ends its strings: under NO_BACKSLASH_ESCAPES
    'a\\'; is a string and the statement's end."""
    from pymysql.constants import CLIENT

    conn = rows.connect(client_flag=CLIENT.MULTI_STATEMENTS)
    try:
        with conn.cursor() as cur:
            cur.execute(f"SET sql_mode = '{NBE}'")
            cur.execute("SELECT order_id FROM t_order WHERE user_id = 1 AND status = 'a\\'; "
                        "SELECT status FROM t_order WHERE user_id = 3 AND order_id = 934003")
            first = cur.fetchall()
            assert cur.nextset()
            second = cur.fetchall()
        assert [tuple(r) for r in first] == [(934001,)]
        assert [tuple(r) for r in second] == [("b\\\\",)]
    finally:
        conn.close()


@pytest.mark.parametrize("mode", ["PIPES_AS_CONCAT", "ANSI", "ORACLE"])
def test_pipes_as_concat(plain_rows: ShardedEnv, pair_of: Any, mode: str) -> None:
    """Under PIPES_AS_CONCAT (ANSI and ORACLE include it) `user_id = 1 || 0` is user 10's: the proxy reads `||` as
    CONCAT there (routing.pipes) and looks on user 10's node, as MariaDB answers; back in the default sql_mode it is
    an OR again."""
    plain_rows.run("INSERT INTO t_order (order_id, user_id, status) VALUES (934030, 10, 'ten')")
    plain_rows.backend("ds_0", "INSERT INTO t_order (order_id, user_id, status) VALUES (934030, 10, 'ten')",
                       ORACLE_DB)
    sql = "SELECT order_id FROM t_order WHERE (user_id = 1 || 0) AND order_id DIV 1000 = 934 ORDER BY order_id"
    pair = pair_of(mode)
    assert pair.same(sql) == [(934030,)]  # MariaDB's answer
    assert pair.same("SELECT order_id, status || '!' FROM t_order WHERE user_id = 1 || 0 AND order_id = 934030") \
        == [(934030, "ten!")]
    assert pair.same("SELECT order_id FROM t_order WHERE user_id = 10 AND status = CONCAT('t', 'en')") == [(934030,)]
    for conn in (pair.proxy, pair.oracle):
        cur = conn.cursor()
        cur.execute("SET sql_mode = DEFAULT")
        cur.close()
    assert pair.same(sql) == [(934011,)]  # OR: user 1's
