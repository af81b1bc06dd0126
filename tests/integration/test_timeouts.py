"""Every wait has a bound: a frozen shard, a full pool, a client that leaves mid-statement.

* `proxy-statement-timeout-seconds` ends a statement whose shard does not answer at all (SIGSTOP: the
  server keeps its sockets and says nothing) with ER_STATEMENT_TIMEOUT, and the session goes on;
* a pool wait ends after the data source's `connectionTimeoutMilliseconds` with an ERR naming the data
  source and the pool's size;
* a client that closes its socket mid-statement has its backend statements killed at once.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pymysql
import pytest

from tests.conftest import ServerFactory
from tests.integration.faults import T_BIG_RULES, abort
from tests.integration.harness import RunningProxy, start_proxy, write_conf


@contextlib.contextmanager
def _proxy(mariadb_factory: ServerFactory, tmp_path: Path, *, props: dict[str, Any] | None = None,
           pool: int = 4, pool_props: dict[str, Any] | None = None) -> Iterator[tuple[RunningProxy, list[Any]]]:
    servers = mariadb_factory.many(2)
    for i, s in enumerate(servers):
        s.execute(f"CREATE DATABASE shard_{i}")
    conf = write_conf(
        tmp_path / "conf", {"tdb": {f"ds_{i}": (s, f"shard_{i}") for i, s in enumerate(servers)}},
        rules_yaml={"tdb": T_BIG_RULES}, props=props, max_pool_size=pool, data_source_props=pool_props,
    )
    proxy = start_proxy(conf)
    try:
        with proxy.connect("tdb") as conn, conn.cursor() as cur:
            cur.execute("CREATE TABLE t_big (id BIGINT PRIMARY KEY, v VARCHAR(20))")
            cur.execute("INSERT INTO t_big (id, v) VALUES " + ", ".join(f"({i}, 'v{i}')" for i in range(40)))
        yield proxy, servers
    finally:
        for s in servers:
            s.thaw()
        proxy.stop()


def _rows(conn: Any, sql: str) -> list[tuple[Any, ...]]:
    with conn.cursor() as cur:
        cur.execute(sql)
        return list(cur.fetchall())


def _running(server: Any, needle: str) -> list[tuple[Any, ...]]:
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute("SELECT ID, INFO FROM information_schema.PROCESSLIST WHERE INFO LIKE %s AND ID <> CONNECTION_ID()",
                    (f"%{needle}%",))
        return list(cur.fetchall())


@pytest.mark.parametrize("sql", [
    "SELECT COUNT(*) FROM t_big",  # scatter, merged
    "SELECT id, v FROM t_big",  # scatter, concatenated
    "SELECT v FROM t_big WHERE id = 3",  # one node, on the frozen shard
], ids=["merge", "concatenation", "single-node"])
def test_a_frozen_shard_ends_the_statement_at_the_timeout(mariadb_factory: ServerFactory, tmp_path: Path,
                                                          sql: str) -> None:
    with _proxy(mariadb_factory, tmp_path, props={"proxy-statement-timeout-seconds": 1}) as (proxy, servers):
        conn = proxy.connect("tdb", read_timeout=30)
        assert _rows(conn, "SELECT v FROM t_big WHERE id = 3") == [("v3",)]  # ds_1 connection held
        servers[1].freeze()
        started = time.monotonic()
        with pytest.raises(pymysql.err.OperationalError) as info:
            _rows(conn, sql)
        took = time.monotonic() - started
        assert info.value.args[0] == 1969, info.value
        assert "ds_1" in info.value.args[1] and "proxy-statement-timeout-seconds" in info.value.args[1]
        assert 0.9 < took < 4.0, took
        # the session goes on: ds_0 answers at once, ds_1 ends at the timeout again while it is frozen
        assert _rows(conn, "SELECT v FROM t_big WHERE id = 2") == [("v2",)]
        servers[1].thaw()
        assert _rows(conn, "SELECT v FROM t_big WHERE id = 3") == [("v3",)]
        assert _rows(conn, "SELECT COUNT(*) FROM t_big") == [(40,)]
        conn.close()


def test_a_full_pool_wait_ends_after_connection_timeout_naming_the_data_source(
        mariadb_factory: ServerFactory, tmp_path: Path) -> None:
    with _proxy(mariadb_factory, tmp_path, pool=1, pool_props={"connectionTimeoutMilliseconds": 1000}) as (proxy, _):
        holder = proxy.connect("tdb")
        _rows(holder, "BEGIN")
        _rows(holder, "SELECT v FROM t_big WHERE id = 2 FOR UPDATE")  # ds_0's only connection, in a transaction
        other = proxy.connect("tdb", read_timeout=30)
        started = time.monotonic()
        with pytest.raises(pymysql.err.OperationalError) as info:
            _rows(other, "SELECT v FROM t_big WHERE id = 4")
        took = time.monotonic() - started
        assert 0.9 < took < 3.0, took
        errno, message = info.value.args
        assert errno == 1040, info.value
        assert "ds_0" in message and "maxPoolSize 1" in message and "1000 ms" in message, message
        # ds_1 is not affected, and once the transaction ends ds_0 serves the other session again
        assert _rows(other, "SELECT v FROM t_big WHERE id = 3") == [("v3",)]
        _rows(holder, "COMMIT")
        assert _rows(other, "SELECT v FROM t_big WHERE id = 4") == [("v4",)]
        holder.close()
        other.close()


@pytest.mark.parametrize("sql,marker", [
    ("SELECT SLEEP(12) AS marker_one", "marker_one"),  # one node
    ("SELECT id, SLEEP(5) AS marker_all FROM t_big", "marker_all"),  # scatter
], ids=["single-node", "scatter"])
def test_a_client_gone_mid_statement_has_its_backend_statements_killed(
        mariadb_factory: ServerFactory, tmp_path: Path, sql: str, marker: str) -> None:
    with _proxy(mariadb_factory, tmp_path) as (proxy, servers):
        conn = proxy.connect("tdb")

        def run() -> None:
            with contextlib.suppress(Exception):
                _rows(conn, sql)

        t = threading.Thread(target=run, daemon=True)
        t.start()
        deadline = time.monotonic() + 5
        while not any(_running(s, marker) for s in servers):
            assert time.monotonic() < deadline, "the statement never started on a backend"
            time.sleep(0.05)
        abort(conn)
        gone_at = time.monotonic()
        while any(_running(s, marker) for s in servers):
            assert time.monotonic() - gone_at < 1.0, [_running(s, marker) for s in servers]
            time.sleep(0.05)
        # the proxy is fine: a new client answers, the processlist is clean
        assert proxy.query("SELECT COUNT(*) FROM t_big", "tdb") == [(40,)]
        t.join(1)
