"""mysqlclient (MySQLdb, libmariadb) through the proxy on a sharded logical database."""

from __future__ import annotations

import MySQLdb
from MySQLdb.constants import CLIENT

from tests.compat.conftest import CompatEnv
from tests.compat.scenario import DBAPIClient, run_sync

CLIENT_NAME = "mysqlclient"


def _connect(env: CompatEnv, **kw: object) -> MySQLdb.Connection:
    d = env.dsn(CLIENT_NAME)
    return MySQLdb.connect(host=d["host"], port=d["port"], user=d["user"], password=d["password"],
                           database=d["database"], **kw)


def test_mysqlclient_scenario(compat: CompatEnv) -> None:
    conn = _connect(compat)
    try:
        assert conn.get_autocommit() is False
        run_sync(compat, CLIENT_NAME, DBAPIClient(conn))
        conn.ping()
        assert conn.get_server_info()
    finally:
        conn.close()


def test_mysqlclient_multi_statements_and_field_list(compat: CompatEnv) -> None:
    conn = _connect(compat, client_flag=CLIENT.MULTI_STATEMENTS, autocommit=True)
    try:
        cur = conn.cursor()
        cur.execute("SET SQL_AUTO_IS_NULL = 0; SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
        while cur.nextset():
            pass
        cur.execute("SELECT @@tx_isolation, @@sql_auto_is_null")
        assert cur.fetchall() == (("READ-COMMITTED", 0),)
        cur.close()
        conn.select_db(compat.database(CLIENT_NAME))  # COM_INIT_DB
    finally:
        conn.close()
