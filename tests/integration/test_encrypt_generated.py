"""Generated differential test of `!ENCRYPT`: seeded random statements (`encrypt_generator`) over two encrypted tables,
each run through the proxy and on one plain MariaDB holding the same rows unencrypted, must answer the same.

Two logical databases over the same rules: ``encg_p`` passes through to one physical database, ``encg_s`` shards both
tables by ``user_id % 2`` over two servers (binding tables). Two proxies over them: "fast" (the socket callbacks'
fast path takes what it can) and "slow" (a statement timeout to arm leaves every command to the session's
coroutine). Each generated statement:

* a read: as text and as a prepared statement (mysql-connector's prepared cursor), each twice in one warm session of
  the fast proxy (the second on the fast path when it can take it), once on the slow proxy, and now and then in a
  fresh session; then, often, the same text with other values (a kept rewrite, the same prepared statement executed
  again). The column names and types and the rows (a multiset, a list under a determining ORDER BY) must be the
  oracle's, or the oracle's error number;
* a write: as text or prepared, on one proxy or the other, sometimes twice; affected rows, LAST_INSERT_ID and
  warnings (or the error number) as the oracle's, then both tables' rows through the proxy as the oracle's;
* a refusal (what ShardingSphere refuses over ciphertext too): ERR 1235 naming the encrypted column, as text and
  prepared, on both proxies.

After each seed the physical rows are read directly: every cipher is the encryption of the oracle's plaintext and
every assisted and LIKE query column its encryptor's digest (so no plaintext is stored), and the fast path must have
taken some of the statements. Seeds divisible by 3 run every session under NO_BACKSLASH_ESCAPES (their literals
written without escapes); there a sharded statement only federation would answer is refused by the sharding kernel
(federation is off under that mode, docs/statements.md), which is counted, not compared.

On a failure the seed, the statement's number and its text (and prepared form) are printed:
``SHARDPROXY_ENCGEN_SEEDS=7,8`` and ``SHARDPROXY_ENCGEN_STATEMENTS=400`` run others by hand (``-s`` prints what each
seed ran).
"""

from __future__ import annotations

import os
import socket
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mysql.connector
import pytest

from proxy.execution.fastpath import STATS
from proxy.sandbox import MariaDBServer
from routing.encrypt.algorithms import create_encryptor
from tests.integration.encrypt_generator import DICT, Generator, Stmt
from tests.integration.harness import RunningProxy, start_proxy, write_conf

pytestmark = pytest.mark.integration

SEEDS = [int(s) for s in os.environ.get("SHARDPROXY_ENCGEN_SEEDS", "1,2,3").split(",")]
STATEMENTS = int(os.environ.get("SHARDPROXY_ENCGEN_STATEMENTS", "200"))
SEED_ROWS = 14  # inserts that fill the tables before the mix
ER_NOT_SUPPORTED_YET = 1235

AES = {"aes-key-value": "123456abc", "digest-algorithm-name": "SHA-1"}
MD5 = {"salt": "pepper"}
LIKE = {"mask": "65535", "dict": DICT}  # (a mask that keeps every character apart: no extra LIKE matches)
FULL = """          cipher: {{name: {c}_cipher, encryptorName: aes}}
          assistedQuery: {{name: {c}_assisted, encryptorName: md5}}
          likeQuery: {{name: {c}_like, encryptorName: like}}
"""
ENCRYPT = (
    "- !ENCRYPT\n  tables:\n    t_user:\n      columns:\n        name:\n" + FULL.format(c="name")
    + "        pwd:\n          cipher: {name: pwd_cipher, encryptorName: aes}\n"
    + "    t_acct:\n      columns:\n        owner:\n" + FULL.format(c="owner")
    + "  encryptors:\n"
    + "    aes: {type: AES, props: {aes-key-value: 123456abc, digest-algorithm-name: SHA-1}}\n"
    + "    md5: {type: MD5, props: {salt: pepper}}\n"
    + f"    like: {{type: CHAR_DIGEST_LIKE, props: {{mask: 65535, dict: {DICT}}}}}\n"
)  # fmt: skip
SHARDING = """- !SHARDING
  tables:
    t_user:
      actualDataNodes: ds_${0..1}.t_user
      databaseStrategy: {standard: {shardingColumn: user_id, shardingAlgorithmName: by_user}}
    t_acct:
      actualDataNodes: ds_${0..1}.t_acct
      databaseStrategy: {standard: {shardingColumn: user_id, shardingAlgorithmName: by_user}}
  bindingTables: [t_user,t_acct]
  shardingAlgorithms:
    by_user:
      type: INLINE
      props: {algorithm-expression: 'ds_${user_id % 2}', allow-range-query-with-inline-sharding: true}
"""
BIN = "COLLATE utf8mb4_nopad_bin"  # exact, as equality over ciphertext is
PHYSICAL = (
    f"CREATE TABLE t_user (user_id INT PRIMARY KEY, name_cipher VARCHAR(400) {BIN}, name_assisted VARCHAR(64), "
    f"name_like VARCHAR(200) {BIN}, pwd_cipher VARCHAR(400) {BIN}, status VARCHAR(16), score INT) "
    "DEFAULT CHARSET=utf8mb4",
    f"CREATE TABLE t_acct (acct_id INT AUTO_INCREMENT PRIMARY KEY, user_id INT NOT NULL, "
    f"owner_cipher VARCHAR(400) {BIN}, owner_assisted VARCHAR(64), owner_like VARCHAR(200) {BIN}, "
    "memo VARCHAR(16), amount INT) DEFAULT CHARSET=utf8mb4",
)
LOGICAL = (
    f"CREATE TABLE t_user (user_id INT PRIMARY KEY, name VARCHAR(100) {BIN}, pwd VARCHAR(100) {BIN}, "
    "status VARCHAR(16), score INT) DEFAULT CHARSET=utf8mb4",
    f"CREATE TABLE t_acct (acct_id INT AUTO_INCREMENT PRIMARY KEY, user_id INT NOT NULL, owner VARCHAR(100) {BIN}, "
    "memo VARCHAR(16), amount INT) DEFAULT CHARSET=utf8mb4",
)
KEYS = {"t_user": "user_id", "t_acct": "acct_id"}
LOGICAL_COLUMNS = {"t_user": "user_id, name, pwd, status, score", "t_acct": "acct_id, user_id, owner, memo, amount"}
PHYSICAL_COLUMNS = {
    "t_user": "user_id, name_cipher, name_assisted, name_like, pwd_cipher, status, score",
    "t_acct": "acct_id, user_id, owner_cipher, owner_assisted, owner_like, memo, amount",
}


@dataclass
class Database:
    name: str
    sharded: bool
    physical: list[tuple[MariaDBServer, str]]
    oracle: tuple[MariaDBServer, str]


@dataclass
class Env:
    proxies: dict[str, RunningProxy]
    databases: dict[str, Database] = field(default_factory=dict)


@pytest.fixture(scope="module")
def env(
    mariadb: MariaDBServer, mariadb_shards: list[MariaDBServer], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Env]:
    dbs = {
        "passthrough": Database("encg_p", False, [(mariadb, "encg_p_ds")], (mariadb, "encg_p_oracle")),
        "sharded": Database(
            "encg_s", True, [(mariadb_shards[i], f"encg_s_ds_{i}") for i in range(2)], (mariadb, "encg_s_oracle")
        ),
    }
    everything = [pair for db in dbs.values() for pair in (*db.physical, db.oracle)]
    for db in dbs.values():  # (before the proxies start: they load the tables' metadata then)
        for server, name in [*db.physical, db.oracle]:
            server.execute(f"DROP DATABASE IF EXISTS {name}")
            server.execute(f"CREATE DATABASE {name}")
            for ddl in LOGICAL if (server, name) == db.oracle else PHYSICAL:
                server.execute(ddl, name)
    sources = {
        "encg_p": {"ds_0": dbs["passthrough"].physical[0]},
        "encg_s": {f"ds_{i}": dbs["sharded"].physical[i] for i in range(2)},
    }
    proxies: dict[str, RunningProxy] = {}
    try:
        for path, props in (("fast", {}), ("slow", {"proxy-statement-timeout-seconds": 3600})):
            conf = write_conf(
                tmp_path_factory.mktemp(f"encgen-{path}"),
                sources,
                rules_yaml={"encg_p": ENCRYPT, "encg_s": SHARDING + ENCRYPT},
                props=props,
            )
            proxies[path] = start_proxy(Path(conf))
        yield Env(proxies, dbs)
    finally:
        for proxy in proxies.values():
            proxy.stop()
        for server, name in everything:
            server.execute(f"DROP DATABASE IF EXISTS {name}")


# --- running statements ----------------------------------------------------------------------------------------


def _norm(value: Any) -> Any:
    return bytes(value).decode("utf-8", errors="surrogateescape") if isinstance(value, bytes | bytearray) else value


class Conn:
    """One mysql-connector session (text and prepared cursors)."""

    def __init__(self, host: str, port: int, password: str, database: str, charset: str = "utf8mb4") -> None:
        self.conn = mysql.connector.connect(
            host=host, port=port, user="root", password=password, database=database, use_pure=True,
            ssl_disabled=True, autocommit=True, charset=charset,
        )  # fmt: skip
        # (its prepared cursor writes a command in two pieces: without this each waits for a delayed ACK)
        self.conn._socket.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.text = self.conn.cursor()
        self.raw_backslashes = False  # the session's sql_mode has NO_BACKSLASH_ESCAPES
        self.prep: Any = None
        self.prep_for: Stmt | None = None

    def prepared_cursor(self, stmt: Stmt) -> Any:
        """A prepared cursor of this statement's own (mysql-connector's keeps the columns of the statement before
        it after an execute that answers none); executed again, it runs the same prepared statement."""
        key = stmt.same_as or stmt
        if self.prep_for is not key:
            if self.prep is not None:
                self.prep.close()
            self.prep, self.prep_for = self.conn.cursor(prepared=True), key
        return self.prep

    def run(self, stmt: Stmt, prepared: bool) -> tuple[Any, ...]:
        """What the statement answers: ("rows", columns, rows) or ("ok", affected, insert id, warnings) or
        ("error", errno, message)."""
        cur = self.prepared_cursor(stmt) if prepared else self.text
        try:
            if prepared:
                cur.execute(*stmt.prepared())
            else:
                cur.execute(stmt.text(self.raw_backslashes))
            if cur.description is not None:
                rows = [tuple(_norm(v) for v in row) for row in cur.fetchall()]
                return "rows", [(d[0], d[1]) for d in cur.description], rows
            return "ok", cur.rowcount, cur.lastrowid or 0, cur.warning_count
        except mysql.connector.Error as exc:
            with_rows = getattr(cur, "_have_unread_result", None)
            if with_rows is not None and with_rows():
                cur.fetchall()
            return "error", exc.errno, exc.msg

    def rows(self, sql: str) -> list[tuple[Any, ...]]:
        self.text.execute(sql)
        return [tuple(_norm(v) for v in row) for row in self.text.fetchall()]

    def close(self) -> None:
        try:
            self.conn.close()
        except mysql.connector.Error:
            pass


def _oracle_conn(db: Database) -> Conn:
    server, name = db.oracle
    return Conn(server.host, server.port, server.password, name)


def _proxy_conn(env: Env, path: str, db: Database) -> Conn:
    proxy = env.proxies[path]
    return Conn(proxy.host, proxy.port, "root", db.name)


def _same(got: tuple[Any, ...], want: tuple[Any, ...], ordered: bool) -> bool:
    if got[0] != want[0]:
        return False
    if got[0] == "rows":
        if got[1] != want[1]:
            return False
        return got[2] == want[2] if ordered else Counter(got[2]) == Counter(want[2])
    if got[0] == "error":
        return bool(got[1] == want[1])
    return got == want


def _sharding_refusal(answer: tuple[Any, ...]) -> bool:
    """A 1235 of the sharding kernel's (a statement over several nodes that federation would answer), not the
    encryption's."""
    return answer[0] == "error" and answer[1] == ER_NOT_SUPPORTED_YET and "encrypted column" not in answer[2]


def _show(answer: tuple[Any, ...]) -> str:
    if answer[0] == "rows":
        rows = answer[2] if len(answer[2]) <= 8 else [*answer[2][:8], f"... {len(answer[2])} rows"]
        return f"columns {answer[1]} rows {rows}"
    return repr(answer)


class Run:
    """One seed over one database: the sessions, the generator and the failures found."""

    def __init__(self, env: Env, db: Database, seed: int, raw_backslashes: bool) -> None:
        self.env, self.db, self.seed = env, db, seed
        self.raw_backslashes = raw_backslashes
        self.gen = Generator(seed, db.sharded)
        self.oracle = self.session(_oracle_conn(db))
        self.warm = {path: self.session(_proxy_conn(env, path, db)) for path in ("fast", "slow")}
        self.failures: list[str] = []
        self.n = 0
        self.stats: Counter[str] = Counter()  # statements run, by kind and outcome (printed with -s)

    def session(self, conn: Conn) -> Conn:
        if self.raw_backslashes:
            conn.text.execute("SET SESSION sql_mode = CONCAT(@@sql_mode, ',NO_BACKSLASH_ESCAPES')")
            conn.raw_backslashes = True
        return conn

    def close(self) -> None:
        for conn in (self.oracle, *self.warm.values()):
            conn.close()

    def fail(self, stmt: Stmt, how: str, got: tuple[Any, ...], want: tuple[Any, ...]) -> None:
        self.failures.append(
            f"seed {self.seed} ({self.db.name}) statement #{self.n} [{how}] {stmt.note}\n   {stmt}\n"
            f"   proxy  {_show(got)}\n   oracle {_show(want)}"
        )

    def refresh(self) -> None:
        state = self.gen.state
        state.user_ids = [r[0] for r in self.oracle.rows("SELECT user_id FROM t_user")]
        state.acct_ids = [r[0] for r in self.oracle.rows("SELECT acct_id FROM t_acct")]
        state.names = sorted(
            {r[0] for r in self.oracle.rows("SELECT name FROM t_user UNION ALL SELECT owner FROM t_acct") if r[0]}
        )

    def statement(self, stmt: Stmt) -> None:
        self.n += 1
        if stmt.kind == "read":
            self.read(stmt)
        elif stmt.kind == "write":
            self.write(stmt)
        else:
            self.refusal(stmt)

    def read(self, stmt: Stmt) -> None:
        fresh = self.session(_proxy_conn(self.env, "fast", self.db)) if self.n % 5 == 0 else None
        try:
            for prepared in (False, True):
                runs = [("fast", self.warm["fast"]), ("fast again", self.warm["fast"]), ("slow", self.warm["slow"])]
                if fresh is not None:
                    runs.append(("fresh", fresh))
                if not self.compare(stmt, prepared, runs):
                    return
        finally:
            if fresh is not None:
                fresh.close()
        if self.gen.rng.random() < 0.4:  # the same text with other values, where the first one's rewrite is kept
            variant = self.gen.variant(stmt)
            for prepared in (False, True):
                if not self.compare(variant, prepared, [("fast", self.warm["fast"]), ("slow", self.warm["slow"])]):
                    return

    def compare(self, stmt: Stmt, prepared: bool, runs: list[tuple[str, Conn]]) -> bool:
        want = self.oracle.run(stmt, prepared)
        self.stats[f"{stmt.note}: {want[0]}{'' if want[0] != 'rows' or want[2] else ' (none)'}"] += 1
        how = "prepared" if prepared else "text"
        for where, conn in runs:
            got = conn.run(stmt, prepared)
            if self.db.sharded and self.raw_backslashes and _sharding_refusal(got) and want[0] == "rows":
                self.stats["refused by the sharding kernel (no federation under NO_BACKSLASH_ESCAPES)"] += 1
                continue
            if not _same(got, want, stmt.ordered):
                self.fail(stmt, f"{how}, {where}", got, want)
                return False
        return True

    def write(self, stmt: Stmt) -> None:
        rng = self.gen.rng
        prepared = rng.random() < 0.5
        path = rng.choice(("fast", "fast", "slow"))
        times = 2 if rng.random() < 0.3 else 1
        how = f"{'prepared' if prepared else 'text'}, {path}"
        for k in range(times):
            want = self.oracle.run(stmt, prepared)
            self.stats[f"{stmt.note}: {want[0]}{'' if want[0] != 'ok' or want[1] else ' (none)'}"] += 1
            got = self.warm[path].run(stmt, prepared)
            if not _same(got, want, False):
                self.fail(stmt, how + (" (again)" if k else ""), got, want)
                self.resync()
                return
        for table in KEYS:
            select = f"SELECT {LOGICAL_COLUMNS[table]} FROM {table} ORDER BY {KEYS[table]}"
            want_rows, got_rows = self.oracle.rows(select), self.warm["fast"].rows(select)
            if got_rows != want_rows:
                diff = [(g, w) for g, w in zip(got_rows, want_rows, strict=False) if g != w][:3]
                self.failures.append(
                    f"seed {self.seed} ({self.db.name}) statement #{self.n} [{how}]: {table} differs after it "
                    f"({len(got_rows)} rows, oracle {len(want_rows)}; first differences {diff})\n   {stmt}"
                )
                self.resync()
                return
        self.refresh()

    def refusal(self, stmt: Stmt) -> None:
        self.stats[f"refused: {stmt.note}"] += 1
        for prepared in (False, True):
            for path, conn in self.warm.items():
                got = conn.run(stmt, prepared)
                if got[0] != "error" or got[1] != ER_NOT_SUPPORTED_YET or stmt.refused not in got[2]:
                    want = ("error", ER_NOT_SUPPORTED_YET, f"naming {stmt.refused}")
                    self.fail(stmt, f"{'prepared' if prepared else 'text'}, {path}", got, want)
                    return

    def resync(self) -> None:
        """After a difference in the rows: the oracle's rows written again through the proxy, so that the next
        statements are compared from equal tables."""
        proxy = self.warm["fast"]
        cur = proxy.conn.cursor(prepared=True)
        for table in KEYS:
            proxy.text.execute(f"DELETE FROM {table}")
            rows = self.oracle.rows(f"SELECT {LOGICAL_COLUMNS[table]} FROM {table}")
            for row in rows:
                marks = ", ".join(["?"] * len(row))
                cur.execute(f"INSERT INTO {table} ({LOGICAL_COLUMNS[table]}) VALUES ({marks})", row)
        cur.close()
        self.refresh()

    def physical_check(self) -> None:
        """Every physical row holds exactly its plaintext's cipher and digests (a failure if not)."""
        aes = create_encryptor("AES", AES, key="aes")
        md5 = create_encryptor("MD5", MD5, key="md5")
        like = create_encryptor("CHAR_DIGEST_LIKE", LIKE, key="like")
        for table in KEYS:
            plain = {r[0]: r for r in self.oracle.rows(f"SELECT {LOGICAL_COLUMNS[table]} FROM {table}")}
            stored: dict[int, tuple[Any, ...]] = {}
            for server, name in self.db.physical:
                for row in server.execute(f"SELECT {PHYSICAL_COLUMNS[table]} FROM {table}", name):
                    stored[row[0]] = row
            if sorted(stored) != sorted(plain):
                self.failures.append(f"seed {self.seed}: {table}'s physical keys are not the oracle's")
                continue
            at = 1 if table == "t_user" else 2  # the first encrypted column's place in the logical row
            for key, row in stored.items():
                value = plain[key][at]
                want = (aes.encrypt(value), md5.encrypt(value), like.encrypt(value))
                if table == "t_user":
                    want += (aes.encrypt(plain[key][2]),)
                if tuple(row[at : at + len(want)]) != want:
                    self.failures.append(f"seed {self.seed}: {table} {key} stores {row}, not {want} for {plain[key]}")


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("layout", ["passthrough", "sharded"])
def test_generated_statements_answer_what_the_plaintext_server_answers(env: Env, layout: str, seed: int) -> None:
    """Seeds divisible by 3 run their sessions with NO_BACKSLASH_ESCAPES (literals written without escapes)."""
    db = env.databases[layout]
    for server, name in [*db.physical, db.oracle]:
        for table in KEYS:
            server.execute(f"TRUNCATE TABLE {table}", name)  # (AUTO_INCREMENT too)
    run = Run(env, db, seed, seed % 3 == 0)
    taken = STATS.taken
    try:
        for _ in range(SEED_ROWS):
            stmt = run.gen.w_insert() if run.gen.rng.random() < 0.7 else run.gen.w_insert_acct()
            stmt.note = "first rows"
            run.statement(stmt)
        for _ in range(STATEMENTS):
            run.statement(run.gen.next())
        run.physical_check()
        taken = STATS.taken - taken
        mode = " NO_BACKSLASH_ESCAPES" if seed % 3 == 0 else ""
        print(f"\n{layout} seed {seed}{mode}: the fast path took {taken} commands;",
              ", ".join(f"{k} {v}" for k, v in sorted(run.stats.items())))
    finally:
        run.close()
    if not run.raw_backslashes:  # (such sessions leave the fast path)
        assert taken > 0, "the fast path took none of the generated statements"
    if run.failures:
        pytest.fail(f"{len(run.failures)} statements differ:\n" + "\n".join(run.failures[:15]), pytrace=False)
