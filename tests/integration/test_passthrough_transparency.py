"""Pass-through is transparent: each statement sent to a plain MariaDB database and through the proxy to a
pass-through logical database gets the same answer — rows, column definitions, OK packet fields, errors —
with the logical database's name where MariaDB prints its own (issue 34 item 7).

The logical database is the session's `passthrough_proxy` `demo`, whose physical database `demo_ds` has another
name: the oracle is `ptt_oracle` on the same server, and its answers are compared with `ptt_oracle` read as
`demo`. Tables are prefixed `ptt_`.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterator
from typing import Any

import pymysql
import pytest

from proxy.sandbox import MariaDBServer
from tests.integration.harness import RunningProxy
from tests.integration.sharding_fixtures import ShardedEnv

pytestmark = pytest.mark.integration

ORACLE = "ptt_oracle"
LOGICAL = "demo"
PHYSICAL = "demo_ds"

PROCEDURES = (
    # a cursor of its own open: its result sets carry CURSOR_EXISTS, and more follow
    "CREATE PROCEDURE ptt_cursor() BEGIN DECLARE x INT; DECLARE c CURSOR FOR SELECT v FROM ptt_one ORDER BY id; "
    "INSERT INTO ptt_one VALUES ((SELECT COALESCE(MAX(id), 0) + 1 FROM ptt_one o), 7); OPEN c; FETCH c INTO x; "
    "CLOSE c; SELECT x; SELECT 2 AS two, 'b' AS b; END",
    "CREATE PROCEDURE ptt_sets() BEGIN SELECT 1 AS a; SELECT id, v FROM ptt_one ORDER BY id; END",
    "CREATE PROCEDURE ptt_write() BEGIN DECLARE x INT; DECLARE c CURSOR FOR SELECT 1; OPEN c; FETCH c INTO x; "
    "CLOSE c; UPDATE ptt_one SET v = v + 1; END",
)
SETUP = (
    "DROP PROCEDURE IF EXISTS ptt_cursor",
    "DROP PROCEDURE IF EXISTS ptt_sets",
    "DROP PROCEDURE IF EXISTS ptt_write",
    *PROCEDURES,
    "DROP TABLE IF EXISTS ptt_one, ptt_two, ptt_sub",
    "CREATE TABLE ptt_one (id INT PRIMARY KEY, v INT)",
    "CREATE TABLE ptt_two (id INT PRIMARY KEY, v INT, w VARCHAR(10))",
    "CREATE TABLE ptt_sub (id INT, p INT) PARTITION BY RANGE (id) SUBPARTITION BY HASH (p) SUBPARTITIONS 2 "
    "(PARTITION p0 VALUES LESS THAN (10), PARTITION p1 VALUES LESS THAN MAXVALUE)",
)


def _normalized(value: Any) -> Any:
    """An oracle answer as the logical database would print it."""
    if isinstance(value, str):
        return value.replace(ORACLE, LOGICAL)
    if isinstance(value, bytes):
        return value.replace(ORACLE.encode(), LOGICAL.encode())
    if isinstance(value, (tuple, list)):
        return type(value)(_normalized(v) for v in value)
    return value


def answer(conn: pymysql.connections.Connection[Any], sql: str) -> list[Any]:
    """Every result of `sql` (each result set or OK), or its error: what the client can read of it."""
    out: list[Any] = []
    with conn.cursor() as cur:
        try:
            cur.execute(sql)
        except pymysql.err.MySQLError as exc:
            return [("error", *exc.args)]
        while True:
            r = cur._result
            assert r is not None
            fields = [
                (
                    f.name,
                    f.org_name,
                    f.table_name,
                    f.org_table,
                    f.db,
                    f.type_code,
                    f.length,
                    f.charsetnr,
                    f.flags,
                    f.scale,
                )
                for f in (getattr(r, "fields", None) or ())
            ]
            out.append((fields, r.rows, r.affected_rows, r.insert_id, r.server_status, r.warning_count, r.message))
            if not cur.nextset():
                break
    return out


@pytest.fixture(scope="module")
def pair(
    mariadb: MariaDBServer, passthrough_proxy: RunningProxy
) -> Iterator[tuple[pymysql.connections.Connection[Any], pymysql.connections.Connection[Any]]]:
    """(oracle connection, proxy connection), with the same tables on both sides."""
    mariadb.execute(f"CREATE DATABASE IF NOT EXISTS {ORACLE}")
    oracle = mariadb.connect(ORACLE, autocommit=True)
    proxied = passthrough_proxy.connect(LOGICAL)
    for conn in (oracle, proxied):
        with conn.cursor() as cur:
            for sql in SETUP:
                cur.execute(sql)
    yield oracle, proxied
    for conn in (oracle, proxied):
        with conn.cursor() as cur:
            cur.execute("DROP TABLE IF EXISTS ptt_one, ptt_two, ptt_sub")
            for name in ("ptt_cursor", "ptt_sets", "ptt_write"):
                cur.execute(f"DROP PROCEDURE IF EXISTS {name}")
        conn.close()


# --- information_schema: exactly MariaDB's rows ---------------------------------------------------------

INFORMATION_SCHEMA = [
    "SELECT table_name FROM information_schema.columns WHERE table_name = 'ptt_two' AND table_schema = DATABASE()",
    "SELECT column_name FROM information_schema.columns WHERE table_schema = DATABASE() AND table_name LIKE 'ptt%' "
    "ORDER BY table_name, ordinal_position",
    "SELECT partition_name, subpartition_name FROM information_schema.partitions WHERE table_name = 'ptt_sub' "
    "AND table_schema = DATABASE() ORDER BY 1, 2",
    "SELECT table_schema, Table_Name, table_type FROM information_schema.tables WHERE table_schema = DATABASE() "
    "AND table_name LIKE 'ptt%' ORDER BY 2",
    "SELECT c.table_name AS t, COUNT(*) FROM information_schema.COLUMNS c WHERE c.table_schema = DATABASE() "
    "AND c.table_name LIKE 'ptt%' GROUP BY 1 ORDER BY 1",
    "SELECT variable_name FROM information_schema.session_status WHERE variable_name IN ('Com_select', 'Com_insert') "
    "ORDER BY 1",
]


@pytest.mark.parametrize("sql", INFORMATION_SCHEMA)
def test_information_schema(pair: tuple[Any, Any], sql: str) -> None:
    oracle, proxied = pair
    assert answer(proxied, sql) == _normalized(answer(oracle, sql))


SHARDED_INFORMATION_SCHEMA = [
    # t_order and t_order_item share column names: distinct rows, never one
    "SELECT column_name FROM information_schema.columns WHERE table_schema = DATABASE() "
    "AND table_name IN ('t_order', 't_order_item') ORDER BY table_name, ordinal_position",
    "SELECT table_name, column_name, ordinal_position FROM information_schema.columns "
    "WHERE table_schema = DATABASE() AND table_name IN ('t_order', 't_order_item') ORDER BY 1, 3",
    "SELECT index_name, column_name FROM information_schema.statistics WHERE table_schema = DATABASE() "
    "AND table_name IN ('t_order', 't_order_item') ORDER BY table_name, 1, 2",
    # a server-wide table: one data source answers, as one server would
    "SELECT variable_name FROM information_schema.session_status WHERE variable_name IN ('Com_select', 'Com_insert') "
    "ORDER BY 1",
]


@pytest.mark.parametrize("sql", SHARDED_INFORMATION_SCHEMA)
def test_sharded_information_schema(sharded_env: ShardedEnv, sql: str) -> None:
    oracle = sharded_env.servers[0].connect(sharded_env.oracle_db, autocommit=True)
    try:
        with sharded_env.proxy.connect("sharding_db") as proxied, proxied.cursor() as cur:
            cur.execute(sql)
            got = cur.fetchall()
        with oracle.cursor() as cur:
            cur.execute(sql)
            assert got == cur.fetchall()
    finally:
        oracle.close()


# --- multi-result answers of CALL, text and prepared -----------------------------------------------------

COM_QUERY, COM_STMT_PREPARE, COM_STMT_EXECUTE, COM_STMT_CLOSE = 0x03, 0x16, 0x17, 0x19


def _lenenc(data: bytes, pos: int) -> tuple[int, int]:
    first = data[pos]
    if first < 0xFB:
        return first, pos + 1
    size = {0xFC: 2, 0xFD: 3, 0xFE: 8}[first]
    return int.from_bytes(data[pos + 1 : pos + 1 + size], "little"), pos + 1 + size


def _packets(conn: pymysql.connections.Connection[Any]) -> list[Any]:
    """The packets of one answer (result sets chained by MORE_RESULTS_EXISTS), read as a client reads them."""
    out: list[Any] = []
    while True:
        try:
            first = conn._read_packet()._data
        except pymysql.err.MySQLError as exc:
            return [*out, ("error", *exc.args)]
        out.append(first)
        if first[0] == 0x00:
            _affected, pos = _lenenc(first, 1)
            _insert_id, pos = _lenenc(first, pos)
            status = struct.unpack_from("<H", first, pos)[0]
        else:
            count, _ = _lenenc(first, 0)
            out += [conn._read_packet()._data for _ in range(count + 1)]  # definitions, EOF
            while True:
                try:
                    packet = conn._read_packet()._data
                except pymysql.err.MySQLError as exc:
                    return [*out, ("error", *exc.args)]
                out.append(packet)
                if packet[0] == 0xFE and len(packet) < 9:
                    status = struct.unpack_from("<H", packet, 3)[0]
                    break
        if not status & 0x0008:  # MORE_RESULTS_EXISTS
            return out


def _blank_schema(packets: Any) -> Any:
    """Packets with the schema of each column definition left empty (what names the database is checked apart)."""
    if isinstance(packets, list):
        return [_blank_schema(p) for p in packets]
    if isinstance(packets, bytes) and packets.startswith(b"\x03def"):
        size, pos = _lenenc(packets, 4)
        return packets[:4] + b"\x00" + packets[pos + size :]
    return packets


def raw_text(conn: pymysql.connections.Connection[Any], sql: str) -> list[Any]:
    conn._execute_command(COM_QUERY, sql)
    return _packets(conn)


def raw_prepared(conn: pymysql.connections.Connection[Any], sql: str) -> list[Any]:
    """COM_STMT_PREPARE (its answer but the statement id) and COM_STMT_EXECUTE's answer."""
    conn._execute_command(COM_STMT_PREPARE, sql)
    ok = conn._read_packet()._data
    stmt_id, columns, params = struct.unpack_from("<IHH", ok, 1)
    prepared = [ok[5:]] + [conn._read_packet()._data for n in (params, columns) if n for _ in range(n + 1)]
    conn._execute_command(COM_STMT_EXECUTE, struct.pack("<IBI", stmt_id, 0, 1))
    executed = _packets(conn)
    conn._execute_command(COM_STMT_CLOSE, struct.pack("<I", stmt_id))
    return [prepared, executed]


CALLS = [
    pytest.param(raw_text, "CALL ptt_cursor()", id="text-cursor"),
    pytest.param(raw_text, "CALL ptt_sets()", id="text-two-sets"),
    pytest.param(raw_text, "CALL ptt_write()", id="text-cursor-then-write"),
    pytest.param(raw_prepared, "CALL ptt_cursor()", id="prepared-cursor"),
    pytest.param(raw_prepared, "CALL ptt_sets()", id="prepared-two-sets"),
    pytest.param(raw_prepared, "CALL ptt_write()", id="prepared-cursor-then-write"),
]


@pytest.mark.parametrize(("send", "sql"), CALLS)
def test_call_relays_every_result(pair: tuple[Any, Any], send: Any, sql: str) -> None:
    oracle, proxied = pair
    for conn in (oracle, proxied):
        with conn.cursor() as cur:
            cur.execute("DELETE FROM ptt_one")
            cur.execute("INSERT INTO ptt_one VALUES (1, 10), (2, 20)")
    assert _blank_schema(send(proxied, sql)) == _blank_schema(send(oracle, sql))
    check = "SELECT id, v FROM ptt_one ORDER BY id"
    assert proxied.query(check) == oracle.query(check)
    assert proxied._result.rows == oracle._result.rows  # the procedure ran once, as on MariaDB
    assert answer(proxied, "SELECT 1") == answer(oracle, "SELECT 1")  # the connection is in step


@pytest.mark.parametrize(("send", "sql"), CALLS)
def test_sharded_call_relays_every_result(sharded_env: ShardedEnv, send: Any, sql: str) -> None:
    """A CALL routed to one data source of a sharded database (the procedure made on every data source)."""
    servers = dict(zip(("ds_0", "ds_1"), sharded_env.servers, strict=True))
    made = [(servers[ds], physical) for ds, physical in sharded_env.physical["sharding_db"].items()]
    made.append((sharded_env.servers[0], sharded_env.oracle_db))
    for server, database in made:
        with server.connect(database, autocommit=True) as conn, conn.cursor() as cur:
            for ddl in (
                "DROP TABLE IF EXISTS ptt_one",
                "CREATE TABLE ptt_one (id INT PRIMARY KEY, v INT)",
                "INSERT INTO ptt_one VALUES (1, 10), (2, 20)",
                "DROP PROCEDURE IF EXISTS ptt_cursor",
                "DROP PROCEDURE IF EXISTS ptt_sets",
                "DROP PROCEDURE IF EXISTS ptt_write",
                *PROCEDURES,
            ):
                cur.execute(ddl)
    try:
        with (
            sharded_env.servers[0].connect(sharded_env.oracle_db, autocommit=True) as oracle,
            sharded_env.proxy.connect("sharding_db") as proxied,
        ):
            # the column definitions name the logical database, as one server names its own (the data node's
            # physical database showed)
            assert _with_schema(send(proxied, sql), "sharding_db") == _with_schema(
                send(oracle, sql), sharded_env.oracle_db
            )
            assert answer(proxied, "SELECT 1") == answer(oracle, "SELECT 1")
    finally:
        for server, database in made:
            with server.connect(database, autocommit=True) as conn, conn.cursor() as cur:
                for ddl in (
                    "DROP TABLE IF EXISTS ptt_one",
                    "DROP PROCEDURE IF EXISTS ptt_cursor",
                    "DROP PROCEDURE IF EXISTS ptt_sets",
                    "DROP PROCEDURE IF EXISTS ptt_write",
                ):
                    cur.execute(ddl)


# --- a sharded database's single-node answers: column definitions in logical names ---------------------------

SINGLE_NODE = [
    "SELECT order_id, status FROM t_order WHERE user_id = 1 AND order_id = 8801",
    "SELECT o.order_id, o.status AS s FROM t_order o WHERE user_id = 1 AND order_id = 8801",
    "SELECT t_order.order_id FROM t_order WHERE user_id = 1 AND order_id = 8801",
    "SELECT COUNT(*), MAX(status) FROM t_order WHERE user_id = 1 AND order_id = 8801",
    "SELECT i.order_item_id, o.status FROM t_order o JOIN t_order_item i ON o.order_id = i.order_id "
    "WHERE o.user_id = 1 AND o.order_id = 8801",
]


@pytest.mark.parametrize("send", [raw_text, raw_prepared], ids=["text", "prepared"])
@pytest.mark.parametrize("sql", SINGLE_NODE)
def test_sharded_single_node_columns_name_the_logical_database(sharded_env: ShardedEnv, send: Any, sql: str) -> None:
    """A statement routed to one data node is relayed: its column definitions named the node's physical database
    (`sht_demo_ds_1`) and actual table (`t_order_1`) where one server names its database and the table."""
    rows = "INSERT INTO t_order (order_id, user_id, status) VALUES (8801, 1, 'a')"
    with sharded_env.connect() as conn, conn.cursor() as cur:
        cur.execute("DELETE FROM t_order WHERE order_id = 8801")
        cur.execute(rows)
    server = sharded_env.servers[0]
    server.execute("DELETE FROM t_order WHERE order_id = 8801", sharded_env.oracle_db)
    server.execute(rows, sharded_env.oracle_db)
    try:
        with (
            server.connect(sharded_env.oracle_db, autocommit=True) as oracle,
            sharded_env.proxy.connect("sharding_db") as proxied,
        ):
            for _ in range(2):  # (the second time on held connections: the fast path)
                assert _with_schema(send(proxied, sql), "sharding_db") == _with_schema(
                    send(oracle, sql), sharded_env.oracle_db
                )
    finally:
        with sharded_env.connect() as conn, conn.cursor() as cur:
            cur.execute("DELETE FROM t_order WHERE order_id = 8801")
        server.execute("DELETE FROM t_order WHERE order_id = 8801", sharded_env.oracle_db)


# --- a physical database of another name: translated on the way in, never shown -------------------------

JOINED = "SELECT * FROM ptt_one a STRAIGHT_JOIN ptt_one b FORCE INDEX (PRIMARY) ON b.id = a.v"
RENAMED: list[Any] = [
    # one case: statements run in turn on one connection, each answer compared ({db}: the database's name)
    pytest.param(
        ("INSERT INTO {db}.ptt_one VALUES (10, 1), (11, 2)", "SELECT * FROM {db}.ptt_one ORDER BY id"),
        id="insert-qualified",
    ),
    pytest.param(
        (
            "UPDATE {db}.ptt_one SET v = v + 1 WHERE id = 10",
            "DELETE FROM {db}.ptt_one WHERE id = 11",
            "SELECT {db}.ptt_one.id, `{db}`.`ptt_one`.v FROM `{db}`.ptt_one ORDER BY 1",
        ),
        id="update-delete",
    ),
    pytest.param(("SELECT id FROM ptt_one",), id="column-definitions"),
    pytest.param(
        ("CHECK TABLE {db}.ptt_one", "CHECK TABLE ptt_one, ptt_nosuch", "ANALYZE TABLE ptt_one"), id="check-table"
    ),
    pytest.param(
        ("SELECT * FROM {db}.ptt_nosuch", "SELECT * FROM ptt_nosuch", "SHOW CREATE TABLE {db}.ptt_nosuch"), id="errors"
    ),
    pytest.param(("EXPLAIN EXTENDED SELECT * FROM {db}.ptt_one WHERE id = 1", "SHOW WARNINGS"), id="explain-notes"),
    pytest.param(
        (
            "SHOW TABLES LIKE 'ptt_o%'",
            "SHOW FULL TABLES FROM {db} LIKE 'ptt_o%'",
            "SHOW COLUMNS FROM ptt_one FROM {db}",
            "DESCRIBE {db}.ptt_one",
        ),
        id="show",
    ),
    pytest.param(("SHOW CREATE VIEW {db}.ptt_view", "SELECT * FROM {db}.ptt_view ORDER BY id"), id="view"),
    pytest.param(
        (
            "SELECT table_schema, table_name FROM information_schema.tables WHERE table_schema = '{db}' "
            "AND table_name = 'ptt_one'",
        ),
        id="information-schema",
    ),
    # EXPLAIN's `ref` column names `db.table.column` (the fast path relays it too: no name in the text)
    pytest.param((f"EXPLAIN {JOINED}",) * 2, id="explain-ref"),
    pytest.param((f"EXPLAIN FORMAT=JSON {JOINED}",), id="explain-json"),
    pytest.param(("LOAD INDEX INTO CACHE ptt_one", "CACHE INDEX ptt_one IN default"), id="key-cache"),
    # SQL-level prepared statements: their text is translated, the rows of an EXPLAIN renamed at EXECUTE
    pytest.param(
        (
            "PREPARE ptt_s FROM 'SELECT id FROM {db}.ptt_one WHERE id = 1'",
            "EXECUTE ptt_s",
            f"PREPARE ptt_s FROM 'EXPLAIN {JOINED}'",
            "EXECUTE ptt_s",
            "EXECUTE ptt_s",
            "DEALLOCATE PREPARE ptt_s",
        ),
        id="sql-prepared",
    ),
    pytest.param(
        ("ALTER TABLE ptt_sub CHECK PARTITION p0", "ALTER TABLE ptt_sub ANALYZE PARTITION nosuch"), id="alter"
    ),
    # RENAME's names: sqlglot reads its text as one string
    pytest.param(
        (
            "RENAME TABLE {db}.ptt_one TO {db}.ptt_moved",
            "SELECT * FROM {db}.ptt_moved ORDER BY id",
            "RENAME TABLE {db}.ptt_moved TO {db}.ptt_one",
        ),
        id="rename-table",
    ),
    # an expression is labelled by its text as typed, the logical name in it
    pytest.param(
        (
            "CREATE FUNCTION ptt_f() RETURNS INT RETURN 7",
            "SELECT {db}.ptt_f(), {db}.ptt_one.id + 1, {db}.ptt_one.v FROM {db}.ptt_one ORDER BY 2",
            "DROP FUNCTION ptt_f",
        ),
        id="labels",
    ),
]


@pytest.fixture
def impostor(mariadb: MariaDBServer, pair: tuple[Any, Any]) -> Iterator[MariaDBServer]:
    """A real database named like the logical one on the same server: what a statement must never reach."""
    for sql in (
        f"CREATE DATABASE IF NOT EXISTS {LOGICAL}",
        f"CREATE TABLE IF NOT EXISTS {LOGICAL}.ptt_one (id INT PRIMARY KEY, v INT)",
    ):
        mariadb.execute(sql)
    for conn in pair:
        with conn.cursor() as cur:
            for sql in (
                "DELETE FROM ptt_one",
                "INSERT INTO ptt_one VALUES (1, 10), (2, 20)",
                "CREATE OR REPLACE VIEW ptt_view AS SELECT id FROM ptt_one",
            ):
                cur.execute(sql)
    yield mariadb
    assert mariadb.execute(f"SELECT COUNT(*) FROM {LOGICAL}.ptt_one") == [(0,)]
    mariadb.execute(f"DROP DATABASE {LOGICAL}")
    for conn in pair:
        with conn.cursor() as cur:
            cur.execute("DROP VIEW IF EXISTS ptt_view")


@pytest.mark.parametrize("statements", RENAMED)
def test_physical_name_never_shows(pair: tuple[Any, Any], impostor: MariaDBServer, statements: tuple[str, ...]) -> None:
    oracle, proxied = pair
    for sql in statements:
        assert answer(proxied, sql.format(db=LOGICAL)) == _normalized(answer(oracle, sql.format(db=ORACLE))), sql


@pytest.mark.parametrize("sql", ["SELECT * FROM {db}.ptt_one WHERE id = ?", "SELECT id FROM ptt_one"])
def test_physical_name_never_shows_prepared(pair: tuple[Any, Any], impostor: MariaDBServer, sql: str) -> None:
    """COM_STMT_PREPARE's and COM_STMT_EXECUTE's column definitions name the logical database."""
    oracle, proxied = pair
    via = raw_prepared(proxied, sql.format(db=LOGICAL))
    direct = raw_prepared(oracle, sql.format(db=ORACLE))
    assert _with_schema(via, LOGICAL) == _with_schema(direct, ORACLE)


def _with_schema(packets: Any, name: str) -> Any:
    """The packets with each column definition's schema checked to be `name` and then left out."""
    if isinstance(packets, list):
        return [_with_schema(p, name) for p in packets]
    if isinstance(packets, bytes) and packets.startswith(b"\x03def"):
        size, pos = _lenenc(packets, 4)
        assert packets[pos : pos + size] in (name.encode(), b""), packets
        return packets[:4] + packets[pos + size :]
    return packets


# --- LOAD DATA LOCAL INFILE: the file request relayed to the client, its file to the data source -------------

LOADS = [
    pytest.param(True, "LOAD DATA LOCAL INFILE '{path}' INTO TABLE ptt_one", id="local-files"),
    pytest.param(
        True,
        "LOAD DATA LOCAL INFILE '{path}' REPLACE INTO TABLE ptt_one FIELDS TERMINATED BY ','",
        id="replace-with-warnings",
    ),
    pytest.param(True, "LOAD DATA LOCAL INFILE '{path}.missing' INTO TABLE ptt_one", id="client-cannot-read"),
    pytest.param(True, "LOAD DATA LOCAL INFILE '{path}' INTO TABLE ptt_nosuch", id="no-such-table"),
    pytest.param(False, "LOAD DATA LOCAL INFILE '{path}' INTO TABLE ptt_one", id="client-without-local-files"),
]


@pytest.mark.parametrize(("local", "sql"), LOADS)
def test_load_data_local_infile(
    mariadb: MariaDBServer, passthrough_proxy: RunningProxy, pair: tuple[Any, Any], tmp_path: Any, local: bool, sql: str
) -> None:
    path = tmp_path / "rows.tsv"
    path.write_text("1\t10\n2\t20\n3\tx\n")
    text = sql.format(path=path)
    answers = []
    for conn in (
        mariadb.connect(ORACLE, autocommit=True, local_infile=local),
        passthrough_proxy.connect(LOGICAL, local_infile=local),
    ):
        with conn:
            with conn.cursor() as cur:
                cur.execute("DELETE FROM ptt_one")
            answers.append(
                (answer(conn, text), answer(conn, "SELECT * FROM ptt_one ORDER BY id"), answer(conn, "SHOW WARNINGS"))
            )
    assert answers[1] == _normalized(answers[0])


def test_load_data_local_infile_with_the_cli(
    mariadb: MariaDBServer, passthrough_proxy: RunningProxy, pair: tuple[Any, Any], tmp_path: Any
) -> None:
    """The `mariadb` client, which sends the file only with --local-infile."""
    import subprocess

    path = tmp_path / "rows.tsv"
    path.write_text("7\t70\n8\t80\n")
    outs = []
    for host, port, user, password, database in (
        (mariadb.host, mariadb.port, mariadb.user, mariadb.password, ORACLE),
        (passthrough_proxy.host, passthrough_proxy.port, "root", "root", LOGICAL),
    ):
        cmd = [
            "mariadb",
            "--no-defaults",
            "-h",
            host,
            "-P",
            str(port),
            "-u",
            user,
            f"-p{password}",
            "--local-infile=1",
            "-vvv",
            database,
            "-e",
            f"DELETE FROM ptt_one; LOAD DATA LOCAL INFILE '{path}' INTO TABLE ptt_one; "
            "SELECT * FROM ptt_one ORDER BY id",
        ]
        res = subprocess.run(cmd, capture_output=True, timeout=60)
        outs.append((res.returncode, res.stderr, re.sub(rb"\([0-9.]+ sec\)", b"", res.stdout)))
    assert outs[1] == outs[0]
    assert b"Records: 2  Deleted: 0  Skipped: 0  Warnings: 0" in outs[1][2]


def test_sharded_single_node_load_data_local_infile(sharded_env: ShardedEnv, tmp_path: Any) -> None:
    """extra_db's t_single lives on ds_0 only: the statement is routed there, the file relayed."""
    path = tmp_path / "rows.tsv"
    path.write_text("1\ta\n2\tb\n")
    oracle_server = sharded_env.servers[0]
    oracle_server.execute(
        "CREATE TABLE IF NOT EXISTS ptt_single (id INT NOT NULL, v VARCHAR(10))", sharded_env.oracle_db
    )
    sql = "LOAD DATA LOCAL INFILE '{path}' INTO TABLE {table}"
    try:
        answers = []
        for conn, table in (
            (oracle_server.connect(sharded_env.oracle_db, autocommit=True, local_infile=True), "ptt_single"),
            (sharded_env.proxy.connect("extra_db", local_infile=True), "t_single"),
        ):
            with conn:
                with conn.cursor() as cur:
                    cur.execute(f"DELETE FROM {table}")
                got = answer(conn, sql.format(path=path, table=table))
                rows = conn.cursor()
                rows.execute(f"SELECT * FROM {table} ORDER BY id")
                answers.append((got, rows.fetchall()))
                rows.execute(f"DELETE FROM {table}")
        assert answers[1] == answers[0]
    finally:
        oracle_server.execute("DROP TABLE IF EXISTS ptt_single", sharded_env.oracle_db)


# --- the server's view of its clients: the proxy's sessions, as MariaDB shows its own -------------------------

OWN_ROW = [
    # the session's own row: (SQL, how to find it in the answer)
    ("SHOW PROCESSLIST;", "show"),
    ("SHOW FULL PROCESSLIST ;  ", "show"),
    ("SELECT COMMAND, STATE, INFO FROM information_schema.PROCESSLIST WHERE ID = CONNECTION_ID();", "select"),
]


@pytest.mark.parametrize(("sql", "kind"), OWN_ROW)
def test_processlist_own_row(pair: tuple[Any, Any], sql: str, kind: str) -> None:
    """State `starting`, Info without the statement's trailing `;`, Progress with MariaDB's three decimals."""
    got = []
    for conn in pair:
        with conn.cursor() as cur:
            cur.execute(sql)
            rows = cur.fetchall()
        if kind == "show":
            rows = tuple(r[4:] for r in rows if r[0] == conn.thread_id())  # Command, Time, State, Info, Progress
        got.append(rows)
    assert got[1] == got[0]


def test_threads_connected_counts_client_sessions(passthrough_proxy: RunningProxy, pair: tuple[Any, Any]) -> None:
    _oracle, proxied = pair

    def threads_connected() -> int:
        with proxied.cursor() as cur:
            cur.execute("SHOW STATUS LIKE 'Threads_connected'")
            return int(cur.fetchone()[1])

    before = threads_connected()
    assert before == passthrough_proxy.call(lambda: len(passthrough_proxy.server.sessions))
    with passthrough_proxy.connect(LOGICAL), passthrough_proxy.connect(LOGICAL):
        assert threads_connected() == before + 2
    with passthrough_proxy.connect(None) as bare, bare.cursor() as cur:  # no database chosen yet
        cur.execute("SHOW GLOBAL STATUS WHERE Variable_name = 'Threads_connected'")
        assert cur.fetchall() == (("Threads_connected", str(before + 1)),)


# --- session functions keep their types -------------------------------------------------------------------

# the proxy answers these calls with its session's values; the server types what stands for them as the function
TYPED_CALLS = [
    "CONCAT(CONNECTION_ID()) AS c",
    "CONNECTION_ID() AS i",
    "CONCAT(DATABASE()) AS d",
    "SCHEMA() AS s",
    "USER() AS u",
    "CONCAT(SESSION_USER(), '') AS su",
    "CURRENT_USER() AS cu",
    "IF(CONNECTION_ID() > 0, DATABASE(), NULL) AS x",
]


@pytest.mark.parametrize("item", TYPED_CALLS)
def test_session_functions_keep_their_types(pair: tuple[Any, Any], item: str) -> None:
    """`CREATE TABLE ... AS SELECT CONCAT(CONNECTION_ID())` made a VARCHAR(2) where MariaDB makes a VARCHAR(10): a
    literal has the type of its text (MariaDB's suite: ctype_cp1251); the column definitions of a SELECT too."""
    oracle, proxied = pair
    for sql in (
        f"CREATE TABLE ptt_fn AS SELECT {item}",
        "SHOW CREATE TABLE ptt_fn",
        "DROP TABLE ptt_fn",
    ):
        assert answer(proxied, sql) == _normalized(answer(oracle, sql)), sql
    fields = [result[0] for result in answer(proxied, f"SELECT {item}")]
    assert fields == _normalized([result[0] for result in answer(oracle, f"SELECT {item}")])


# --- a prepare's warnings -----------------------------------------------------------------------------------

PREPARE_WARNINGS = [
    "SELECT * FROM ptt_chk",  # opening the table evaluates its CHECK: two warnings at PREPARE
    "SELECT v FROM ptt_chk WHERE v > ?",
]


@pytest.mark.parametrize("sql", PREPARE_WARNINGS)
def test_prepare_sends_its_warnings_count_in_every_packet(pair: tuple[Any, Any], sql: str) -> None:
    """MariaDB puts the prepare's warning count in the EOF packets after the definitions too, where client libraries
    read it (mysqltest --ps-protocol lost the warnings of a prepared SELECT: MariaDB's suite check_constraint)."""
    oracle, proxied = pair
    answers = []
    for conn in (oracle, proxied):
        with conn.cursor() as cur:
            cur.execute("CREATE OR REPLACE TABLE ptt_chk (v BIGINT CHECK (v NOT IN ('x', 'x111')))")
            cur.execute("FLUSH TABLES")
        prepared = raw_prepared(conn, sql)[0]
        answers.append([prepared[0], *(p for p in prepared if p[:1] == b"\xfe")])  # the OK and the EOFs
        with conn.cursor() as cur:
            cur.execute("DROP TABLE ptt_chk")
    assert answers[1] == answers[0]


# --- another session's State in the processlist -------------------------------------------------------------

WAITING = [
    "SELECT state FROM information_schema.PROCESSLIST WHERE info = 'SELECT COUNT(*) FROM ptt_one'",
    "SHOW PROCESSLIST",
]


@pytest.mark.parametrize("sql", WAITING)
def test_processlist_shows_what_another_session_waits_for(
    mariadb: MariaDBServer, passthrough_proxy: RunningProxy, pair: tuple[Any, Any], sql: str
) -> None:
    """A session blocked on the server shows the server's State (`Waiting for table metadata lock`), where tools and
    MariaDB's suite wait for it (query_cache_28249 timed out): the proxy's processlist said `Executing`."""
    import threading
    import time

    sides = [(mariadb.connect(ORACLE, autocommit=True), lambda: mariadb.connect(ORACLE, autocommit=True))]
    sides.append((passthrough_proxy.connect(LOGICAL), lambda: passthrough_proxy.connect(LOGICAL)))
    states = []
    for locker, connect in sides:
        waiter, watcher = connect(), connect()
        thread = waiter.thread_id()
        with locker.cursor() as cur:
            cur.execute("LOCK TABLES ptt_one WRITE")
        blocked = threading.Thread(target=lambda w=waiter: w.cursor().execute("SELECT COUNT(*) FROM ptt_one"))
        blocked.start()
        try:
            for _ in range(100):  # until the server has the statement waiting
                with watcher.cursor() as cur:
                    cur.execute(sql)
                    rows = cur.fetchall()
                found = [r[0] if sql.startswith("SELECT") else r[6] for r in rows if len(r) == 1 or r[0] == thread]
                if "Waiting for table metadata lock" in found:
                    break
                time.sleep(0.05)
            states.append(found)
        finally:
            with locker.cursor() as cur:
                cur.execute("UNLOCK TABLES")
            blocked.join(10)
            for conn in (locker, waiter, watcher):
                conn.close()
    assert "Waiting for table metadata lock" in states[0]
    assert "Waiting for table metadata lock" in states[1]
