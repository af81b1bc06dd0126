"""A logical database whose tables all go through the kernel (`!SINGLE` tables, every table routed) answers as
one MariaDB server (issue 34 item 7): LAST_INSERT_ID(), ROW_COUNT(), FOUND_ROWS() of the session's statements,
compound statements sent in a multi-statement query. Each script runs, statement by statement, through the proxy
and on a plain database of the same server; every answer is compared: columns, rows, affected rows, last insert
id, warnings, info text, errno and message."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pymysql
import pytest
from pymysql.constants import CLIENT

from proxy.sandbox import MariaDBServer
from tests.integration.harness import RunningProxy, start_proxy, write_conf

LOGICAL = "kt_logic"  # the logical database, and the oracle's database of the same name on the server
PHYSICAL = ("kt_ds_0", "kt_ds_1")
SINGLE_RULES = "- !SINGLE\n  tables: ['*.*']\n  defaultDataSource: ds_0\n"

T = "CREATE TABLE t (id INT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(10))"
SEED = "INSERT INTO t (v) VALUES ('a'), ('b'), ('c')"

# one script a line, run from a fresh table t; every statement's answer compared
SCRIPTS: list[tuple[str, list[str]]] = [
    (
        "generated ids",
        [T, SEED, "SELECT LAST_INSERT_ID(), ROW_COUNT()", "INSERT INTO t (v) VALUES ('d')", "SELECT LAST_INSERT_ID()"],
    ),
    (
        "update where id = last insert id",
        [
            T,
            SEED,
            "UPDATE t SET v = 'z' WHERE id = LAST_INSERT_ID()",
            "SELECT ROW_COUNT()",
            "SELECT * FROM t ORDER BY id",
        ],
    ),
    (
        "explicit ids keep it",
        [
            T,
            SEED,
            "INSERT INTO t (id, v) VALUES (100, 'x')",
            "SELECT LAST_INSERT_ID()",
            "INSERT INTO t VALUES (200, 'y')",
            "SELECT LAST_INSERT_ID()",
        ],
    ),
    (
        "null and explicit id",
        [
            T,
            SEED,
            "INSERT INTO t (id, v) VALUES (NULL, 'x'), (50, 'y')",
            "SELECT LAST_INSERT_ID()",
            "INSERT INTO t (id, v) VALUES (60, 'x'), (NULL, 'y')",
            "SELECT LAST_INSERT_ID()",
        ],
    ),
    (
        "last_insert_id(expr)",
        [
            T,
            SEED,
            "SELECT LAST_INSERT_ID(42)",
            "SELECT LAST_INSERT_ID()",
            "UPDATE t SET id = LAST_INSERT_ID(id + 10) WHERE id = 1",
            "SELECT LAST_INSERT_ID()",
            "DELETE FROM t WHERE id = LAST_INSERT_ID()",
            "SELECT ROW_COUNT()",
        ],
    ),
    (
        "row_count after each kind",
        [
            T,
            SEED,
            "SELECT ROW_COUNT()",
            "SELECT ROW_COUNT()",
            "SET @a = 1",
            "SELECT ROW_COUNT()",
            "DELETE FROM t WHERE id > 1",
            "SELECT ROW_COUNT()",
            "SELECT nope FROM t",
            "SELECT ROW_COUNT()",
            "DO 1",
            "SELECT ROW_COUNT()",
            "UPDATE t SET v = 'a' WHERE id = 1",
            "SELECT ROW_COUNT()",
        ],
    ),
    (
        "found rows",
        [
            T,
            SEED,
            "SELECT SQL_CALC_FOUND_ROWS * FROM t ORDER BY id LIMIT 1",
            "SELECT FOUND_ROWS()",
            "SELECT * FROM t",
            "SELECT FOUND_ROWS()",
        ],
    ),
    (
        "labels and types of substituted calls",
        [
            T,
            SEED,
            "SELECT CONCAT('<', USER(), '>') IS NOT NULL",
            "SELECT IF(0, CONNECTION_ID(), CONNECTION_ID()) > 0",
            "SELECT CONNECTION_ID() - CONNECTION_ID()",
            "SELECT CONCAT('[', DATABASE(), ']'), LENGTH(DATABASE()) AS n",
            "SELECT LAST_INSERT_ID() + 0, ROW_COUNT() - 1",
            "INSERT INTO t (v) VALUES (LEFT(USER(), 2))",
            "SELECT COUNT(*) FROM t WHERE v = LEFT(USER(), 2)",
            "SELECT LAST_INSERT_ID() - 1",
        ],
    ),
    (
        "sql prepared statements",
        [
            T,
            SEED,
            "PREPARE s1 FROM 'SELEC 1'",
            "EXECUTE s1",
            "PREPARE s2 FROM 'SELECT v FROM t WHERE v = ? OR id = ?'",
            "SET @v = 'b', @i = '3abc'",
            "EXECUTE s2 USING @v, @i",
            "PREPARE s3 FROM 'SELECT CHARSET(?) AS c, ? IS NULL AS n, ? + 1 AS s, CHARSET(?) AS h'",
            "SET @b = 0x61, @n = NULL, @s = '7', @h = 'x'",
            "EXECUTE s3 USING @b, @n, @s, @h",
            "PREPARE s4 FROM 'UPDATE t SET v = ? WHERE id = LAST_INSERT_ID()'",
            "EXECUTE s4 USING @v",
            "SELECT ROW_COUNT()",
            "DEALLOCATE PREPARE s2",
        ],
    ),
    (
        "upsert",
        [
            T,
            SEED,
            "INSERT INTO t (id, v) VALUES (1, 'q') ON DUPLICATE KEY UPDATE v = 'q'",
            "SELECT LAST_INSERT_ID(), ROW_COUNT()",
            "REPLACE INTO t (v) VALUES ('r')",
            "SELECT LAST_INSERT_ID()",
        ],
    ),
]

# multi-statement queries (CLIENT_MULTI_STATEMENTS): every result of the query compared
MULTI: list[tuple[str, str]] = [
    (
        "procedure",
        "DROP PROCEDURE IF EXISTS kt_p; CREATE PROCEDURE kt_p() BEGIN DECLARE x INT DEFAULT 1; "
        "IF x = 1 THEN SELECT 1 AS one; ELSE SELECT 2; END IF; END; CALL kt_p()",
    ),
    (
        "function",
        "DROP FUNCTION IF EXISTS kt_f; CREATE FUNCTION kt_f(a INT) RETURNS INT BEGIN DECLARE b INT; "
        "SET b = a * 2; RETURN b; END; SELECT kt_f(21)",
    ),
    (
        "trigger",
        f"DROP TABLE IF EXISTS t; {T}; CREATE TRIGGER kt_tr BEFORE INSERT ON t FOR EACH ROW BEGIN "
        "IF NEW.v = 'x' THEN SET NEW.v = 'y'; END IF; END; INSERT INTO t (v) VALUES ('x'); SELECT v FROM t",
    ),
    (
        "begin not atomic",
        "BEGIN NOT ATOMIC DECLARE i INT DEFAULT 0; WHILE i < 2 DO SET i = i + 1; END WHILE; "
        "SELECT i; END; SELECT 'after'",
    ),
]


@pytest.fixture(scope="module")
def single_proxy(mariadb: MariaDBServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningProxy]:
    for name in (*PHYSICAL, LOGICAL):
        mariadb.execute(f"DROP DATABASE IF EXISTS {name}")
        mariadb.execute(f"CREATE DATABASE {name}")
    conf = write_conf(
        tmp_path_factory.mktemp("kernel-transparency"),
        {LOGICAL: {ds: (mariadb, db) for ds, db in zip(("ds_0", "ds_1"), PHYSICAL, strict=True)}},
        rules_yaml={LOGICAL: SINGLE_RULES},
    )
    proxy = start_proxy(Path(conf))
    yield proxy
    proxy.stop()
    for name in (*PHYSICAL, LOGICAL):
        mariadb.execute(f"DROP DATABASE IF EXISTS {name}")


def _answer(conn: pymysql.connections.Connection[Any], sql: str) -> list[Any]:
    """Every result of `sql`: (columns, rows, affected, last insert id, warnings, info), or (errno, message)."""
    out: list[Any] = []
    with conn.cursor() as cur:
        try:
            cur.execute(sql)
            while True:
                r = conn._result
                assert r is not None
                columns = [d[0] for d in cur.description] if cur.description else None
                out.append(
                    (
                        columns,
                        cur.fetchall() if columns else None,
                        r.affected_rows,
                        r.insert_id,
                        r.warning_count,
                        r.message,
                    )
                )
                if not cur.nextset():
                    break
        except pymysql.MySQLError as exc:
            out.append(exc.args)
    return out


def _pair(proxy: RunningProxy, server: MariaDBServer, flags: int = 0) -> tuple[Any, Any]:
    proxied = proxy.connect(LOGICAL, client_flag=flags)
    direct = pymysql.connect(
        host=server.host,
        port=server.port,
        user=server.user,
        password=server.password,
        database=LOGICAL,
        autocommit=True,
        client_flag=flags,
    )
    return proxied, direct


def _reset(proxy: RunningProxy, server: MariaDBServer) -> None:
    server.execute("DROP TABLE IF EXISTS t", LOGICAL)
    with proxy.connect(LOGICAL) as conn, conn.cursor() as cur:
        cur.execute("DROP TABLE IF EXISTS t")


@pytest.mark.parametrize(("name", "script"), SCRIPTS, ids=[s[0] for s in SCRIPTS])
def test_session_values_as_one_server(
    single_proxy: RunningProxy, mariadb: MariaDBServer, name: str, script: list[str]
) -> None:
    _reset(single_proxy, mariadb)
    proxied, direct = _pair(single_proxy, mariadb)
    try:
        wrong = []
        for sql in script:
            got, want = _answer(proxied, sql), _answer(direct, sql)
            if got != want:
                wrong.append(f"{sql}\n  proxy  {got}\n  server {want}")
        assert not wrong, "\n".join(wrong)
    finally:
        proxied.close()
        direct.close()
        _reset(single_proxy, mariadb)


@pytest.mark.parametrize(("name", "sql"), MULTI, ids=[m[0] for m in MULTI])
def test_compound_statements_in_multi_statement_queries(
    single_proxy: RunningProxy, mariadb: MariaDBServer, name: str, sql: str
) -> None:
    _reset(single_proxy, mariadb)
    proxied, direct = _pair(single_proxy, mariadb, CLIENT.MULTI_STATEMENTS)
    try:
        got, want = _answer(proxied, sql), _answer(direct, sql)
        assert got == want
    finally:
        proxied.close()
        direct.close()
        _reset(single_proxy, mariadb)
