"""mysql-connector-python through the proxy on a sharded logical database: the pure-Python protocol, and the
C extension when the installed wheel provides it (`mysql.connector.HAVE_CEXT`)."""

from __future__ import annotations

from typing import Any

import mysql.connector
import pytest

from tests.compat.conftest import CompatEnv
from tests.compat.scenario import DBAPIClient, run_sync

IMPLEMENTATIONS = [
    pytest.param(True, "connector", id="pure"),
    pytest.param(False, "connector_cext", id="cext", marks=pytest.mark.skipif(
        not mysql.connector.HAVE_CEXT,
        reason="mysql-connector-python's C extension is not available in this install (HAVE_CEXT is False)")),
]


def _connect(env: CompatEnv, client: str, use_pure: bool, **kw: Any) -> Any:
    return mysql.connector.connect(**env.dsn(client), use_pure=use_pure, ssl_disabled=True, **kw)


@pytest.mark.parametrize(("use_pure", "client"), IMPLEMENTATIONS)
def test_connector_scenario(compat: CompatEnv, use_pure: bool, client: str) -> None:
    conn = _connect(compat, client, use_pure, collation="utf8mb4_general_ci")
    try:
        assert conn.autocommit is False
        run_sync(compat, client, DBAPIClient(conn, {"buffered": True}))
        conn.ping(reconnect=False)
        conn.cmd_reset_connection()
    finally:
        conn.close()


@pytest.mark.parametrize(("use_pure", "client"), IMPLEMENTATIONS)
def test_connector_prepared_cursor(compat: CompatEnv, use_pure: bool, client: str) -> None:
    """cursor(prepared=True): COM_STMT_PREPARE once, COM_STMT_RESET + COM_STMT_EXECUTE per call."""
    conn = _connect(compat, client, use_pure, autocommit=True)
    try:
        cur = conn.cursor(prepared=True)
        cur.execute("DELETE FROM t_order")
        for user_id, order_id in ((10, 100), (10, 101), (11, 102), (11, 103)):
            cur.execute("INSERT INTO t_order (order_id, user_id, status) VALUES (?, ?, ?)", (order_id, user_id, "new"))
        compat.assert_spread(client)
        cur.execute("SELECT order_id, status FROM t_order WHERE user_id = ? ORDER BY order_id", (11,))
        assert [(int(a), b if isinstance(b, str) else b.decode()) for a, b in cur.fetchall()] == [
            (102, "new"), (103, "new")]
        cur.close()
    finally:
        conn.close()
