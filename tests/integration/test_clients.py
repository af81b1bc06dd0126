"""Real client libraries and the mariadb CLI through the proxy, each compared with the same client talking to
MariaDB directly: mysql-connector-python (pure), mysqlclient (libmariadb), aiomysql, SQLAlchemy 2 on three
drivers, and `mariadb -e` / `-B`."""

from __future__ import annotations

import re
import subprocess
from typing import Any

import aiomysql
import mysql.connector
import MySQLdb
import pytest
import sqlalchemy as sa
from mysql.connector import errors as cerrors

from proxy.sandbox import MariaDBServer
from tests.integration.harness import RunningProxy

pytestmark = pytest.mark.integration

SETUP = [
    "DROP TABLE IF EXISTS cl_types",
    """CREATE TABLE cl_types (id INT PRIMARY KEY, ti TINYINT, ubi BIGINT UNSIGNED, bi BIGINT, dc DECIMAL(25,8),
        f FLOAT, d DOUBLE, vc VARCHAR(64), dt DATE, dtm DATETIME(6), tm TIME, bl BLOB, js JSON)
        CHARACTER SET utf8mb4""",
    """INSERT INTO cl_types VALUES
        (1, -1, 18446744073709551615, -9223372036854775808, 12345678901234567.12345678, 0.5, 1e-300,
         '漢字 かな 한글 😀 ☃', '2000-01-01', '2099-12-31 23:59:59.999999', '-12:34:56', X'00017F80FEFF', '{"k": "ü"}'),
        (2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)""",
    "DROP TABLE IF EXISTS cl_kv",
    "CREATE TABLE cl_kv (k INT PRIMARY KEY, v VARCHAR(10))",
    "INSERT INTO cl_kv VALUES (1, 'one')",
]
SELECT = "SELECT * FROM cl_types ORDER BY id"


@pytest.fixture(scope="module")
def proxy(passthrough_proxy: RunningProxy, mariadb: MariaDBServer) -> RunningProxy:
    for sql in SETUP:
        mariadb.execute(sql, "demo_ds")
    return passthrough_proxy


def _where(proxy: RunningProxy, mariadb: MariaDBServer, via_proxy: bool) -> dict[str, Any]:
    if via_proxy:
        return {"host": proxy.host, "port": proxy.port, "user": "root", "password": "root", "database": "demo"}
    return {"host": mariadb.host, "port": mariadb.port, "user": "root", "password": mariadb.password,
            "database": "demo_ds"}


# --- mysql-connector-python (pure) ----------------------------------------------------------------------


def _connector(proxy: RunningProxy, mariadb: MariaDBServer, via_proxy: bool = True, **kw: Any) -> Any:
    args = _where(proxy, mariadb, via_proxy) | {"use_pure": True, "ssl_disabled": True} | kw
    return mysql.connector.connect(**args)


CONNECTOR_LOGIN_ERRORS: list[Any] = [
    pytest.param({"password": "bad"}, 1045, "28000", id="wrong-password"),
    pytest.param({"user": "ghost"}, 1045, "28000", id="unknown-user"),
    pytest.param({"database": "no_such_db"}, 1049, "42000", id="unknown-database"),
]


@pytest.mark.parametrize(("override", "errno", "sqlstate"), CONNECTOR_LOGIN_ERRORS)
def test_connector_login_errors(proxy: RunningProxy, mariadb: MariaDBServer, override: dict[str, str], errno: int,
                                sqlstate: str) -> None:
    with pytest.raises(cerrors.Error) as exc:
        _connector(proxy, mariadb, **override)
    assert (exc.value.errno, exc.value.sqlstate) == (errno, sqlstate)


def test_connector_values_equal_direct(proxy: RunningProxy, mariadb: MariaDBServer) -> None:
    results = []
    for via in (True, False):
        conn = _connector(proxy, mariadb, via)
        cur = conn.cursor()
        cur.execute(SELECT)
        results.append((cur.fetchall(), [d[:2] for d in cur.description]))
        conn.close()
    assert results[0] == results[1]
    assert results[0][0][0][2] == 18446744073709551615


CONNECTOR_ERRORS: list[Any] = [
    pytest.param("INSERT INTO cl_kv VALUES (1, 'dup')", 1062, "23000", id="duplicate-key"),
    pytest.param("SELEKT 1", 1064, "42000", id="syntax"),
    pytest.param("SELECT * FROM cl_missing", 1146, "42S02", id="unknown-table"),
]


@pytest.mark.parametrize(("sql", "errno", "sqlstate"), CONNECTOR_ERRORS)
def test_connector_errors_keep_errno_sqlstate_message(proxy: RunningProxy, mariadb: MariaDBServer, sql: str,
                                                       errno: int, sqlstate: str) -> None:
    seen = []
    for via in (True, False):
        conn = _connector(proxy, mariadb, via)
        with pytest.raises(cerrors.Error) as exc:
            conn.cursor().execute(sql)
        seen.append((exc.value.errno, exc.value.sqlstate, exc.value.msg.replace("demo_ds", "demo")))
        conn.close()
    assert seen[0] == seen[1]
    assert seen[0][:2] == (errno, sqlstate)


def test_connector_reset_connection_drops_user_variables(proxy: RunningProxy, mariadb: MariaDBServer) -> None:
    conn = _connector(proxy, mariadb)
    cur = conn.cursor()
    cur.execute("SET @marker = 42")
    cur.execute("SELECT @marker")
    assert cur.fetchall() == [(42,)]
    conn.cmd_reset_connection()
    cur = conn.cursor()
    cur.execute("SELECT @marker")
    assert cur.fetchall() == [(None,)]
    conn.close()


def test_connector_commands(proxy: RunningProxy, mariadb: MariaDBServer) -> None:
    conn = _connector(proxy, mariadb, database=None)
    conn.cmd_ping()
    stats = conn.cmd_statistics()
    assert "Uptime" in stats or "uptime" in {k.lower() for k in stats}
    conn.cmd_init_db("demo")
    cur = conn.cursor()
    cur.execute("SELECT COUNT(*) FROM cl_kv")
    assert cur.fetchall() == [(1,)]
    with pytest.raises(cerrors.Error) as exc:
        conn.cmd_init_db("no_such_db")
    assert exc.value.errno == 1049
    conn.close()


def test_connector_transaction_rollback(proxy: RunningProxy, mariadb: MariaDBServer) -> None:
    conn = _connector(proxy, mariadb, autocommit=False)
    cur = conn.cursor()
    cur.execute("INSERT INTO cl_kv VALUES (100, 'tx')")
    conn.rollback()
    cur.execute("SELECT COUNT(*) FROM cl_kv WHERE k = 100")
    assert cur.fetchall() == [(0,)]
    conn.close()


# --- mysqlclient (libmariadb) ---------------------------------------------------------------------------


def _mysqldb(proxy: RunningProxy, mariadb: MariaDBServer, via_proxy: bool = True, **kw: Any) -> Any:
    w = _where(proxy, mariadb, via_proxy)
    args = {"host": w["host"], "port": w["port"], "user": w["user"], "password": w["password"],
            "database": w["database"], "charset": "utf8mb4"} | kw
    return MySQLdb.connect(**args)


def test_mysqlclient_values_equal_direct(proxy: RunningProxy, mariadb: MariaDBServer) -> None:
    results = []
    for via in (True, False):
        conn = _mysqldb(proxy, mariadb, via)
        cur = conn.cursor()
        cur.execute(SELECT)
        results.append((cur.fetchall(), [d[:2] for d in cur.description]))
        conn.close()
    assert results[0] == results[1]


def test_mysqlclient_login_errors(proxy: RunningProxy, mariadb: MariaDBServer) -> None:
    with pytest.raises(MySQLdb.OperationalError) as exc:
        _mysqldb(proxy, mariadb, password="bad")
    assert exc.value.args[0] == 1045
    with pytest.raises(MySQLdb.OperationalError) as exc:
        _mysqldb(proxy, mariadb, database="no_such_db")
    assert exc.value.args[0] == 1049


def test_mysqlclient_multi_statements_and_commands(proxy: RunningProxy, mariadb: MariaDBServer) -> None:
    from MySQLdb.constants import CLIENT

    conn = _mysqldb(proxy, mariadb, client_flag=CLIENT.MULTI_STATEMENTS | CLIENT.MULTI_RESULTS)
    cur = conn.cursor()
    cur.execute("SELECT 1; SELECT 'two'; SELECT k FROM cl_kv ORDER BY k")
    sets = [cur.fetchall()]
    while cur.nextset():
        sets.append(cur.fetchall())
    assert sets == [((1,),), (("two",),), ((1,),)]
    conn.ping()
    conn.select_db("demo")
    assert "Uptime" in conn.stat()
    cur = conn.cursor()
    cur.execute("SELECT 'after'")
    assert cur.fetchall() == (("after",),)
    conn.close()


# --- aiomysql --------------------------------------------------------------------------------------------


async def test_aiomysql(proxy: RunningProxy, mariadb: MariaDBServer) -> None:
    results = []
    for via in (True, False):
        w = _where(proxy, mariadb, via)
        conn = await aiomysql.connect(host=w["host"], port=w["port"], user=w["user"], password=w["password"],
                                      db=w["database"], charset="utf8mb4")
        async with conn.cursor() as cur:
            await cur.execute(SELECT)
            results.append(await cur.fetchall())
            await cur.execute("SELECT seq FROM seq_1_to_5000")
            assert len(await cur.fetchall()) == 5000
        await conn.ping()
        conn.close()
    assert results[0] == results[1]


# --- SQLAlchemy 2 ----------------------------------------------------------------------------------------

DRIVERS = ["mysql+pymysql", "mysql+mysqldb", "mysql+mysqlconnector"]


@pytest.mark.parametrize("driver", DRIVERS)
def test_sqlalchemy(proxy: RunningProxy, mariadb: MariaDBServer, driver: str) -> None:
    query = {"charset": "utf8mb4"}
    if driver == "mysql+mysqlconnector":
        query = {"charset": "utf8mb4", "use_pure": "true", "ssl_disabled": "true"}
    results = []
    for via in (True, False):
        w = _where(proxy, mariadb, via)
        url = sa.URL.create(driver, username=w["user"], password=w["password"], host=w["host"], port=w["port"],
                            database=w["database"], query=query)
        engine = sa.create_engine(url, pool_pre_ping=True)
        try:
            with engine.connect() as conn:
                results.append([tuple(r) for r in conn.execute(sa.text(SELECT))])
                conn.execute(sa.text("INSERT INTO cl_kv VALUES (:k, :v)"), {"k": 50, "v": "sa"})
                conn.rollback()
                assert conn.execute(sa.text("SELECT COUNT(*) FROM cl_kv WHERE k = 50")).scalar() == 0
            with engine.begin() as conn:
                kv = sa.Table("cl_kv", sa.MetaData(), autoload_with=conn)
                assert [c.name for c in kv.columns] == ["k", "v"]
                assert conn.execute(sa.select(kv.c.v).where(kv.c.k == 1)).scalar_one() == "one"
        finally:
            engine.dispose()
    assert results[0] == results[1]


# --- the mariadb command-line client ---------------------------------------------------------------------

CLI_QUERIES = [
    "select @@version_comment limit 1",
    "SELECT * FROM cl_types ORDER BY id",
    "SELECT 1; SELECT 'a' AS x, NULL AS y",
    "SHOW TABLES LIKE 'cl_kv'",
]


def _cli(where: dict[str, Any], *args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    """Output as bytes: a BLOB column prints raw."""
    cmd = ["mariadb", "--no-defaults", "-h", where["host"], "-P", str(where["port"]), "-u", where["user"],
           f"-p{where['password']}", "--default-character-set=utf8mb4", *args]
    return subprocess.run(cmd, input=stdin, capture_output=True, timeout=60)


@pytest.mark.parametrize("mode", [["-e"], ["-B", "-e"], ["-B", "-N", "-e"]], ids=["table", "batch", "batch-raw"])
@pytest.mark.parametrize("sql", CLI_QUERIES)
def test_cli_output_equals_direct(proxy: RunningProxy, mariadb: MariaDBServer, mode: list[str], sql: str) -> None:
    outs = []
    for via in (True, False):
        w = _where(proxy, mariadb, via)
        res = _cli(w, w["database"], *mode, sql)
        assert res.returncode == 0, res.stderr
        outs.append(res.stdout)
    if b"demo_ds" in outs[1]:  # the physical database's name shows as the logical one (issue 34), table borders too
        outs = [re.sub(rb"[-+ |]+", b" ", o.replace(b"demo_ds", b"demo")) for o in outs]
    assert outs[0] == outs[1]


def test_cli_session(proxy: RunningProxy) -> None:
    w = {"host": proxy.host, "port": proxy.port, "user": "root", "password": "root"}
    script = b"select @@version_comment limit 1;\nSHOW DATABASES;\nUSE demo;\nSELECT k, v FROM cl_kv ORDER BY k;\n"
    res = _cli(w, "-B", stdin=script)
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith(b"@@version_comment\n")
    assert b"Database\n" in res.stdout and b"\ndemo\n" in res.stdout
    assert res.stdout.endswith(b"k\tv\n1\tone\n")


CLI_ERRORS: list[Any] = [
    pytest.param({"password": "bad"}, [], "ERROR 1045 (28000)", id="wrong-password"),
    pytest.param({}, ["no_such_db", "-e", "select 1"], "ERROR 1049 (42000)", id="unknown-database"),
    pytest.param({}, ["-e", "select * from cl_kv"], "ERROR 1046 (3D000)", id="no-database"),
    pytest.param({}, ["demo", "-e", "insert into cl_kv values (1, 'x')"], "ERROR 1062 (23000)", id="duplicate"),
]


@pytest.mark.parametrize(("override", "args", "expected"), CLI_ERRORS)
def test_cli_errors(proxy: RunningProxy, override: dict[str, str], args: list[str], expected: str) -> None:
    w = {"host": proxy.host, "port": proxy.port, "user": "root", "password": "root"} | override
    res = _cli(w, *(args or ["-e", "select 1"]))
    assert res.returncode == 1
    assert expected.encode() in res.stderr, res.stderr
