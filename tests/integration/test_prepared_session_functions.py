"""Prepared statements that ask the session's own functions (issue 34 item 7): `SELECT DATABASE()` prepared was
refused with 1235 on every database, and on a pass-through database `DATABASE()` next to a parameter answered the
physical database's name. Answers are the logical ones, as the text protocol gives them."""

from __future__ import annotations

from typing import Any

import mysql.connector
import pytest

from tests.integration.harness import RunningProxy
from tests.integration.sharding_fixtures import ShardedEnv

CASES = (  # (statement, parameters, the row as a function of the logical database's name)
    ("SELECT DATABASE()", (), lambda db: (db,)),
    ("SELECT DATABASE(), ? AS x", (1,), lambda db: (db, 1)),
    ("SELECT SCHEMA() AS s, ? + 1 AS y", (1,), lambda db: (db, 2)),
    ("SELECT CONNECTION_ID() > 0 AS c", (), lambda db: (1,)),
)


@pytest.mark.parametrize("where", ("pass-through", "sharded"))
@pytest.mark.parametrize(("sql", "params", "row"), CASES, ids=[c[0] for c in CASES])
def test_session_functions_prepared(passthrough_proxy: RunningProxy, sharded_env: ShardedEnv, where: str, sql: str,
                                    params: tuple[Any, ...], row: Any) -> None:
    proxy, db = (passthrough_proxy, "demo") if where == "pass-through" else (sharded_env.proxy, "sharding_db")
    conn = mysql.connector.connect(host=proxy.host, port=proxy.port, user="root", password="root", database=db,
                                   use_pure=True, ssl_disabled=True, autocommit=True)
    try:
        for _ in range(2):  # prepared anew, then the same text again
            cur = conn.cursor(prepared=True)
            cur.execute(sql, params)
            assert [tuple(r) for r in cur.fetchall()] == [row(db)]
            cur.close()
    finally:
        conn.close()


TEXT_CASES = (  # session functions inside expressions: answered where MariaDB answers (1583 / 1064 before)
    ("SELECT CONCAT('<', DATABASE(), '>')", lambda db: (f"<{db}>",)),
    ("SELECT IF(0, CONNECTION_ID(), CONNECTION_ID()) > 0", lambda db: (1,)),
    ("SELECT COALESCE(NULL, SCHEMA()), DATABASE()", lambda db: (db, db)),
)


@pytest.mark.parametrize("where", ("pass-through", "sharded"))
@pytest.mark.parametrize(("sql", "row"), TEXT_CASES, ids=[c[0] for c in TEXT_CASES])
def test_session_functions_inside_expressions(passthrough_proxy: RunningProxy, sharded_env: ShardedEnv, where: str,
                                              sql: str, row: Any) -> None:
    proxy, db = (passthrough_proxy, "demo") if where == "pass-through" else (sharded_env.proxy, "sharding_db")
    with proxy.connect(db) as conn, conn.cursor() as cur:
        cur.execute(sql)
        assert [tuple(r) for r in cur.fetchall()] == [row(db)]
