"""SELECTs on an `!ENCRYPT` table answered by the socket callbacks' relay (proxy.execution.fastpath with
proxy.execution.decrypting's DecryptingRelay): rewritten there, their cipher columns decrypted as the rows pass. They
answer what one unencrypted MariaDB holding the same rows answers, a value its encryptor did not write answers the
same lone ERR as the session's coroutine, and the kept rewrite of a text before its trailing number serves only the
texts it fits — on a pass-through database and on a sharded one. A prepared SELECT whose parameters are not
encrypted runs there too, on a sharded database once the coroutine's execute left the node's connection with its
rewrite prepared: both paths answer the same bytes, warm or fresh, in a transaction or after a USE elsewhere."""

from __future__ import annotations

import struct
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
    other = (mariadb, "encfast_other")  # a database to USE elsewhere
    for server, db in [*physical, oracle, other]:
        server.execute(f"DROP DATABASE IF EXISTS {db}")
        server.execute(f"CREATE DATABASE {db}")
        if (server, db) != other:
            server.execute(LOGICAL if (server, db) == oracle else PHYSICAL, db)
    conf = write_conf(
        tmp_path_factory.mktemp(f"encfast-{request.param}"),
        {"encfast": {f"ds_{i}": p for i, p in enumerate(physical)}, "encfast_other": {"ds_0": other}},
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
        for server, db in [*physical, oracle, other]:
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


# (prepared statement, its parameters, answered on the fast path on a pass-through database, on a sharded one):
# executed through the binary protocol, each answers what the unencrypted oracle answers; a parameter bound to an
# encrypted column is encrypted into the backend's execute (proxy.execution.encrypted.physical_binding); a sharded
# statement over both shards is the session's coroutine's (it merges it)
PREPARED = [
    ("SELECT user_name FROM t_user WHERE user_id = ?", (10,), True, True),
    ("SELECT user_name FROM t_user WHERE user_id = ?", (11,), True, True),  # (the other shard)
    ("SELECT user_name, password FROM t_user WHERE user_id = ?", (12,), True, True),  # a NULL and a non-ASCII value
    ("SELECT user_name, password, status FROM t_user WHERE user_id = ?", (13,), True, True),  # NULL user_name
    ("SELECT user_id, user_name AS n, status FROM t_user WHERE user_id = ?", (14,), True, True),  # NULL last, quotes
    ("SELECT status, user_id FROM t_user WHERE user_id = ?", (11,), True, True),  # nothing to decrypt
    ("SELECT user_id, password FROM t_user WHERE user_id = ?", (999,), True, True),  # no row
    ("SELECT user_id, password FROM t_user WHERE user_id IN (?, ?, ?)", (10, 12, 14), True, True),  # rows of a shard
    ("SELECT password, user_name FROM t_user WHERE user_id = ? OR user_id = ?", (10, 11), True, False),  # both shards
    ("SELECT user_id FROM t_user WHERE password = ?", ("222222",), True, False),  # an encrypted parameter
    ("SELECT user_id, user_name FROM t_user WHERE user_name = ? AND user_id = ?", ("lisi", 11), True, True),
    ("SELECT * FROM t_user WHERE user_id = ?", (10,), False, False),  # (its table's columns when executed)
    # rewritten once at PREPARE for every execute: ORDER BY, GROUP BY and a `*` in COUNT(*) are the fast path's too
    ("SELECT user_id, user_name FROM t_user WHERE user_id IN (?, ?) ORDER BY user_id DESC", (10, 12), True, True),
    ("SELECT status, COUNT(*) FROM t_user WHERE user_id IN (?, ?) GROUP BY status ORDER BY status", (10, 12), True,
     True),
    ("SELECT COUNT(*), MAX(user_id) FROM t_user WHERE user_name = ?", ("lisi",), True, False),  # (sharded: both)
    ("SELECT user_name FROM t_user WHERE user_id = ? /* a comment */", (10,), False, False),  # (not read)
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


@pytest.mark.parametrize(("sql", "params", "fast_passthrough", "fast_sharded"), PREPARED)
def test_prepared_encrypted_selects_answer_what_an_unencrypted_server_answers(
    env: Env, sql: str, params: tuple[Any, ...], fast_passthrough: bool, fast_sharded: bool
) -> None:
    fast = fast_passthrough if env.proxy_kind == "passthrough" else fast_sharded
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
    assert taken >= 1 if fast else taken == 0


# prepared statements whose rows come in an order: the same order as the unencrypted oracle's
ORDERED = [
    ("SELECT user_id, user_name FROM t_user WHERE user_id IN (?, ?, ?) ORDER BY user_id DESC", (10, 12, 14)),
    ("SELECT user_name, user_id FROM t_user WHERE user_id IN (?, ?) ORDER BY user_id LIMIT 1", (12, 14)),
    ("SELECT status, COUNT(*) FROM t_user WHERE user_id IN (?, ?, ?) GROUP BY status ORDER BY status DESC",
     (10, 12, 14)),
]


@pytest.mark.parametrize(("sql", "params"), ORDERED)
def test_prepared_encrypted_selects_in_order(env: Env, sql: str, params: tuple[Any, ...]) -> None:
    server, db = env.oracle
    conn = _prepared(env.proxy.host, env.proxy.port, "root", "encfast")
    oconn = _prepared(server.host, server.port, server.password, db)
    try:
        answers = []
        for c in (conn, oconn):
            cur = c.cursor(prepared=True)
            rows = []
            for _ in range(2):  # (the second execute: the fast path's)
                cur.execute(sql, params)
                rows.append([tuple(r) for r in cur.fetchall()])
            cur.close()
            answers.append(rows)
    finally:
        conn.close()
        oconn.close()
    assert answers[0] == answers[1]


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
        assert STATS.taken - before >= 1
        assert _prepared_answer(conn, sql, (11,))[0] == [(11, "lisi")]  # the session goes on
    finally:
        conn.close()
        server.execute("DELETE FROM t_user WHERE user_id = 20", db)


# where a statement runs on the fast path when executed again: (protocol, kind of database)
EVERYWHERE = frozenset({("prepared", "passthrough"), ("prepared", "sharded"), ("text", "passthrough"),
                        ("text", "sharded")})
# (statement, the parameters of its executes, where it is answered on the fast path when executed again): executed as
# a prepared statement, or as text with its parameters written in (literal); each execute answers what the unencrypted
# oracle answers, whichever path runs it. Users 20 and 21 hold a value their encryptor did not write: the lone ERR 1105
# either way, and the session goes on
EXECUTES = [
    ("SELECT user_name FROM t_user WHERE user_id = ?", [(10,), (11,), (13,)], EVERYWHERE),  # each shard; a NULL
    ("SELECT user_id, user_name, password, status FROM t_user WHERE user_id = ?", [(12,), (14,), (999,)], EVERYWHERE),
    ("SELECT status, user_id FROM t_user WHERE user_id = ?", [(11,), (10,)], EVERYWHERE),  # nothing to decrypt
    ("SELECT user_id, password, user_name FROM t_user WHERE user_id IN (?, ?, ?)", [(10, 12, 14), (11, 13, 15)],
     EVERYWHERE),  # several rows, of one shard
    ("SELECT user_name FROM t_user WHERE user_id = ?", [(21,), (11,), (20,)], EVERYWHERE),  # undecryptable
    ("SELECT user_name, password FROM t_user WHERE user_id = ? OR user_id = ?", [(10, 11), (12, 13)],
     {("prepared", "passthrough"), ("text", "passthrough")}),  # a row on each shard: the coroutine merges them
    ("SELECT user_id, password FROM t_user WHERE user_name = ? AND user_id = ?",
     [("lisi", 11), ("zhangsan", 10), ("nobody", 10), (None, 13)], EVERYWHERE),  # an encrypted parameter, one node
    ("SELECT user_id FROM t_user WHERE password = ?", [("111111",), ("5",)],
     {("prepared", "passthrough"), ("text", "passthrough")}),  # encrypted (pass-through: mapped_execute, the text's
    # rewrite; sharded: both shards)
]
# warm: one session executes each twice; fresh: a new session for each execute; transaction: warm, inside BEGIN ...
# COMMIT; elsewhere: prepared, then USE another database, then executed (in the database it was prepared in)
MODES = [
    *[(protocol, mode) for protocol in ("prepared", "text") for mode in ("warm", "fresh", "transaction")],
    ("prepared", "elsewhere"),
]
UNDECRYPTABLE = (20, 21)


class _Session:
    """One client session executing one statement: prepared (mysql-connector's prepared cursor), or as text with its
    parameters written in."""

    def __init__(self, env: Env, sql: str, protocol: str) -> None:
        self.conn = _prepared(env.proxy.host, env.proxy.port, "root", "encfast")
        self.sql = sql
        self.protocol = protocol
        self.cur = self.conn.cursor(prepared=protocol == "prepared")

    def execute(self, params: tuple[Any, ...]) -> tuple[tuple[Any, ...], int]:
        """The answer (as `_prepared_answer` gives it) and how many commands the fast path took for it."""
        import mysql.connector

        before = STATS.taken
        try:
            if self.protocol == "prepared":
                self.cur.execute(self.sql, params)
            else:
                self.cur.execute(self.sql.replace("?", "%s"), params)  # (the connector writes them in)
            rows = [tuple(r) for r in self.cur.fetchall()]
            got: tuple[Any, ...] = (sorted(rows, key=repr), [(d[0], d[1]) for d in self.cur.description or ()])
        except mysql.connector.Error as exc:
            got = ("error", exc.errno, exc.msg)
        return got, STATS.taken - before

    def close(self) -> None:
        self.cur.close()
        self.conn.close()


@pytest.fixture
def undecryptable(env: Env) -> Iterator[None]:
    """Users 20 and 21 (one on each shard) hold a cipher column value their encryptor did not write."""
    for user_id in UNDECRYPTABLE:
        server, db = env.physical[user_id % len(env.physical)]
        server.execute(f"INSERT INTO t_user (user_id, user_name_cipher) VALUES ({user_id}, 'plaintext')", db)
    try:
        yield
    finally:
        for user_id in UNDECRYPTABLE:
            server, db = env.physical[user_id % len(env.physical)]
            server.execute(f"DELETE FROM t_user WHERE user_id = {user_id}", db)


@pytest.mark.parametrize(("protocol", "mode"), MODES)
@pytest.mark.parametrize(("sql", "executes", "fast_in"), EXECUTES)
def test_encrypted_executes_answer_alike_on_either_path(
    env: Env,
    undecryptable: None,
    protocol: str,
    mode: str,
    sql: str,
    executes: list[tuple[Any, ...]],
    fast_in: frozenset[tuple[str, str]],
) -> None:
    fast = (protocol, env.proxy_kind) in fast_in
    server, db = env.oracle
    oconn = _prepared(server.host, server.port, server.password, db)
    session = None if mode == "fresh" else _Session(env, sql, protocol)
    try:
        if mode == "transaction":
            assert session is not None
            session.conn.start_transaction()
        if mode == "elsewhere":
            assert session is not None
            session.execute(executes[0])  # (prepared in encfast, and run there once)
            session.conn.cmd_query("USE encfast_other")
        for params in executes:
            want = _prepared_answer(oconn, sql, params)
            if any(p in UNDECRYPTABLE for p in params):
                want = ("error", 1105, "the value of column user_name cannot be decrypted by its encryptor (AES): "
                        "it was not written by it (another key, or plaintext)")
            if mode == "fresh":
                fresh = _Session(env, sql, protocol)
                try:
                    assert fresh.execute(params)[0] == want
                finally:
                    fresh.close()
                continue
            assert session is not None
            first, _ = session.execute(params)
            again, taken = session.execute(params)  # (its node's connection holds the statement now)
            assert first == want
            assert again == want
            assert taken == (1 if fast and mode != "elsewhere" else 0)
        if mode == "transaction":
            assert session is not None
            session.conn.commit()
    finally:
        if session is not None:
            session.close()
        oconn.close()


class _RawPrepared:
    """COM_STMT_PREPARE and COM_STMT_EXECUTE over PyMySQL's connection, each answer as the packets it came in (the
    bytes a client reads, whichever path of the proxy wrote them)."""

    def __init__(self, env: Env) -> None:
        self.conn = env.proxy.connect("encfast")

    def prepare(self, sql: str) -> int:
        self.conn._execute_command(0x16, sql)
        ok = self.conn._read_packet().get_all_data()
        stmt_id, ncols, nparams = struct.unpack_from("<IHH", ok, 1)
        for _ in range(bool(nparams) + bool(ncols)):  # (parameter and column definitions, each list up to its EOF)
            while not self.conn._read_packet().is_eof_packet():
                pass
        return int(stmt_id)

    def execute(self, stmt_id: int, params: tuple[int, ...]) -> list[bytes]:
        body = struct.pack("<IBI", stmt_id, 0, 1) + bytes((len(params) + 7) // 8) + b"\x01"
        body += b"\x08\x00" * len(params) + b"".join(struct.pack("<q", v) for v in params)
        self.conn._execute_command(0x17, body)
        try:
            first = self.conn._read_packet()
        except pymysql.MySQLError as exc:  # (PyMySQL reads an ERR as this)
            return [repr(exc.args).encode()]
        answer = [first.get_all_data()]
        if first.is_ok_packet():
            return answer
        for _ in range(2):  # the column definitions, then the rows, each up to its EOF
            while True:
                packet = self.conn._read_packet()
                answer.append(packet.get_all_data())
                if packet.is_eof_packet():
                    break
        return answer

    def query(self, sql: str) -> None:
        with self.conn.cursor() as cur:
            cur.execute(sql)


# (prepared statement, parameters): on a sharded database, each answers the same bytes from the session's coroutine
# (the session holds no connection of the node) and from the fast path (its next executes, on the connection the
# coroutine left with the statement prepared)
SAME_BYTES = [
    ("SELECT user_name FROM t_user WHERE user_id = ?", (11,)),
    ("SELECT user_id, user_name, password, status FROM t_user WHERE user_id = ?", (12,)),
    ("SELECT user_id, password, user_name FROM t_user WHERE user_id IN (?, ?, ?)", (11, 13, 15)),
    ("SELECT user_name FROM t_user WHERE user_id = ?", (21,)),  # the lone ERR
]


@pytest.mark.parametrize(("sql", "params"), SAME_BYTES)
def test_a_prepared_encrypted_select_answers_the_same_bytes_on_either_path(
    env: Env, undecryptable: None, sql: str, params: tuple[int, ...]
) -> None:
    client = _RawPrepared(env)
    try:
        stmt_id = client.prepare(sql)
        client.query("USE encfast_other")  # (and back: the session holds no connection of encfast's now)
        client.query("USE encfast")
        answers, taken = [], []
        for _ in range(3):
            before = STATS.taken
            answers.append(client.execute(stmt_id, params))
            taken.append(STATS.taken - before)
    finally:
        client.conn.close()
    assert taken == [0, 1, 1]  # the coroutine's, then the fast path's (the node's connection holds the statement)
    assert answers[0] == answers[1] == answers[2]
