"""A session's own state reads as on one MariaDB (issue 34 item 7): the collation a client asks for in its
handshake or with SET NAMES ... COLLATE, statements that need no database, invalid database names, and what a
prepared statement or a column label carries.

Each case runs its statements through the proxy and directly on a plain MariaDB (pass-through: the server behind
`demo`; sharded: the oracle database beside the shards) and compares every answer: rows, or errno and message.
On the sharded database the last statement of a case also reads two rows that live on different data sources,
so that every backend connection the session uses is checked, pooled ones too."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import pymysql
import pymysql.connections
import pytest

from proxy.sandbox import MariaDBServer
from tests.integration.harness import RunningProxy
from tests.integration.sharding_fixtures import ORACLE_DB, ShardedEnv

Connect = Callable[..., Any]
ROWS = "order_id IN (8801, 8802)"  # user 1 and user 2: one row on each data source


class HandshakeCollation(pymysql.connections.Connection):  # type: ignore[type-arg]
    """A client that asks for a collation id in its handshake and sends no SET NAMES after it (PyMySQL always
    does), as the mariadb CLI, mysql2 or JDBC do."""

    def __init__(self, *, collation_id: int, **kw: Any) -> None:
        self._collation_id = collation_id
        self._in_connect = True
        super().__init__(**kw)
        self._in_connect = False

    def set_character_set(self, charset: str, collation: str | None = None) -> None:
        if not getattr(self, "_in_connect", False):
            super().set_character_set(charset, collation)

    def _request_authentication(self) -> None:
        by_name = pymysql.connections.charset_by_name
        pymysql.connections.charset_by_name = lambda _name: SimpleNamespace(id=self._collation_id)
        try:
            super()._request_authentication()
        finally:
            pymysql.connections.charset_by_name = by_name


def _opener(host: str, port: int, user: str, password: str, database: str | None) -> Connect:
    def connect(collation_id: int | None = None, charset: str = "utf8mb4", db: Any = ..., **kw: Any) -> Any:
        args = dict(
            host=host,
            port=port,
            user=user,
            password=password,
            autocommit=True,
            charset=charset,
            database=database if db is ... else db,
            **kw,
        )
        if collation_id is None:
            return pymysql.connect(**args)
        return HandshakeCollation(collation_id=collation_id, **args)

    connect.database = database  # type: ignore[attr-defined]
    return connect


@pytest.fixture(params=("pass-through", "sharded"))
def sides(request: pytest.FixtureRequest) -> Iterator[tuple[str, Connect, Connect]]:
    """(layout, connect through the proxy, connect to the plain MariaDB)."""
    if request.param == "pass-through":
        proxy: RunningProxy = request.getfixturevalue("passthrough_proxy")
        server: MariaDBServer = request.getfixturevalue("mariadb")
        yield (
            request.param,
            _opener(proxy.host, proxy.port, "root", "root", "demo"),
            _opener(server.host, server.port, server.user, server.password, "demo_ds"),
        )
        return
    env: ShardedEnv = request.getfixturevalue("sharded_env")
    server = env.servers[0]
    rows = "INSERT INTO t_order (order_id, user_id, status) VALUES (8801, 1, 'a'), (8802, 2, 'A')"
    with env.connect() as conn, conn.cursor() as cur:
        cur.execute(f"DELETE FROM t_order WHERE {ROWS}")
        cur.execute(rows)
    server.execute(f"DELETE FROM t_order WHERE {ROWS}", ORACLE_DB)
    server.execute(rows, ORACLE_DB)
    try:
        yield (
            request.param,
            _opener(env.proxy.host, env.proxy.port, "root", "root", "sharding_db"),
            _opener(server.host, server.port, server.user, server.password, ORACLE_DB),
        )
    finally:
        with env.connect() as conn, conn.cursor() as cur:
            cur.execute(f"DELETE FROM t_order WHERE {ROWS}")
        server.execute(f"DELETE FROM t_order WHERE {ROWS}", ORACLE_DB)


def answer(conn: pymysql.connections.Connection[Any], sql: str) -> Any:
    """What a client sees of one statement: its rows (with column labels as bytes) or its error."""
    try:
        with conn.cursor() as cur:
            cur.execute(sql)
            labels = [d[0] for d in cur.description or ()]
            return labels, list(cur.fetchall())
    except pymysql.err.MySQLError as exc:
        return "ERR", *exc.args


def same_answers(proxied: Any, direct: Any, statements: tuple[str, ...]) -> None:
    for sql in statements:
        assert answer(proxied, sql) == answer(direct, sql), sql


# (handshake collation id, client charset, statements): the last statement reads the session's collation
COLLATION = "SELECT @@character_set_client, @@character_set_connection, @@collation_connection"
ON_EVERY_NODE = (
    f"SELECT order_id, @@collation_connection, 'A' = 'a', 'a' = status FROM t_order WHERE {ROWS} ORDER BY order_id"
)
HANDSHAKES = (
    (48, "latin1", (COLLATION, "SELECT 'y' = 'ü', 'A' = 'a'")),  # latin1_general_ci: ü is not y
    (46, "utf8mb4", (COLLATION, "SELECT 'A' = 'a'")),  # utf8mb4_bin
    (224, "utf8mb4", (COLLATION, "SELECT 'ß' = 'ss', 'A' = 'a'")),  # utf8mb4_unicode_ci: ß is ss
    (8, "latin1", (COLLATION, "SELECT 'y' = 'ü'")),  # latin1_swedish_ci, the charset's default
    (45, "utf8mb4", (COLLATION,)),
    (33, "utf8", (COLLATION,)),
    (83, "utf8", (COLLATION, "SELECT 'A' = 'a'")),  # utf8mb3_bin
)
SET_STATEMENTS = (
    ("SET NAMES utf8mb4 COLLATE utf8mb4_bin", "SELECT 'A' = 'a'", COLLATION),
    ("SET NAMES 'utf8mb4' COLLATE 'utf8mb4_unicode_ci'", "SELECT 'ß' = 'ss'", COLLATION),
    ("SET NAMES latin1 COLLATE latin1_general_ci", COLLATION),
    ("SET NAMES utf8mb4 COLLATE utf8mb4_bin", "SET NAMES latin1", COLLATION),
    ("SET NAMES utf8mb4 COLLATE utf8mb4_bin", "SET NAMES DEFAULT", COLLATION),
    ("SET CHARACTER SET latin1", COLLATION),
    ("SET CHARACTER SET latin1", "SET NAMES utf8mb4", COLLATION),
    ("SET CHARSET utf8mb4", COLLATION),
    ("SET collation_connection = utf8mb4_bin", "SELECT 'A' = 'a'", COLLATION),
    ("SET collation_connection = utf8mb4_bin", "SET NAMES utf8mb4", "SELECT 'A' = 'a'", COLLATION),
    ("SET NAMES latin1", "SET @@session.collation_connection = 'latin1_bin'", COLLATION),
    ("SET character_set_client = latin1, character_set_results = latin1", COLLATION),
)


@pytest.mark.parametrize(
    ("collation_id", "charset", "statements"), HANDSHAKES, ids=[f"id{c}" for c, _, _ in HANDSHAKES]
)
def test_the_handshake_collation_is_the_sessions(
    sides: tuple[str, Connect, Connect], collation_id: int, charset: str, statements: tuple[str, ...]
) -> None:
    layout, proxy, direct = sides
    if layout == "sharded":
        statements = (*statements, ON_EVERY_NODE)
    with proxy(collation_id, charset) as p, direct(collation_id, charset) as d:
        same_answers(p, d, statements)
    with proxy(collation_id, charset) as p, direct(collation_id, charset) as d:  # pooled connections now
        same_answers(p, d, statements)


@pytest.mark.parametrize("statements", SET_STATEMENTS, ids=lambda s: " / ".join(s[:-1]))
def test_set_names_keeps_its_collation(sides: tuple[str, Connect, Connect], statements: tuple[str, ...]) -> None:
    layout, proxy, direct = sides
    if layout == "sharded":
        statements = (*statements, ON_EVERY_NODE)
    with proxy() as p, direct() as d:
        same_answers(p, d, statements)
    with proxy() as p, direct() as d:  # a session after it, on the connections that session gave back
        same_answers(p, d, (COLLATION, "SELECT 'A' = 'a'"))


# statements that need no database, in a session that has chosen none ({db}: the side's database), then after USE
NO_DATABASE = (
    ("/*!40100 SET @@SQL_MODE='' */", "SELECT @@sql_mode", "USE {db}", "SELECT @@sql_mode"),
    (
        "/*!40103 SET TIME_ZONE='+00:00' */",
        "/*!40101 SET NAMES utf8mb4 */",
        "SELECT @@time_zone",
        "USE {db}",
        "SELECT @@time_zone, @@character_set_client",
    ),
    ("/*!40101 SET @OLD_SQL_MODE=@@SQL_MODE, SQL_MODE='NO_AUTO_VALUE_ON_ZERO' */", "SELECT @@sql_mode, @OLD_SQL_MODE"),
    ("SET sql_mode = 'ANSI_QUOTES'", "SELECT @@sql_mode", "USE {db}", "SELECT @@sql_mode", 'SELECT "x" + 0'),
    ("SET NAMES latin1 COLLATE latin1_general_ci", "USE {db}", COLLATION),
    ("SET @a = 5", "SELECT @a + 1", "SELECT 1 + 1, DATABASE()", "SELECT @@max_allowed_packet > 0"),
    ("SHOW VARIABLES LIKE 'sql_mode'", "SHOW SESSION VARIABLES LIKE 'time_zone'"),
    ("/*!40100 SELECT 1 */", "DO 1", "SELECT DATABASE()"),
    ("SHOW TABLES",),
    ("SHOW TABLE STATUS",),
    ("SHOW FULL TABLES",),
    ("SELECT * FROM t_order",),
    ("SELECT COUNT(*) FROM t_order WHERE 1 = 0",),
    ("SHOW CREATE TABLE t_order",),
    ("SHOW COLUMNS FROM t_order",),
    ("DESCRIBE t_order",),
    ("INSERT INTO t_order VALUES (1, 1, 'x')",),
)


@pytest.mark.parametrize("statements", NO_DATABASE, ids=lambda s: s[0])
def test_statements_that_need_no_database(sides: tuple[str, Connect, Connect], statements: tuple[str, ...]) -> None:
    _layout, proxy, direct = sides
    with proxy(db=None) as p, direct(db=None) as d:
        for sql in statements:
            if sql.startswith("USE "):
                p.select_db(proxy.database)
                d.select_db(direct.database)
                continue
            assert answer(p, sql) == answer(d, sql), sql


def test_mariadb_dump_of_a_sharded_database_restores_the_same_rows(sharded_env: ShardedEnv) -> None:
    """`mariadb-dump` through the proxy: it starts with `/*!40100 SET @@SQL_MODE='' */` before choosing a
    database (answered 1046 before), sets character_set_results = binary around SHOW CREATE TABLE, and reads every
    table; restored into a plain database, the rows are the ones the proxy shows."""
    env, server = sharded_env, sharded_env.servers[0]
    rows = [(8811, 1, "é"), (8812, 2, "a'b"), (8813, 3, None), (8814, 4, "x\\y")]
    with env.connect() as conn, conn.cursor() as cur:
        cur.execute("DELETE FROM t_order WHERE order_id IN (8811, 8812, 8813, 8814)")
        cur.executemany("INSERT INTO t_order (order_id, user_id, status) VALUES (%s, %s, %s)", rows)
    try:
        dump = subprocess.run(
            [
                "mariadb-dump",
                "-h",
                env.proxy.host,
                "-P",
                str(env.proxy.port),
                "-uroot",
                "-proot",
                "--skip-ssl",
                "--skip-lock-tables",
                "--tables",
                "sharding_db",
                "t_order",
                "t_order_item",
            ],
            capture_output=True,
            timeout=60,
            check=False,
        )
        assert dump.returncode == 0, dump.stderr.decode(errors="replace")
        server.execute("DROP DATABASE IF EXISTS sht_dump_restore")
        server.execute("CREATE DATABASE sht_dump_restore")
        restore = subprocess.run(
            [
                "mariadb",
                "-h",
                server.host,
                "-P",
                str(server.port),
                f"-u{server.user}",
                *([f"-p{server.password}"] if server.password else []),
                "--skip-ssl",
                "sht_dump_restore",
            ],
            input=dump.stdout,
            capture_output=True,
            timeout=60,
            check=False,
        )
        assert restore.returncode == 0, restore.stderr.decode(errors="replace")
        for table in ("t_order", "t_order_item"):
            through_proxy = sorted(env.query(f"SELECT * FROM {table}")[1])
            restored = sorted(server.execute(f"SELECT * FROM {table}", "sht_dump_restore"))
            assert restored == through_proxy, table
        assert set(rows) <= set(server.execute("SELECT * FROM t_order", "sht_dump_restore"))
    finally:
        with env.connect() as conn, conn.cursor() as cur:
            cur.execute("DELETE FROM t_order WHERE order_id IN (8811, 8812, 8813, 8814)")
        server.execute("DROP DATABASE IF EXISTS sht_dump_restore")


# (how the name is given, the name): MariaDB tells an invalid name (1102) from an unknown one (1049)
LONG = "n" * 65
DATABASE_NAMES = (
    ("USE", "a/b"),
    ("USE", LONG),
    ("USE", "a "),
    ("USE", "nosuch"),
    ("USE", "a.b"),
    ("USE", "n" * 64),
    ("COM_INIT_DB", LONG),
    ("COM_INIT_DB", "a "),
    ("COM_INIT_DB", ""),
    ("COM_INIT_DB", "nosuch"),
    ("handshake", LONG),
    ("handshake", "a "),
    ("handshake", "nosuch"),
    ("SHOW TABLES FROM", LONG),
    ("SHOW TABLES FROM", "a "),
)


def _choose(connect: Connect, how: str, name: str) -> Any:
    try:
        if how == "handshake":
            connect(db=name).close()
            return "connected"
        with connect() as conn:
            if how == "COM_INIT_DB":
                conn.select_db(name)
                return "OK"
            return answer(conn, f"{how} `{name}`")
    except pymysql.err.MySQLError as exc:
        return "ERR", *exc.args


@pytest.mark.parametrize(("how", "name"), DATABASE_NAMES, ids=[f"{h}-{n[:8]!r}" for h, n in DATABASE_NAMES])
def test_invalid_database_names_answer_as_mariadb(sides: tuple[str, Connect, Connect], how: str, name: str) -> None:
    _layout, proxy, direct = sides
    assert _choose(proxy, how, name) == _choose(direct, how, name)


# a global variable and a value it takes for a while: a new session through the proxy starts with it, as a new
# connection to MariaDB does, although the pooled connection it gets was opened before the SET GLOBAL
GLOBALS = (
    ("sql_mode", "'NO_ENGINE_SUBSTITUTION'"),
    ("max_allowed_packet", "33554432"),
    ("time_zone", "'+03:00'"),
    ("div_precision_increment", "7"),
    ("group_concat_max_len", "4096"),
    ("query_cache_type", "'OFF'"),
    ("wait_timeout", "1234"),
)


@pytest.mark.parametrize(("variable", "value"), GLOBALS, ids=[v for v, _ in GLOBALS])
def test_a_new_session_starts_with_the_current_globals(
    sides: tuple[str, Connect, Connect], variable: str, value: str
) -> None:
    layout, proxy, direct = sides
    read = f"SELECT @@session.{variable}"
    for _ in range(2):  # connections into the pools, opened with the old global value
        with proxy() as p:
            answer(p, read)
    with direct() as d:
        before = answer(d, f"SELECT @@global.{variable}")[1][0][0]
        answer(d, f"SET GLOBAL {variable} = {value}")
    try:
        with proxy() as p, direct() as d:
            assert answer(p, read) == answer(d, read), layout
    finally:
        with direct() as d:
            restore = before if isinstance(before, int) else f"'{before}'"
            answer(d, f"SET GLOBAL {variable} = {restore}")
