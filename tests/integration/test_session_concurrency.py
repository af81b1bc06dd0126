"""Statements prepared before a USE run in their own database on connections borrowed for one command
(proxy.session.stmt_database), and LOCK TABLES pins a session's connection until UNLOCK TABLES: both hold
connections beyond a plain statement's. Many clients on a pool of two, some leaving mid-statement: every answer is
its client's, no session wedges, and the pool comes back whole."""

from __future__ import annotations

import random
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import mysql.connector
import pytest

from tests.integration.harness import MariaDBServer, RunningProxy, start_proxy, write_conf

CLIENTS = 16
ROUNDS = 12


@pytest.fixture(scope="module")
def small_pool(mariadb: MariaDBServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningProxy]:
    for physical, value in (("cc_pa", 1), ("cc_pb", 2)):
        mariadb.execute(f"CREATE DATABASE IF NOT EXISTS {physical}")
        mariadb.execute("CREATE OR REPLACE TABLE cct (x INT)", physical)
        mariadb.execute(f"INSERT INTO cct VALUES ({value})", physical)
    conf = write_conf(tmp_path_factory.mktemp("small-pool"),
                      {"cca": {"ds_0": (mariadb, "cc_pa")}, "ccb": {"ds_0": (mariadb, "cc_pb")}}, max_pool_size=2)
    proxy = start_proxy(Path(conf))
    yield proxy
    proxy.stop()


def _client(proxy: RunningProxy, k: int, errors: list[str]) -> None:
    rng = random.Random(k)
    conn = mysql.connector.connect(host=proxy.host, port=proxy.port, user="root", password="root", database="cca",
                                   connection_timeout=30, autocommit=True)
    try:
        prepared = conn.cursor(prepared=True)
        plain = conn.cursor()
        prepared.execute("SELECT x + ?, DATABASE() FROM cct", (0,))
        prepared.fetchall()
        for r in range(ROUNDS):
            plain.execute("USE ccb" if r % 2 == 0 else "USE cca")
            plain.fetchall()
            here = 2 if r % 2 == 0 else 1
            value = k * 1000 + r
            prepared.execute("SELECT x + ?, DATABASE() FROM cct", (value,))
            got = prepared.fetchall()
            if [tuple(row) for row in got] != [(1 + value, "cca")]:  # (always its own database's row)
                errors.append(f"client {k} round {r}: prepared answered {got}")
            locking = k % 3 == 1  # LOCK TABLES pins the session's connection until UNLOCK TABLES
            if locking:
                plain.execute("LOCK TABLES cct READ")
            plain.execute("SELECT x, DATABASE() FROM cct")
            got = plain.fetchall()
            if [tuple(row) for row in got] != [(here, "ccb" if here == 2 else "cca")]:
                errors.append(f"client {k} round {r}: plain answered {got}")
            if locking:
                plain.execute("UNLOCK TABLES")
            if k % 4 == 3 and r == rng.randrange(2, ROUNDS):
                # leave mid-statement: the socket closes with a command sent and its answer unread
                conn._socket.sock.send(b"\x1a\x00\x00\x00\x03SELECT SLEEP(0.2) FROM cct")
                conn._socket.sock.shutdown(socket.SHUT_RDWR)
                return
    except Exception as exc:
        errors.append(f"client {k}: {type(exc).__name__}: {exc}")
    finally:
        try:
            conn.close()
        except Exception:
            pass


def test_prepared_statements_across_use_on_a_pool_of_two(small_pool: RunningProxy) -> None:
    errors: list[str] = []
    threads = [threading.Thread(target=_client, args=(small_pool, k, errors)) for k in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads), "a client wedged"
    assert errors == []
    # the pool came back: a new session is served at once, in each database
    for db, value in (("cca", 1), ("ccb", 2)):
        conn = mysql.connector.connect(host=small_pool.host, port=small_pool.port, user="root", password="root",
                                       database=db, connection_timeout=10)
        cur = conn.cursor()
        cur.execute("SELECT x FROM cct")
        assert cur.fetchall() == [(value,)]
        conn.close()
