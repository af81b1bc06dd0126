"""What drivers, ORMs and GUI tools send right after connecting and while browsing, on a sharded logical
database (text protocol through PyMySQL, prepared through mysql-connector): answered, and in logical names.
The sources: docs of the clients named per case (Connector/J, SQLAlchemy, Django, Navicat, DBeaver, mariadb)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import mysql.connector
import pymysql
import pytest
from pymysql.constants import CLIENT

from tests.compat.conftest import T_ADDRESS_DDL, T_ORDER_DDL, CompatEnv
from tests.compat.scenario import assert_logical

CLIENT_NAME = "startup"

CONNECTOR_J = (
    "SELECT @@session.auto_increment_increment AS auto_increment_increment, @@character_set_client AS "
    "character_set_client, @@character_set_connection AS character_set_connection, @@character_set_results AS "
    "character_set_results, @@character_set_server AS character_set_server, @@collation_server AS collation_server, "
    "@@collation_connection AS collation_connection, @@init_connect AS init_connect, @@interactive_timeout AS "
    "interactive_timeout, @@license AS license, @@lower_case_table_names AS lower_case_table_names, "
    "@@max_allowed_packet AS max_allowed_packet, @@net_write_timeout AS net_write_timeout, @@performance_schema AS "
    "performance_schema, @@query_cache_size AS query_cache_size, @@query_cache_type AS query_cache_type, "
    "@@sql_mode AS sql_mode, @@system_time_zone AS system_time_zone, @@time_zone AS time_zone, @@tx_isolation AS "
    "transaction_isolation, @@wait_timeout AS wait_timeout"
)
DJANGO = ("SELECT VERSION(), @@sql_mode, @@default_storage_engine, @@sql_auto_is_null, @@lower_case_table_names, "
          "CONVERT_TZ('2001-01-01 01:00:00', 'UTC', 'UTC') IS NOT NULL")


@pytest.fixture(scope="module")
def conn(compat: CompatEnv) -> Iterator[pymysql.connections.Connection[Any]]:
    c = pymysql.connect(**compat.dsn(CLIENT_NAME), autocommit=True, client_flag=CLIENT.MULTI_STATEMENTS)
    with c.cursor() as cur:
        for sql in ("DROP TABLE IF EXISTS t_order", "DROP TABLE IF EXISTS t_address", T_ORDER_DDL, T_ADDRESS_DDL,
                    "INSERT INTO t_order VALUES (100, 10, 'a'), (101, 10, 'b'), (102, 11, 'c'), (103, 11, 'd')"):
            cur.execute(sql)
    yield c
    c.close()


def _all(conn: pymysql.connections.Connection[Any], sql: str) -> list[list[tuple[Any, ...]]]:
    with conn.cursor() as cur:
        cur.execute(sql)
        out = [list(cur.fetchall())]
        while cur.nextset():
            out.append(list(cur.fetchall()))
        return out


DB = CompatEnv.database(CLIENT_NAME)
TABLES = [("t_address",), ("t_order",)]
INDEX = [("t_order", 0, "PRIMARY", "order_id"), ("t_order", 1, "idx_user", "user_id")]


def _index(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    return [(r[0], r[1], r[2], r[4]) for r in rows]


CASES: list[Any] = [
    # mariadb / mysql CLI, every GUI
    pytest.param("select @@version_comment limit 1", lambda r: len(r[0]) == 1, id="version_comment"),
    pytest.param("SELECT DATABASE(), USER(), CURRENT_USER()", lambda r: r[0][0][0] == DB and
                 r[0][0][1].startswith("root@") and r[0][0][2] == "root@%", id="session-functions"),
    pytest.param("SHOW DATABASES", lambda r: (DB,) in r[0] and not any("cpt_" in x[0] for x in r[0]),
                 id="show-databases"),
    # Connector/J, SQLAlchemy, Django start-up selects
    pytest.param(CONNECTOR_J, lambda r: len(r[0][0]) == 21 and r[0][0][0] == 1, id="connector-j-variables"),
    pytest.param("SELECT @@sql_mode; SELECT @@lower_case_table_names", lambda r: r[1] == [(0,)],
                 id="sqlalchemy-selects"),
    pytest.param(DJANGO, lambda r: r[0][0][2] == "InnoDB" and r[0][0][3] == 0, id="django-select"),
    pytest.param("SET SQL_AUTO_IS_NULL = 0; SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED; "
                 "SELECT @@tx_isolation", lambda r: r[2] == [("READ-COMMITTED",)], id="django-multi-set"),
    # Navicat's probe (one multi-statement query)
    pytest.param("SHOW VARIABLES LIKE 'lower_case_%'; SHOW VARIABLES LIKE 'sql_mode'; SELECT COUNT(*) AS "
                 "support_ndb FROM information_schema.ENGINES WHERE Engine = 'ndbcluster'",
                 lambda r: [x[0] for x in r[0]] == ["lower_case_file_system", "lower_case_table_names"]
                 and r[1][0][0] == "sql_mode" and r[2] == [(0,)], id="navicat-probe"),
    pytest.param("SHOW VARIABLES WHERE Variable_name = 'autocommit'", lambda r: r[0] == [("autocommit", "ON")],
                 id="show-variables-where"),
    pytest.param("SHOW SESSION STATUS LIKE 'Uptime'", lambda r: r[0][0][0] == "Uptime", id="show-status"),
    pytest.param("SHOW WARNINGS", lambda r: r[0] == [], id="show-warnings"),
    # DBeaver / HeidiSQL / Workbench browsing
    pytest.param("SHOW ENGINES", lambda r: any(x[0] == "InnoDB" for x in r[0]), id="show-engines"),
    pytest.param("SHOW CHARSET LIKE 'utf8mb4'", lambda r: r[0][0][0] == "utf8mb4", id="show-charset"),
    pytest.param("SHOW COLLATION LIKE 'utf8mb4_bin'", lambda r: r[0][0][:2] == ("utf8mb4_bin", "utf8mb4"),
                 id="show-collation"),
    pytest.param("SELECT ENGINE, SUPPORT FROM information_schema.ENGINES WHERE ENGINE = 'InnoDB'",
                 lambda r: r[0] == [("InnoDB", "DEFAULT")], id="information_schema-engines"),
    pytest.param("SHOW CREATE DATABASE " + DB, lambda r: r[0][0][0] == DB and f"`{DB}`" in r[0][0][1],
                 id="show-create-database"),
    pytest.param("SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = DATABASE()",
                 lambda r: r[0] == [(DB,)], id="information_schema-schemata"),
    # logical tables
    pytest.param("SHOW TABLES", lambda r: r[0] == TABLES, id="show-tables"),
    pytest.param("SHOW FULL TABLES", lambda r: r[0] == [(t, "BASE TABLE") for (t,) in TABLES], id="show-full-tables"),
    pytest.param(f"SHOW FULL TABLES FROM `{DB}` WHERE Table_type = 'BASE TABLE'",
                 lambda r: r[0] == [(t, "BASE TABLE") for (t,) in TABLES], id="show-full-tables-where"),
    pytest.param(f"SHOW TABLES WHERE Tables_in_{DB} LIKE 't_o%'", lambda r: r[0] == [("t_order",)],
                 id="show-tables-where"),
    pytest.param("SHOW TABLE STATUS LIKE 't_order'", lambda r: r[0][0][0] == "t_order" and len(r[0]) == 1,
                 id="show-table-status"),
    pytest.param("SHOW TABLE STATUS", lambda r: [x[0] for x in r[0]] == ["t_address", "t_order"],
                 id="show-table-status-all"),
    pytest.param("SHOW INDEX FROM t_order", lambda r: _index(r[0]) == INDEX, id="show-index"),
    pytest.param(f"SHOW KEYS FROM t_order FROM {DB}", lambda r: _index(r[0]) == INDEX, id="show-keys"),
    pytest.param("SHOW INDEXES IN `t_order` WHERE Key_name = 'idx_user'", lambda r: _index(r[0]) == INDEX[1:],
                 id="show-indexes-where"),
    pytest.param("SHOW CREATE TABLE t_order", lambda r: r[0][0][0] == "t_order" and
                 r[0][0][1].startswith("CREATE TABLE `t_order` (") and "KEY `idx_user`" in r[0][0][1],
                 id="show-create-table"),
    pytest.param("SHOW FULL COLUMNS FROM t_order", lambda r: [x[0] for x in r[0]] == ["order_id", "user_id", "status"],
                 id="show-full-columns"),
    pytest.param("DESCRIBE t_order", lambda r: [x[0] for x in r[0]] == ["order_id", "user_id", "status"],
                 id="describe"),
    pytest.param("DESC t_order status", lambda r: [x[0] for x in r[0]] == ["status"], id="describe-column"),
    pytest.param("SELECT TABLE_NAME, TABLE_TYPE FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() "
                 "ORDER BY TABLE_NAME", lambda r: r[0] == [(t, "BASE TABLE") for (t,) in TABLES],
                 id="information_schema-tables"),
    pytest.param(f"SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = '{DB}' AND "
                 "TABLE_NAME = 't_order' ORDER BY ORDINAL_POSITION",
                 lambda r: r[0] == [("order_id",), ("user_id",), ("status",)], id="information_schema-columns"),
    pytest.param("SELECT INDEX_NAME, COLUMN_NAME FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE() "
                 "AND TABLE_NAME = 't_order' ORDER BY INDEX_NAME",
                 lambda r: r[0] == [("idx_user", "user_id"), ("PRIMARY", "order_id")],
                 id="information_schema-statistics"),
    pytest.param("SELECT TABLE_NAME, COLUMN_NAME FROM information_schema.KEY_COLUMN_USAGE WHERE TABLE_SCHEMA = "
                 "DATABASE() ORDER BY TABLE_NAME", lambda r: r[0] == [("t_address", "address_id"),
                                                                     ("t_order", "order_id")],
                 id="information_schema-key_column_usage"),
    pytest.param("SHOW PROCESSLIST", lambda r: any(x[3] == DB and x[7] == "SHOW PROCESSLIST" for x in r[0]),
                 id="show-processlist"),
]


@pytest.mark.parametrize(("sql", "check"), CASES)
def test_startup_and_browsing_queries(conn: pymysql.connections.Connection[Any], sql: str, check: Any) -> None:
    result = _all(conn, sql)
    assert_logical(result)
    assert check(result), result


@pytest.mark.parametrize("sql", ["SHOW TABLES", "SHOW FULL TABLES", "SHOW INDEX FROM t_order",
                                 "SHOW KEYS IN t_order", "SHOW CREATE TABLE t_order", "DESCRIBE t_order",
                                 "SHOW TABLE STATUS", "SELECT DATABASE(), CONNECTION_ID()",
                                 "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s"])
def test_prepared_metadata_in_logical_names(compat: CompatEnv, conn: pymysql.connections.Connection[Any],
                                            sql: str) -> None:
    """The same statements prepared (COM_STMT_PREPARE / EXECUTE, binary rows) answer what the text form does."""
    params: tuple[Any, ...] = (DB,) if "%s" in sql else ()
    text_rows = _all(conn, sql % ((f"'{DB}'",) if params else ()))[0]
    c = mysql.connector.connect(**compat.dsn(CLIENT_NAME), use_pure=True, ssl_disabled=True, autocommit=True)
    try:
        cur = c.cursor(prepared=True)
        cur.execute(sql.replace("%s", "?"), params)
        rows = [tuple(v.decode() if isinstance(v, bytes | bytearray) else v for v in r) for r in cur.fetchall()]
        connection_id = c.connection_id
        cur.close()
    finally:
        c.close()
    assert_logical(rows)
    if sql.startswith("SELECT DATABASE()"):
        assert rows == [(DB, connection_id)]
    elif sql == "SHOW TABLE STATUS":
        assert [r[0] for r in rows] == [r[0] for r in text_rows]
    else:
        assert rows == text_rows
