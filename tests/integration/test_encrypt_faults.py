"""The server behind an `!ENCRYPT` table dies while an encrypted SELECT runs, text or prepared, on the socket
callbacks' fast path (proxy.execution.fastpath with DecryptingRelay): the client gets one clear error, the session and
the proxy go on, statements answer the data source's error while it is down, and once the server is back the same
session reads decrypted rows again, the same statements as before."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import mysql.connector
import pytest

from proxy.execution.fastpath import STATS
from tests.conftest import ServerFactory
from tests.integration.harness import start_proxy, write_conf

ENCRYPT = """- !ENCRYPT
  encryptors:
    aes: {type: AES, props: {aes-key-value: 123456abc, digest-algorithm-name: SHA-1}}
  tables:
    t_user:
      columns:
        user_name: {cipher: {name: user_name_cipher, encryptorName: aes}}
"""
SLOW = "SELECT user_id, user_name FROM t_user WHERE user_id = {id} AND SLEEP({sleep}) = 0"
POINT = "SELECT user_id, user_name FROM t_user WHERE user_id = {id}"


def _connect(proxy: Any) -> Any:
    return mysql.connector.connect(host=proxy.host, port=proxy.port, user="root", password="root",
                                   database="encfault", use_pure=True, ssl_disabled=True, autocommit=True)


def _text(conn: Any, template: str, **values: int) -> list[tuple[Any, ...]]:
    cur = conn.cursor()
    try:
        cur.execute(template.format(**values))
        return [tuple(r) for r in cur.fetchall()]
    finally:
        cur.close()


def _prepared(conn: Any, template: str, **values: int) -> list[tuple[Any, ...]]:
    cur = conn.cursor(prepared=True)
    try:
        cur.execute(template.format(**{k: "%s" for k in values}), tuple(values.values()))
        return [tuple(r) for r in cur.fetchall()]
    finally:
        cur.close()


RUNS: list[tuple[str, Callable[..., list[tuple[Any, ...]]]]] = [("text", _text), ("prepared", _prepared)]


@pytest.mark.parametrize(("protocol", "run"), RUNS, ids=[r[0] for r in RUNS])
def test_the_server_dying_under_an_encrypted_select(
    protocol: str, run: Callable[..., list[tuple[Any, ...]]], mariadb_factory: ServerFactory, tmp_path: Path
) -> None:
    (server,) = mariadb_factory.many(1)
    server.execute("CREATE DATABASE encfault_ds")
    server.execute("CREATE TABLE t_user (user_id INT PRIMARY KEY, user_name_cipher VARCHAR(200))", "encfault_ds")
    conf = write_conf(tmp_path / "conf", {"encfault": {"ds_0": (server, "encfault_ds")}},
                      rules_yaml={"encfault": ENCRYPT})
    proxy = start_proxy(conf)
    try:
        conn = _connect(proxy)
        cur = conn.cursor()
        cur.execute("INSERT INTO t_user (user_id, user_name) VALUES (1, 'zhangsan'), (2, 'lisi')")
        cur.close()
        for _ in range(3):  # warm: the rewrite kept, the head of the answer known
            assert run(conn, POINT, id=1) == [(1, "zhangsan")]
        before = STATS.taken
        assert run(conn, POINT, id=2) == [(2, "lisi")]
        assert STATS.taken - before == 1  # (the fast path answered it)

        killer = threading.Timer(0.5, server.kill)
        killer.start()
        started = time.monotonic()
        with pytest.raises(mysql.connector.Error) as died:
            run(conn, SLOW, id=1, sleep=5)
        killer.join()
        assert time.monotonic() - started < 20
        assert died.value.errno in (1158, 2013, 1317, 1927, 1429), died.value

        with pytest.raises(mysql.connector.Error) as down:  # while it is down: the data source's error, at once
            run(conn, POINT, id=1)
        assert down.value.errno in (1429, 1158), down.value
        assert "ds_0" in str(down.value.msg), down.value.msg

        server.restart()
        deadline = time.monotonic() + 20
        while True:  # the same session, the same statements, decrypted again
            try:
                assert run(conn, POINT, id=2) == [(2, "lisi")]
                break
            except mysql.connector.Error:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        assert run(conn, POINT, id=1) == [(1, "zhangsan")]
        other = _connect(proxy)  # and a new client
        assert run(other, POINT, id=1) == [(1, "zhangsan")]
        other.close()
        conn.close()
    finally:
        proxy.stop()


SHARDING = """- !SHARDING
  tables:
    t_user:
      actualDataNodes: ds_${0..1}.t_user
      databaseStrategy:
        standard: {shardingColumn: user_id, shardingAlgorithmName: by_user}
  shardingAlgorithms:
    by_user: {type: INLINE, props: {algorithm-expression: 'ds_${user_id % 2}'}}
"""
CLIENTS = 24
ROUNDS = 30
USERS = 40


def _client(proxy: Any, database: str, k: int, errors: list[str]) -> None:
    """Point selects of random users, text and prepared, each answer checked to be its own user's decrypted name;
    every fifth client drops its connection in the middle of an answer now and then (an abort)."""
    import random

    import pymysql
    from pymysql.constants import COMMAND

    rng = random.Random(k)
    try:
        conn = _connect_to(proxy, database)
        for r in range(ROUNDS):
            user = rng.randint(1, USERS)
            run = _prepared if rng.random() < 0.5 else _text
            got = run(conn, POINT, id=user)
            if got != [(user, f"name-{user}")]:
                errors.append(f"client {k} round {r}: user {user} answered {got}")
            if k % 5 == 0 and r % 10 == 5:  # an abort: an encrypted SELECT sent, the socket closed before its answer
                raw = pymysql.connect(host=proxy.host, port=proxy.port, user="root", password="root",
                                      database=database, autocommit=True)
                raw._execute_command(COMMAND.COM_QUERY, SLOW.format(id=user, sleep=0.2))
                raw._sock.close()
        conn.close()
    except Exception as exc:
        errors.append(f"client {k}: {exc!r}")


def _connect_to(proxy: Any, database: str) -> Any:
    return mysql.connector.connect(host=proxy.host, port=proxy.port, user="root", password="root",
                                   database=database, use_pure=True, ssl_disabled=True, autocommit=True)


def test_many_clients_on_a_pool_of_two_each_get_their_own_decrypted_rows(
    mariadb_factory: ServerFactory, tmp_path: Path
) -> None:
    """24 clients on encrypted pass-through and sharded databases whose data sources have pools of two: every
    answer (text and prepared, on the fast path and on the coroutine while waiting for a connection) is the client's
    own."""
    servers = mariadb_factory.many(2)
    layout = {"encpass": {"ds_0": (servers[0], "cc_pass")},
              "encshard": {f"ds_{i}": (servers[i], f"cc_shard_{i}") for i in range(2)}}
    for dbs in layout.values():
        for server, physical in dbs.values():
            server.execute(f"CREATE DATABASE {physical}")
            server.execute("CREATE TABLE t_user (user_id INT PRIMARY KEY, user_name_cipher VARCHAR(200))", physical)
    conf = write_conf(tmp_path / "conf", layout, rules_yaml={"encpass": ENCRYPT, "encshard": SHARDING + ENCRYPT},
                      max_pool_size=2)
    proxy = start_proxy(conf)
    try:
        for database in layout:
            conn = _connect_to(proxy, database)
            cur = conn.cursor()
            cur.execute("INSERT INTO t_user (user_id, user_name) VALUES "
                        + ", ".join(f"({u}, 'name-{u}')" for u in range(1, USERS + 1)))
            cur.close()
            conn.close()
        errors: list[str] = []
        before = STATS.taken
        threads = [threading.Thread(target=_client, args=(proxy, list(layout)[k % 2], k, errors))
                   for k in range(CLIENTS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert not any(t.is_alive() for t in threads), "a client did not finish"
        assert not errors, errors[:5]
        # both paths answered: the fast path relays over a connection the session still holds, which a pool of two
        # shared by 24 clients gives some of the time (152 of the 720 statements in one run), the coroutine the rest
        assert STATS.taken - before > 0
        check = _connect_to(proxy, "encshard")  # the proxy still answers
        assert _text(check, POINT, id=7) == [(7, "name-7")]
        check.close()
    finally:
        proxy.stop()
