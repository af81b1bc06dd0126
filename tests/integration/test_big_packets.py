"""Packets of 16 MiB and more through a sharded table (issue 35 item 3): a 20 MiB value, several 0xFFFFFF frames
each way, round-trips — written by a prepared INSERT (the client's COM_STMT_EXECUTE spans frames, and so does the
proxy's toward the data source), read back in the text and the binary protocol (the node's row spans frames, and
so does the client's), byte for byte and as MariaDB itself stores it; and a text INSERT of such a value (the kernel's
string patterns walk a literal in one pass, so routing it costs its copies, within the statement's memory budget).

(tests/integration/test_passthrough_fresh.py covers the same sizes on a pass-through database.)
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mysql.connector
import pytest

from protocol.constants import MAX_PAYLOAD
from proxy.sandbox import MariaDBServer
from tests.integration.harness import RunningProxy, start_proxy, write_conf

pytestmark = pytest.mark.integration

PHYSICAL = ("big_ds_0", "big_ds_1")
PACKET = 64 * 1024 * 1024
RULES = """\
- !SHARDING
  tables:
    t_blob:
      actualDataNodes: ds_${0..1}.t_blob_${0..1}
      databaseStrategy: {standard: {shardingColumn: id, shardingAlgorithmName: blob_db}}
      tableStrategy: {standard: {shardingColumn: k, shardingAlgorithmName: blob_table}}
  shardingAlgorithms:
    blob_db: {type: INLINE, props: {algorithm-expression: 'ds_${id % 2}'}}
    blob_table: {type: INLINE, props: {algorithm-expression: 't_blob_${k % 2}'}}
"""
DDL = "CREATE TABLE {name} (id INT NOT NULL PRIMARY KEY, k INT NOT NULL, b LONGBLOB)"
VALUE = bytes(range(256)) * (20 * 1024 * 1024 // 256) + b"tail"  # 20 MiB and 4 bytes: two full frames and a rest


@dataclass
class BigEnv:
    proxy: RunningProxy
    servers: list[MariaDBServer]


@pytest.fixture(scope="module")
def big(mariadb_shards: list[MariaDBServer], tmp_path_factory: pytest.TempPathFactory) -> Iterator[BigEnv]:
    before = []
    for server, physical in zip(mariadb_shards, PHYSICAL, strict=True):
        before.append(server.execute("SELECT @@GLOBAL.max_allowed_packet")[0][0])
        server.execute(f"SET GLOBAL max_allowed_packet = {PACKET}")  # the proxy's connections, opened after
        server.execute(f"DROP DATABASE IF EXISTS {physical}")
        server.execute(f"CREATE DATABASE {physical}")
        for table in ("t_blob_0", "t_blob_1"):
            server.execute(DDL.format(name=table), physical)
    databases = {"big_db": {f"ds_{i}": (s, PHYSICAL[i]) for i, s in enumerate(mariadb_shards)}}
    proxy = start_proxy(Path(write_conf(tmp_path_factory.mktemp("big-conf"), databases, rules_yaml={"big_db": RULES})))
    try:
        yield BigEnv(proxy, list(mariadb_shards))
    finally:
        proxy.stop()
        for server, physical, value in zip(mariadb_shards, PHYSICAL, before, strict=True):
            server.execute(f"DROP DATABASE IF EXISTS {physical}")
            server.execute(f"SET GLOBAL max_allowed_packet = {value}")


def _connector(env: BigEnv) -> Any:
    return mysql.connector.connect(
        host=env.proxy.host,
        port=env.proxy.port,
        user="root",
        password="root",
        database="big_db",
        use_pure=True,
        ssl_disabled=True,
        autocommit=True,
    )


# The binary protocol's reader: mysql2 (node), as mysql-connector's pure reader misreads a binary row over several
# frames (a 20 MiB REPEAT() straight from MariaDB fails in it too); the value comes back as its length and MD5.
NODE_MODULES = Path(__file__).resolve().parents[1] / "compat" / "node" / "node_modules"
BINARY_READ = """
const mysql = require('mysql2/promise');
const crypto = require('crypto');
(async () => {
  const [host, port, sql, arg] = process.argv.slice(1);  // (node -e: no script path)
  const c = await mysql.createConnection({host, port: +port, user: 'root', password: 'root', database: 'big_db'});
  const [rows] = await c.execute(sql, [+arg]);
  const out = rows.map(r => Object.values(r).map(v => Buffer.isBuffer(v) ?
    {len: v.length, md5: crypto.createHash('md5').update(v).digest('hex')} : v));
  const [next] = await c.execute("SELECT 'next' AS n");
  console.log(JSON.stringify({rows: out, next: next[0].n}));
  await c.end();
})().catch(e => { console.log(JSON.stringify({error: e.errno, message: e.message})); });
"""


def _read(env: BigEnv, protocol: str, row_id: int) -> tuple[int, str, int, str, str]:
    """(the value's length, its MD5, LENGTH(b), MD5(b), 'after') as the client read them."""
    sql = "SELECT b, LENGTH(b), MD5(b), 'after' FROM t_blob WHERE id = %s"
    if protocol == "text":
        with env.proxy.connect("big_db", max_allowed_packet=PACKET) as conn, conn.cursor() as cur:
            cur.execute(sql, (row_id,))
            rows = cur.fetchall()
            cur.execute("SELECT 'next'")
            assert cur.fetchall() == (("next",),)
        assert len(rows) == 1
        value, length, md5, after = rows[0]
        return len(value), hashlib.md5(value).hexdigest(), int(length), md5, after
    answer = subprocess.run(
        ["node", "-e", BINARY_READ, env.proxy.host, str(env.proxy.port), sql.replace("%s", "?"), str(row_id)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "NODE_PATH": str(NODE_MODULES)},
        check=True,
    )
    got = json.loads(answer.stdout.strip().splitlines()[-1])
    assert got.get("next") == "next", got
    assert len(got["rows"]) == 1
    value, length, md5, after = got["rows"][0]
    return value["len"], value["md5"], int(length), md5, after


# (row id, k): every data source and table; the value read back in each protocol
CASES = [(id_, k, protocol) for id_, k in ((1, 0), (2, 1)) for protocol in ("text", "prepared")]


@pytest.mark.parametrize(("row_id", "k", "protocol"), CASES)
def test_20mib_value_round_trips_through_a_sharded_table(big: BigEnv, row_id: int, k: int, protocol: str) -> None:
    assert len(VALUE) > MAX_PAYLOAD
    conn = _connector(big)
    try:
        cur = conn.cursor(prepared=True)
        cur.execute("DELETE FROM t_blob WHERE id = ?", (row_id,))
        cur.execute("INSERT INTO t_blob (id, k, b) VALUES (?, ?, ?)", (row_id, k, VALUE))
        assert cur.rowcount == 1
    finally:
        conn.close()
    md5 = hashlib.md5(VALUE).hexdigest()
    assert _read(big, protocol, row_id) == (len(VALUE), md5, len(VALUE), md5, "after")
    server, physical = big.servers[row_id % 2], PHYSICAL[row_id % 2]
    assert server.execute(f"SELECT MD5(b) FROM t_blob_{k % 2} WHERE id = {row_id}", physical) == [(md5,)]


def test_20mib_text_insert_round_trips(big: BigEnv) -> None:
    """The value in the statement's text (escaped by the client), routed by the kernel: it used to cost ~290 bytes
    per byte of the literal in the tokenizer, 6 GB for this one."""
    with big.proxy.connect("big_db", max_allowed_packet=PACKET, autocommit=True) as conn, conn.cursor() as cur:
        cur.execute("DELETE FROM t_blob WHERE id = 3")
        cur.execute("INSERT INTO t_blob (id, k, b) VALUES (3, 1, %s)", (VALUE,))
        assert cur.rowcount == 1
        cur.execute("SELECT LENGTH(b), MD5(b) FROM t_blob WHERE id = 3")
        assert cur.fetchall() == ((len(VALUE), hashlib.md5(VALUE).hexdigest()),)
        cur.execute("DELETE FROM t_blob WHERE id = 3")
