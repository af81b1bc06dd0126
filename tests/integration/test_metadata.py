"""Metadata in logical names on a sharded database: what GUI tools and ORMs see when they browse."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pymysql
import pytest
from pymysql.constants import CLIENT, SERVER_STATUS

from proxy.sandbox import MariaDBServer
from tests.integration.harness import RunningProxy, start_proxy, write_conf

RULES = (Path(__file__).resolve().parents[2] / "conf" / "database-sharding.yaml").read_text().split("rules:\n", 1)[1]


@pytest.fixture(scope="module")
def proxy(mariadb_shards: list[MariaDBServer], tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningProxy]:
    for i, server in enumerate(mariadb_shards):
        server.execute(f"CREATE DATABASE IF NOT EXISTS meta_ds_{i}")
    mariadb_shards[0].execute("CREATE DATABASE IF NOT EXISTS meta_plain_ds")
    mariadb_shards[0].execute("CREATE TABLE meta_plain_ds.p_one (id INT)")
    mariadb_shards[0].execute("CREATE TABLE meta_plain_ds.q_two (id INT)")
    conf = write_conf(
        tmp_path_factory.mktemp("meta-conf"),
        {
            "meta_db": {f"ds_{i}": (s, f"meta_ds_{i}") for i, s in enumerate(mariadb_shards)},
            "meta_plain": {"ds_0": (mariadb_shards[0], "meta_plain_ds")},
        },
        rules_yaml={"meta_db": RULES},
    )
    running = start_proxy(conf)
    with running.connect("meta_db") as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE t_order (order_id BIGINT PRIMARY KEY, user_id INT NOT NULL, status VARCHAR(45))")
        cur.execute("CREATE TABLE t_order_item (order_item_id BIGINT PRIMARY KEY, order_id BIGINT, user_id INT)")
        cur.execute("CREATE TABLE t_address (address_id BIGINT PRIMARY KEY, address_name VARCHAR(100))")
    mariadb_shards[0].execute("CREATE TABLE meta_ds_0.t_single (id INT PRIMARY KEY)")
    yield running
    running.stop()


def _q(conn: pymysql.connections.Connection[Any], sql: str) -> list[tuple[Any, ...]]:
    with conn.cursor() as cur:
        cur.execute(sql)
        return list(cur.fetchall())


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("SHOW TABLES", [("t_address",), ("t_order",), ("t_order_item",), ("t_single",)]),
        ("SHOW FULL TABLES LIKE 't_order%'", [("t_order", "BASE TABLE"), ("t_order_item", "BASE TABLE")]),
        ("SHOW TABLES FROM meta_plain LIKE 'p%'", [("p_one",)]),
        ("SELECT DATABASE()", [("meta_db",)]),
        ("SELECT DATABASE(), 1", [("meta_db", 1)]),
        ("SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() "
         "ORDER BY TABLE_NAME",
         [("meta_db", "t_address"), ("meta_db", "t_order"), ("meta_db", "t_order_item"), ("meta_db", "t_single")]),
        ("SELECT COLUMN_NAME, DATA_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'meta_db' "
         "AND TABLE_NAME = 't_order' ORDER BY ORDINAL_POSITION",
         [("order_id", "bigint"), ("user_id", "int"), ("status", "varchar")]),
        ("SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = 'meta_db'", [("meta_db",)]),
        ("SELECT INDEX_NAME, COLUMN_NAME FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = 'meta_db' "
         "AND TABLE_NAME = 't_order_item'", [("PRIMARY", "order_item_id")]),
        ("SELECT TABLE_NAME, COLUMN_NAME FROM information_schema.KEY_COLUMN_USAGE WHERE TABLE_SCHEMA = 'meta_db' "
         "AND TABLE_NAME = 't_address'", [("t_address", "address_id")]),
    ],
)
def test_logical_metadata(proxy: RunningProxy, sql: str, expected: list[tuple[Any, ...]]) -> None:
    with proxy.connect("meta_db") as conn:
        assert _q(conn, sql) == expected


def test_session_functions_are_the_proxys(proxy: RunningProxy) -> None:
    with proxy.connect("meta_db") as conn:
        (conn_id, user, current), = _q(conn, "SELECT CONNECTION_ID(), USER(), CURRENT_USER()")
        assert user == "root@127.0.0.1" and current == "root@%"
        ids = [row[0] for row in _q(conn, "SHOW PROCESSLIST")]
        assert conn_id in ids  # the id KILL takes
        _q(conn, "INSERT INTO t_order (user_id, status) VALUES (3, 'x')")
        (last_id, count), = _q(conn, "SELECT LAST_INSERT_ID(), ROW_COUNT()")
        assert last_id > 0 and count == 1
        assert _q(conn, f"SELECT user_id FROM t_order WHERE order_id = {last_id}") == [(3,)]


def test_multi_statement_on_a_sharded_database(proxy: RunningProxy) -> None:
    conn = proxy.connect("meta_db", client_flag=CLIENT.MULTI_STATEMENTS)
    with conn.cursor() as cur:
        cur.execute("SET @a = 1; SELECT @a; SHOW TABLES LIKE 't_addr%'; SELECT COUNT(*) FROM t_address")
        results = [tuple(cur.fetchall())]
        while cur.nextset():
            results.append(tuple(cur.fetchall()))
        assert results == [(), ((1,),), (("t_address",),), ((0,),)]
        with pytest.raises(pymysql.err.OperationalError):
            cur.execute("SELECT 1; SELECT nosuch FROM t_order; SELECT 2")
            while cur.nextset():
                pass
        cur.execute("SELECT 3")
        assert cur.fetchall() == ((3,),)
    conn.close()


def test_ddl_commits_an_open_transaction_as_mysql_does(
    proxy: RunningProxy, mariadb_shards: list[MariaDBServer]
) -> None:
    with proxy.connect("meta_db") as conn, conn.cursor() as cur:
        cur.execute("BEGIN")
        cur.execute("INSERT INTO t_order (order_id, user_id, status) VALUES (501, 1, 'x'), (502, 2, 'y')")
        cur.execute("CREATE TABLE t_after_ddl (id INT PRIMARY KEY)")  # implicit commit
        assert not conn.server_status & SERVER_STATUS.SERVER_STATUS_IN_TRANS
        cur.execute("ROLLBACK")  # nothing left to roll back
    rows = [server.execute(f"SELECT COUNT(*) FROM meta_ds_{i}.t_order_{t} WHERE order_id IN (501, 502)")[0][0]
            for i, server in enumerate(mariadb_shards) for t in (0, 1)]
    assert sum(rows) == 2


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("SELECT t_order.nosuch FROM t_order WHERE user_id = 1 AND order_id = 1", "Unknown column 't_order.nosuch'"),
        ("SELECT t_order.nosuch FROM t_order", "Unknown column 't_order.nosuch'"),
    ],
)
def test_backend_errors_name_logical_tables(proxy: RunningProxy, sql: str, expected: str) -> None:
    with proxy.connect("meta_db") as conn, conn.cursor() as cur, pytest.raises(pymysql.err.OperationalError) as info:
        cur.execute(sql)
    message = str(info.value.args[1])
    assert expected in message and "t_order_" not in message and "meta_ds_" not in message, message
