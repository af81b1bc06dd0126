"""Prepared statements whose parameters are bound to `!ENCRYPT` columns, on a pass-through database: the rewrite is
prepared on the backend connection and each EXECUTE runs it there, the client's parameters mapped onto its `?` and
encrypted (cipher, assisted query and LIKE query columns), on the socket callbacks' fast path (SELECTs and writes)
and on the session's coroutine alike (a second proxy over the same database, with a statement timeout, which the
fast path leaves to the coroutine). Each answers what one unencrypted MariaDB holding the plaintext answers —
rows, affected rows, LAST_INSERT_ID, warnings — literal and prepared, in a warm session and a fresh one, and the
physical rows hold only ciphertext."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mysql.connector
import pytest

from proxy.execution.fastpath import STATS
from proxy.sandbox import MariaDBServer
from routing.encrypt.algorithms import create_encryptor
from routing.interpolate import interpolate
from tests.integration.harness import RunningProxy, start_proxy, write_conf

AES = {"aes-key-value": "123456abc", "digest-algorithm-name": "SHA-1"}
MD5 = {"salt": "pepper"}
LIKE = {"dict": "张三丰"}
ENCRYPT = """- !ENCRYPT
  tables:
    t_user:
      columns:
        user_name:
          cipher: {name: user_name_cipher, encryptorName: aes}
          assistedQuery: {name: user_name_assisted, encryptorName: md5}
          likeQuery: {name: user_name_like, encryptorName: like}
        password:
          cipher: {name: password_cipher, encryptorName: aes}
        telephone:
          cipher: {name: telephone_cipher, encryptorName: aes}
          likeQuery: {name: telephone_like, encryptorName: like}
  encryptors:
    aes: {type: AES, props: {aes-key-value: 123456abc, digest-algorithm-name: SHA-1}}
    md5: {type: MD5, props: {salt: pepper}}
    like: {type: CHAR_DIGEST_LIKE, props: {dict: 张三丰}}
"""
PHYSICAL = (
    "CREATE TABLE t_user (user_id INT AUTO_INCREMENT PRIMARY KEY, user_name_cipher VARCHAR(200), "
    "user_name_assisted VARCHAR(64), user_name_like VARCHAR(200), password_cipher VARCHAR(200), "
    "telephone_cipher VARCHAR(200), telephone_like VARCHAR(200), status VARCHAR(10))"
)
LOGICAL = (
    "CREATE TABLE t_user (user_id INT AUTO_INCREMENT PRIMARY KEY, user_name VARCHAR(200), password VARCHAR(200), "
    "telephone VARCHAR(200), status VARCHAR(10))"
)
COLUMNS = "user_id, user_name, password, telephone, status"
ROWS = [
    (10, "zhangsan", "111111", "12345678900", "a"),
    (11, "lisi", "222222", "12345678901", "b"),
    (12, "张三丰", "o'brien\\x", "98765", "a"),
    (13, None, "pw", None, None),
    (14, "zhangsan", "444444", "12345678903", "c"),
]

# (prepared SELECT, its parameters, run as its rewrite prepared on the backend): each answers what the plaintext
# server answers
READS = [
    ("SELECT user_id, user_name FROM t_user WHERE user_name = ?", ("zhangsan",), True),  # the assisted query column
    ("SELECT user_id FROM t_user WHERE password = ?", ("o'brien\\x",), True),  # the cipher column (AES)
    ("SELECT user_id, password FROM t_user WHERE user_name = ?", ("nobody",), True),  # matches nothing
    ("SELECT user_id FROM t_user WHERE user_name = ?", (None,), True),  # NULL matches nothing
    ("SELECT user_id, telephone FROM t_user WHERE user_name IN (?, ?, ?)", ("lisi", None, "张三丰"), True),
    ("SELECT user_id FROM t_user WHERE user_name LIKE ?", ("zh%",), True),  # the LIKE query column
    ("SELECT user_id, user_name FROM t_user WHERE telephone LIKE ? OR user_name LIKE ?", ("%8903", "%三%"), True),
    ("SELECT user_id FROM t_user WHERE user_name <> ? AND user_id > ?", ("lisi", 10), True),
    ("SELECT user_name, status FROM t_user WHERE status = ? AND password = ?", ("a", "111111"), True),  # mixed
    ("SELECT user_id FROM t_user WHERE user_id = ? AND password IN (?, ?)", (11, "222222", "x"), True),
    ("SELECT user_id, password FROM t_user WHERE password = ? LIMIT ?", (222222, 5), True),  # a number, encrypted
    ("SELECT COUNT(*) FROM t_user WHERE user_name = ?", ("zhangsan",), True),  # (a `*` the rewrite did not expand)
    ("SELECT user_id, user_name FROM t_user WHERE user_name LIKE ? ORDER BY user_id DESC", ("%", ), True),
    ("SELECT * FROM t_user WHERE user_name = ?", ("lisi",), False),  # (the table's columns, read when executed)
]

# (id, prepared write, the parameters of each of its executes): affected rows, LAST_INSERT_ID, warnings and the
# rows it leaves are the plaintext server's
WRITES = [
    ("insert_rows", f"INSERT INTO t_user ({COLUMNS}) VALUES (?, ?, ?, ?, ?), (?, ?, ?, ?, ?)",
     [(20, "new", "pw1", "555%_x", "n", 21, None, None, "12", None),
      (22, "张三", "x", "1", "m", 23, "zhangsan", "2", "3", "m")]),
    ("insert_auto_id", "INSERT INTO t_user (user_name, password) VALUES (?, ?)", [("auto", "pw"), (None, "pw2")]),
    ("insert_set", "INSERT INTO t_user SET user_name = ?, telephone = ?", [("set", "123"), ("set2", None)]),
    ("insert_duplicate", "INSERT INTO t_user (user_id, user_name) VALUES (?, ?)", [(30, "a"), (30, "b")]),
    ("insert_ignore", "INSERT IGNORE INTO t_user (user_id, user_name) VALUES (?, ?)", [(31, "new"), (10, "dup")]),
    ("update_set", "UPDATE t_user SET user_name = ?, password = ? WHERE user_id = ?",
     [("changed", "pw2", 11), (None, None, 12)]),
    ("update_where_encrypted", "UPDATE t_user SET status = ?, telephone = ? WHERE user_name = ?",
     [("z", "777", "zhangsan"), ("y", None, "nobody")]),
    ("update_like", "UPDATE t_user SET status = ? WHERE telephone LIKE ?", [("l", "1234%"), ("k", "%9%")]),
    ("upsert", "INSERT INTO t_user (user_id, user_name, password) VALUES (?, ?, ?) ON DUPLICATE KEY UPDATE "
     "password = ?, user_name = VALUES(user_name)", [(10, "dup", "x", "upserted"), (40, "fresh", "y", "unused")]),
    ("replace", "REPLACE INTO t_user (user_id, user_name, password) VALUES (?, ?, ?)",
     [(11, "replaced", "r"), (41, "added", None)]),
    ("delete", "DELETE FROM t_user WHERE user_name = ? OR telephone LIKE ?", [("lisi", "%8903"), ("nobody", "0%")]),
    ("update_plain", "UPDATE t_user SET status = ? WHERE user_id = ?", [("p", 10), ("q", 99)]),  # nothing encrypted
    ("delete_plain", "DELETE FROM t_user WHERE user_id IN (?, ?)", [(10, 11), (99, 12)]),
]  # fmt: skip


class Env:
    def __init__(
        self, proxies: dict[str, RunningProxy], physical: tuple[MariaDBServer, str], oracle: tuple[MariaDBServer, str]
    ) -> None:
        self.proxies, self.physical, self.oracle = proxies, physical, oracle


@pytest.fixture(scope="module")
def env(mariadb: MariaDBServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    physical, oracle = (mariadb, "encps_ds"), (mariadb, "encps_oracle")
    for server, db in (physical, oracle):
        server.execute(f"DROP DATABASE IF EXISTS {db}")
        server.execute(f"CREATE DATABASE {db}")
        server.execute(PHYSICAL if db == physical[1] else LOGICAL, db)
    proxies: dict[str, RunningProxy] = {}
    try:
        # "slow": a statement timeout to arm makes the fast path leave every command to the session's coroutine
        for path, props in (("fast", {}), ("slow", {"proxy-statement-timeout-seconds": 3600})):
            conf = write_conf(
                tmp_path_factory.mktemp(f"encps-{path}"),
                {"encps": {"ds_0": physical}},
                rules_yaml={"encps": ENCRYPT},
                props=props,
            )
            proxies[path] = start_proxy(Path(conf))
        yield Env(proxies, physical, oracle)
    finally:
        for proxy in proxies.values():
            proxy.stop()
        for server, db in (physical, oracle):
            server.execute(f"DROP DATABASE IF EXISTS {db}")


@pytest.fixture(autouse=True)
def rows(env: Env) -> None:
    """ROWS in both tables, written anew for each test (AUTO_INCREMENT too)."""
    for server, db in (env.physical, env.oracle):
        server.execute("TRUNCATE TABLE t_user", db)
    insert = f"INSERT INTO t_user ({COLUMNS}) VALUES (%s, %s, %s, %s, %s)"
    with env.proxies["fast"].connect("encps") as conn, conn.cursor() as cur:
        for row in ROWS:
            cur.execute(insert, row)
    for row in ROWS:
        env.oracle[0].execute(insert, env.oracle[1], args=row)


def _connect(env: Env, path: str) -> Any:
    if path == "oracle":
        server, db = env.oracle
        host, port, password, database = server.host, server.port, server.password, db
    else:
        proxy = env.proxies[path]
        host, port, password, database = proxy.host, proxy.port, "root", "encps"
    return mysql.connector.connect(
        host=host, port=port, user="root", password=password, database=database, use_pure=True, ssl_disabled=True,
        autocommit=True,
    )  # fmt: skip


def _text(conn: Any, sql: str) -> list[tuple[Any, ...]]:
    cur = conn.cursor()
    try:
        cur.execute(sql)
        return [tuple(r) for r in cur.fetchall()]
    finally:
        cur.close()


def _stmt_executes(conn: Any) -> int:
    """COM_STMT_EXECUTEs the session's backend connection ran (a pass-through SHOW is relayed there)."""
    return int(_text(conn, "SHOW SESSION STATUS LIKE 'Com_stmt_execute'")[0][1])


def _execute(cur: Any, sql: str, params: tuple[Any, ...]) -> tuple[Any, ...]:
    """What one execute answers: its rows (sorted) and columns, or its affected rows, LAST_INSERT_ID and warnings,
    or its error."""
    try:
        cur.execute(sql, params)
        if cur.with_rows:
            rows = sorted((tuple(r) for r in cur.fetchall()), key=repr)
            return rows, [(d[0], d[1]) for d in cur.description]
        return cur.rowcount, cur.lastrowid, cur.warning_count
    except mysql.connector.Error as exc:
        return ("error", exc.errno)


def _oracle(env: Env, sql: str, runs: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    conn = _connect(env, "oracle")
    try:
        cur = conn.cursor(prepared=True)
        return [_execute(cur, sql, params) for params in runs]
    finally:
        conn.close()


@pytest.mark.parametrize(("sql", "params", "mapped"), READS)
@pytest.mark.parametrize("path", ["fast", "slow"])
def test_a_warm_prepared_select_answers_what_the_plaintext_server_answers(
    env: Env, path: str, sql: str, params: tuple[Any, ...], mapped: bool
) -> None:
    """Executed twice in one session: the second on the fast path (on the "fast" proxy, when `mapped`), each as a
    COM_STMT_EXECUTE of the rewrite on the backend (when `mapped`: no longer the text with the values written in)."""
    want = _oracle(env, sql, [params, params])
    conn = _connect(env, path)
    try:
        cur = conn.cursor(prepared=True)
        got = [_execute(cur, sql, params)]
        executes = _stmt_executes(conn)
        before = STATS.taken
        got.append(_execute(cur, sql, params))
        taken = STATS.taken - before
        executes = _stmt_executes(conn) - executes
    finally:
        conn.close()
    assert got == want
    assert taken == (1 if mapped and path == "fast" else 0)
    assert executes == (1 if mapped else 0)


@pytest.mark.parametrize(("sql", "params", "mapped"), READS)
def test_a_fresh_session_and_the_literal_text_answer_the_same(
    env: Env, sql: str, params: tuple[Any, ...], mapped: bool
) -> None:
    want = _oracle(env, sql, [params])[0]
    conn = _connect(env, "fast")
    try:
        assert _execute(conn.cursor(prepared=True), sql, params) == want
    finally:
        conn.close()
    literal = interpolate(sql, params)
    with env.proxies["fast"].connect("encps") as conn, conn.cursor() as cur:
        cur.execute(literal)
        got = sorted(cur.fetchall(), key=repr)
    assert got == want[0]


def _physical(row: tuple[Any, ...]) -> tuple[Any, ...]:
    """The physical row the proxy must store for a plaintext row."""
    aes = create_encryptor("AES", AES, key="aes")
    md5 = create_encryptor("MD5", MD5, key="md5")
    like = create_encryptor("CHAR_DIGEST_LIKE", LIKE, key="like")
    user_id, name, password, telephone, status = row
    return (user_id, aes.encrypt(name), md5.encrypt(name), like.encrypt(name), aes.encrypt(password),
            aes.encrypt(telephone), like.encrypt(telephone), status)  # fmt: skip


@pytest.mark.parametrize(("case", "sql", "runs"), WRITES, ids=[w[0] for w in WRITES])
@pytest.mark.parametrize("path", ["fast", "slow"])
def test_a_prepared_write_does_what_it_does_on_the_plaintext_server(
    env: Env, path: str, case: str, sql: str, runs: list[tuple[Any, ...]]
) -> None:
    """Each execute: affected rows, LAST_INSERT_ID, warnings (or the error) as on the plaintext server, run as a
    COM_STMT_EXECUTE of the rewrite (the second on the fast path on the "fast" proxy); then LAST_INSERT_ID(), SHOW
    WARNINGS, the logical rows, and the physical rows: ciphertext only, exactly the encryptors' of the plaintext."""
    oconn = _connect(env, "oracle")
    conn = _connect(env, path)
    try:
        ocur = oconn.cursor(prepared=True)
        want = [_execute(ocur, sql, params) for params in runs]
        want_after = [_text(oconn, "SHOW WARNINGS"), _text(oconn, "SELECT LAST_INSERT_ID()")]
        cur = conn.cursor(prepared=True)
        executes = _stmt_executes(conn)
        got = [_execute(cur, sql, runs[0])]
        before = STATS.taken
        got.append(_execute(cur, sql, runs[1]))
        taken = STATS.taken - before
        got_after = [_text(conn, "SHOW WARNINGS"), _text(conn, "SELECT LAST_INSERT_ID()")]
        executes = _stmt_executes(conn) - executes
    finally:
        conn.close()
        oconn.close()
    assert got == want
    assert got_after == want_after
    assert taken == (1 if path == "fast" else 0)
    assert executes == 2
    select = f"SELECT {COLUMNS} FROM t_user ORDER BY user_id"
    plain = env.oracle[0].execute(select, env.oracle[1])
    assert env.proxies[path].query(select, "encps") == plain
    server, db = env.physical
    stored = server.execute("SELECT * FROM t_user ORDER BY user_id", db)
    assert [tuple(r) for r in stored] == [_physical(tuple(r)) for r in plain]
    for physical, logical in zip(stored, plain, strict=True):
        secret = {v for v in logical[1:4] if v is not None}
        assert not secret & set(physical[1:7])  # (no plaintext in any physical column)


# (prepared statement, the parameters of each of its executes), run in sessions whose sql_mode has NO_BACKSLASH_ESCAPES
NO_BACKSLASH_ESCAPES = [
    ("SELECT user_id, password FROM t_user WHERE password = ?", [("o'brien\\x",), ("o'brien\\x",)]),
    ("SELECT user_id FROM t_user WHERE user_name = ? OR telephone LIKE ?", [("张三丰", "no'%"), ("x", "\\%")]),
    ("SELECT * FROM t_user WHERE password IN (?, ?)", [("o'brien\\x", "pw"), ("'", "\\")]),  # (a *: as text)
    ("INSERT INTO t_user VALUES (?, ?, ?, ?, ?)", [(52, "a\\'b", "'", "\\\\", "x'"), (53, None, "\\", "", "")]),
    ("SELECT user_id FROM t_user WHERE telephone LIKE ?", [("%\\%",), ("9%",)]),
    ("INSERT INTO t_user (user_id, user_name, password) VALUES (?, ?, ?)", [(50, "a\\'b", "new\nline"),
                                                                         (51, "\\", "'")]),
    ("UPDATE t_user SET password = ?, status = ? WHERE user_name = ?", [("x\\y'z", "q'", "zhangsan"),
                                                                       ("\\'", "\\", "lisi")]),
]  # fmt: skip


@pytest.mark.parametrize(("sql", "runs"), NO_BACKSLASH_ESCAPES)
@pytest.mark.parametrize("path", ["fast", "slow"])
def test_prepared_statements_under_no_backslash_escapes(
    env: Env, path: str, sql: str, runs: list[tuple[Any, ...]]
) -> None:
    """Executes the proxy runs as text (such a session leaves the fast path): the parameters are written into the
    rewrite as the session reads its strings, backslashes and quotes as the values hold them."""
    answers = []
    for target in ("oracle", path):
        conn = _connect(env, target)
        try:
            _text(conn, "SET SESSION sql_mode = CONCAT(@@sql_mode, ',NO_BACKSLASH_ESCAPES')")
            cur = conn.cursor(prepared=True)
            got = [_execute(cur, sql, params) for params in runs]
            answers.append((got, _text(conn, f"SELECT {COLUMNS} FROM t_user ORDER BY user_id")))
        finally:
            conn.close()
    assert answers[1] == answers[0]


@pytest.mark.parametrize(("sql", "params"), [
    ("SELECT user_id, user_name FROM t_user WHERE user_name = ?", ("zhangsan",)),
    ("SELECT user_id FROM t_user WHERE user_name LIKE ? AND user_id > ?", ("%三%", 1)),
])  # fmt: skip
def test_a_parameter_sent_as_long_data_is_encrypted_too(env: Env, sql: str, params: tuple[Any, ...]) -> None:
    """COM_STMT_SEND_LONG_DATA (a file-like parameter): the session's coroutine runs that execute, with the value the
    long data makes."""
    want = _oracle(env, sql, [params])
    conn = _connect(env, "fast")
    try:
        cur = conn.cursor(prepared=True)
        executes = _stmt_executes(conn)
        got = [_execute(cur, sql, (io.BytesIO(params[0].encode()), *params[1:]))]
        executes = _stmt_executes(conn) - executes
    finally:
        conn.close()
    assert got == want
    assert executes == 1


@pytest.mark.parametrize(("sql", "params"), [
    ("SELECT user_id, user_name, password FROM t_user WHERE user_name = ?", ("zhangsan",)),
    ("SELECT user_id, telephone FROM t_user WHERE telephone LIKE ? AND user_id > ?", ("1234%", 10)),
])  # fmt: skip
@pytest.mark.parametrize("path", ["fast", "slow"])
def test_a_cursor_over_a_mapped_execute_fetches_the_plaintext_rows(
    env: Env, path: str, sql: str, params: tuple[Any, ...]
) -> None:
    """CURSOR_TYPE_READ_ONLY: the session's coroutine runs the mapped execute and keeps its decrypted rows for
    COM_STMT_FETCH, as MariaDB keeps the plaintext server's."""
    from protocol.binary import CURSOR_TYPE_READ_ONLY, decode_binary_row
    from tests.integration.test_bytes import login
    from tests.integration.test_prepared import _prepared, _raw_execute, _raw_fetch

    answers = []
    for target in (path, "oracle"):
        if target == "oracle":
            server, db = env.oracle
            client = login(server.host, server.port, db, server.password)
        else:
            client = login(env.proxies[path].host, env.proxies[path].port, "encps")
        try:
            prepared = _prepared(client, sql)
            opened = _raw_execute(client, prepared.ok.statement_id, params, flags=CURSOR_TYPE_READ_ONLY)
            fetched = _raw_fetch(client, prepared.ok.statement_id, 100)
            rows = sorted(decode_binary_row(p, prepared.columns) for p in fetched.rows)
            answers.append((opened.columns, opened.status, opened.err, rows, fetched.err))
        finally:
            client.close()
    assert answers[0] == answers[1]
    assert answers[0][3]  # (some rows)
