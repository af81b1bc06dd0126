"""A session's own state reads as on one MariaDB (issue 34 item 7): the collation a client asks for in its
handshake or with SET NAMES ... COLLATE, statements that need no database, invalid database names, and what a
prepared statement or a column label carries.

Each case runs its statements through the proxy and directly on a plain MariaDB (pass-through: the server behind
`demo`; sharded: the oracle database beside the shards) and compares every answer: rows, or errno and message.
On the sharded database the last statement of a case also reads two rows that live on different data sources,
so that every backend connection the session uses is checked, pooled ones too."""

from __future__ import annotations

import struct
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
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
    ("select database()", "SELECT Schema( )"),  # labelled as typed
    ("SHOW TABLES",),
    ("SHOW TABLE STATUS",),
    ("SHOW FULL TABLES",),
    ("SELECT * FROM t_order",),
    ("SELECT COUNT(*) FROM t_order WHERE 1 = 0",),
    ("SHOW CREATE TABLE t_order",),
    ("SHOW COLUMNS FROM t_order",),
    ("DESCRIBE t_order",),
    ("INSERT INTO t_order VALUES (1, 1, 'x')",),
    # a transaction, autocommit and savepoints set before USE hold after it (mariadb-dump --single-transaction)
    (
        "SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ",
        "START TRANSACTION /*!40100 WITH CONSISTENT SNAPSHOT */",
        "SELECT @@in_transaction",
        "USE {db}",
        "SELECT @@in_transaction",
        "SAVEPOINT sp",
        "SELECT COUNT(*) > 0 FROM information_schema.tables",
        "ROLLBACK TO SAVEPOINT sp",
        "RELEASE SAVEPOINT sp",
        "SELECT @@in_transaction, @@tx_isolation",
        "COMMIT",
        "SELECT @@in_transaction",
    ),
    ("START TRANSACTION", "SAVEPOINT a", "SAVEPOINT b", "USE {db}", "ROLLBACK TO SAVEPOINT a", "RELEASE SAVEPOINT b"),
    ("START TRANSACTION", "SAVEPOINT a", "COMMIT", "USE {db}", "ROLLBACK TO SAVEPOINT a", "SELECT @@in_transaction"),
    ("SET autocommit = 0", "USE {db}", "SELECT @@autocommit"),
    ("SET autocommit = 0", "SET autocommit = 1", "USE {db}", "SELECT @@autocommit, @@in_transaction"),
    ("START TRANSACTION", "ROLLBACK", "USE {db}", "SELECT @@in_transaction"),
    ("SET TRANSACTION ISOLATION LEVEL SERIALIZABLE", "USE {db}", "START TRANSACTION", "SELECT @@in_transaction"),
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


# without a current database, a statement whose tables are all qualified with one database runs in it ({db}: the
# database of each side), as MariaDB runs it; an unqualified table still answers 1046
QUALIFIED = (
    ("SELECT COUNT(*) FROM {db}.t_order WHERE 1 = 0", "SELECT DATABASE()"),
    ("SELECT o.order_id FROM {db}.t_order o JOIN {db}.t_order p ON p.order_id = o.order_id WHERE o.order_id = 8801",),
    ("SELECT DATABASE(), (SELECT COUNT(*) FROM {db}.t_order WHERE 1 = 0) AS n",),
    ("EXPLAIN SELECT * FROM {db}.t_order WHERE 1 = 0",),  # (pass-through: a sharded one says where it ran)
    ("SELECT COUNT(*) FROM {db}.t_order, t_order",),
)


@pytest.mark.parametrize("statements", QUALIFIED, ids=lambda s: s[0])
def test_qualified_tables_need_no_database(sides: tuple[str, Connect, Connect], statements: tuple[str, ...]) -> None:
    layout, proxy, direct = sides
    if layout == "sharded" and statements[0].startswith("EXPLAIN"):
        return
    with proxy(db=None) as p, direct(db=None) as d:
        for sql in statements:
            direct_answer = repr(answer(d, sql.format(db=direct.database))).replace(direct.database, proxy.database)
            assert repr(answer(p, sql.format(db=proxy.database))) == direct_answer, sql


@pytest.mark.parametrize("options", [(), ("--single-transaction",), ("--skip-lock-tables",)], ids=" ".join)
def test_mariadb_dump_of_a_sharded_database_restores_the_same_rows(
    sharded_env: ShardedEnv, options: tuple[str, ...]
) -> None:
    """`mariadb-dump` through the proxy: it starts with `/*!40100 SET @@SQL_MODE='' */` before choosing a
    database (answered 1046 before), reads INFORMATION_SCHEMA.FILES for tablespaces, locks the tables it dumps
    (LOCK TABLES ... READ /*!32311 LOCAL */: refused with 1235 before), or with --single-transaction starts its
    transaction and sets SAVEPOINT sp before USE and rolls back to it after each table (1305 before), sets
    character_set_results = binary around SHOW CREATE TABLE, and reads every table; restored into a plain database,
    the rows are the ones the proxy shows, and it said nothing on stderr."""
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
                *options,
                "--tables",
                "sharding_db",
                "t_order",
                "t_order_item",
            ],
            capture_output=True,
            timeout=60,
            check=False,
        )
        assert (dump.returncode, dump.stderr.decode(errors="replace")) == (0, "")
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


def _errno_or_rows_of(conn: pymysql.connections.Connection[Any], sql: str) -> Any:
    got = answer(conn, sql)
    return got[:3] if got[0] == "ERR" else got


@pytest.mark.parametrize("sides", ["pass-through"], indirect=True)
def test_a_new_session_reads_packets_up_to_the_global_max_allowed_packet(sides: tuple[str, Connect, Connect]) -> None:
    """MariaDB reads a connection's packets up to the max_allowed_packet of when it connected (a bigger one: 1153);
    COM_RESET_CONNECTION changes the variable, not that limit. A session through the proxy got the limit of the
    pooled connection it was lent: bigger packets passed while @@max_allowed_packet said 1024, and after the global
    was raised again, connections opened meanwhile refused what a new session may send."""
    _layout, proxy, direct = sides
    small, big = "SELECT LENGTH('" + "a" * 1100 + "')", "SELECT LENGTH('" + "b" * 3000 + "')"
    for _ in range(2):
        with proxy() as p:
            answer(p, "SELECT 1")
    with direct() as d:
        before = answer(d, "SELECT @@global.max_allowed_packet, @@global.net_buffer_length")[1][0]
        answer(d, "SET GLOBAL max_allowed_packet = 1024, GLOBAL net_buffer_length = 1024")
    try:
        held = [proxy() for _ in range(3)]  # connections opened while the global is 1024
        for conn in held:
            answer(conn, "SELECT 1")
        with proxy() as p, direct() as d:
            for sql in ("SELECT @@max_allowed_packet, @@net_buffer_length", small):
                assert _errno_or_rows_of(p, sql) == _errno_or_rows_of(d, sql), sql[:40]
        for conn in held:
            conn.close()
    finally:
        with direct() as d:
            answer(d, f"SET GLOBAL max_allowed_packet = {before[0]}, GLOBAL net_buffer_length = {before[1]}")
    for _ in range(4):  # each new session may send up to the global again, whichever pooled connection it gets
        with proxy() as p, direct() as d:
            assert _errno_or_rows_of(p, big) == _errno_or_rows_of(d, big)


# LOCK TABLES: each statement through the proxy and on a plain MariaDB; errors compared by errno (a data source's
# message names its actual table); the session ends holding nothing (the last statement reads everything)
LOCKS = (
    ("LOCK TABLES t_order READ", "SELECT COUNT(*) FROM t_order", "SELECT COUNT(*) FROM t_order_item", "UNLOCK TABLES"),
    ("LOCK TABLE t_order READ", f"UPDATE t_order SET status = 'r' WHERE {ROWS}", "DELETE FROM t_order WHERE 1 = 0"),
    ("LOCK TABLES t_order READ", "INSERT INTO t_order (order_id, user_id, status) VALUES (8803, 1, 'x')"),
    ("LOCK TABLES `t_order` READ /*!32311 LOCAL */,`t_order_item` READ /*!32311 LOCAL */", "SELECT 1 FROM t_order o"),
    ("LOCK TABLES t_order WRITE, t_order_item READ", f"UPDATE t_order SET status = 'w' WHERE {ROWS}", "UNLOCK TABLES"),
    (
        "LOCK TABLES t_order LOW_PRIORITY WRITE",
        f"UPDATE t_order SET status = 'w' WHERE {ROWS}",
        "SELECT 1 FROM t_order_item",
    ),
    ("LOCK TABLES t_order READ", "START TRANSACTION", "SELECT COUNT(*) FROM t_order_item", "COMMIT"),
    ("LOCK TABLES t_order READ", "LOCK TABLES t_order_item READ", "SELECT 1 FROM t_order"),
    ("LOCK TABLES t_order READ, t_order READ",),
    ("LOCK TABLES t_order READ, t_order_item AS t_order READ",),
    ("LOCK TABLES nosuch READ",),
    ("LOCK TABLES t_order READ LOCAL WRITE",),
    ("UNLOCK TABLES", "UNLOCK TABLE"),
    ("SET autocommit = 0", "LOCK TABLES t_order WRITE", f"UPDATE t_order SET status = 'z' WHERE {ROWS}", "ROLLBACK"),
    (
        "SET autocommit = 0",
        "LOCK TABLES t_order WRITE",
        f"UPDATE t_order SET status = 'z' WHERE {ROWS}",
        "UNLOCK TABLES",
    ),
    ("START TRANSACTION", f"UPDATE t_order SET status = 't' WHERE {ROWS}", "LOCK TABLES t_order READ", "ROLLBACK"),
    # a write the proxy runs step by step, or row by row, in a transaction of its own: under the locks, which hold
    # after it (its transaction began with BEGIN, which released them: t_order_item was readable)
    (
        "LOCK TABLES t_order WRITE",
        f"UPDATE t_order SET status = 'q' WHERE {ROWS} ORDER BY order_id DESC LIMIT 1",
        "SELECT COUNT(*) FROM t_order_item",
    ),
    ("LOCK TABLES t_order WRITE", "UPDATE t_order SET user_id = 3 WHERE order_id = 8801", "SELECT 1 FROM t_order_item"),
    (
        "LOCK TABLES t_order WRITE",
        "INSERT INTO t_order (order_id, user_id, status) VALUES (8801, 2, 'u') ON DUPLICATE KEY UPDATE status = 'u'",
        "SELECT 1 FROM t_order_item",
    ),
    ("LOCK TABLES t_order READ", f"UPDATE t_order SET status = 'q' WHERE {ROWS} ORDER BY order_id LIMIT 1"),
    # a savepoint set before a data source joined: ROLLBACK TO takes back what it did since joining
    ("START TRANSACTION", "SAVEPOINT sp", f"UPDATE t_order SET status = 's' WHERE {ROWS}", "ROLLBACK TO SAVEPOINT sp"),
)
EVERYTHING = (f"SELECT order_id, status FROM t_order WHERE {ROWS} ORDER BY 1", "SELECT COUNT(*) FROM t_order_item")


def _errno_or_rows(conn: pymysql.connections.Connection[Any], sql: str) -> Any:
    got = answer(conn, sql)
    return got[:2] if got[0] == "ERR" else got


@pytest.mark.parametrize("sides", ["sharded"], indirect=True)
@pytest.mark.parametrize("statements", LOCKS, ids=lambda s: " / ".join(s))
def test_lock_tables_as_one_server(sides: tuple[str, Connect, Connect], statements: tuple[str, ...]) -> None:
    _layout, proxy, direct = sides
    with proxy() as p, direct() as d:
        for sql in statements:
            assert _errno_or_rows(p, sql) == _errno_or_rows(d, sql), sql
        for sql in ("UNLOCK TABLES", "ROLLBACK", "SET autocommit = 1", *EVERYTHING):
            assert _errno_or_rows(p, sql) == _errno_or_rows(d, sql), sql
    with proxy() as p, direct() as d:  # a new session finds no lock left
        for sql in EVERYTHING:
            assert _errno_or_rows(p, sql) == _errno_or_rows(d, sql), sql


def test_lock_tables_refuses_an_alias_of_two_actual_tables(sharded_env: ShardedEnv) -> None:
    """t_order has two actual tables on each data source: one alias cannot lock both there (MariaDB's 1066), and
    locking one of them would leave the other unlocked: refused, naming the table, nothing locked."""
    with sharded_env.connect() as conn:
        got = answer(conn, "LOCK TABLES t_order AS o READ")
        assert got[:2] == ("ERR", 1235) and "t_order_0, t_order_1" in got[2], got
        assert answer(conn, "SELECT COUNT(*) >= 0 FROM t_order_item") == (["COUNT(*) >= 0"], [(1,)])


def test_lock_tables_of_a_broadcast_table_hold_on_every_data_source(sharded_env: ShardedEnv) -> None:
    """t_address is on both data sources: READ refuses the write on both (nothing written anywhere), and under WRITE
    the write goes to both and the locks still hold after it (its statement transaction began with BEGIN, which
    released them, before)."""
    env = sharded_env
    insert = "INSERT INTO t_address (address_id, address_name) VALUES (8891, 'x')"
    count = "SELECT COUNT(*) FROM t_address WHERE address_id = 8891"
    try:
        with env.connect() as conn:
            assert answer(conn, "LOCK TABLES t_address READ") == ([], [])
            assert answer(conn, insert)[:2] == ("ERR", 1099)
            assert [env.backend(ds, count) for ds in ("ds_0", "ds_1")] == [[(0,)], [(0,)]]
            assert answer(conn, "LOCK TABLES t_address WRITE") == ([], [])
            assert answer(conn, insert) == ([], [])
            assert answer(conn, "SELECT COUNT(*) FROM t_order")[:2] == ("ERR", 1100)
            assert answer(conn, "UNLOCK TABLES") == ([], [])
            assert answer(conn, "SELECT COUNT(*) >= 0 FROM t_order")[1] == [(1,)]
        assert [env.backend(ds, count) for ds in ("ds_0", "ds_1")] == [[(1,)], [(1,)]]
    finally:
        with env.connect() as conn:
            answer(conn, "DELETE FROM t_address WHERE address_id = 8891")


# prepared statements over the binary protocol: (database chosen?, text statements first, the prepared text, compare
# the column labels at PREPARE too): the EXECUTE answer (labels as bytes, binary rows) and PREPARE's labels
PREPARED = (
    (False, (), b"SELECT DATABASE()", True),
    (True, (), b"SHOW DATABASES LIKE 'nosuch'", True),
    (False, (), b"SELECT 1 + 1 AS two, @@max_allowed_packet > 0", True),
    (False, (), b"SELECT * FROM t_order", True),
    (True, (b"SET NAMES latin1",), b"SELECT 1 AS '\xe9'", True),
    (True, (b"SET NAMES latin1",), b"SELECT 'x' AS `\xe9\xe8`, 2 AS '\xff'", True),
    (True, (b"SET NAMES utf8mb4",), b"SELECT 1 AS '\xc3\xa9'", True),
)


def _prepared(c: Any, setup: tuple[bytes, ...], sql: bytes, labels_at_prepare: bool) -> tuple[Any, ...]:
    from protocol.packets import is_err
    from tests.integration.test_bytes import column_name, summarize

    for statement in setup:
        c.command(b"\x03" + statement)
    c.send(b"\x16" + sql, 0)
    _seq, first = c.read()
    if is_err(first):
        return summarize([first])
    statement_id, columns, params = struct.unpack_from("<IHH", first, 1)
    defs = [c.read()[1] for _ in range(columns + (1 if columns else 0) + params + (1 if params else 0))]
    labels = [column_name(d) for d in defs[params + (1 if params else 0) :][:columns]]
    packets = [p for _, p in c.command(b"\x17" + struct.pack("<IBI", statement_id, 0, 1))]
    c.send(b"\x19" + struct.pack("<I", statement_id), 0)
    return (labels if labels_at_prepare else None, summarize(packets))


@pytest.mark.parametrize("layout", ["pass-through", "sharded"])
@pytest.mark.parametrize(("chosen", "setup", "sql", "labels_at_prepare"), PREPARED, ids=[repr(p[2]) for p in PREPARED])
def test_prepared_statements_as_one_server(
    request: pytest.FixtureRequest,
    layout: str,
    chosen: bool,
    setup: tuple[bytes, ...],
    sql: bytes,
    labels_at_prepare: bool,
) -> None:
    from tests.integration.test_bytes import login

    if layout == "pass-through":
        proxy: RunningProxy = request.getfixturevalue("passthrough_proxy")
        server: MariaDBServer = request.getfixturevalue("mariadb")
        names = ("demo", "demo_ds")
    else:
        env: ShardedEnv = request.getfixturevalue("sharded_env")
        proxy, server, names = env.proxy, env.servers[0], ("sharding_db", ORACLE_DB)
    proxied = login(proxy.host, proxy.port, names[0] if chosen else None)
    direct = login(server.host, server.port, names[1] if chosen else None, server.password)
    try:
        assert _prepared(proxied, setup, sql, labels_at_prepare) == _prepared(direct, setup, sql, labels_at_prepare)
    finally:
        proxied.close()
        direct.close()


# handshake collations of character sets no client may use (ucs2, utf16, utf16le, utf32): MariaDB refuses the
# connection with 1231, as SET NAMES would be refused, and so does the proxy (it accepted and failed every statement)
NOT_CLIENT_COLLATIONS = (35, 54, 56, 60, 101, 160)


def _outcome(connect: Connect, collation_id: int, db: Any = ...) -> Any:
    try:
        with connect(collation_id, db=db) as conn:
            return answer(conn, "SELECT @@character_set_client")
    except pymysql.err.MySQLError as exc:
        return "ERR", *exc.args


@pytest.mark.parametrize("collation_id", NOT_CLIENT_COLLATIONS)
def test_a_handshake_in_a_charset_no_client_may_use_is_refused(
    sides: tuple[str, Connect, Connect], collation_id: int
) -> None:
    _layout, proxy, direct = sides
    assert _outcome(proxy, collation_id) == _outcome(direct, collation_id)
    assert _outcome(proxy, collation_id, None) == _outcome(direct, collation_id, None)


# EXPLAIN's notes: the warning count that ends its rows (EXPLAIN EXTENDED notes its rewritten query), text and
# prepared, on the sharded database (several plans, one per unit: one note, as one server's EXPLAIN gives one)
EXPLAINS = (
    b"EXPLAIN EXTENDED SELECT * FROM t_order WHERE order_id = 1",
    b"EXPLAIN EXTENDED SELECT * FROM t_order",
    b"EXPLAIN SELECT * FROM t_order",
    b"EXPLAIN EXTENDED SELECT * FROM t_order WHERE user_id = 1 AND order_id = 2",
)


def _warnings_at_end(c: Any, sql: bytes, prepared: bool) -> Any:
    from protocol.packets import is_eof, is_err

    if prepared:
        c.send(b"\x16" + sql, 0)
        _seq, first = c.read()
        if is_err(first):
            return "ERR", first[3:]
        statement_id, columns, params = struct.unpack_from("<IHH", first, 1)
        for _ in range(columns + (1 if columns else 0) + params + (1 if params else 0)):
            c.read()
        packets = [p for _, p in c.command(b"\x17" + struct.pack("<IBI", statement_id, 0, 1))]
        c.send(b"\x19" + struct.pack("<I", statement_id), 0)
    else:
        packets = [p for _, p in c.command(b"\x03" + sql)]
    last = packets[-1]
    assert is_eof(last), last
    return struct.unpack_from("<H", last, 1)[0]


@pytest.mark.parametrize("prepared", [False, True], ids=["text", "prepared"])
@pytest.mark.parametrize("sql", EXPLAINS, ids=[s.decode() for s in EXPLAINS])
def test_explain_keeps_its_notes(sharded_env: ShardedEnv, sql: bytes, prepared: bool) -> None:
    from tests.integration.test_bytes import login

    server = sharded_env.servers[0]
    proxied = login(sharded_env.proxy.host, sharded_env.proxy.port, "sharding_db")
    direct = login(server.host, server.port, ORACLE_DB, server.password)
    try:
        assert _warnings_at_end(proxied, sql, prepared) == _warnings_at_end(direct, sql, prepared)
    finally:
        proxied.close()
        direct.close()


# --- prepared statements across USE ------------------------------------------------------------------------------
# MariaDB keeps a session's prepared statements across USE and executes each in the database current at its
# PREPARE: its unqualified tables and DATABASE() are that database's. Steps: "U:home" / "U:other" (USE), "P:n:sql"
# (COM_STMT_PREPARE as n), "E:n" / "E:n:v" (COM_STMT_EXECUTE, with one integer parameter v: its types bound at the
# statement's first execute only, as Connector/C does), "C:n" (COM_STMT_CLOSE), else a text statement. Database
# names are compared as HOME / OTHER.
COUNT_HOME = f"SELECT COUNT(*), DATABASE() FROM t_order WHERE {ROWS}"
ACROSS_USE = (
    ("P:a:" + COUNT_HOME, "U:other", "E:a", "SELECT DATABASE()", "E:a", "U:home", "E:a"),
    ("P:a:SELECT order_id, status FROM t_order WHERE order_id = ?", "E:a:8801", "U:other", "E:a:8802", "E:a:8801"),
    ("P:a:SELECT DATABASE()", "U:other", "E:a", "U:home", "E:a"),
    (
        "PREPARE s FROM 'SELECT COUNT(*), DATABASE() FROM t_order WHERE " + ROWS.replace("'", "''") + "'",
        "U:other",
        "EXECUTE s",
        "SELECT DATABASE()",
        "DEALLOCATE PREPARE s",
        "EXECUTE s",
    ),
    (
        "SET @v = 8802",
        "PREPARE s FROM 'SELECT status FROM t_order WHERE order_id = ?'",
        "U:other",
        "EXECUTE s USING @v",
        "U:home",
        "EXECUTE s USING @v",
    ),
    ("P:a:SELECT 1 FROM t_order WHERE 1 = 0", "U:other", "START TRANSACTION", "ROLLBACK", "E:a"),
    ("P:a:SELECT 1 + 1", "C:a", "U:other", "E:a"),
)


class _Steps:
    """One side's session for ACROSS_USE: statement ids by name, and whether each has bound its types."""

    def __init__(self, client: Any, names: dict[str, str]) -> None:
        self.c, self.names, self.ids, self.bound = client, names, {}, set()

    def normalized(self, value: Any) -> Any:
        for name, label in self.names.items():  # (a row's value, length first, or in a message)
            if isinstance(value, bytes):
                value = value.replace(bytes([len(name)]) + name.encode(), bytes([len(label)]) + label.encode())
                value = value.replace(name.encode(), label.encode())
        if isinstance(value, (list, tuple)):
            return type(value)(self.normalized(v) for v in value)
        return value

    def step(self, step: str) -> Any:
        from tests.integration.test_bytes import summarize

        kind, _, rest = step.partition(":")
        if kind == "U":
            db = {label: name for name, label in self.names.items()}[rest.upper()]
            return summarize([p for _, p in self.c.command(b"\x03USE " + db.encode())])
        if kind == "P":
            name, _, sql = rest.partition(":")
            self.c.send(b"\x16" + sql.encode(), 0)
            _seq, first = self.c.read()
            if first[:1] == b"\xff":
                return summarize([first])
            statement_id, columns, params = struct.unpack_from("<IHH", first, 1)
            for _ in range(columns + (1 if columns else 0) + params + (1 if params else 0)):
                self.c.read()
            self.ids[name] = statement_id
            return ("PREPARED", columns, params)
        if kind in ("E", "C"):
            name, _, value = rest.partition(":")
            sid = self.ids[name]
            if kind == "C":
                self.c.send(b"\x19" + struct.pack("<I", sid), 0)
                return "closed"
            body = b""
            if value:
                first = name not in self.bound
                self.bound.add(name)
                body = b"\x00" + (b"\x01\x08\x00" if first else b"\x00") + struct.pack("<q", int(value))
            return self.normalized(
                summarize([p for _, p in self.c.command(b"\x17" + struct.pack("<IBI", sid, 0, 1) + body)])
            )
        return self.normalized(summarize([p for _, p in self.c.command(b"\x03" + step.encode())]))

    def answer(self, step: str) -> Any:
        got = self.step(step)
        return got[:3] if got[0] == "ERR" and got[1] == 1243 else got  # (its message names the server's own id)


@pytest.mark.parametrize("steps", ACROSS_USE, ids=lambda s: " / ".join(s)[:80])
def test_prepared_statements_hold_across_use(sharded_env: ShardedEnv, steps: tuple[str, ...]) -> None:
    """Sharded: prepared in sharding_db, executed after USE extra_db (the oracle: prepared in the oracle database,
    executed after USE of an empty one). Before, USE forgot every prepared statement (ERR 1243)."""
    from tests.integration.test_bytes import login

    env, server = sharded_env, sharded_env.servers[0]
    server.execute("CREATE DATABASE IF NOT EXISTS sht_across_use")
    rows = "INSERT INTO t_order (order_id, user_id, status) VALUES (8801, 1, 'a'), (8802, 2, 'A')"
    with env.connect() as conn, conn.cursor() as cur:
        cur.execute(f"DELETE FROM t_order WHERE {ROWS}")
        cur.execute(rows)
    server.execute(f"DELETE FROM t_order WHERE {ROWS}", ORACLE_DB)
    server.execute(rows, ORACLE_DB)
    proxied = _Steps(login(env.proxy.host, env.proxy.port, "sharding_db"), {"sharding_db": "HOME", "extra_db": "OTHER"})
    direct = _Steps(
        login(server.host, server.port, ORACLE_DB, server.password), {ORACLE_DB: "HOME", "sht_across_use": "OTHER"}
    )
    try:
        for step in steps:
            assert proxied.answer(step) == direct.answer(step), step
    finally:
        proxied.c.close()
        direct.c.close()
        with env.connect() as conn, conn.cursor() as cur:
            cur.execute(f"DELETE FROM t_order WHERE {ROWS}")
        server.execute(f"DELETE FROM t_order WHERE {ROWS}", ORACLE_DB)


def test_a_statement_of_another_database_is_refused_inside_a_transaction(sharded_env: ShardedEnv) -> None:
    """MariaDB would run it in the session's transaction, which lives on the current database's connections: the
    proxy cannot, and says so (1235, naming both databases) rather than run it outside the transaction."""
    from tests.integration.test_bytes import login

    c = _Steps(login(sharded_env.proxy.host, sharded_env.proxy.port, "sharding_db"), {})
    try:
        c.step("P:a:SELECT 1 FROM t_order WHERE 1 = 0")
        for step in ("USE extra_db", "START TRANSACTION"):
            assert c.step(step)[0] == "OK"
        got = c.step("E:a")
        assert got[:2] == ("ERR", 1235) and b"'sharding_db'" in got[3] and b"'extra_db'" in got[3], got
        assert c.step("ROLLBACK")[0] == "OK"
        assert c.step("E:a") == ("ROWS", [b"1"], [])
    finally:
        c.c.close()


@pytest.fixture(scope="module")
def two_pass_through(mariadb: MariaDBServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningProxy]:
    """Two pass-through logical databases on one server, `pta` (physical s3_pa) and `ptb` (s3_pb), each with a
    table `s3t` of one row (1 in pta, 2 in ptb); the oracle databases s3_oa / s3_ob hold the same."""
    from tests.integration.harness import start_proxy, write_conf

    for physical, value in (("s3_pa", 1), ("s3_pb", 2), ("s3_oa", 1), ("s3_ob", 2)):
        mariadb.execute(f"CREATE DATABASE IF NOT EXISTS {physical}")
        mariadb.execute("CREATE OR REPLACE TABLE s3t (x INT)", physical)
        mariadb.execute(f"INSERT INTO s3t VALUES ({value})", physical)
    conf = write_conf(
        tmp_path_factory.mktemp("two-pass-through"),
        {"pta": {"ds_0": (mariadb, "s3_pa")}, "ptb": {"ds_0": (mariadb, "s3_pb")}},
    )
    proxy = start_proxy(Path(conf))
    yield proxy
    proxy.stop()


PASS_THROUGH_ACROSS_USE = (
    ("P:a:SELECT x, DATABASE() FROM s3t", "U:other", "E:a", "SELECT x, DATABASE() FROM s3t", "E:a", "U:home", "E:a"),
    ("P:a:SELECT x + ? FROM s3t", "E:a:10", "U:other", "E:a:20", "E:a:30", "U:home", "E:a:40"),
    (
        "P:a:INSERT INTO s3t VALUES (7)",
        "U:other",
        "E:a",
        "SELECT COUNT(*) FROM s3t",
        "U:home",
        "SELECT COUNT(*) FROM s3t",
        "DELETE FROM s3t WHERE x = 7",
    ),
    ("P:a:SELECT DATABASE()", "U:other", "E:a", "C:a", "E:a"),
)


@pytest.mark.parametrize("steps", PASS_THROUGH_ACROSS_USE, ids=lambda s: " / ".join(s)[:80])
def test_pass_through_prepared_statements_hold_across_use(
    two_pass_through: RunningProxy, mariadb: MariaDBServer, steps: tuple[str, ...]
) -> None:
    from tests.integration.test_bytes import login

    proxied = _Steps(login(two_pass_through.host, two_pass_through.port, "pta"), {"pta": "HOME", "ptb": "OTHER"})
    direct = _Steps(login(mariadb.host, mariadb.port, "s3_oa", mariadb.password), {"s3_oa": "HOME", "s3_ob": "OTHER"})
    try:
        for step in steps:
            assert proxied.answer(step) == direct.answer(step), step
    finally:
        proxied.c.close()
        direct.c.close()


# extra_db: t_single lives on ds_0 only, t_user on both (ds_{user_id % 2}); under LOCK TABLES t_single, a statement
# routed to ds_1 (where nothing is locked) ran there: MariaDB answers 1100 for a table the LOCK TABLES left out
NOT_LOCKED = (
    ("SELECT COUNT(*) FROM t_user WHERE user_id = 1", ("ERR", 1100, "Table 't_user' was not locked with LOCK TABLES")),
    ("SELECT COUNT(*) FROM t_user WHERE user_id = 2", ("ERR", 1100, "Table 't_user' was not locked with LOCK TABLES")),
    (
        "INSERT INTO t_user (user_id, name) VALUES (1, 'x')",
        ("ERR", 1100, "Table 't_user' was not locked with LOCK TABLES"),
    ),
    ("SELECT COUNT(*) >= 0 FROM t_single", (["COUNT(*) >= 0"], [(1,)])),
    ("SELECT 1", (["1"], [(1,)])),
)


@pytest.mark.parametrize(("sql", "expected"), NOT_LOCKED, ids=[s for s, _ in NOT_LOCKED])
def test_a_table_left_out_of_lock_tables_answers_1100(sharded_env: ShardedEnv, sql: str, expected: Any) -> None:
    with sharded_env.connect("extra_db") as conn:
        assert answer(conn, "LOCK TABLES t_single READ") == ([], [])
        assert answer(conn, sql) == expected
        assert answer(conn, "UNLOCK TABLES") == ([], [])
        assert answer(conn, "SELECT COUNT(*) >= 0 FROM t_user WHERE user_id = 1") == (["COUNT(*) >= 0"], [(1,)])
    assert sharded_env.query("SELECT COUNT(*) FROM t_user WHERE name = 'x'", "extra_db")[1] == [(0,)]


# a transaction (or autocommit off) set up before any database is chosen holds after USE, as on MariaDB: USE of
# `ptb`, a pass-through database other than the default one (`pta`), gave the transaction's connection back (its
# INSERT was committed, ROLLBACK took nothing back)
NO_DATABASE_TRANSACTION = (
    (
        "START TRANSACTION",
        "U:other",
        "SELECT @@in_transaction",
        "INSERT INTO s3t VALUES (8)",
        "ROLLBACK",
        "SELECT COUNT(*) FROM s3t WHERE x = 8",
    ),
    (
        "SET autocommit = 0",
        "U:other",
        "SELECT @@autocommit",
        "INSERT INTO s3t VALUES (8)",
        "ROLLBACK",
        "SELECT COUNT(*) FROM s3t WHERE x = 8",
        "SET autocommit = 1",
    ),
    (
        "START TRANSACTION",
        "SAVEPOINT a",
        "U:other",
        "INSERT INTO s3t VALUES (8)",
        "ROLLBACK TO SAVEPOINT a",
        "SELECT COUNT(*) FROM s3t WHERE x = 8",
        "COMMIT",
    ),
    ("START TRANSACTION READ ONLY", "U:other", "INSERT INTO s3t VALUES (8)", "COMMIT"),
    ("START TRANSACTION", "U:home", "INSERT INTO s3t VALUES (8)", "ROLLBACK", "SELECT COUNT(*) FROM s3t WHERE x = 8"),
)


@pytest.mark.parametrize("steps", NO_DATABASE_TRANSACTION, ids=lambda s: " / ".join(s)[:80])
def test_a_transaction_begun_without_a_database_holds_after_use(
    two_pass_through: RunningProxy, mariadb: MariaDBServer, steps: tuple[str, ...]
) -> None:
    from tests.integration.test_bytes import login

    proxied = _Steps(login(two_pass_through.host, two_pass_through.port, None), {"pta": "HOME", "ptb": "OTHER"})
    direct = _Steps(login(mariadb.host, mariadb.port, None, mariadb.password), {"s3_oa": "HOME", "s3_ob": "OTHER"})
    try:
        for step in steps:
            assert proxied.answer(step) == direct.answer(step), step
    finally:
        proxied.c.close()
        direct.c.close()
        for db in ("s3_pa", "s3_pb", "s3_oa", "s3_ob"):
            mariadb.execute("DELETE FROM s3t WHERE x = 8", db)


# the column definitions of a prepared statement the proxy answers itself, at PREPARE and at EXECUTE: equal (a
# driver reads them before it executes); (database, text, columns MariaDB's one server reports at PREPARE: the
# proxy's EXPLAIN over several units has one more, `data_source`)
DESCRIBED = (
    ("sharding_db", b"EXPLAIN SELECT * FROM t_order WHERE user_id = 1 AND order_id = 2", 10),
    ("sharding_db", b"EXPLAIN EXTENDED SELECT * FROM t_order WHERE order_id = 1", 12),
    ("sharding_db", b"EXPLAIN SELECT * FROM t_order", 11),
    ("sharding_db", b"EXPLAIN SELECT * FROM t_order WHERE user_id = ? AND order_id = ?", 10),
    ("sharding_db", b"SELECT DATABASE()", 1),
    ("sharding_db", b"SHOW DATABASES LIKE 'sharding_db'", 1),
    ("sharding_db", b"SHOW SHARDING TABLE RULES", None),
)  # (not SHOW PROCESSLIST: MariaDB describes it only at EXECUTE, test_proxy_answer_definitions)


def _definitions(c: Any, sql: bytes) -> tuple[list[bytes], list[bytes]]:
    """(column definitions at PREPARE, at EXECUTE, with each parameter bound to 1)."""
    c.send(b"\x16" + sql, 0)
    _seq, first = c.read()
    assert first[:1] == b"\x00", first
    statement_id, columns, params = struct.unpack_from("<IHH", first, 1)
    defs = [c.read()[1] for _ in range(columns + (1 if columns else 0) + params + (1 if params else 0))]
    at_prepare = defs[params + (1 if params else 0) :][:columns]
    body = b""
    if params:
        body = b"\x00" * ((params + 7) // 8) + b"\x01" + b"\x08\x00" * params + struct.pack("<q", 1) * params
    packets = [p for _, p in c.command(b"\x17" + struct.pack("<IBI", statement_id, 0, 1) + body)]
    c.send(b"\x19" + struct.pack("<I", statement_id), 0)
    count = packets[0][0]
    return at_prepare, packets[1 : 1 + count]


@pytest.mark.parametrize(("db", "sql", "count"), DESCRIBED, ids=[s.decode() for _, s, _ in DESCRIBED])
def test_prepared_columns_equal_at_prepare_and_execute(
    sharded_env: ShardedEnv, db: str, sql: bytes, count: int | None
) -> None:
    from tests.integration.test_bytes import login

    c = login(sharded_env.proxy.host, sharded_env.proxy.port, db)
    try:
        at_prepare, at_execute = _definitions(c, sql)
    finally:
        c.close()
    assert at_prepare == at_execute
    assert count is None or len(at_prepare) == count


ORACLE_TABLES = "table_schema = DATABASE() AND table_name IN ('t_order', 't_order_item')"
# information_schema read over a sharded database by statements that combine rows: one answer, as one server's
COMBINED = (
    "SELECT COUNT(*) > 0 FROM information_schema.tables",
    f"SELECT COUNT(*) FROM information_schema.columns WHERE {ORACLE_TABLES}",
    f"SELECT COUNT(*), SUM(ordinal_position), MIN(column_name), MAX(column_name) FROM information_schema.columns "
    f"WHERE {ORACLE_TABLES}",
    f"SELECT table_name, COUNT(*) AS n FROM information_schema.columns WHERE {ORACLE_TABLES} GROUP BY table_name",
    f"SELECT DISTINCT data_type FROM information_schema.columns WHERE {ORACLE_TABLES} ORDER BY data_type",
    f"SELECT table_name, column_name FROM information_schema.columns WHERE {ORACLE_TABLES} ORDER BY 1, 2 LIMIT 4",
    f"SELECT column_name FROM information_schema.COLUMNS c WHERE {ORACLE_TABLES} ORDER BY column_name DESC LIMIT 2, 3",
    "SELECT t.table_name, COUNT(c.column_name) FROM information_schema.tables t JOIN information_schema.columns c "
    "ON c.table_schema = t.table_schema AND c.table_name = t.table_name WHERE t.table_schema = DATABASE() "
    "AND t.table_name IN ('t_order', 't_order_item') "
    "GROUP BY t.table_name ORDER BY 1",
    f"SELECT table_name FROM information_schema.tables WHERE {ORACLE_TABLES} AND table_name IN "
    f"(SELECT table_name FROM information_schema.columns WHERE column_name = 'order_item_id')",
    "SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name = DATABASE()",
    f"SELECT COUNT(*) FROM information_schema.statistics WHERE {ORACLE_TABLES} HAVING COUNT(*) > 1",
)


def _described(conn: pymysql.connections.Connection[Any], sql: str) -> Any:
    """Rows and column descriptions (label, type, lengths, scale, nullability)."""
    with conn.cursor() as cur:
        cur.execute(sql)
        return cur.description, list(cur.fetchall())


@pytest.mark.parametrize("sql", COMBINED)
def test_information_schema_of_a_sharded_database_answers_as_one_server(sharded_env: ShardedEnv, sql: str) -> None:
    """Each data source holds part of the logical view: COUNT over information_schema answered one row per data
    source, ORDER BY / LIMIT / DISTINCT / GROUP BY held per data source only."""
    server = sharded_env.servers[0]
    with (
        sharded_env.connect() as p,
        pymysql.connect(
            host=server.host, port=server.port, user=server.user, password=server.password, database=ORACLE_DB
        ) as d,
    ):
        assert _described(p, sql) == _described(d, sql)


def test_combined_information_schema_in_a_read_only_transaction_is_refused(sharded_env: ShardedEnv) -> None:
    """The one-server answer needs TEMPORARY tables, which a READ ONLY transaction forbids: a precise ERR, never
    one row per data source."""
    with sharded_env.connect() as p, p.cursor() as cur:
        cur.execute("START TRANSACTION READ ONLY")
        with pytest.raises(pymysql.err.MySQLError) as info:
            cur.execute("SELECT COUNT(*) > 0 FROM information_schema.tables")
        assert info.value.args[0] == 1792 and "information_schema.TABLES" in info.value.args[1]
        cur.execute("SELECT table_name FROM information_schema.tables WHERE table_name = 't_order'")
        assert cur.fetchall() == (("t_order",),)
        cur.execute("ROLLBACK")


@pytest.mark.parametrize(
    "sql",
    ["SELECT COUNT(*) FROM {db}.t_order WHERE 1 = 0", "SELECT MAX(o.user_id) FROM {db}.t_order o WHERE o.order_id = 0"],
)
def test_qualified_tables_prepared_without_a_database(sharded_env: ShardedEnv, sql: str) -> None:
    """COM_STMT_PREPARE of a statement whose tables are qualified, before any database is chosen: MariaDB prepares
    and executes it (mysqltest --ps-protocol: analyze_format_json); the proxy answered 1046."""
    from tests.integration.test_bytes import login

    server = sharded_env.servers[0]
    answers = []
    for host, port, password, db in (
        (sharded_env.proxy.host, sharded_env.proxy.port, "root", "sharding_db"),
        (server.host, server.port, server.password, ORACLE_DB),
    ):
        c = login(host, port, None, password=password)
        try:
            c.send(b"\x16" + sql.format(db=db).encode(), 0)
            _seq, first = c.read()
            assert first[:1] == b"\x00", first
            statement_id, columns, params = struct.unpack_from("<IHH", first, 1)
            for _ in range(columns + (1 if columns else 0) + params + (1 if params else 0)):
                c.read()
            packets = [p for _, p in c.command(b"\x17" + struct.pack("<IBI", statement_id, 0, 1))]
        finally:
            c.close()
        answers.append((columns, packets[0], packets[-2:]))  # column count, ..., the row and the EOF
    assert answers[0] == answers[1]
