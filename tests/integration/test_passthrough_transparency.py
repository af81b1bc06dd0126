"""Pass-through is transparent: each statement sent to a plain MariaDB database and through the proxy to a
pass-through logical database gets the same answer — rows, column definitions, OK packet fields, errors —
with the logical database's name where MariaDB prints its own (issue 34 item 7).

The logical database is the session's `passthrough_proxy` `demo`, whose physical database `demo_ds` has another
name: the oracle is `ptt_oracle` on the same server, and its answers are compared with `ptt_oracle` read as
`demo`. Tables are prefixed `ptt_`.
"""

from __future__ import annotations

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

SETUP = (
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
                for f in (r.fields or ())
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
