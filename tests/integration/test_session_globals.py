"""A new client session starts with the server's current global variables, as a new connection to MariaDB does
(issue 34 item 7): the proxy's pooled connections keep the values of when they were opened or last reset, so a
session that followed a window of `SET GLOBAL sql_mode = ''` ran non-strict and stored `('abcdef', 300)` as
`('abc', 127)` where a new direct session answers 1406."""

from __future__ import annotations

from typing import Any

import pymysql
import pytest

from proxy.sandbox import MariaDBServer
from tests.integration.harness import RunningProxy
from tests.integration.sharding_fixtures import ShardedEnv


def _one(conn: pymysql.connections.Connection[Any], sql: str) -> Any:
    with conn.cursor() as cur:
        cur.execute(sql)
        return cur.fetchall()[0][0]


def _window(server: MariaDBServer, connect: Any, statement: str) -> None:
    """Sessions through the proxy while the global sql_mode is '' (their connections go back to the pool)."""
    before = server.execute("SELECT @@global.sql_mode")[0][0]
    server.execute("SET GLOBAL sql_mode = ''")
    try:
        for _ in range(3):
            with connect() as conn:
                _one(conn, statement)
    finally:
        server.execute(f"SET GLOBAL sql_mode = '{before}'")


@pytest.mark.parametrize("database", ("pass-through", "sharded"))
def test_a_new_session_takes_the_current_globals(passthrough_proxy: RunningProxy, mariadb: MariaDBServer,
                                                 sharded_env: ShardedEnv, database: str) -> None:
    if database == "pass-through":
        server, connect, statement = mariadb, lambda: passthrough_proxy.connect("demo"), "SELECT 1 FROM DUAL"
    else:
        server, connect = sharded_env.servers[0], sharded_env.connect
        statement = "SELECT COUNT(*) FROM t_order WHERE user_id = 2"
    _window(server, connect, statement)
    want = server.execute("SELECT @@global.sql_mode")[0][0]
    assert "STRICT" in want
    for _ in range(3):
        with connect() as conn:
            _one(conn, statement)  # the session's first statement takes a connection the way any statement does
            assert _one(conn, "SELECT @@session.sql_mode") == want
