"""Metadata answers about a sharded database's tables equal one MariaDB server's, column definitions included.

`defs_db` is sharded over the two ``mariadb_shards`` servers (t_wide: two actual tables on each, t_bc broadcast,
t_one a single table on ds_0); the oracle is a plain database of the same name on the ``mariadb`` server holding the
same tables unsharded. Each statement runs on both, text (COM_QUERY) and prepared (COM_STMT_PREPARE's definitions,
then EXECUTE's), over raw sockets, in a utf8mb4 and a latin1 session: every field of every ColumnDefinition41
(catalog, schema, table, org_table, name, org_name, charset, length, type, flags, decimals) and the rows are compared
(but the server's bookkeeping: times, sizes, row estimates, `VOLATILE`), or the ERR's errno, SQLSTATE and message;
and through mysql-connector's prepared cursor, its description and rows.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mysql.connector
import pytest

from protocol.binary import (
    ComStmtClose,
    ComStmtExecute,
    ComStmtPrepare,
    PrepareResponse,
    StmtPrepareOK,
    decode_binary_row,
)
from protocol.packets import ColumnDefinition41, ComQuery, ERRPacket, decode_text_row, is_eof, is_err
from proxy.sandbox import MariaDBServer
from tests.integration.harness import RunningProxy, start_proxy, write_conf
from tests.integration.test_malformed import RawClient

pytestmark = pytest.mark.integration

DB = "defs_db"
RULES = """\
- !SHARDING
  tables:
    t_wide:
      actualDataNodes: ds_${0..1}.t_wide_${0..1}
      databaseStrategy: {standard: {shardingColumn: k, shardingAlgorithmName: by_k}}
      tableStrategy: {standard: {shardingColumn: id, shardingAlgorithmName: by_id}}
  shardingAlgorithms:
    by_k: {type: INLINE, props: {algorithm-expression: 'ds_${k % 2}'}}
    by_id: {type: INLINE, props: {algorithm-expression: 't_wide_${id % 2}'}}
- !BROADCAST
  tables: [t_bc]
- !SINGLE
  tables: [ds_0.t_one]
  defaultDataSource: ds_0
"""
WIDE = (
    "CREATE TABLE t_wide (id BIGINT NOT NULL, k INT NOT NULL, "
    "name VARCHAR(40) CHARACTER SET latin1 DEFAULT 'x' COMMENT 'a name', body LONGTEXT, note TEXT, "
    "raw MEDIUMBLOB, price DECIMAL(10,2) DEFAULT 1.50, at DATETIME(3), e ENUM('a','b') NOT NULL, j JSON, "
    "f DOUBLE, z INT(5) UNSIGNED ZEROFILL, PRIMARY KEY (id, k), UNIQUE KEY uk_name (name, k), KEY idx_at (at)) "
    "COMMENT 'wide'"
)
BC = "CREATE TABLE t_bc (code CHAR(3) NOT NULL PRIMARY KEY, label VARCHAR(20) NOT NULL)"
ONE = "CREATE TABLE t_one (id INT NOT NULL PRIMARY KEY, v TINYTEXT)"
ROWS = (
    "INSERT INTO t_wide (id, k, name, body, note, raw, price, at, e, j, f, z) VALUES "
    "(1, 1, 'one', 'b1', 'n1', 'r1', 1.25, '2024-01-02 03:04:05.678', 'a', '{\"a\": 1}', 1.5, 7), "
    "(2, 1, 'two', 'b2', NULL, NULL, NULL, NULL, 'b', NULL, NULL, NULL), "
    "(3, 2, 'three', 'b3', 'n3', NULL, 3.00, NULL, 'a', NULL, NULL, 12), "
    "(4, 2, 'four', NULL, NULL, NULL, 4.00, NULL, 'b', NULL, NULL, NULL)",
    "INSERT INTO t_bc VALUES ('abc', 'first'), ('def', 'second')",
    "INSERT INTO t_one VALUES (1, 'x')",
)


@pytest.fixture(scope="module")
def defs(mariadb_shards: list[MariaDBServer], mariadb: MariaDBServer,
         tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RunningProxy, MariaDBServer]]:
    for i, server in enumerate(mariadb_shards):
        server.execute(f"CREATE DATABASE IF NOT EXISTS defs_ds_{i}")
    conf = write_conf(
        Path(tmp_path_factory.mktemp("defs-conf")),
        {DB: {f"ds_{i}": (s, f"defs_ds_{i}") for i, s in enumerate(mariadb_shards)}},
        rules_yaml={DB: RULES},
    )
    mariadb_shards[0].execute(ONE, "defs_ds_0")  # a single table, found on its data source
    running = start_proxy(conf)
    mariadb.execute(f"CREATE DATABASE IF NOT EXISTS {DB}")
    with running.connect(DB) as proxied, mariadb.connect(DB) as plain:
        for conn in (proxied, plain):
            with conn.cursor() as cur:
                for sql in (WIDE, BC, *((ONE,) if conn is plain else ()), *ROWS):
                    cur.execute(sql)
    yield running, mariadb
    running.stop()
    mariadb.execute(f"DROP DATABASE {DB}")


def _client(defs: tuple[RunningProxy, MariaDBServer], *, oracle: bool, charset: str) -> RawClient:
    proxy, server = defs
    c = RawClient(server.host, server.port) if oracle else RawClient(proxy.host, proxy.port)
    answer = c.login("root", server.password if oracle else "root", database=DB)
    assert answer[:1] == b"\x00", answer
    if charset != "utf8mb4":
        assert c.command(ComQuery(f"SET NAMES {charset}".encode()).encode())[0][1][:1] == b"\x00"
    return c


def _fields(c: ColumnDefinition41) -> dict[str, Any]:
    return {"catalog": c.catalog, "schema": c.schema, "table": c.table, "org_table": c.org_table, "name": c.name,
            "org_name": c.org_name, "charset": c.character_set, "length": c.column_length, "type": int(c.type),
            "flags": c.flags, "decimals": c.decimals}


# the column definitions (every field) and the rows of an answer, or its ERR's (errno, SQLSTATE, message)
Answer = tuple[list[dict[str, Any]], list[tuple[Any, ...]]] | tuple[int, str, str]


def _error(payload: bytes) -> tuple[int, str, str]:
    err = ERRPacket.decode(payload)
    return err.errno, err.sqlstate, err.message


def _text(c: RawClient, sql: str) -> Answer:
    packets = [p for _seq, p in c.command(ComQuery(sql.encode()).encode())]
    if is_err(packets[0]):
        return _error(packets[0])
    n = packets[0][0]
    columns = [ColumnDefinition41.decode(p) for p in packets[1 : 1 + n]]
    rows = [decode_text_row(p, n) for p in packets[2 + n :] if not is_eof(p)]
    return [_fields(col) for col in columns], rows


def _prepared(c: RawClient, sql: str) -> tuple[Answer, list[dict[str, Any]]]:
    """The EXECUTE's answer, and the PREPARE's column definitions."""
    c.send(ComStmtPrepare(sql.encode()).encode())
    first = c.read()[1]
    if is_err(first):
        return _error(first), []
    ok = StmtPrepareOK.decode(first)
    prepared = PrepareResponse.decode([first, *(c.read()[1] for _ in range(ok.following_packets(False)))], False)
    c.send(ComStmtExecute(ok.statement_id, 0, 1, (), (), True).encode())
    head = c.read()[1]
    if is_err(head):
        return _error(head), [_fields(col) for col in prepared.columns]
    columns = [ColumnDefinition41.decode(c.read()[1]) for _ in range(head[0])]
    assert is_eof(c.read()[1])
    rows = []
    while not is_eof(p := c.read()[1]):
        assert not is_err(p), p
        rows.append(decode_binary_row(p, columns))
    c.send(ComStmtClose(ok.statement_id).encode())
    return ([_fields(col) for col in columns], rows), [_fields(col) for col in prepared.columns]


# columns whose values are the server's own bookkeeping (times, sizes, estimates), not compared
VOLATILE = {"Create_time", "Update_time", "Check_time", "CREATE_TIME", "UPDATE_TIME", "CHECK_TIME", "Data_length",
            "Index_length", "Data_free", "Avg_row_length", "Max_data_length", "Rows", "TABLE_ROWS", "DATA_LENGTH",
            "INDEX_LENGTH", "DATA_FREE", "AVG_ROW_LENGTH", "MAX_DATA_LENGTH", "Cardinality", "CARDINALITY"}

# (id, statement): one line per case; each runs as text and prepared, on the proxy and on the plain server
CASES: list[tuple[str, str]] = [
    ("show-columns", "SHOW COLUMNS FROM t_wide"),
    ("show-full-columns", "SHOW FULL COLUMNS FROM t_wide"),
    ("show-columns-like", "SHOW COLUMNS FROM t_wide LIKE 'n%'"),
    ("show-columns-where", "SHOW COLUMNS FROM t_wide WHERE `Type` LIKE '%text'"),
    ("show-columns-from-db", "SHOW COLUMNS FROM t_wide FROM defs_db"),
    ("show-columns-qualified", "SHOW FIELDS IN defs_db.t_wide"),
    ("show-fields-from", "SHOW FIELDS FROM t_wide"),
    ("show-columns-in", "SHOW COLUMNS IN t_wide"),
    ("show-columns-db-qualified", "SHOW COLUMNS FROM defs_db.t_wide"),
    ("show-columns-in-in", "SHOW COLUMNS IN t_wide IN defs_db"),
    ("show-columns-quoted", "SHOW COLUMNS FROM `defs_db`.`t_wide`"),
    ("show-columns-broadcast", "SHOW FULL COLUMNS FROM t_bc"),
    ("show-columns-single", "SHOW COLUMNS FROM t_one"),
    ("describe", "DESCRIBE t_wide"),
    ("describe-qualified", "DESCRIBE defs_db.t_wide"),
    ("explain-table", "EXPLAIN t_wide"),
    ("desc-column", "DESC t_wide body"),
    ("describe-pattern", "DESCRIBE t_wide 'n%'"),
    ("show-index", "SHOW INDEX FROM t_wide"),
    ("show-keys-in", "SHOW KEYS IN t_wide"),
    ("show-indexes-where", "SHOW INDEXES FROM t_wide WHERE Key_name = 'uk_name'"),
    ("show-index-broadcast", "SHOW INDEX FROM t_bc"),
    ("show-index-from-db", "SHOW INDEX FROM t_wide FROM defs_db"),
    ("show-keys-from-db", "SHOW KEYS FROM t_wide IN defs_db"),
    ("show-table-status", "SHOW TABLE STATUS"),
    ("show-table-status-like", "SHOW TABLE STATUS LIKE 't_w%'"),
    ("show-table-status-where", "SHOW TABLE STATUS WHERE Name = 't_wide'"),
    ("show-table-status-from", "SHOW TABLE STATUS FROM defs_db LIKE 't\\_%'"),
    ("show-table-status-rows", "SHOW TABLE STATUS WHERE `Rows` > 1 AND Comment <> ''"),
    ("show-create-table", "SHOW CREATE TABLE t_wide"),
    ("show-create-broadcast", "SHOW CREATE TABLE t_bc"),
    ("show-create-single", "SHOW CREATE TABLE t_one"),
    ("show-tables", "SHOW TABLES"),
    ("show-full-tables", "SHOW FULL TABLES"),
    ("show-tables-like", "SHOW TABLES LIKE 't_w%'"),
    ("show-tables-from", "SHOW TABLES FROM defs_db"),
    ("show-tables-where", "SHOW FULL TABLES WHERE Table_type = 'BASE TABLE'"),
    ("is-columns", "SELECT * FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() "
                   "AND TABLE_NAME = 't_wide'"),
    ("is-columns-ordered", "SELECT * FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() "
                           "ORDER BY TABLE_NAME, ORDINAL_POSITION"),
    ("is-columns-picked", "SELECT COLUMN_NAME, COLUMN_TYPE, COLUMN_DEFAULT, COLUMN_COMMENT "
                          "FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'defs_db' "
                          "ORDER BY TABLE_NAME, ORDINAL_POSITION"),
    ("is-columns-expressions", "SELECT TABLE_NAME, MAX(COLUMN_TYPE), COUNT(*), GROUP_CONCAT(COLUMN_NAME ORDER BY "
                               "ORDINAL_POSITION) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() "
                               "GROUP BY TABLE_NAME ORDER BY TABLE_NAME"),
    ("is-tables", "SELECT TABLE_SCHEMA, TABLE_NAME, TABLE_TYPE, ENGINE, TABLE_COLLATION, TABLE_COMMENT "
                  "FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE()"),
    ("is-tables-ordered", "SELECT * FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() "
                          "ORDER BY TABLE_NAME"),
    ("is-statistics", "SELECT * FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE() "
                      "ORDER BY TABLE_NAME, INDEX_NAME, SEQ_IN_INDEX"),
    ("is-key-column-usage", "SELECT * FROM information_schema.KEY_COLUMN_USAGE WHERE TABLE_SCHEMA = DATABASE() "
                            "ORDER BY TABLE_NAME, CONSTRAINT_NAME, ORDINAL_POSITION"),
    ("is-table-constraints", "SELECT * FROM information_schema.TABLE_CONSTRAINTS WHERE TABLE_SCHEMA = 'defs_db' "
                             "ORDER BY TABLE_NAME, CONSTRAINT_NAME"),
    ("is-count", "SELECT COUNT(*), COUNT(DISTINCT TABLE_NAME) FROM information_schema.COLUMNS "
                 "WHERE TABLE_SCHEMA = DATABASE()"),
    ("is-distinct", "SELECT DISTINCT TABLE_NAME, DATA_TYPE FROM information_schema.COLUMNS "
                    "WHERE TABLE_SCHEMA = DATABASE()"),
    ("is-join", "SELECT c.TABLE_NAME, c.COLUMN_NAME, c.COLUMN_TYPE, t.TABLE_COMMENT FROM information_schema.COLUMNS c "
                "JOIN information_schema.TABLES t USING (TABLE_SCHEMA, TABLE_NAME) WHERE c.TABLE_SCHEMA = DATABASE() "
                "ORDER BY 1, 2"),
    ("is-partitions", "SELECT * FROM information_schema.PARTITIONS WHERE TABLE_SCHEMA = DATABASE() "
                      "ORDER BY TABLE_NAME"),
    ("missing-show-columns", "SHOW COLUMNS FROM t_nope"),
    ("missing-describe", "DESCRIBE t_nope"),
    ("missing-show-index", "SHOW INDEX FROM t_nope"),
    ("missing-show-create", "SHOW CREATE TABLE t_nope"),
    ("missing-is-table", "SELECT * FROM information_schema.NOPE"),
    ("system-table-join", "SELECT u.User FROM mysql.user u JOIN t_wide w ON w.id = 1 AND w.k = 1 "
                          "WHERE u.User = 'root' LIMIT 1"),
]


def _comparable(answer: Answer) -> Answer:
    if isinstance(answer[0], int):
        return answer  # an ERR
    columns, rows = answer
    keep = [i for i, c in enumerate(columns) if c["name"] not in VOLATILE]
    return columns, sorted((tuple(r[i] for i in keep) for r in rows), key=repr)


CHARSETS = ["utf8mb4", "latin1"]


@pytest.mark.parametrize("charset", CHARSETS)
@pytest.mark.parametrize("sql", [c[1] for c in CASES], ids=[c[0] for c in CASES])
def test_text_answer_equals_mariadb(defs: tuple[RunningProxy, MariaDBServer], sql: str, charset: str) -> None:
    proxy, oracle = _client(defs, oracle=False, charset=charset), _client(defs, oracle=True, charset=charset)
    try:
        got, want = _text(proxy, sql), _text(oracle, sql)
    finally:
        proxy.close()
        oracle.close()
    assert _comparable(got) == _comparable(want)


@pytest.mark.parametrize("charset", CHARSETS)
@pytest.mark.parametrize("sql", [c[1] for c in CASES], ids=[c[0] for c in CASES])
def test_prepared_answer_equals_mariadb(defs: tuple[RunningProxy, MariaDBServer], sql: str, charset: str) -> None:
    proxy, oracle = _client(defs, oracle=False, charset=charset), _client(defs, oracle=True, charset=charset)
    try:
        (got, got_prepared), (want, want_prepared) = _prepared(proxy, sql), _prepared(oracle, sql)
    finally:
        proxy.close()
        oracle.close()
    assert got_prepared == want_prepared
    assert _comparable(got) == _comparable(want)


@pytest.mark.parametrize("sql", [c[1] for c in CASES], ids=[c[0] for c in CASES])
def test_connector_prepared_cursor_equals_mariadb(defs: tuple[RunningProxy, MariaDBServer], sql: str) -> None:
    """What a client library's prepared cursor sees (mysql-connector: its description and rows)."""
    proxy, server = defs
    seen = []
    for host, port, password in ((proxy.host, proxy.port, "root"), (server.host, server.port, server.password)):
        conn = mysql.connector.connect(host=host, port=port, user="root", password=password, database=DB,
                                       use_pure=True, ssl_disabled=True, autocommit=True)
        try:
            cur = conn.cursor(prepared=True)
            try:
                cur.execute(sql)
                rows = cur.fetchall()
            except mysql.connector.Error as exc:
                seen.append((exc.errno, exc.sqlstate, exc.msg))
                continue
            names = [d[0] for d in cur.description]
            keep = [i for i, n in enumerate(names) if n not in VOLATILE]
            seen.append((cur.description, sorted((tuple(r[i] for i in keep) for r in rows), key=repr)))
        finally:
            conn.close()
    assert seen[0] == seen[1]
