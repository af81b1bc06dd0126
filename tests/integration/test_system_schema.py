"""ShardingSphere's `shardingsphere` system schema through the proxy (cluster_information,
sharding_table_statistics), text and prepared, answered by MariaDB over the rows the proxy builds."""

from __future__ import annotations

from typing import Any

import mysql.connector
import pytest

from proxy.version import version
from tests.integration.sharding_fixtures import ShardedEnv


def _query(env: ShardedEnv, sql: str, prepared: bool) -> list[tuple[Any, ...]]:
    if not prepared:
        with env.proxy.connect("sharding_db") as conn, conn.cursor() as cur:
            cur.execute(sql)
            return [tuple(r) for r in cur.fetchall()]
    conn = mysql.connector.connect(host=env.proxy.host, port=env.proxy.port, user="root", password="root",
                                   database="sharding_db", use_pure=True, ssl_disabled=True)
    try:
        cur = conn.cursor(prepared=True)
        cur.execute(sql)
        rows = [tuple(v.decode() if isinstance(v, bytearray | bytes) else v for v in r) for r in cur.fetchall()]
        cur.close()
        return rows
    finally:
        conn.close()


# the example's t_order and t_order_item: ds_0/ds_1 x t_<name>_0/_1, in actualDataNodes order
NODES = [(t, ds, f"{t}_{n}") for t in ("t_order", "t_order_item") for ds in ("ds_0", "ds_1") for n in (0, 1)]


@pytest.mark.parametrize("prepared", [False, True], ids=["text", "prepared"])
@pytest.mark.parametrize(("sql", "want"), [
    ("SELECT * FROM shardingsphere.cluster_information", [(version(),)]),
    ("select version from `shardingsphere`.`cluster_information` c where c.version <> ''", [(version(),)]),
    # inside a literal or a comment the name stays text; as a column qualifier it names the table
    ("SELECT 'shardingsphere.cluster_information' /* shardingsphere.cluster_information */, "
     "shardingsphere.cluster_information.version FROM shardingsphere.cluster_information",
     [("shardingsphere.cluster_information", version())]),
    ("SELECT logic_table_name, actual_database_name, actual_table_name FROM shardingsphere.sharding_table_statistics "
     "WHERE logic_database_name = 'sharding_db' AND logic_table_name LIKE 't_order%' ORDER BY id", NODES),
    ("SELECT COUNT(*), MAX(id) - MIN(id) + 1 = COUNT(*) FROM shardingsphere.sharding_table_statistics s "
     "WHERE s.logic_database_name = 'sharding_db'", [(8, 1)]),
    ("SELECT actual_table_name FROM shardingsphere.sharding_table_statistics WHERE logic_table_name = 't_order' "
     "AND row_count >= 0 AND size >= 0 ORDER BY id DESC LIMIT 1", [("t_order_1",)]),
])  # fmt: skip
def test_the_system_schema_answers_as_shardingsphere(sharded_env: ShardedEnv, sql: str, want: list[Any],
                                                     prepared: bool) -> None:
    got = _query(sharded_env, sql, prepared)
    assert [tuple(int(v) if isinstance(v, int) else v for v in r) for r in got] == want


def test_an_unknown_system_table_is_mariadbs_error(sharded_env: ShardedEnv) -> None:
    import pymysql

    with sharded_env.proxy.connect("sharding_db") as conn, conn.cursor() as cur:
        with pytest.raises(pymysql.err.MySQLError) as failed:
            cur.execute("SELECT * FROM shardingsphere.no_such_table")
    assert failed.value.args[0] in (1146, 1235), failed.value.args
