"""`!MASK` beside `!ENCRYPT` on the same columns: the client sees the mask of the plaintext (ShardingSphere's
`mask_encrypt` e2e scenario), never the plaintext nor a mask of the ciphertext — text and prepared, `SELECT *`,
named columns, aliases and joins, on a pass-through database and on a sharded one."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mysql.connector
import pytest

from proxy.sandbox import MariaDBServer
from tests.integration.encrypt_fixtures import SHARDING
from tests.integration.harness import RunningProxy, start_proxy, write_conf

RULES = """- !MASK
  maskAlgorithms:
    md5_mask: {type: MD5}
    keep: {type: KEEP_FIRST_N_LAST_M, props: {first-n: 3, last-m: 4, replace-char: '*'}}
  tables:
    t_user:
      columns:
        password: {maskAlgorithm: md5_mask}
        telephone: {maskAlgorithm: keep}
- !ENCRYPT
  encryptors:
    aes: {type: AES, props: {aes-key-value: 123456abc, digest-algorithm-name: SHA-1}}
  tables:
    t_user:
      columns:
        user_name: {cipher: {name: user_name_cipher, encryptorName: aes}}
        password: {cipher: {name: password_cipher, encryptorName: aes}}
        telephone: {cipher: {name: telephone_cipher, encryptorName: aes}}
"""
PHYSICAL = (
    "CREATE TABLE t_user (user_id INT PRIMARY KEY, user_name_cipher VARCHAR(200), password_cipher VARCHAR(200), "
    "telephone_cipher VARCHAR(200))"
)
ROWS = [(10, "zhangsan", "111111", "12345678900"), (11, "lisi", "222222", "12345678901"), (12, "wangwu", None, None)]


def _shown(row: tuple[Any, ...]) -> tuple[Any, ...]:
    """A row as the client must see it: password's MD5, telephone's first 3 and last 4 kept."""
    uid, name, password, phone = row
    return (
        uid,
        name,
        None if password is None else hashlib.md5(password.encode()).hexdigest(),
        None if phone is None else phone[:3] + "*" * (len(phone) - 7) + phone[-4:],
    )


SHOWN = {r[0]: _shown(r) for r in ROWS}
# (statement, the ids of the rows it answers, in order, and which of their columns)
CASES = [
    ("SELECT * FROM t_user ORDER BY user_id", [10, 11, 12], (0, 1, 2, 3)),
    ("SELECT user_id, password, telephone FROM t_user WHERE user_id = 10", [10], (0, 2, 3)),
    ("SELECT password AS p, user_name FROM t_user WHERE user_id = 11", [11], (2, 1)),
    ("SELECT u1.* FROM t_user u1 JOIN t_user u2 ON u1.user_id = u2.user_id WHERE u1.user_id = 10", [10], (0, 1, 2, 3)),
    ("SELECT telephone FROM t_user WHERE user_id = 12", [12], (3,)),
]


@pytest.fixture(scope="module", params=["passthrough", "sharded"])
def proxy(
    request: pytest.FixtureRequest,
    mariadb: MariaDBServer,
    mariadb_shards: list[MariaDBServer],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[RunningProxy]:
    if request.param == "passthrough":
        physical = [(mariadb, "encmask_ds")]
        rules = RULES
    else:
        physical = [(mariadb_shards[i], f"encmask_shard_{i}") for i in range(2)]
        rules = SHARDING + RULES
    for server, db in physical:
        server.execute(f"DROP DATABASE IF EXISTS {db}")
        server.execute(f"CREATE DATABASE {db}")
        server.execute(PHYSICAL, db)
    conf = write_conf(
        tmp_path_factory.mktemp(f"encmask-{request.param}"),
        {"encmask": {f"ds_{i}": p for i, p in enumerate(physical)}},
        rules_yaml={"encmask": rules},
    )
    running = start_proxy(Path(conf))
    try:
        with running.connect("encmask") as conn, conn.cursor() as cur:
            for row in ROWS:
                cur.execute("INSERT INTO t_user (user_id, user_name, password, telephone) VALUES (%s, %s, %s, %s)", row)
        yield running
    finally:
        running.stop()
        for server, db in physical:
            server.execute(f"DROP DATABASE IF EXISTS {db}")


@pytest.mark.parametrize("prepared", [False, True], ids=["text", "prepared"])
@pytest.mark.parametrize(("sql", "ids", "columns"), CASES)
def test_masked_encrypted_columns_show_the_mask_of_the_plaintext(
    proxy: RunningProxy, sql: str, ids: list[int], columns: tuple[int, ...], prepared: bool
) -> None:
    conn = mysql.connector.connect(
        host=proxy.host, port=proxy.port, user="root", password="root", database="encmask", autocommit=True
    )
    try:
        cur = conn.cursor(prepared=prepared)
        cur.execute(sql)
        got = [tuple(v.decode() if isinstance(v, bytes | bytearray) else v for v in r) for r in cur.fetchall()]
    finally:
        conn.close()
    assert got == [tuple(SHOWN[i][c] for c in columns) for i in ids]
