"""The answers the proxy builds itself carry MariaDB's column definitions, field by field, and its rows where they can.

SHOW DATABASES / SCHEMAS, SHOW CREATE DATABASE, SHOW OPEN TABLES, SHOW [FULL] PROCESSLIST,
information_schema.PROCESSLIST, SELECT DATABASE() and the session's other functions are answered by the proxy (a
data source would name its physical database, list its actual tables, its own threads, its own connection's values);
the server-state statements next to them (SHOW VARIABLES, STATUS, WARNINGS, ENGINES, CHARSET, COLLATION, PLUGINS,
GRANTS, SHOW CREATE USER, @@variables, KILL's answer) are kept equal here too. The oracle is one plain MariaDB holding
the same databases: `pad_db` (sharded over the two ``mariadb_shards`` servers in the proxy: t_s two actual tables on
each, t_b broadcast, t_o a single table) and `pad_pt` (passed through to the second server's `pad_pt_ds`). Each
statement runs in a session on either database and in one that chose none, text (COM_QUERY) and prepared
(COM_STMT_PREPARE's definitions, then EXECUTE's) over raw sockets in a utf8mb4 and a latin1 session, and through
mysql-connector's prepared cursor: every ColumnDefinition41 field is compared (proxy.session.definitions), and the
rows where one server's would be the same (not the processlist's ids and times, nor the databases and grants only the
oracle has).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mysql.connector
import pytest

from protocol.packets import ComQuery
from proxy.sandbox import MariaDBServer
from tests.integration.harness import RunningProxy, start_proxy, write_conf
from tests.integration.test_malformed import RawClient
from tests.integration.test_sharded_definitions import Answer, _prepared, _text

pytestmark = pytest.mark.integration

SHARDED, PASS_THROUGH = "pad_db", "pad_pt"
RULES = """\
- !SHARDING
  tables:
    t_s:
      actualDataNodes: ds_${0..1}.t_s_${0..1}
      databaseStrategy: {standard: {shardingColumn: k, shardingAlgorithmName: by_k}}
      tableStrategy: {standard: {shardingColumn: id, shardingAlgorithmName: by_id}}
  shardingAlgorithms:
    by_k: {type: INLINE, props: {algorithm-expression: 'ds_${k % 2}'}}
    by_id: {type: INLINE, props: {algorithm-expression: 't_s_${id % 2}'}}
- !BROADCAST
  tables: [t_b]
- !SINGLE
  tables: [ds_0.t_o]
  defaultDataSource: ds_0
"""
TABLES = (
    "CREATE TABLE t_s (id INT NOT NULL, k INT NOT NULL, v VARCHAR(20), PRIMARY KEY (id, k))",
    "CREATE TABLE t_b (code CHAR(3) NOT NULL PRIMARY KEY)",
)
SINGLE = "CREATE TABLE t_o (id INT NOT NULL PRIMARY KEY)"
ROWS = ("INSERT INTO t_s VALUES (1, 1, 'a'), (2, 1, 'b'), (3, 2, 'c'), (4, 2, 'd')", "INSERT INTO t_b VALUES ('x')")
PT_TABLE = "CREATE TABLE t_p (id INT PRIMARY KEY)"


@pytest.fixture(scope="module")
def pad(mariadb_shards: list[MariaDBServer], mariadb: MariaDBServer,
        tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RunningProxy, MariaDBServer, list[MariaDBServer]]]:
    for i, server in enumerate(mariadb_shards):
        server.execute(f"CREATE DATABASE IF NOT EXISTS pad_ds_{i}")
    mariadb_shards[1].execute("CREATE DATABASE IF NOT EXISTS pad_pt_ds")
    mariadb_shards[0].execute(SINGLE, "pad_ds_0")
    mariadb_shards[1].execute(PT_TABLE, "pad_pt_ds")
    conf = write_conf(
        Path(tmp_path_factory.mktemp("pad-conf")),
        {SHARDED: {f"ds_{i}": (s, f"pad_ds_{i}") for i, s in enumerate(mariadb_shards)},
         PASS_THROUGH: {"ds_0": (mariadb_shards[1], "pad_pt_ds")}},
        rules_yaml={SHARDED: RULES},
    )
    running = start_proxy(conf)
    for name in (SHARDED, PASS_THROUGH):
        mariadb.execute(f"CREATE DATABASE IF NOT EXISTS {name}")
    mariadb.execute(PT_TABLE, PASS_THROUGH)
    with running.connect(SHARDED) as proxied, mariadb.connect(SHARDED) as plain:
        for conn in (proxied, plain):
            with conn.cursor() as cur:
                for sql in (*TABLES, *((SINGLE,) if conn is plain else ()), *ROWS):
                    cur.execute(sql)
    yield running, mariadb, mariadb_shards
    running.stop()
    for name in (SHARDED, PASS_THROUGH):
        mariadb.execute(f"DROP DATABASE {name}")
    mariadb_shards[1].execute("DROP DATABASE pad_pt_ds")
    for i, server in enumerate(mariadb_shards):
        server.execute(f"DROP DATABASE pad_ds_{i}")


Env = tuple[RunningProxy, MariaDBServer, list[MariaDBServer]]


def _client(pad: Env, *, oracle: bool, database: str | None, charset: str) -> RawClient:
    proxy, server, _shards = pad
    c = RawClient(server.host, server.port) if oracle else RawClient(proxy.host, proxy.port)
    answer = c.login("root", server.password if oracle else "root", database=database)
    assert answer[:1] == b"\x00", answer
    if charset != "utf8mb4":
        assert c.command(ComQuery(f"SET NAMES {charset}".encode()).encode())[0][1][:1] == b"\x00"
    return c


DEFS, ALL = "definitions", "rows too"

# (id, statement, what is compared: the column definitions (and an ERR) only, or the rows too); one line per case,
# each run as text and prepared, on the proxy and on the plain server, in a session on each database and in none
CASES: list[tuple[str, str, str]] = [
    ("show-databases", "SHOW DATABASES", DEFS),  # (the oracle has databases of its own)
    ("show-schemas", "SHOW SCHEMAS", DEFS),
    ("show-databases-like", "SHOW DATABASES LIKE 'pad%'", ALL),
    ("show-schemas-like", "SHOW SCHEMAS LIKE 'pad\\_d%'", ALL),
    ("show-create-database", "SHOW CREATE DATABASE pad_db", ALL),
    ("show-create-schema-quoted", "SHOW CREATE SCHEMA `pad_pt`", ALL),
    ("show-create-database-ine", "SHOW CREATE DATABASE IF NOT EXISTS pad_db", ALL),
    ("show-create-database-missing", "SHOW CREATE DATABASE pad_nope", ALL),
    ("show-processlist", "SHOW PROCESSLIST", DEFS),  # (ids, hosts, times: the proxy's sessions)
    ("show-full-processlist", "SHOW FULL PROCESSLIST", DEFS),
    ("is-processlist", "SELECT * FROM information_schema.PROCESSLIST", DEFS),
    # (Info: its first 100 characters, docs/limits.md)
    ("is-processlist-own", "SELECT USER, SUBSTRING_INDEX(HOST, ':', 1), HOST LIKE '%:_%', DB, COMMAND, STATE, "
                           "LEFT(INFO, 100) FROM information_schema.PROCESSLIST WHERE ID = CONNECTION_ID()", ALL),
    ("is-processlist-expressions", "SELECT ID + 1, TIME / 2, LOWER(COMMAND) AS c, COUNT(*) "
                                   "FROM information_schema.processlist WHERE ID = CONNECTION_ID() GROUP BY ID", DEFS),
    ("show-tables", "SHOW TABLES", ALL),
    ("show-full-tables-like", "SHOW FULL TABLES LIKE 't%'", ALL),
    ("show-open-tables", "SHOW OPEN TABLES", DEFS),  # (rows: test_open_tables_are_the_logical_ones)
    ("show-open-tables-from", "SHOW OPEN TABLES FROM pad_db", DEFS),
    ("show-open-tables-in-like", "SHOW OPEN TABLES IN pad_db LIKE 't%'", DEFS),
    ("show-open-tables-where", "SHOW OPEN TABLES WHERE `Database` = 'pad_db' AND In_use = 0", DEFS),
    ("show-open-tables-system", "SHOW OPEN TABLES FROM mysql LIKE 'no%such'", ALL),
    ("show-open-tables-missing", "SHOW OPEN TABLES FROM pad_nope", ALL),
    ("select-database", "SELECT DATABASE()", ALL),
    ("select-schema-spaced", "select schema ( )", ALL),
    ("select-user", "SELECT USER()", ALL),
    ("select-session-system-user", "SELECT SESSION_USER(), SYSTEM_USER()", ALL),
    ("select-current-user", "SELECT CURRENT_USER()", DEFS),  # (the account each server matched)
    ("select-connection-id", "SELECT CONNECTION_ID()", DEFS),
    ("select-last-insert-id", "SELECT LAST_INSERT_ID()", ALL),
    ("select-row-count", "SELECT ROW_COUNT()", DEFS),  # (a pass-through connection's: what the pool ran last)
    ("select-found-rows", "SELECT FOUND_ROWS()", ALL),
    ("select-functions", "SELECT DATABASE(), USER(), CONNECTION_ID() > 0, LAST_INSERT_ID()", ALL),
    ("select-function-expressions", "SELECT CONCAT(USER(), '/', DATABASE()) AS who, CONNECTION_ID() + 1 AS n", DEFS),
    ("select-functions-with-rows", "SELECT id, USER(), DATABASE() AS d FROM t_s ORDER BY id", ALL),
    ("select-functions-grouped", "SELECT k, COUNT(*), LAST_INSERT_ID(), DATABASE() FROM t_s GROUP BY k", ALL),
    ("select-functions-aggregated", "SELECT COUNT(*) + CONNECTION_ID() > 0, MAX(id), USER() FROM t_s", ALL),
    ("show-variables-like", "SHOW VARIABLES LIKE 'version_comment'", DEFS),
    ("show-session-status", "SHOW SESSION STATUS LIKE 'Threads_connected'", DEFS),
    ("show-global-status-where", "SHOW GLOBAL STATUS WHERE Variable_name = 'Uptime'", DEFS),
    ("show-warnings", "SHOW WARNINGS", ALL),
    ("show-errors", "SHOW ERRORS", ALL),
    ("show-count-warnings", "SHOW COUNT(*) WARNINGS", ALL),
    ("show-count-errors", "SHOW COUNT(*) ERRORS", ALL),
    ("show-engines", "SHOW ENGINES", DEFS),
    ("show-storage-engines", "SHOW STORAGE ENGINES", DEFS),
    ("show-charset", "SHOW CHARACTER SET LIKE 'utf8%'", ALL),
    ("show-collation", "SHOW COLLATION WHERE Collation = 'latin1_bin'", ALL),
    ("show-plugins", "SHOW PLUGINS", DEFS),
    ("show-privileges", "SHOW PRIVILEGES", ALL),
    ("show-grants", "SHOW GRANTS", DEFS),
    ("show-grants-current", "SHOW GRANTS FOR CURRENT_USER()", DEFS),
    ("show-create-user", "SHOW CREATE USER root", DEFS),
    ("select-variables", "SELECT @@version_comment, @@session.autocommit, @@sql_mode", DEFS),
    ("kill-unknown", "KILL 987654", ALL),
    ("kill-query-unknown", "KILL QUERY 987654", ALL),
]

WHERE = ["sharded", "pass-through", "no-database"]
_DATABASE = {"sharded": SHARDED, "pass-through": PASS_THROUGH, "no-database": None}
CHARSETS = ["utf8mb4", "latin1"]


# statements naming another database than the session's: (id, statement, compared), in a session on the sharded
# database and in one without a database (a pass-through session's server does not know the other databases, nor
# does the kernel of a sharded one route a table of another database: docs/limits.md)
NAMING: list[tuple[str, str, str]] = [
    ("show-tables-from", "SHOW TABLES FROM pad_db", ALL),
    ("show-full-tables-in", "SHOW FULL TABLES IN `pad_db` LIKE 't\\_%'", ALL),
    ("show-tables-from-pass-through", "SHOW TABLES FROM pad_pt", ALL),
    ("show-table-status-from", "SHOW TABLE STATUS FROM pad_db WHERE Name = 't_s'", DEFS),  # (sizes, times)
    ("show-columns-qualified", "SHOW COLUMNS FROM pad_db.t_s LIKE 'i%'", ALL),
    ("show-full-fields-in-in", "SHOW FULL FIELDS IN t_s IN pad_db", ALL),
    ("show-index-from-from", "SHOW INDEX FROM t_b FROM pad_db", ALL),
    ("show-create-table-qualified", "SHOW CREATE TABLE pad_db.t_b", ALL),
]
NAMING_NO_DATABASE: list[tuple[str, str, str]] = [
    ("show-create-table-pass-through", "SHOW CREATE TABLE pad_pt.t_p", ALL),
    ("show-columns-pass-through", "SHOW COLUMNS FROM t_p FROM pad_pt", ALL),
]


def _comparable(answer: Answer, compared: str) -> Answer:
    if isinstance(answer[0], int):
        return answer  # an ERR
    columns, rows = answer
    return columns, sorted(rows, key=repr) if compared == ALL else []


@pytest.mark.parametrize("charset", CHARSETS)
@pytest.mark.parametrize("where", WHERE)
@pytest.mark.parametrize(("sql", "compared"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_text_answer_equals_mariadb(pad: Env, sql: str, compared: str, where: str, charset: str) -> None:
    database = _DATABASE[where]
    proxy = _client(pad, oracle=False, database=database, charset=charset)
    oracle = _client(pad, oracle=True, database=database, charset=charset)
    try:
        got, want = _text(proxy, sql), _text(oracle, sql)
    finally:
        proxy.close()
        oracle.close()
    assert _comparable(got, compared) == _comparable(want, compared)


@pytest.mark.parametrize("charset", CHARSETS)
@pytest.mark.parametrize("where", WHERE)
@pytest.mark.parametrize(("sql", "compared"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_prepared_answer_equals_mariadb(pad: Env, sql: str, compared: str, where: str, charset: str) -> None:
    database = _DATABASE[where]
    proxy = _client(pad, oracle=False, database=database, charset=charset)
    oracle = _client(pad, oracle=True, database=database, charset=charset)
    try:
        (got, got_prepared), (want, want_prepared) = _prepared(proxy, sql), _prepared(oracle, sql)
    finally:
        proxy.close()
        oracle.close()
    assert got_prepared == want_prepared
    assert _comparable(got, compared) == _comparable(want, compared)


@pytest.mark.parametrize("where", WHERE)
@pytest.mark.parametrize(("sql", "compared"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_connector_prepared_cursor_equals_mariadb(pad: Env, sql: str, compared: str, where: str) -> None:
    """What a client library's prepared cursor sees (mysql-connector: its description, and the rows)."""
    proxy, server, _shards = pad
    seen: list[Any] = []
    for host, port, password in ((proxy.host, proxy.port, "root"), (server.host, server.port, server.password)):
        conn = mysql.connector.connect(host=host, port=port, user="root", password=password,
                                       database=_DATABASE[where], use_pure=True, ssl_disabled=True, autocommit=True)
        try:
            cur = conn.cursor(prepared=True)
            try:
                cur.execute(sql)
                rows = cur.fetchall() if cur.description else []
            except mysql.connector.Error as exc:
                seen.append((exc.errno, exc.sqlstate, exc.msg))
                continue
            seen.append((cur.description, sorted(rows, key=repr) if compared == ALL else []))
        finally:
            conn.close()
    assert seen[0] == seen[1]


@pytest.mark.parametrize(("sql", "compared", "where"), [
    *((sql, compared, where) for _id, sql, compared in NAMING for where in ("sharded", "no-database")),
    *((sql, compared, "no-database") for _id, sql, compared in NAMING_NO_DATABASE),
], ids=[*(f"{i}-{where}" for i, _s, _c in NAMING for where in ("sharded", "no-database")),
        *(f"{i}-no-database" for i, _s, _c in NAMING_NO_DATABASE)])
def test_statements_naming_a_database_equal_mariadb(pad: Env, sql: str, compared: str, where: str) -> None:
    """Without a database, a SHOW that names one runs there, as MariaDB runs it (it answered 1046); from a sharded
    database's session, SHOW TABLES FROM a pass-through database lists that one's tables."""
    database = _DATABASE[where]
    proxy = _client(pad, oracle=False, database=database, charset="utf8mb4")
    oracle = _client(pad, oracle=True, database=database, charset="utf8mb4")
    try:
        got = (_text(proxy, sql), *_prepared(proxy, sql))
        want = (_text(oracle, sql), *_prepared(oracle, sql))
    finally:
        proxy.close()
        oracle.close()
    assert (_comparable(got[0], compared), _comparable(got[1], compared), got[2]) == (
        _comparable(want[0], compared), _comparable(want[1], compared), want[2])


# SHOW OPEN TABLES after the servers closed every table and one statement opened t_s (on the proxy: the actual tables
# its rows are read from); (id, statement before, statement): each as text and prepared, rows and definitions
OPEN_TABLES: list[tuple[str, str | None, str]] = [
    ("from", None, "SHOW OPEN TABLES FROM pad_db"),
    ("in-like", None, "SHOW OPEN TABLES IN pad_db LIKE 't\\_s'"),
    ("like-none", None, "SHOW OPEN TABLES FROM pad_db LIKE 't_b'"),  # never opened: not listed
    ("where-database", None, "SHOW OPEN TABLES WHERE `Database` IN ('pad_db', 'pad_pt')"),
    ("where-in-use", "LOCK TABLES t_s READ", "SHOW OPEN TABLES WHERE `Database` = 'pad_db' AND In_use > 0"),
    ("locked", "LOCK TABLES t_s READ, t_b WRITE", "SHOW OPEN TABLES FROM pad_db"),
]


@pytest.mark.parametrize("where", WHERE)
@pytest.mark.parametrize(("before", "sql"), [c[1:] for c in OPEN_TABLES], ids=[c[0] for c in OPEN_TABLES])
def test_open_tables_are_the_logical_ones(pad: Env, before: str | None, sql: str, where: str) -> None:
    """SHOW OPEN TABLES lists a logical table once, under its logical database, when one of its actual tables is open
    (`In_use` as one server counts a lock); a table no statement opened is not listed, as on MariaDB."""
    _proxy, server, shards = pad
    for s in (server, *shards):
        s.execute("FLUSH TABLES")
    answers = []
    for oracle in (False, True):
        opener = _client(pad, oracle=oracle, database=SHARDED, charset="utf8mb4")
        asking = _client(pad, oracle=oracle, database=_DATABASE[where], charset="utf8mb4")
        try:
            assert not isinstance(_text(opener, "SELECT COUNT(*) FROM t_s WHERE id = 1 AND k = 1")[0], int)
            if before is not None:
                assert opener.command(ComQuery(before.encode()).encode())[0][1][:1] == b"\x00"
            text = _text(asking, sql)
            executed, prepared = _prepared(asking, sql)
            answers.append((_comparable(text, ALL), _comparable(executed, ALL), prepared))
            if before is not None:
                opener.command(ComQuery(b"UNLOCK TABLES").encode())
        finally:
            opener.close()
            asking.close()
    assert answers[0] == answers[1]


# a session's KILL of itself: (id, how it is sent: a statement with {me} for its own id, or COM_PROCESS_KILL)
SELF_KILLS: list[tuple[str, str | None]] = [
    ("kill-query", "KILL QUERY {me}"),  # the KILL is the statement it interrupts: ERR 1317, the session goes on
    ("kill-query-soft", "KILL SOFT QUERY {me}"),
    ("kill-connection", "KILL CONNECTION {me}"),  # ERR 1927, the connection closed
    ("kill", "KILL {me}"),
    ("kill-hard-parenthesised", "KILL HARD (  {me} )"),
    ("com-process-kill", None),
]


@pytest.mark.parametrize("where", WHERE)
@pytest.mark.parametrize("sent", [c[1] for c in SELF_KILLS], ids=[c[0] for c in SELF_KILLS])
def test_a_session_killing_itself_gets_mariadb_answer(pad: Env, sent: str | None, where: str) -> None:
    """ERR 1317 for KILL QUERY of itself (the session goes on), ERR 1927 `Connection was killed` for KILL [CONNECTION]
    and COM_PROCESS_KILL of itself (the connection closes), as MariaDB answers."""
    answers = []
    for oracle in (False, True):
        c = _client(pad, oracle=oracle, database=_DATABASE[where], charset="utf8mb4")
        me = c.greeting.connection_id
        try:
            if sent is None:
                c.send(b"\x0c" + me.to_bytes(4, "little"))
                first = c.read()[1]
            else:
                first = c.command(ComQuery(sent.format(me=me).encode()).encode())[0][1]
            if "QUERY" in (sent or ""):
                answers.append((first, _text(c, "SELECT 1")))  # the session goes on
            else:
                answers.append((first, c.closed(2)))
        finally:
            c.close()
    assert answers[0] == answers[1]


# what the proxy answers from its own state with the server's definitions, while every pooled connection is taken
WITH_POOLS_TAKEN = [
    "SHOW PROCESSLIST",
    "SHOW FULL PROCESSLIST",
    "SHOW DATABASES",
    "SELECT DATABASE()",
    "SHOW CREATE DATABASE pad_db",
    "SHOW OPEN TABLES FROM pad_db",
]


@pytest.mark.parametrize("sql", WITH_POOLS_TAKEN)
def test_answered_while_every_pooled_connection_is_taken(
    pad: Env, tmp_path: Path, sql: str
) -> None:
    """The definitions are read over the data sources' admin connections: SHOW PROCESSLIST answers when a
    transaction holds each pool's only connection (the tool to see who holds them), as it did before it carried the
    server's definitions."""
    _proxy, _server, shards = pad
    conf = write_conf(tmp_path, {SHARDED: {f"ds_{i}": (s, f"pad_ds_{i}") for i, s in enumerate(shards)}},
                      rules_yaml={SHARDED: RULES}, max_pool_size=1,
                      data_source_props={"connectionTimeoutMilliseconds": 20000})
    small = start_proxy(conf)
    try:
        holder = small.connect(SHARDED)
        with holder.cursor() as cur:
            cur.execute("BEGIN")
            cur.execute("SELECT COUNT(*) FROM t_s")  # both data sources' only connection, held by the transaction
        asking = small.connect(SHARDED, read_timeout=10)
        with asking.cursor() as cur:
            cur.execute(sql)
            assert cur.fetchall() is not None
            assert cur.description
        holder.rollback()
        holder.close()
        asking.close()
    finally:
        small.stop()


def test_the_admin_connection_keeps_its_character_sets(pad: Env) -> None:
    """A latin1 session's definitions are read with SET NAMES latin1 on the admin connection, for that statement only:
    the proxy's own reads there (metadata, KILL QUERY) go on in utf8mb4."""
    proxy, _server, _shards = pad
    c = _client(pad, oracle=False, database=SHARDED, charset="latin1")
    try:
        columns = _text(c, "SHOW DATABASES LIKE 'pad\\_admin\\_check%'")[0]
    finally:
        c.close()
    assert not isinstance(columns, int) and columns[0]["charset"] == 8  # latin1_swedish_ci, as MariaDB's
    source = proxy.server.database(SHARDED).sources["ds_0"]
    read = source.admin_execute("SELECT @@character_set_client, @@character_set_results, @@collation_connection")
    assert asyncio.run_coroutine_threadsafe(read, proxy._loop).result(10) == [
        (b"utf8mb4", b"utf8mb4", b"utf8mb4_general_ci")]
