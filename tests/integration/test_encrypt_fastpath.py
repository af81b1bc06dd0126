"""SELECTs on an `!ENCRYPT` table answered by the socket callbacks' relay (proxy.execution.fastpath with
proxy.execution.encrypted's DecryptingRelay): rewritten there, their cipher columns decrypted as the rows pass. They
answer what one unencrypted MariaDB holding the same rows answers, a value its encryptor did not write answers the
same lone ERR as the session's coroutine, and the kept rewrite of a text before its trailing number serves only the
texts it fits — on a pass-through database and on a sharded one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pymysql
import pytest

from proxy.execution.fastpath import STATS
from proxy.sandbox import MariaDBServer
from tests.integration.encrypt_fixtures import SHARDING
from tests.integration.harness import RunningProxy, start_proxy, write_conf

ENCRYPT = """- !ENCRYPT
  encryptors:
    aes: {type: AES, props: {aes-key-value: 123456abc, digest-algorithm-name: SHA-1}}
  tables:
    t_user:
      columns:
        user_name: {cipher: {name: user_name_cipher, encryptorName: aes}}
        password: {cipher: {name: password_cipher, encryptorName: aes}}
"""
PHYSICAL = (
    "CREATE TABLE t_user (user_id INT PRIMARY KEY, user_name_cipher VARCHAR(200), password_cipher VARCHAR(200), "
    "status VARCHAR(20))"
)
LOGICAL = (
    "CREATE TABLE t_user (user_id INT PRIMARY KEY, user_name VARCHAR(200), password VARCHAR(200), status VARCHAR(20))"
)
ROWS = [
    (10, "zhangsan", "111111", "a"),
    (11, "lisi", "222222", "b"),
    (12, "王五", None, "a"),
    (13, None, "5", "c"),
    (14, "it's \\ here", "444444", None),
]
# (statement, answered on the fast path): each answers what the unencrypted oracle answers
READS = [
    ("SELECT user_name FROM t_user WHERE user_id = 10", True),
    ("SELECT user_name FROM t_user WHERE user_id = 11", True),  # the text before 11 kept from the one before
    ("SELECT user_name, password FROM t_user WHERE user_id = 12", True),  # a NULL and a non-ASCII value
    ("SELECT user_id, user_name AS n, status FROM t_user WHERE user_id = 14", True),
    ("select password from t_user where user_id=13", True),
    ("SELECT user_id FROM t_user WHERE user_id = 13", True),  # nothing to decrypt
    ("SELECT user_id FROM t_user WHERE password = 5", False),  # the number is encrypted: not kept as a tail
    ("SELECT user_id FROM t_user WHERE password = 222222", False),
    ("SELECT user_id, password FROM t_user WHERE user_id = 999", True),  # no row
    ("SELECT user_id, user_name FROM t_user ORDER BY 1", False),  # a position: decided on the value
    ("SELECT user_id, user_name FROM t_user ORDER BY 2", False),  # (refused: an encrypted column)
    ("SELECT user_id, status FROM t_user ORDER BY 2, 1", False),
    ("SELECT * FROM t_user WHERE user_id = 10", False),
    ("SELECT * FROM t_user WHERE user_id = 11", False),
]


class Env:
    def __init__(
        self,
        proxy: RunningProxy,
        physical: list[tuple[MariaDBServer, str]],
        oracle: tuple[MariaDBServer, str],
        kind: str = "passthrough",
    ) -> None:
        self.proxy, self.physical, self.oracle = proxy, physical, oracle
        self.proxy_kind = kind


@pytest.fixture(scope="module", params=["passthrough", "sharded"])
def env(
    request: pytest.FixtureRequest,
    mariadb: MariaDBServer,
    mariadb_shards: list[MariaDBServer],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Env]:
    oracle = (mariadb, "encfast_oracle")
    if request.param == "passthrough":
        physical = [(mariadb, "encfast_ds")]
        rules = ENCRYPT
    else:
        physical = [(mariadb_shards[i], f"encfast_shard_{i}") for i in range(2)]
        rules = SHARDING + ENCRYPT
    for server, db in [*physical, oracle]:
        server.execute(f"DROP DATABASE IF EXISTS {db}")
        server.execute(f"CREATE DATABASE {db}")
        server.execute(LOGICAL if (server, db) == oracle else PHYSICAL, db)
    conf = write_conf(
        tmp_path_factory.mktemp(f"encfast-{request.param}"),
        {"encfast": {f"ds_{i}": p for i, p in enumerate(physical)}},
        rules_yaml={"encfast": rules},
    )
    proxy = start_proxy(Path(conf))
    try:
        insert = "INSERT INTO t_user (user_id, user_name, password, status) VALUES (%s, %s, %s, %s)"
        with proxy.connect("encfast") as conn, conn.cursor() as cur:
            for row in ROWS:
                cur.execute(insert, row)
        for row in ROWS:
            oracle[0].execute(insert, oracle[1], args=row)
        yield Env(proxy, physical, oracle, request.param)
    finally:
        proxy.stop()
        for server, db in [*physical, oracle]:
            server.execute(f"DROP DATABASE IF EXISTS {db}")


def _answer(conn: Any, sql: str) -> tuple[Any, ...]:
    try:
        with conn.cursor() as cur:
            cur.execute(sql)
            return list(cur.fetchall()), [d[:2] for d in cur.description or ()]
    except pymysql.MySQLError as exc:
        return ("error", exc.args[0])


@pytest.mark.parametrize(("sql", "fast"), READS)
def test_encrypted_selects_answer_what_an_unencrypted_server_answers(env: Env, sql: str, fast: bool) -> None:
    server, db = env.oracle
    with env.proxy.connect("encfast") as conn, server.connect(db) as oconn:
        _answer(conn, sql)  # (the session holds the node's connection from then on)
        before = STATS.taken
        got = _answer(conn, sql)
        taken = STATS.taken - before
        want = _answer(oconn, sql)
    if sql.endswith("ORDER BY 2"):  # refused (an encrypted column's position), as ShardingSphere refuses it
        assert got == ("error", 1235)
    else:
        assert got == want
    if fast:
        assert taken == 1


def test_a_value_its_encryptor_did_not_write_is_the_same_lone_err(env: Env) -> None:
    server, db = env.physical[0]
    server.execute("INSERT INTO t_user (user_id, user_name_cipher) VALUES (20, 'plaintext')", db)
    try:
        with env.proxy.connect("encfast") as conn:
            _answer(conn, "SELECT user_name FROM t_user WHERE user_id = 10")
            before = STATS.taken
            with pytest.raises(pymysql.MySQLError) as caught, conn.cursor() as cur:
                cur.execute("SELECT user_name FROM t_user WHERE user_id = 20")
            assert STATS.taken - before == 1
            assert caught.value.args[0] == 1105
            assert "user_name cannot be decrypted by its encryptor (AES)" in caught.value.args[1]
            assert _answer(conn, "SELECT user_name FROM t_user WHERE user_id = 11") == (
                [("lisi",)],
                [("user_name", 253)],
            )
    finally:
        server.execute("DELETE FROM t_user WHERE user_id = 20", db)


# (prepared statement, its parameters, answered on the fast path of a pass-through database): executed through the
# binary protocol, each answers what the unencrypted oracle answers; a parameter bound to an encrypted column is
# encrypted into the backend's execute (proxy.execution.encrypted.mapped_execute)
PREPARED = [
    ("SELECT user_name FROM t_user WHERE user_id = ?", (10,), True),
    ("SELECT user_name, password FROM t_user WHERE user_id = ?", (12,), True),  # a NULL and a non-ASCII value
    ("SELECT user_name, password, status FROM t_user WHERE user_id = ?", (13,), True),  # NULL user_name
    ("SELECT user_id, user_name AS n, status FROM t_user WHERE user_id = ?", (14,), True),  # NULL last, quotes
    ("SELECT status, user_id FROM t_user WHERE user_id = ?", (11,), True),  # nothing to decrypt
    ("SELECT user_id, password FROM t_user WHERE user_id = ?", (999,), True),  # no row
    ("SELECT password, user_name FROM t_user WHERE user_id = ? OR user_id = ?", (10, 11), True),
    ("SELECT user_id FROM t_user WHERE password = ?", ("222222",), True),  # an encrypted parameter
    ("SELECT user_id, user_name FROM t_user WHERE user_name = ? AND user_id = ?", ("lisi", 11), True),
    ("SELECT * FROM t_user WHERE user_id = ?", (10,), False),  # (its table's columns when executed)
]


def _prepared(host: str, port: int, password: str, db: str) -> Any:
    import mysql.connector

    return mysql.connector.connect(
        host=host,
        port=port,
        user="root",
        password=password,
        database=db,
        use_pure=True,
        ssl_disabled=True,
        autocommit=True,
    )


def _prepared_answer(conn: Any, sql: str, params: tuple[Any, ...]) -> tuple[Any, ...]:
    import mysql.connector

    cur = conn.cursor(prepared=True)
    try:
        cur.execute(sql, params)
        rows = [tuple(r) for r in cur.fetchall()]
        return sorted(rows, key=repr), [(d[0], d[1]) for d in cur.description or ()]
    except mysql.connector.Error as exc:
        return ("error", exc.errno, exc.msg)
    finally:
        cur.close()


@pytest.mark.parametrize(("sql", "params", "fast"), PREPARED)
def test_prepared_encrypted_selects_answer_what_an_unencrypted_server_answers(
    env: Env, sql: str, params: tuple[Any, ...], fast: bool
) -> None:
    server, db = env.oracle
    conn = _prepared(env.proxy.host, env.proxy.port, "root", "encfast")
    oconn = _prepared(server.host, server.port, server.password, db)
    try:
        cur = conn.cursor(prepared=True)
        cur.execute(sql, params)
        cur.fetchall()
        before = STATS.taken
        cur.execute(sql, params)  # (the same statement, executed again)
        got = ([tuple(r) for r in cur.fetchall()], [(d[0], d[1]) for d in cur.description or ()])
        taken = STATS.taken - before
        cur.close()
        want = _prepared_answer(oconn, sql, params)
    finally:
        conn.close()
        oconn.close()
    assert (sorted(got[0], key=repr), got[1]) == want
    if fast and env.proxy_kind == "passthrough":
        assert taken >= 1
    elif not fast:
        assert taken == 0


def test_a_prepared_select_of_a_value_its_encryptor_did_not_write_is_the_same_lone_err(env: Env) -> None:
    server, db = env.physical[0]
    server.execute("INSERT INTO t_user (user_id, user_name_cipher) VALUES (20, 'plaintext')", db)
    conn = _prepared(env.proxy.host, env.proxy.port, "root", "encfast")
    try:
        sql = "SELECT user_id, user_name FROM t_user WHERE user_id = ?"
        assert _prepared_answer(conn, sql, (10,))[0] == [(10, "zhangsan")]
        before = STATS.taken
        got = _prepared_answer(conn, sql, (20,))
        assert got[:2] == ("error", 1105)
        assert "user_name cannot be decrypted by its encryptor (AES)" in got[2]
        if env.proxy_kind == "passthrough":
            assert STATS.taken - before >= 1
        assert _prepared_answer(conn, sql, (11,))[0] == [(11, "lisi")]  # the session goes on
    finally:
        conn.close()
        server.execute("DELETE FROM t_user WHERE user_id = 20", db)
