"""The OK packet of a write is the one a single MariaDB server sends for it (issue 34 item 3): affected rows, the
info text (`Records: 2  Duplicates: 0  Warnings: 0`, `Rows matched: ...`), the warning count and the last insert
id, for writes over several nodes as for writes on one. Each script runs on the sharded `t_order` through the
proxy and on the same rows in the unsharded oracle database, with and without CLIENT_FOUND_ROWS."""

from __future__ import annotations

from typing import Any

import pymysql
import pytest
from pymysql.constants import CLIENT

from tests.integration.sharding_fixtures import ORACLE_DB, ShardedEnv

SEED = ((1, 1, "a"), (2, 2, "b"), (3, 3, "c"), (4, 4, "d"))
INSERT = "INSERT INTO t_order (order_id, user_id, status) VALUES "

# one line a statement, run in order on the seeded rows (order_id % 2 and user_id % 2 spread them over 4 nodes)
STATEMENTS = (
    INSERT + "(10, 10, 'n'), (11, 11, 'n')",  # two nodes
    INSERT + "(12, 12, 'n'), (14, 12, 'n'), (13, 13, 'n')",  # two nodes, two rows on one
    INSERT + "(20, 20, 'one')",  # one row, one node
    "INSERT IGNORE INTO t_order (order_id, user_id, status) VALUES (1, 1, 'dup'), (21, 21, 'n')",
    "INSERT IGNORE INTO t_order (order_id, user_id, status) VALUES (2, 2, 'dup'), (3, 3, 'dup'), (22, 22, 'n')",
    "REPLACE INTO t_order (order_id, user_id, status) VALUES (2, 2, 'rep'), (23, 23, 'n')",
    INSERT + "(3, 3, 'c'), (30, 30, 'n'), (31, 31, 'n') ON DUPLICATE KEY UPDATE status = VALUES(status)",  # same
    INSERT + "(3, 3, 'x'), (4, 4, 'x'), (32, 32, 'n') ON DUPLICATE KEY UPDATE status = VALUES(status)",
    INSERT + "(4, 4, 'y'), (33, 33, 'n') ON DUPLICATE KEY UPDATE status = 'z'",
    "UPDATE t_order SET status = 'u' WHERE user_id IN (1, 2, 3)",
    "UPDATE t_order SET status = 'u' WHERE user_id IN (1, 2, 4)",  # some rows unchanged
    "UPDATE t_order SET status = 'v' WHERE user_id IN (1, 2) LIMIT 0",
    "UPDATE t_order SET status = 'w' ORDER BY order_id LIMIT 0",
    "UPDATE t_order SET status = 'w' WHERE user_id = 999",
    "DELETE FROM t_order WHERE user_id IN (10, 11)",
    "DELETE FROM t_order WHERE user_id IN (998, 999)",
)


def _ok(conn: pymysql.connections.Connection[Any], sql: str) -> tuple[int, bytes, int, int]:
    with conn.cursor() as cur:
        cur.execute(sql)
        result = conn._result
        assert result is not None
        message = result.message or b""
        return int(result.affected_rows), bytes(message[1:] if message else b""), int(result.warning_count), \
            int(result.insert_id)


@pytest.mark.parametrize("found_rows", (False, True), ids=("affected", "found rows"))
def test_oks_are_one_servers(sharded_env: ShardedEnv, found_rows: bool) -> None:
    env = sharded_env
    env.clean("t_order")
    server = env.servers[0]
    server.execute("DELETE FROM t_order", ORACLE_DB)
    flags = CLIENT.FOUND_ROWS if found_rows else 0
    proxied = env.connect(client_flag=flags)
    direct = pymysql.connect(host=server.host, port=server.port, user=server.user, password=server.password,
                             database=ORACLE_DB, autocommit=True, client_flag=flags)
    try:
        seed = INSERT + ", ".join(f"({o}, {u}, '{s}')" for o, u, s in SEED)
        _ok(proxied, seed)
        _ok(direct, seed)
        wrong = []
        for sql in STATEMENTS:
            got, want = _ok(proxied, sql), _ok(direct, sql)
            if got != want:
                wrong.append(f"{sql}\n  proxy  {got}\n  server {want}")
        assert not wrong, "\n".join(wrong)
    finally:
        proxied.close()
        direct.close()
        env.clean("t_order")
        server.execute("DELETE FROM t_order", ORACLE_DB)
