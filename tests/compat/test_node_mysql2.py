"""node mysql2 through the proxy: `query` (text protocol, client-side interpolation) and `execute`
(COM_STMT_PREPARE / EXECUTE), run as `node tests/compat/node/client.js <phase>`; mysql2 is installed into
tests/compat/node by `.ci/run` (npm ci, from the committed package-lock.json)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.compat.conftest import SPREAD, CompatEnv
from tests.compat.scenario import LOGIC_TABLES, T_ORDER_COLUMNS, assert_logical

CLIENT_NAME = "node"
NODE_DIR = Path(__file__).resolve().parent / "node"

pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed (CI installs it)")


def _run(env: CompatEnv, phase: str) -> dict[str, Any]:
    if not (NODE_DIR / "node_modules" / "mysql2").is_dir():
        pytest.fail("mysql2 is not installed: run `npm ci` in tests/compat/node (as .ci/run does)", pytrace=False)
    environ = {**os.environ, "SHARDPROXY_COMPAT_HOST": env.host, "SHARDPROXY_COMPAT_PORT": str(env.port),
               "SHARDPROXY_COMPAT_DB": env.database(CLIENT_NAME)}
    res = subprocess.run(["node", str(NODE_DIR / "client.js"), phase], capture_output=True, text=True, timeout=60,
                         env=environ, cwd=NODE_DIR)
    assert res.returncode == 0, f"node client.js {phase}: {res.stderr}"
    result: dict[str, Any] = json.loads(res.stdout)
    return result


def test_node_mysql2(compat: CompatEnv) -> None:
    setup = _run(compat, "setup")
    assert setup["version"]["db"] == compat.database(CLIENT_NAME)

    crud = _run(compat, "crud")
    assert [crud[k] for k in ("query_insert_100", "query_insert_101", "execute_insert_102",
                              "execute_insert_103")] == [1, 1, 1, 1]
    assert [(r["order_id"], r["user_id"], r["status"]) for r in crud["all"]] == [
        (o, u, "new") for u, o in sorted(SPREAD, key=lambda p: p[1])]
    assert crud["point"] == [{"status": "new"}]
    assert (crud["update"], crud["update2"], crud["delete"], crud["delete_all"]) == (2, 2, 1, 3)
    assert [(r["status"], int(r["n"])) for r in crud["grouped"]] == [("new", 1), ("paid", 1), ("sent", 2)]
    assert compat.all_backend_rows(CLIENT_NAME) == []

    assert _run(compat, "rollback") == {"inside": 4, "after": 0}
    assert compat.all_backend_rows(CLIENT_NAME) == []
    assert _run(compat, "commit") == {"after": 4}
    compat.assert_spread(CLIENT_NAME)

    meta = _run(compat, "metadata")
    assert_logical(meta)
    tables = [t for t in LOGIC_TABLES if t != "t_order_item"]  # this client creates t_order and t_address
    assert [next(iter(r.values())) for r in meta["tables"]] == tables
    assert [list(r.values()) for r in meta["full_tables"]] == [[t, "BASE TABLE"] for t in tables]
    assert [r["Field"] for r in meta["columns"]] == T_ORDER_COLUMNS
    assert {(r["Table"], r["Key_name"]) for r in meta["index"]} == {("t_order", "PRIMARY"), ("t_order", "idx_user")}
    assert meta["create"][0]["Table"] == "t_order"
    assert [r["name"] for r in meta["schema_tables"]] == tables
    assert [r["name"] for r in meta["schema_columns"]] == T_ORDER_COLUMNS
