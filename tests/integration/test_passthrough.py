"""Pass-through: PyMySQL through the proxy gets exactly what it gets from MariaDB directly.

Uses the session-scoped `passthrough_proxy` (logical `demo` -> `demo_ds` on the sandbox server `mariadb`).
Tables here are prefixed `pt_` so other test modules on the same server are not disturbed.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pymysql
import pytest
from pymysql.constants import CLIENT

from proxy.sandbox import MariaDBServer
from tests.integration.harness import RunningProxy

pytestmark = pytest.mark.integration

TYPES_DDL = """CREATE TABLE pt_types (
    id INT NOT NULL PRIMARY KEY,
    ti TINYINT, uti TINYINT UNSIGNED, si SMALLINT, i INT, ui INT UNSIGNED, bi BIGINT, ubi BIGINT UNSIGNED,
    dc DECIMAL(30,10), f FLOAT, d DOUBLE, vc VARCHAR(100), ch CHAR(4), tx TEXT,
    dt DATE, dtm DATETIME(6), tm TIME(3), ts TIMESTAMP(6) NULL, yr YEAR,
    bl BLOB, vb VARBINARY(300), js JSON, en ENUM('x','y'), st SET('a','b','c'), bt BIT(12)
) CHARACTER SET utf8mb4"""
ALL_BYTES = bytes(range(256))
ROWS: list[tuple[Any, ...]] = [
    (1, -128, 255, -32768, -2147483648, 4294967295, -9223372036854775808, 18446744073709551615,
     "-12345678901234567890.0123456789", 3.5, -1.7976931348623157e308, "日本語 中文 한국어 😀🎉 ☃", "ab😀", "é" * 1000,
     "1000-01-01", "9999-12-31 23:59:59.999999", "-838:59:59.000", "2038-01-19 03:14:07.123456", 2155,
     ALL_BYTES, ALL_BYTES, '{"a": [1, 2.5, null, "ü😀"], "b": {"c": true}}', "y", "a,c", 0xABC),
    (2, 127, 0, 32767, 2147483647, 0, 9223372036854775807, 0, "0.0000000001", -0.0, 2.2250738585072014e-308,
     "", "", "", "2024-02-29", "2024-02-29 00:00:00.000001", "00:00:00.001", "1970-01-01 00:00:01.000000", 1901,
     b"", b"\x00", "[]", "x", "", 0),
    (3,) + (None,) * 24,
]


@pytest.fixture(scope="module")
def proxy(passthrough_proxy: RunningProxy) -> RunningProxy:
    with passthrough_proxy.connect("demo") as conn, conn.cursor() as cur:
        for sql in ("DROP TABLE IF EXISTS pt_types", TYPES_DDL, "DROP TABLE IF EXISTS pt_kv",
                    "CREATE TABLE pt_kv (k INT PRIMARY KEY, v VARCHAR(20))", "DROP TABLE IF EXISTS pt_tx",
                    "CREATE TABLE pt_tx (id INT PRIMARY KEY) ENGINE=InnoDB"):
            cur.execute(sql)
        cur.executemany("INSERT INTO pt_types VALUES (" + ", ".join(["%s"] * 25) + ")", ROWS)
        conn.commit()
    return passthrough_proxy


@pytest.fixture
def conn(proxy: RunningProxy) -> Iterator[pymysql.connections.Connection[Any]]:
    c = proxy.connect("demo", autocommit=True)
    yield c
    c.close()


def _direct(mariadb: MariaDBServer, sql: str, args: Any = None) -> tuple[Any, ...]:
    c = mariadb.connect("demo_ds")
    try:
        with c.cursor() as cur:
            cur.execute(sql, args)
            return (cur.description, cur.fetchall())
    finally:
        c.close()


def _proxied(conn: pymysql.connections.Connection[Any], sql: str, args: Any = None) -> tuple[Any, ...]:
    with conn.cursor() as cur:
        cur.execute(sql, args)
        return (cur.description, cur.fetchall())


def _errno(exc: pytest.ExceptionInfo[BaseException]) -> int:
    return int(exc.value.args[0])


# --- connecting -----------------------------------------------------------------------------------------

LOGINS: list[Any] = [
    pytest.param("root", "root", "demo", None, id="right-password"),
    pytest.param("root", "wrong", "demo", 1045, id="wrong-password"),
    pytest.param("nobody", "root", None, 1045, id="unknown-user"),
    pytest.param("root", "root", "no_such_db", 1049, id="unknown-database"),
    pytest.param("root", "root", None, None, id="no-database"),
    pytest.param("nopw", "", "demo", None, id="empty-password"),
    pytest.param("nopw", "x", "demo", 1045, id="empty-password-user-given-one"),
    pytest.param("sha", "sha2pw", "demo", None, id="caching-sha2-user"),
    pytest.param("sha", "nope", "demo", 1045, id="caching-sha2-wrong"),
]


@pytest.mark.parametrize(("user", "password", "database", "errno"), LOGINS)
def test_login(proxy: RunningProxy, user: str, password: str, database: str | None, errno: int | None) -> None:
    if errno is None:
        with proxy.connect(database, user=user, password=password) as c, c.cursor() as cur:
            cur.execute("SELECT DATABASE()")
            assert cur.fetchone() == (database,)
        return
    with pytest.raises(pymysql.err.OperationalError) as exc:
        proxy.connect(database, user=user, password=password)
    assert _errno(exc) == errno
    if errno == 1045:
        assert f"Access denied for user '{user}'@" in exc.value.args[1]


def test_database_function_inside_a_select_is_logical(conn: pymysql.connections.Connection[Any]) -> None:
    assert _proxied(conn, "SELECT DATABASE(), 1")[1] == (("demo", 1),)


def test_statement_needing_a_database_before_use(proxy: RunningProxy) -> None:
    with proxy.connect(None) as c, c.cursor() as cur:
        cur.execute("select @@version_comment limit 1")
        assert cur.fetchone() is not None
        with pytest.raises(pymysql.err.OperationalError) as exc:
            cur.execute("SELECT * FROM pt_kv")
        assert _errno(exc) == 1046
        cur.execute("SHOW DATABASES")
        assert ("demo",) in cur.fetchall()
        cur.execute("USE demo")
        cur.execute("SELECT DATABASE()")
        assert cur.fetchone() == ("demo",)
        cur.execute("SELECT COUNT(*) FROM pt_types")
        assert cur.fetchone() == (3,)


def test_com_init_db(proxy: RunningProxy) -> None:
    with proxy.connect(None) as c:
        c.select_db("demo")
        with c.cursor() as cur:
            cur.execute("SELECT COUNT(*) FROM pt_types")
            assert cur.fetchone() == (3,)
        with pytest.raises(pymysql.err.OperationalError) as exc:
            c.select_db("no_such_db")
        assert _errno(exc) == 1049
        with c.cursor() as cur:  # still usable, still on demo
            cur.execute("SELECT DATABASE()")
            assert cur.fetchone() == ("demo",)


def test_ping_and_reconnect(proxy: RunningProxy) -> None:
    c = proxy.connect("demo")
    c.ping(reconnect=False)
    c.close()
    c.connect()  # the same client object opens a new session
    with c.cursor() as cur:
        cur.execute("SELECT 41 + 1")
        assert cur.fetchone() == (42,)
    c.close()
    for _ in range(5):
        with proxy.connect("demo") as again, again.cursor() as cur:
            cur.execute("SELECT 1")
            assert cur.fetchone() == (1,)


# --- values: the proxy returns what the server returns --------------------------------------------------

QUERIES = [
    "SELECT * FROM pt_types ORDER BY id",
    "SELECT id, ubi, dc, f, d FROM pt_types WHERE ubi = 18446744073709551615",
    "SELECT vc, ch, LENGTH(vc), CHAR_LENGTH(vc), HEX(vc) FROM pt_types ORDER BY id",
    "SELECT bl = vb, LENGTH(bl), MD5(bl) FROM pt_types ORDER BY id",
    "SELECT JSON_EXTRACT(js, '$.a[3]'), js FROM pt_types ORDER BY id",
    "SELECT NULL, 1.5, 'x', 0x00ff, CAST(-1 AS UNSIGNED), 1e300 * 10, 1/0, DATE('2024-13-01')",
    "SELECT COUNT(*), SUM(i), AVG(d), MAX(vc), GROUP_CONCAT(id ORDER BY id) FROM pt_types",
]


@pytest.mark.parametrize("sql", QUERIES)
def test_values_equal_direct(conn: pymysql.connections.Connection[Any], mariadb: MariaDBServer, sql: str) -> None:
    desc_p, rows_p = _proxied(conn, sql)
    desc_d, rows_d = _direct(mariadb, sql)
    assert rows_p == rows_d
    assert [d[:2] for d in desc_p] == [d[:2] for d in desc_d]  # names and type codes


def test_values_round_trip(conn: pymysql.connections.Connection[Any]) -> None:
    _, rows = _proxied(conn, "SELECT id, ubi, vc, ch, bl, vb, en, st FROM pt_types ORDER BY id")
    assert rows[0] == (1, 18446744073709551615, "日本語 中文 한국어 😀🎉 ☃", "ab😀", ALL_BYTES, ALL_BYTES, "y", "a,c")
    assert rows[2] == (3,) + (None,) * 7


# --- errors reach the client unchanged ------------------------------------------------------------------

ERRORS: list[Any] = [
    pytest.param("INSERT INTO pt_kv VALUES (1, 'a'), (1, 'b')", 1062, id="duplicate-key"),
    pytest.param("SELEC 1", 1064, id="syntax"),
    pytest.param("SELECT * FROM pt_no_such_table", 1146, id="unknown-table"),
    pytest.param("SELECT no_such_column FROM pt_kv", 1054, id="unknown-column"),
    pytest.param("INSERT INTO pt_kv VALUES (NULL, 'a')", 1048, id="not-null"),
]


@pytest.mark.parametrize(("sql", "errno"), ERRORS)
def test_backend_errors_unchanged(conn: pymysql.connections.Connection[Any], mariadb: MariaDBServer, sql: str,
                                  errno: int) -> None:
    with pytest.raises(pymysql.err.MySQLError) as via_proxy:
        _proxied(conn, sql)
    with pytest.raises(pymysql.err.MySQLError) as direct:
        _direct(mariadb, sql)
    assert via_proxy.value.args[0] == direct.value.args[0] == errno
    assert via_proxy.value.args[1] == direct.value.args[1].replace("demo_ds", "demo") or \
        via_proxy.value.args[1] == direct.value.args[1]
    assert type(via_proxy.value) is type(direct.value)
    _, rows = _proxied(conn, "SELECT 1")  # the session goes on
    assert rows == ((1,),)


# --- statements ------------------------------------------------------------------------------------------


def test_multi_statements_with_the_flag(proxy: RunningProxy) -> None:
    with proxy.connect("demo", client_flag=CLIENT.MULTI_STATEMENTS) as c, c.cursor() as cur:
        cur.execute("SELECT 1 AS a; SELECT 'x' AS b, NULL AS c; UPDATE pt_kv SET v = v WHERE k = -1; SELECT 2")
        results = [cur.fetchall()]
        while cur.nextset():
            results.append(cur.fetchall() if cur.description else cur.rowcount)
        assert results == [((1,),), (("x", None),), 0, ((2,),)]
        cur.execute("SELECT 3")  # the session is back in step
        assert cur.fetchall() == ((3,),)


def test_multi_statements_refused_without_the_flag(proxy: RunningProxy) -> None:
    with proxy.connect("demo") as c, c.cursor() as cur:
        with pytest.raises(pymysql.err.ProgrammingError) as exc:
            cur.execute("SELECT 1; SELECT 2")
        assert _errno(exc) == 1064
        cur.execute("SELECT 5")
        assert cur.fetchall() == ((5,),)


def test_multi_statement_setting_does_not_leak_through_the_pool(proxy: RunningProxy) -> None:
    """A session without CLIENT_MULTI_STATEMENTS turns the option off on its backend connection; the
    next borrower of that pooled connection, which has the flag, must still be able to send 'a; b'."""
    for _ in range(4):
        with proxy.connect("demo") as c, c.cursor() as cur:
            cur.execute("SELECT 1")
    for _ in range(4):
        with proxy.connect("demo", client_flag=CLIENT.MULTI_STATEMENTS) as c, c.cursor() as cur:
            cur.execute("SELECT 1; SELECT 2")
            assert cur.fetchall() == ((1,),)
            assert cur.nextset() and cur.fetchall() == ((2,),)


def test_transaction_rollback_leaves_nothing(proxy: RunningProxy, mariadb: MariaDBServer) -> None:
    with proxy.connect("demo") as c, c.cursor() as cur:
        cur.execute("BEGIN")
        cur.execute("INSERT INTO pt_tx VALUES (1), (2)")
        cur.execute("SELECT COUNT(*) FROM pt_tx")
        assert cur.fetchone() == (2,)
        assert c.server_status & 1  # SERVER_STATUS_IN_TRANS
        cur.execute("ROLLBACK")
        assert not c.server_status & 1
        cur.execute("SELECT COUNT(*) FROM pt_tx")
        assert cur.fetchone() == (0,)
    assert _direct(mariadb, "SELECT COUNT(*) FROM pt_tx")[1] == ((0,),)


def test_insert_select_update_delete(conn: pymysql.connections.Connection[Any]) -> None:
    with conn.cursor() as cur:
        cur.execute("DELETE FROM pt_kv")
        assert cur.execute("INSERT INTO pt_kv VALUES (10, 'a'), (11, 'b'), (12, NULL)") == 3
        assert cur.execute("UPDATE pt_kv SET v = 'z' WHERE k >= 11") == 2
        cur.execute("SELECT k, v FROM pt_kv ORDER BY k")
        assert cur.fetchall() == ((10, "a"), (11, "z"), (12, "z"))
        assert cur.execute("DELETE FROM pt_kv WHERE k = 10") == 1


def test_large_result(conn: pymysql.connections.Connection[Any]) -> None:
    with conn.cursor() as cur:
        cur.execute("SELECT seq, CONCAT('row-', seq) FROM seq_1_to_50000")
        rows = cur.fetchall()
    assert len(rows) == 50000
    assert rows[0] == (1, "row-1") and rows[-1] == (50000, "row-50000")
    assert sum(r[0] for r in rows) == 50000 * 50001 // 2


def test_large_result_unbuffered(proxy: RunningProxy) -> None:
    with proxy.connect("demo", cursorclass=pymysql.cursors.SSCursor) as c, c.cursor() as cur:
        cur.execute("SELECT seq FROM seq_1_to_50000")
        assert sum(r[0] for r in cur.fetchall_unbuffered()) == 50000 * 50001 // 2
