"""`!ENCRYPT` through the proxy, against real MariaDB servers: what the application writes is stored encrypted
(the physical rows, read directly, hold no plaintext, and ShardingSphere's ciphertexts where its e2e dataset has
them), what it reads back is what it wrote, and WHERE = / IN / LIKE / IS NULL find the rows one unencrypted MariaDB
holding the same rows finds — literal and prepared, on a pass-through database and on a sharded one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mysql.connector
import pymysql
import pytest

from proxy.sandbox import MariaDBServer
from routing.encrypt.algorithms import create_encryptor
from tests.integration.encrypt_fixtures import SHARDING
from tests.integration.harness import RunningProxy, start_proxy, write_conf

AES = {"aes-key-value": "123456abc", "digest-algorithm-name": "SHA-1"}  # ShardingSphere's e2e scenario's key
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
    like: {type: IT.ENCRYPT.LIKE.FIXTURE, props: {mask: 4093, dict: 张三丰}}
"""
PHYSICAL = (
    "CREATE TABLE t_user (user_id INT PRIMARY KEY, user_name_cipher VARCHAR(200), user_name_assisted VARCHAR(64), "
    "user_name_like VARCHAR(200), password_cipher VARCHAR(200), telephone_cipher VARCHAR(200), "
    "telephone_like VARCHAR(200), created DATE)"
)
LOGICAL = (
    "CREATE TABLE t_user (user_id INT PRIMARY KEY, user_name VARCHAR(200), password VARCHAR(200), "
    "telephone VARCHAR(200), created DATE)"
)
# ShardingSphere's e2e rows (expected/dataset.xml), a Chinese name, quotes and backslashes, NULLs
ROWS = [
    (10, "zhangsan", "111111", "12345678900", "2017-08-08"),
    (11, "lisi", "222222", "12345678901", "2017-08-08"),
    (12, "wangwu", "333333", "12345678902", "2017-08-09"),
    (13, "zhaoliu", "444444", "12345678903", "2017-08-09"),
    (14, "张三丰", "o'brien\\x", "98765", "2020-01-01"),
    (15, None, "pw", None, None),
]
WRITES = [
    "INSERT INTO t_user (user_id, user_name, password, telephone, created) VALUES "
    "(10, 'zhangsan', '111111', '12345678900', '2017-08-08'), (11, 'lisi', '222222', '12345678901', '2017-08-08')",
    "INSERT INTO t_user (created, user_id, telephone, user_name, password) VALUES "
    "('2017-08-09', 12, '12345678902', 'wangwu', '333333')",
    "INSERT INTO t_user (user_id, user_name, password, telephone, created) VALUES "
    "(13, 'zhaoliu', '444444', '12345678903', '2017-08-09')",
]
PREPARED_WRITES = [  # (14 and 15 through COM_STMT_PREPARE / EXECUTE)
    ("INSERT INTO t_user (user_id, user_name, password, telephone, created) VALUES (?, ?, ?, ?, ?)", ROWS[4]),
    ("INSERT INTO t_user (user_id, user_name, password, telephone, created) VALUES (?, ?, ?, ?, ?)", ROWS[5]),
]

# one statement per line: the proxy over the encrypted table answers what MariaDB over the plain table answers
READS = [
    "SELECT * FROM t_user ORDER BY user_id",
    "SELECT user_id, user_name AS n, password FROM t_user WHERE user_name = 'zhangsan'",
    "SELECT u.user_id, u.telephone FROM t_user u WHERE u.user_name IN ('lisi', 'wangwu', 'nobody') ORDER BY 1",
    "SELECT user_id FROM t_user WHERE user_name <> 'lisi' ORDER BY user_id",
    "SELECT user_id, user_name FROM t_user WHERE user_name LIKE 'zhang%' ORDER BY user_id",
    "SELECT user_id FROM t_user WHERE telephone LIKE '%8903' OR password = '222222' ORDER BY user_id",
    "SELECT user_id FROM t_user WHERE user_name = '张三丰' AND password = 'o''brien\\\\x'",
    "SELECT user_id, password FROM t_user WHERE user_name IS NULL",
    "SELECT COUNT(*) FROM t_user WHERE telephone IS NOT NULL AND created = '2017-08-09'",
    "SELECT DISTINCT created FROM t_user WHERE user_name NOT IN ('lisi') ORDER BY created",
    "SELECT user_name FROM t_user WHERE user_id = 13 UNION ALL SELECT user_name FROM t_user WHERE user_id = 10",
    "SELECT user_id FROM t_user WHERE user_id IN (SELECT user_id FROM t_user WHERE password = '444444')",
    "/* a comment */ SELECT * FROM t_user WHERE user_id = 10",
    "SELECT d.n, d.password FROM (SELECT user_id, user_name AS n, password FROM t_user) d WHERE d.n = 'lisi'",
    "SELECT * FROM (SELECT * FROM t_user) d WHERE d.telephone LIKE '1234%' ORDER BY d.user_id",
    "SELECT user_id, (SELECT t.password FROM t_user t WHERE t.user_id = 11) AS p FROM t_user ORDER BY user_id",
    "SELECT user_id FROM t_user WHERE password IN (SELECT password FROM t_user WHERE user_id IN (10, 12)) ORDER BY 1",
    "SELECT user_id FROM t_user WHERE user_name LIKE CONCAT('%', 'ang', '%') ORDER BY user_id",
    "SELECT password, COUNT(*) FROM t_user GROUP BY password ORDER BY MIN(user_id)",
    "SELECT DISTINCT (password) FROM t_user WHERE user_id IN (10, 11)",
    "SELECT user_id FROM t_user u WHERE EXISTS (SELECT t.password FROM t_user t WHERE t.user_id = u.user_id + 1) "
    "ORDER BY user_id",
]
CHANGES = [
    "UPDATE t_user SET password = 'changed', telephone = '555' WHERE user_name = 'lisi'",
    "UPDATE t_user SET user_name = NULL WHERE user_id = 12",
    "DELETE FROM t_user WHERE user_name IN ('zhaoliu')",
    "INSERT INTO t_user (user_id, user_name, password) VALUES (10, 'dup', 'x') ON DUPLICATE KEY UPDATE "
    "password = 'upserted'",
]
REFUSED = [
    ("SELECT user_id FROM t_user ORDER BY user_name", "t_user.user_name cannot be used in ORDER BY"),
    ("SELECT user_id FROM t_user WHERE password > 'a'", "a range condition"),
    ("SELECT UPPER(user_name) FROM t_user", "UPPER()"),
    ("SELECT user_id FROM t_user WHERE password LIKE 'a%'", "likeQuery"),
    (
        "INSERT INTO t_user (user_id, password) SELECT 99, user_name FROM t_user WHERE user_id = 10",
        "encrypted the same way",
    ),
    ("/*!40101 SELECT * FROM t_user */", "executable comment"),
]


class Env:
    def __init__(
        self,
        proxy: RunningProxy,
        database: str,
        physical: list[tuple[MariaDBServer, str]],
        oracle: tuple[MariaDBServer, str],
    ) -> None:
        self.proxy, self.database, self.physical, self.oracle = proxy, database, physical, oracle

    def proxy_conn(self) -> pymysql.connections.Connection[Any]:
        return self.proxy.connect(self.database)

    def physical_rows(self) -> list[tuple[Any, ...]]:
        rows: list[tuple[Any, ...]] = []
        for server, db in self.physical:
            rows.extend(server.execute("SELECT * FROM t_user", db))
        return sorted(rows)


def _setup(physical: list[tuple[MariaDBServer, str]], oracle: tuple[MariaDBServer, str]) -> None:
    for server, db in [*physical, oracle]:
        server.execute(f"DROP DATABASE IF EXISTS {db}")
        server.execute(f"CREATE DATABASE {db}")
        server.execute(LOGICAL if (server, db) == oracle else PHYSICAL, db)


@pytest.fixture(scope="module", params=["passthrough", "sharded"])
def env(
    request: pytest.FixtureRequest,
    mariadb: MariaDBServer,
    mariadb_shards: list[MariaDBServer],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Env]:
    oracle = (mariadb, "enc_oracle")
    if request.param == "passthrough":
        physical = [(mariadb, "enc_ds")]
        databases = {"enc": {"ds_0": physical[0]}}
        rules = ENCRYPT
    else:
        physical = [(mariadb_shards[i], f"enc_shard_{i}") for i in range(2)]
        databases = {"enc": {f"ds_{i}": physical[i] for i in range(2)}}
        rules = SHARDING + ENCRYPT
    _setup(physical, oracle)
    conf = write_conf(tmp_path_factory.mktemp(f"encrypt-{request.param}"), databases, rules_yaml={"enc": rules})
    proxy = start_proxy(Path(conf))
    try:
        yield Env(proxy, "enc", physical, oracle)
    finally:
        proxy.stop()
        for server, db in [*physical, oracle]:
            server.execute(f"DROP DATABASE IF EXISTS {db}")


def _write_all(env: Env) -> None:
    with env.proxy_conn() as conn, conn.cursor() as cur:
        cur.execute("DELETE FROM t_user")
        for sql in WRITES:
            cur.execute(sql)
    server, db = env.oracle
    server.execute("DELETE FROM t_user", db)
    for sql in WRITES:
        server.execute(sql, db)
    pconn = mysql.connector.connect(
        host=env.proxy.host, port=env.proxy.port, user="root", password="root", database=env.database, autocommit=True
    )
    try:
        cur = pconn.cursor(prepared=True)
        for sql, row in PREPARED_WRITES:
            cur.execute(sql, row)
            server.execute(sql.replace("?", "%s"), db, args=row)
    finally:
        pconn.close()


def _answer(conn: Any, sql: str) -> tuple[list[tuple[Any, ...]], list[str]]:
    with conn.cursor() as cur:
        cur.execute(sql)
        return list(cur.fetchall()), [d[0] for d in cur.description or ()]


def test_the_physical_rows_hold_no_plaintext_and_shardingspheres_ciphertexts(env: Env) -> None:
    _write_all(env)
    rows = env.physical_rows()
    assert [r[0] for r in rows] == [r[0] for r in ROWS]
    plaintexts = {v for row in ROWS for v in row[1:4] if v is not None}
    for row in rows:
        for value in row[1:7]:
            assert value is None or value not in plaintexts, row
    if len(env.physical) == 2:  # sharded by user_id % 2: each server holds its rows
        for i, (server, db) in enumerate(env.physical):
            ids = [r[0] for r in server.execute("SELECT user_id FROM t_user", db)]
            assert ids and all(u % 2 == i for u in ids), ids
    by_id = {r[0]: r for r in rows}
    # ShardingSphere's e2e dataset: user 10's stored user_name_cipher, password_cipher, telephone cipher and like
    assert by_id[10][1] == "sVq8Lmm+j6bZE5EKSilJEQ==" and by_id[10][4] == "aQol0b6th65d0aXe+zFPsQ=="
    assert by_id[10][5] == "kLjLJIMnfyHT2nA+viaoaQ==" and by_id[10][6] == "01454589811"
    assert by_id[10][3] == "yi`mht`m"
    assert by_id[15][1] is None and by_id[15][2] is None and by_id[15][3] is None
    aes = create_encryptor("AES", AES, key="k")
    md5 = create_encryptor("MD5", {"salt": "pepper"}, key="k")
    for plain, stored in zip(ROWS, rows, strict=True):
        assert (aes.decrypt(stored[1]) if stored[1] else None) == plain[1]
        assert stored[2] == md5.encrypt(plain[1])
        assert aes.decrypt(stored[4]) == plain[2]


@pytest.mark.parametrize("sql", READS)
def test_reads_answer_what_an_unencrypted_server_answers(env: Env, sql: str) -> None:
    if len(env.physical_rows()) != len(ROWS):
        _write_all(env)
    server, db = env.oracle
    with env.proxy_conn() as conn, server.connect(db) as oconn:
        assert _answer(conn, sql) == _answer(oconn, sql)


@pytest.mark.parametrize("sql", READS[:4])
def test_prepared_reads_answer_the_same(env: Env, sql: str) -> None:
    if len(env.physical_rows()) != len(ROWS):
        _write_all(env)
    server, db = env.oracle
    prepared_sql = sql.replace("'zhangsan'", "?").replace("'lisi'", "?")
    args = tuple(v for v in ("zhangsan", "lisi") if f"'{v}'" in sql)
    pconn = mysql.connector.connect(
        host=env.proxy.host, port=env.proxy.port, user="root", password="root", database=env.database, autocommit=True
    )
    try:
        cur = pconn.cursor(prepared=True)
        cur.execute(prepared_sql, args)
        got = [tuple(v.decode() if isinstance(v, bytes | bytearray) else v for v in r) for r in cur.fetchall()]
        names = [d[0] for d in cur.description]
    finally:
        pconn.close()
    with server.connect(db) as oconn:
        rows, onames = _answer(oconn, sql)
    assert names == onames
    assert got == [tuple(r) for r in rows]


def test_changes_affect_the_same_rows(env: Env) -> None:
    _write_all(env)
    server, db = env.oracle
    with env.proxy_conn() as conn, server.connect(db) as oconn:
        for sql in CHANGES:
            with conn.cursor() as cur, oconn.cursor() as ocur:
                assert cur.execute(sql) == ocur.execute(sql), sql
        assert _answer(conn, READS[0]) == _answer(oconn, READS[0])
    plaintexts = {"changed", "555", "upserted"}
    assert not [r for r in env.physical_rows() if plaintexts.intersection(map(str, r))]
    _write_all(env)


@pytest.mark.parametrize(("sql", "words"), REFUSED)
def test_what_cannot_be_answered_over_ciphertext_is_refused(env: Env, sql: str, words: str) -> None:
    with env.proxy_conn() as conn, conn.cursor() as cur:
        with pytest.raises(pymysql.err.MySQLError) as info:
            cur.execute(sql)
    assert info.value.args[0] == 1235 and words in info.value.args[1], info.value.args


SHOWN = [  # SHOW ENCRYPT RULES of the configuration above, in ShardingSphere's columns
    ("t_user", "user_name", "user_name_cipher", "user_name_assisted", "user_name_like", "AES",
     '{"aes-key-value":"123456abc","digest-algorithm-name":"SHA-1"}', "MD5", '{"salt":"pepper"}',
     "IT.ENCRYPT.LIKE.FIXTURE", '{"dict":"张三丰","mask":4093}'),
    ("t_user", "password", "password_cipher", "", "", "AES",
     '{"aes-key-value":"123456abc","digest-algorithm-name":"SHA-1"}', "", "", "", ""),
    ("t_user", "telephone", "telephone_cipher", "", "telephone_like", "AES",
     '{"aes-key-value":"123456abc","digest-algorithm-name":"SHA-1"}', "", "", "IT.ENCRYPT.LIKE.FIXTURE",
     '{"dict":"张三丰","mask":4093}'),
]  # fmt: skip
NOTE_RULE = (
    "t_note (COLUMNS((NAME=body, CIPHER=body_cipher, ASSISTED_QUERY_COLUMN=body_assisted, "
    "ENCRYPT_ALGORITHM(TYPE(NAME='AES', PROPERTIES('aes-key-value'='k2', 'digest-algorithm-name'='SHA-256'))), "
    "ASSISTED_QUERY_ALGORITHM(TYPE(NAME='MD5')))))"
)


def test_show_encrypt_rules(env: Env) -> None:
    with env.proxy_conn() as conn:
        rows, names = _answer(conn, "SHOW ENCRYPT RULES")
        assert names == ["table", "logic_column", "cipher_column", "assisted_query_column", "like_query_column",
                         "encryptor_type", "encryptor_props", "assisted_query_type", "assisted_query_props",
                         "like_query_type", "like_query_props"]  # fmt: skip
        assert rows == SHOWN
        assert _answer(conn, "SHOW ENCRYPT TABLE RULE t_user FROM enc")[0] == SHOWN
        assert _answer(conn, "SHOW ENCRYPT RULE t_other")[0] == []
        assert _answer(conn, "COUNT ENCRYPT RULE")[0] == [("encrypt", "enc", "1")]


def test_create_alter_drop_encrypt_rule(env: Env) -> None:
    server, db = env.physical[0]
    server.execute("CREATE TABLE t_note (id INT PRIMARY KEY, body_cipher VARCHAR(200), body_assisted VARCHAR(64))", db)
    conf_file = env.proxy.conf_dir / "database-enc.yaml"
    try:
        with env.proxy_conn() as conn, conn.cursor() as cur:
            cur.execute(f"CREATE ENCRYPT RULE {NOTE_RULE}")
            rows = _answer(conn, "SHOW ENCRYPT RULE t_note")[0]
            assert rows == [
                (
                    "t_note",
                    "body",
                    "body_cipher",
                    "body_assisted",
                    "",
                    "AES",
                    '{"aes-key-value":"k2","digest-algorithm-name":"SHA-256"}',
                    "MD5",
                    "",
                    "",
                    "",
                )
            ]
            assert "t_note_body" in conf_file.read_text() and "assist_t_note_body" in conf_file.read_text()
            with pytest.raises(pymysql.err.MySQLError) as info:
                cur.execute(f"CREATE ENCRYPT RULE {NOTE_RULE}")
            assert "Duplicate encrypt rule names `t_note`" in info.value.args[1]
            cur.execute(f"CREATE ENCRYPT RULE IF NOT EXISTS {NOTE_RULE}")
            if len(env.physical) == 1:  # (a pass-through table: the new rule encrypts at once)
                cur.execute("INSERT INTO t_note (id, body) VALUES (1, 'secret note')")
                assert server.execute("SELECT body_cipher FROM t_note", db)[0][0] != "secret note"
                assert _answer(conn, "SELECT id, body FROM t_note WHERE body = 'secret note'")[0] == [
                    (1, "secret note")
                ]
            cur.execute(
                "ALTER ENCRYPT RULE t_note (COLUMNS((NAME=body, CIPHER=body_cipher, "
                "ENCRYPT_ALGORITHM(TYPE(NAME='AES', PROPERTIES('aes-key-value'='k2', "
                "'digest-algorithm-name'='SHA-256'))))))"
            )
            assert _answer(conn, "SHOW ENCRYPT RULE t_note")[0][0][3] == ""
            assert "assist_t_note_body" not in conf_file.read_text()  # its unused encryptor went with it
            with pytest.raises(pymysql.err.MySQLError) as info:
                cur.execute(
                    "ALTER ENCRYPT RULE t_note (COLUMNS((NAME=body, CIPHER=body_cipher, "
                    "ENCRYPT_ALGORITHM(TYPE(NAME='MD5')))))"
                )
            assert "cannot decrypt" in info.value.args[1]
            cur.execute("DROP ENCRYPT RULE t_note")
            assert _answer(conn, "SHOW ENCRYPT RULE t_note")[0] == []
            assert "t_note:" not in conf_file.read_text() and "t_note_body" not in conf_file.read_text()
            with pytest.raises(pymysql.err.MySQLError) as info:
                cur.execute("DROP ENCRYPT RULE t_note")
            assert "Encrypt rule `t_note` does not exist" in info.value.args[1]
            cur.execute("DROP ENCRYPT RULE IF EXISTS t_note")
            assert _answer(conn, "SHOW ENCRYPT RULES")[0] == SHOWN
    finally:
        server.execute("DROP TABLE IF EXISTS t_note", db)


def test_ddl_on_an_encrypted_table_runs_as_written_and_select_star_follows_it(env: Env) -> None:
    if len(env.physical_rows()) != len(ROWS):
        _write_all(env)
    with env.proxy_conn() as conn, conn.cursor() as cur:
        assert _answer(conn, "SELECT * FROM t_user WHERE user_id = 10")[1][-1] == "created"
        cur.execute("ALTER TABLE t_user ADD COLUMN extra INT")
        try:
            rows, names = _answer(conn, "SELECT * FROM t_user WHERE user_id = 10")
            assert names == ["user_id", "user_name", "password", "telephone", "created", "extra"]
            assert rows[0][:3] == (10, "zhangsan", "111111")
        finally:
            cur.execute("ALTER TABLE t_user DROP COLUMN extra")
        assert _answer(conn, "SELECT * FROM t_user WHERE user_id = 10")[1][-1] == "created"


def test_a_value_its_encryptor_did_not_write_is_an_error_not_ciphertext(env: Env) -> None:
    server, db = env.physical[0]
    user_id = 98  # (even: on the first data source of the sharded database)
    server.execute(f"INSERT INTO t_user (user_id, password_cipher) VALUES ({user_id}, 'plain text left behind')", db)
    try:
        with env.proxy_conn() as conn, conn.cursor() as cur:
            with pytest.raises(pymysql.err.MySQLError) as info:
                cur.execute(f"SELECT password FROM t_user WHERE user_id = {user_id}")
            assert info.value.args[0] == 1105 and "cannot be decrypted" in info.value.args[1]
            cur.execute(f"SELECT user_id FROM t_user WHERE user_id = {user_id}")  # the session goes on
            assert cur.fetchall() == ((user_id,),)
    finally:
        server.execute(f"DELETE FROM t_user WHERE user_id = {user_id}", db)


@pytest.mark.parametrize(
    "sql",
    [
        "INSERT INTO t_user VALUES (60, 'nocols', 'pw60', '600', '2021-01-01')",
        "INSERT INTO t_user (user_id, user_name, password, telephone, created) "
        "SELECT 62, user_name, password, telephone, created FROM t_user WHERE user_name = 'lisi'",
    ],
)
def test_insert_without_columns_and_insert_select_store_what_a_plain_server_stores(env: Env, sql: str) -> None:
    if len(env.physical) != 1 and "SELECT" in sql:
        pytest.skip("INSERT ... SELECT over shards is the sharding kernel's (refused there)")
    _write_all(env)
    server, db = env.oracle
    with env.proxy_conn() as conn, server.connect(db) as oconn:
        with conn.cursor() as cur, oconn.cursor() as ocur:
            assert cur.execute(sql) == ocur.execute(sql)
        assert _answer(conn, READS[0]) == _answer(oconn, READS[0])
    assert not [r for r in env.physical_rows() if {"nocols", "pw60"}.intersection(map(str, r))]
    _write_all(env)
