"""The server-status flags of every answer are MariaDB's (issue 34 item 1): clients decide by them how to escape
strings (SERVER_STATUS_NO_BACKSLASH_ESCAPES: PyMySQL, mysql-connector and libmysqlclient's
mysql_real_escape_string) and whether a transaction is open or read-only.

Each script runs statement by statement on a sharded logical database through the proxy and on the unsharded
oracle database directly; after each statement the flags of its answer (OK, or the EOF / OK that ends its rows)
are compared, in a new session each time."""

from __future__ import annotations

from typing import Any

import pymysql
import pytest

from tests.integration.sharding_fixtures import ORACLE_DB, ShardedEnv

AUTOCOMMIT, IN_TRANS, NO_BACKSLASH_ESCAPES, IN_TRANS_READONLY, ANSI_QUOTES = 0x2, 0x1, 0x200, 0x2000, 0x8000
FLAGS = AUTOCOMMIT | IN_TRANS | NO_BACKSLASH_ESCAPES | IN_TRANS_READONLY | ANSI_QUOTES

# one line a script: the statements of one session, in order
SCRIPTS = (
    ("SET SESSION sql_mode = 'NO_BACKSLASH_ESCAPES'", "SELECT 1", "SELECT COUNT(*) FROM t_order",
     "SELECT * FROM t_order WHERE user_id = 1 AND order_id = 1", "SET sql_mode = DEFAULT", "SELECT 1"),
    ("SET sql_mode = 'ANSI_QUOTES'", "SELECT COUNT(*) FROM t_order", "BEGIN", "SELECT COUNT(*) FROM t_order",
     "COMMIT", "SET @@session.sql_mode = ''", "SELECT 1"),
    ("SET sql_mode = 'ANSI_QUOTES,NO_BACKSLASH_ESCAPES'", "SET autocommit = 0", "SELECT COUNT(*) FROM t_order",
     "COMMIT", "SET autocommit = 1", "SET sql_mode = 'STRICT_TRANS_TABLES'"),
    ("START TRANSACTION READ ONLY", "SELECT COUNT(*) FROM t_order", "COMMIT", "START TRANSACTION READ WRITE",
     "SELECT COUNT(*) FROM t_order", "ROLLBACK"),
    ("SET sql_mode = 'NO_BACKSLASH_ESCAPES'", "START TRANSACTION READ ONLY", "SELECT 1", "COMMIT"),
)


def _flags(conn: pymysql.connections.Connection[Any], sql: str) -> int:
    with conn.cursor() as cur:
        cur.execute(sql)
        cur.fetchall()
    return int(conn.server_status) & FLAGS


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda s: s[0])
def test_flags_are_mariadbs(sharded_env: ShardedEnv, script: tuple[str, ...]) -> None:
    server = sharded_env.servers[0]
    proxied = sharded_env.connect()
    direct = pymysql.connect(host=server.host, port=server.port, user=server.user, password=server.password,
                             database=ORACLE_DB, autocommit=True)
    try:
        for sql in script:
            got, want = _flags(proxied, sql), _flags(direct, sql)
            assert got == want, f"{sql}: proxy {got:#06x}, MariaDB {want:#06x}"
    finally:
        proxied.close()
        direct.close()


@pytest.mark.parametrize("mode", ("NO_BACKSLASH_ESCAPES", "ANSI_QUOTES,NO_BACKSLASH_ESCAPES"))
def test_a_client_escaping_by_the_flags_stores_what_it_sent(sharded_env: ShardedEnv, mode: str) -> None:
    """PyMySQL escapes by the flag: without it, 'a\\b' was stored as a\\\\b and "it's" failed with 1064."""
    env = sharded_env
    values = ("a\\b", "it's", "c:\\dir\\file")
    mine = "order_id IN (7700, 7701, 7702, 7710, 7711)"  # rows of this test only: what other modules keep is left alone
    with env.connect() as conn, conn.cursor() as cur:
        cur.execute(f"DELETE FROM t_order WHERE {mine}")
        cur.execute(f"SET sql_mode = '{mode}'")
        for i, value in enumerate(values):
            cur.execute("INSERT INTO t_order (order_id, user_id, status) VALUES (%s, %s, %s)", (7700 + i, i, value))
        # one statement over both data sources: each node's part keeps the text as the client escaped it
        cur.execute("INSERT INTO t_order (order_id, user_id, status) VALUES (%s, %s, %s), (%s, %s, %s)",
                    (7710, 10, values[0], 7711, 11, values[1]))
        cur.execute(f"SELECT status FROM t_order WHERE {mine} ORDER BY order_id")
        assert [r[0] for r in cur.fetchall()] == [*values, values[0], values[1]]
        cur.execute(f"DELETE FROM t_order WHERE {mine}")
