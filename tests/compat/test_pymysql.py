"""PyMySQL through the proxy on a sharded logical database (driver default: autocommit off)."""

from __future__ import annotations

import pymysql
from pymysql.constants import CLIENT

from tests.compat.conftest import CompatEnv
from tests.compat.scenario import DBAPIClient, run_sync

CLIENT_NAME = "pymysql"


def test_pymysql_scenario(compat: CompatEnv) -> None:
    conn = pymysql.connect(**compat.dsn(CLIENT_NAME))
    try:
        assert conn.get_autocommit() is False
        run_sync(compat, CLIENT_NAME, DBAPIClient(conn))
        # executemany folds the rows into one multi-row INSERT spanning all four actual tables
        with conn.cursor() as cur:
            cur.execute("DELETE FROM t_order")
            cur.executemany("INSERT INTO t_order (order_id, user_id, status) VALUES (%s, %s, %s)",
                            [(100, 10, "new"), (101, 10, "new"), (102, 11, "new"), (103, 11, "new")])
            assert cur.rowcount == 4
        conn.commit()
        compat.assert_spread(CLIENT_NAME)
        conn.ping()
    finally:
        conn.close()


def test_pymysql_multi_statements(compat: CompatEnv) -> None:
    """Navicat's start-up probe as one multi-statement COM_QUERY: three result sets."""
    conn = pymysql.connect(**compat.dsn(CLIENT_NAME), client_flag=CLIENT.MULTI_STATEMENTS, autocommit=True)
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW VARIABLES LIKE 'lower_case_%'; SHOW VARIABLES LIKE 'sql_mode'; "
                        "SELECT COUNT(*) AS support_ndb FROM information_schema.ENGINES WHERE Engine = 'ndbcluster'")
            first = cur.fetchall()
            assert {r[0] for r in first} == {"lower_case_file_system", "lower_case_table_names"}
            assert cur.nextset()
            assert [r[0] for r in cur.fetchall()] == ["sql_mode"]
            assert cur.nextset()
            assert cur.fetchall() == ((0,),)
            assert not cur.nextset()
    finally:
        conn.close()
