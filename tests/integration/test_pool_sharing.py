"""Sessions share pooled backend connections without sharing state: with a pool of one connection per
data source, two clients take turns on it, each seeing only its own SET state, variables and
transaction."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pymysql
import pytest

from proxy.sandbox import MariaDBServer
from tests.integration.harness import RunningProxy, start_proxy, write_conf

RULES = (Path(__file__).resolve().parents[2] / "conf" / "database-sharding.yaml").read_text().split("rules:\n", 1)[1]


@pytest.fixture(scope="module")
def proxy(mariadb_shards: list[MariaDBServer], tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningProxy]:
    for i, server in enumerate(mariadb_shards):
        server.execute(f"CREATE DATABASE IF NOT EXISTS pool_ds_{i}")
    conf = write_conf(
        tmp_path_factory.mktemp("pool-conf"),
        {
            "pool_sharded": {f"ds_{i}": (s, f"pool_ds_{i}") for i, s in enumerate(mariadb_shards)},
            "pool_plain": {"ds_0": (mariadb_shards[0], "pool_ds_0")},
        },
        rules_yaml={"pool_sharded": RULES},
        max_pool_size=1,
    )
    running = start_proxy(conf)
    with running.connect("pool_sharded") as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE t_order (order_id BIGINT PRIMARY KEY, user_id INT NOT NULL, status VARCHAR(45))")
    with running.connect("pool_plain") as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE t_plain (id BIGINT PRIMARY KEY)")
    yield running
    running.stop()


def _one(conn: pymysql.connections.Connection[Any], sql: str) -> tuple[Any, ...] | None:
    with conn.cursor() as cur:
        cur.execute(sql)
        row = cur.fetchone()
        return tuple(row) if row is not None else None


@pytest.mark.parametrize("database", ["pool_plain", "pool_sharded"])
def test_alternating_clients_never_see_each_others_state(proxy: RunningProxy, database: str) -> None:
    a = proxy.connect(database)
    b = proxy.connect(database)
    default_mode = _one(b, "SELECT @@session.sql_mode")
    b_who = None
    for turn in range(3):
        _one(a, f"SET @who = 'a{turn}'")
        _one(a, "SET SESSION sql_mode = 'ANSI_QUOTES'")
        _one(a, "SET NAMES latin1")
        assert _one(b, "SELECT @who, @@session.sql_mode, @@character_set_client") == (b_who, *default_mode, "utf8mb4")
        b_who = f"b{turn}"
        _one(b, f"SET @who = '{b_who}'")
        a_state = _one(a, "SELECT @who, @@session.sql_mode, @@character_set_client")
        assert a_state == (f"a{turn}", "ANSI_QUOTES", "latin1")
        assert _one(b, "SELECT @who") == (b_who,)
    a.close()
    b.close()


@pytest.mark.parametrize("database", ["pool_plain", "pool_sharded"])
def test_a_transaction_keeps_its_connection_and_others_wait(proxy: RunningProxy, database: str) -> None:
    a = proxy.connect(database)
    b = proxy.connect(database)
    table, column = ("t_order", "order_id") if database == "pool_sharded" else ("t_plain", "id")
    _one(a, "BEGIN")
    _one(a, "INSERT INTO t_order (order_id, user_id, status) VALUES (1000, 2, 'open')"
         if database == "pool_sharded" else "INSERT INTO t_plain (id) VALUES (1000)")
    seen: list[Any] = []

    def other() -> None:
        seen.append(_one(b, f"SELECT COUNT(*) FROM {table} WHERE {column} = 1000"))

    worker = threading.Thread(target=other)
    worker.start()
    time.sleep(0.5)
    assert worker.is_alive()  # b waits for the only connection, which a's transaction holds
    _one(a, "ROLLBACK")
    worker.join(10)
    assert not worker.is_alive()
    assert seen == [(0,)]  # never saw a's uncommitted row
    assert _one(a, f"SELECT COUNT(*) FROM {table} WHERE {column} = 1000") == (0,)
    a.close()
    b.close()


def test_temporary_tables_keep_the_connection(proxy: RunningProxy) -> None:
    a = proxy.connect("pool_plain")
    _one(a, "CREATE TEMPORARY TABLE tmp_a (id INT)")
    _one(a, "INSERT INTO tmp_a VALUES (7)")
    b_result: list[Any] = []

    def other() -> None:
        b = proxy.connect("pool_plain")
        b_result.append(_one(b, "SELECT 1"))
        b.close()

    worker = threading.Thread(target=other)
    worker.start()
    worker.join(1.0)
    assert _one(a, "SELECT id FROM tmp_a") == (7,)  # still a's connection
    a.close()  # releasing it lets b run
    worker.join(10)
    assert b_result == [(1,)]


def test_a_set_after_an_error_is_still_carried_to_the_next_connection(proxy: RunningProxy) -> None:
    """The SET state a session re-applies on a re-borrowed connection includes SETs sent after a failed
    statement (the failure must not stick to the session)."""
    a = proxy.connect("pool_plain")
    b = proxy.connect("pool_plain")
    with pytest.raises(pymysql.err.ProgrammingError):
        _one(a, "SELECT * FROM no_such_table")
    _one(a, "SET @after_error = 7")
    assert _one(b, "SELECT @after_error") == (None,)  # b takes the only connection, resetting it
    assert _one(a, "SELECT @after_error") == (7,)  # a's SET is re-applied on the connection it gets back
    a.close()
    b.close()
