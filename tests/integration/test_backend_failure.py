"""A shard dying in the middle of a query: the client gets one clear error naming the data source, the
session and the server stay usable, and the shard is used again once it is back."""

from __future__ import annotations

import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pymysql
import pytest

from tests.conftest import ServerFactory
from tests.integration.faults import T_BIG_RULES
from tests.integration.harness import start_proxy, write_conf


@pytest.fixture
def two_shards(mariadb_factory: ServerFactory, tmp_path: Path) -> Any:
    servers = mariadb_factory.many(2)
    for i, s in enumerate(servers):
        s.execute(f"CREATE DATABASE shard_{i}")
    conf = write_conf(
        tmp_path / "conf",
        {"fail_db": {f"ds_{i}": (s, f"shard_{i}") for i, s in enumerate(servers)}},
        rules_yaml={"fail_db": T_BIG_RULES},
    )
    proxy = start_proxy(conf)
    yield proxy, servers
    proxy.stop()


def _rows(conn: pymysql.connections.Connection[Any], sql: str) -> list[tuple[Any, ...]]:
    with conn.cursor() as cur:
        cur.execute(sql)
        return list(cur.fetchall())


def test_killing_a_shard_mid_query_gives_a_clear_error_and_the_session_survives(two_shards: Any) -> None:
    proxy, servers = two_shards
    conn = proxy.connect("fail_db")
    _rows(conn, "CREATE TABLE t_big (id BIGINT PRIMARY KEY, v VARCHAR(20))")
    _rows(conn, "INSERT INTO t_big (id, v) VALUES " + ", ".join(f"({i}, 'v{i}')" for i in range(40)))
    assert _rows(conn, "SELECT COUNT(*) FROM t_big") == [(40,)]

    # a scatter query that is still running on ds_1 when ds_1's server dies
    killer = threading.Timer(1.0, servers[1].kill)
    killer.start()
    started = time.monotonic()
    with pytest.raises(pymysql.err.OperationalError) as info:
        _rows(conn, "SELECT id, SLEEP(0.3) FROM t_big ORDER BY id")
    killer.join()
    assert time.monotonic() - started < 20
    errno, message = info.value.args[0], str(info.value.args[1])
    assert errno in (1158, 2013, 2006, 1317, 1927), info.value
    assert "ds_1" in message, message

    # the session is still usable: ds_0 answers, ds_1 is reported clearly while it is down
    assert _rows(conn, "SELECT v FROM t_big WHERE id = 2") == [("v2",)]
    with pytest.raises(pymysql.err.OperationalError) as down:
        _rows(conn, "SELECT v FROM t_big WHERE id = 3")
    assert "ds_1" in str(down.value.args[1])
    # a server's numbers, never the client library's (2003, 2013: libmariadb refuses them from a server and
    # prints "ERROR 2027 (HY000): Received malformed packet"): the mariadb CLI shows the proxy's error
    assert down.value.args[0] in (1429, 1158), down.value.args
    cli = subprocess.run(["mariadb", "-h", proxy.host, "-P", str(proxy.port), "-uroot", "-proot", "fail_db",
                          "-e", "SELECT v FROM t_big WHERE id = 3"], capture_output=True, text=True, timeout=30)
    assert cli.returncode == 1 and "ds_1" in cli.stderr and "malformed" not in cli.stderr, cli.stderr
    assert "ERROR 1429 (HY000)" in cli.stderr or "ERROR 1158 (08S01)" in cli.stderr, cli.stderr
    # another client connects and works on the healthy shard
    other = proxy.connect("fail_db")
    assert _rows(other, "SELECT v FROM t_big WHERE id = 4") == [("v4",)]

    # once ds_1 is back, the same session reads it again
    servers[1].restart()
    deadline = time.monotonic() + 20
    while True:
        try:
            assert _rows(conn, "SELECT COUNT(*) FROM t_big") == [(40,)]
            break
        except pymysql.err.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    other.close()
    conn.close()


def test_one_failing_unit_stops_the_others_and_reports_its_data_source(two_shards: Any) -> None:
    proxy, servers = two_shards
    conn = proxy.connect("fail_db")
    _rows(conn, "CREATE TABLE t_big (id BIGINT PRIMARY KEY, v VARCHAR(20))")
    _rows(conn, "INSERT INTO t_big (id, v) VALUES " + ", ".join(f"({i}, 'v{i}')" for i in range(8)))
    # make the statement fail on ds_1's actual tables only, while ds_0's units sleep
    servers[1].execute("ALTER TABLE shard_1.t_big_0 DROP COLUMN v")
    started = time.monotonic()
    with pytest.raises(pymysql.err.OperationalError) as info:
        _rows(conn, "SELECT id, v, IF(id % 2 = 0, SLEEP(2), 0) FROM t_big ORDER BY id")
    assert time.monotonic() - started < 3.5  # the sleeping units were killed, not waited for
    assert info.value.args[0] == 1054 and "ds_1" in str(info.value.args[1])
    # the session's connections were cleaned up: the next statement works
    assert _rows(conn, "SELECT COUNT(*) FROM t_big WHERE id = 0") == [(1,)]
    conn.close()


def test_statement_timeout_cancels_cleanly(mariadb_factory: ServerFactory, tmp_path: Path) -> None:
    servers = mariadb_factory.many(2)
    for i, s in enumerate(servers):
        s.execute(f"CREATE DATABASE shard_{i}")
    conf = write_conf(
        tmp_path / "conf",
        {"fail_db": {f"ds_{i}": (s, f"shard_{i}") for i, s in enumerate(servers)}},
        rules_yaml={"fail_db": T_BIG_RULES},
        props={"proxy-statement-timeout-seconds": 1},
    )
    proxy = start_proxy(conf)
    try:
        conn = proxy.connect("fail_db")
        _rows(conn, "CREATE TABLE t_big (id BIGINT PRIMARY KEY, v VARCHAR(20))")
        _rows(conn, "INSERT INTO t_big (id, v) VALUES " + ", ".join(f"({i}, 'v{i}')" for i in range(8)))
        started = time.monotonic()
        try:
            rows = _rows(conn, "SELECT id, SLEEP(3) FROM t_big ORDER BY id")
        except pymysql.err.OperationalError as exc:
            assert exc.args[0] in (1317, 1927, 3024), exc
        else:  # MariaDB ends an interrupted SLEEP() with 1 instead of an error
            assert any(r[1] == 1 for r in rows), rows
        assert time.monotonic() - started < 2.5
        assert _rows(conn, "SELECT COUNT(*) FROM t_big") == [(8,)]
        conn.close()
    finally:
        proxy.stop()
