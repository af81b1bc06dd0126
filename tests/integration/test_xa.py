"""XA transactions across two data sources, on real MariaDB servers: what the client sees (status flags,
errors, autocommit=0, savepoints, FOR UPDATE, implicit commits) and what the servers hold (rows, XA
RECOVER, open InnoDB transactions), the transaction rule's RAL, and the view of in-doubt branches.

The fault tests (servers and the proxy killed at each phase, a bank transfer under faults) are in
test_xa_faults.py."""

from __future__ import annotations

import itertools
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pymysql
import pytest

from proxy.backends.xa import FORMAT_ID
from proxy.sandbox import MariaDBServer, start_servers
from tests.integration.harness import RunningProxy, start_proxy, write_conf

RULES = """\
- !SHARDING
  tables:
    t_xa:
      actualDataNodes: ds_${0..1}.t_xa
      databaseStrategy:
        standard: {shardingColumn: id, shardingAlgorithmName: db_mod}
  shardingAlgorithms:
    db_mod: {type: INLINE, props: {algorithm-expression: 'ds_${id % 2}'}}
"""
ON = {"ds_0": 2, "ds_1": 1}  # even ids live on ds_0, odd ones on ds_1
_NAMES = itertools.count()


def run(conn: pymysql.connections.Connection[Any], sql: str) -> list[tuple[Any, ...]]:
    with conn.cursor() as cur:
        cur.execute(sql)
        return list(cur.fetchall())


def failing(conn: pymysql.connections.Connection[Any], sql: str) -> tuple[int, str]:
    with pytest.raises(pymysql.MySQLError) as info:
        run(conn, sql)
    return int(info.value.args[0]), str(info.value.args[1])


class Env:
    """Two servers, a proxy with the XA rule, table t_xa on both."""

    def __init__(self, servers: list[MariaDBServer], tmp_path: Path, *, default: str = "XA",
                 max_pool_size: int = 20, data_source_props: dict[str, Any] | None = None) -> None:
        self.servers = servers
        n = next(_NAMES)
        self.dbs = [f"xa{n}_{i}" for i in range(2)]
        for server, db in zip(servers, self.dbs, strict=True):
            server.execute(f"CREATE DATABASE {db}")
        self.conf = write_conf(tmp_path / f"conf{n}", {"xa_db": {"ds_0": (servers[0], self.dbs[0]),
                                                                  "ds_1": (servers[1], self.dbs[1])}},
                               rules_yaml={"xa_db": RULES}, max_pool_size=max_pool_size,
                               data_source_props=data_source_props,
                               users=({"user": "root@%", "password": "root", "admin": True},
                                      {"user": "app@%", "password": "app"}),
                               transaction={"defaultType": default, "providerType": "Atomikos",
                                            "props": {"xa-recovery-interval-seconds": 0.3}})
        self.proxy: RunningProxy = start_proxy(self.conf)
        with self.connect() as conn:
            run(conn, "CREATE TABLE t_xa (id BIGINT PRIMARY KEY, v VARCHAR(20))")

    def connect(self, **kw: Any) -> pymysql.connections.Connection[Any]:
        kw.setdefault("autocommit", True)
        kw.setdefault("read_timeout", 30)
        return self.proxy.connect("xa_db", **kw)

    def rows(self, ds: str) -> list[tuple[Any, ...]]:
        i = int(ds[-1])
        return [tuple(r) for r in self.servers[i].execute(f"SELECT id, v FROM {self.dbs[i]}.t_xa ORDER BY id")]

    def prepared(self, ds: str) -> list[tuple[Any, ...]]:
        return [tuple(r) for r in self.servers[int(ds[-1])].execute("XA RECOVER")]

    def open_transactions(self, ds: str) -> list[tuple[Any, ...]]:
        time.sleep(0.15)  # INNODB_TRX is a snapshot refreshed at most every 100 ms
        return [tuple(r) for r in self.servers[int(ds[-1])].execute(
            "SELECT trx_mysql_thread_id, trx_state FROM information_schema.INNODB_TRX")]

    def decisions(self) -> list[bytes]:
        """The commit records written so far (C lines of the decision log)."""
        path = self.conf / "xa-log" / "decisions.log"
        return [line for line in path.read_bytes().splitlines() if line.startswith(b"C ")] if path.exists() else []

    def assert_clean(self) -> None:
        """Nothing prepared, nothing open on either server."""
        deadline = time.monotonic() + 3
        for ds in ("ds_0", "ds_1"):
            while (left := self.prepared(ds) + self.open_transactions(ds)) and time.monotonic() < deadline:
                time.sleep(0.1)
            assert left == [], f"{ds}: {left}"

    def close(self) -> None:
        self.proxy.stop()


def insert(conn: pymysql.connections.Connection[Any], ds: str, offset: int, v: str) -> int:
    key = ON[ds] + 2 * offset
    run(conn, f"INSERT INTO t_xa (id, v) VALUES ({key}, '{v}')")
    return key


@pytest.fixture(scope="module")
def servers() -> Iterator[list[MariaDBServer]]:
    servers = start_servers(2)
    yield servers
    for server in servers:
        server.cleanup()


@pytest.fixture
def env(servers: list[MariaDBServer], tmp_path: Path) -> Iterator[Env]:
    e = Env(servers, tmp_path)
    yield e
    e.close()


# --- commit and rollback ---------------------------------------------------------------------------------------


def test_a_cross_shard_commit_is_two_phase_with_a_logged_decision(env: Env) -> None:
    conn = env.connect()
    run(conn, "BEGIN")
    assert conn.server_status & 1  # SERVER_STATUS_IN_TRANS
    a, b = insert(conn, "ds_0", 0, "a"), insert(conn, "ds_1", 0, "b")
    # each data source has an XA branch open (ACTIVE: not prepared yet), nothing visible yet
    assert [state for _t, state in env.open_transactions("ds_0")] == ["RUNNING"]
    assert env.prepared("ds_0") == [] and env.rows("ds_0") == [] and env.rows("ds_1") == []
    assert run(conn, "SELECT id, v FROM t_xa ORDER BY id") == [(b, "b"), (a, "a")]  # its own writes
    run(conn, "COMMIT")
    assert not conn.server_status & 1
    assert env.rows("ds_0") == [(a, "a")] and env.rows("ds_1") == [(b, "b")]
    [record] = env.decisions()
    assert b'"ds_0"' in record and b'"ds_1"' in record
    env.assert_clean()
    conn.close()


def test_one_data_source_or_one_writer_commits_in_one_phase(env: Env) -> None:
    conn = env.connect()
    run(conn, "BEGIN")
    insert(conn, "ds_0", 0, "one")
    run(conn, "COMMIT")
    run(conn, "BEGIN")
    insert(conn, "ds_1", 1, "writer")
    assert run(conn, f"SELECT v FROM t_xa WHERE id = {ON['ds_0']}") == [("one",)]  # ds_0 only reads
    run(conn, "COMMIT")
    assert env.decisions() == []  # no two-phase commit was needed: nothing logged
    assert env.rows("ds_0") == [(ON["ds_0"], "one")] and env.rows("ds_1") == [(ON["ds_1"] + 2, "writer")]
    env.assert_clean()
    conn.close()


def test_rollback_rolls_back_every_branch(env: Env) -> None:
    conn = env.connect()
    run(conn, "START TRANSACTION")
    insert(conn, "ds_0", 0, "x")
    insert(conn, "ds_1", 0, "x")
    run(conn, "ROLLBACK")
    assert not conn.server_status & 1
    assert env.rows("ds_0") == [] and env.rows("ds_1") == []
    env.assert_clean()
    insert(conn, "ds_0", 1, "auto")  # autocommit again, for real
    assert env.rows("ds_0") == [(ON["ds_0"] + 2, "auto")]
    conn.close()


def test_autocommit_0_starts_a_branch_at_the_first_statement(env: Env) -> None:
    conn = env.connect()
    run(conn, "SET autocommit=0")
    assert run(conn, "SELECT @@autocommit") == [(0,)]
    assert not conn.server_status & 1 and not conn.server_status & 2
    insert(conn, "ds_0", 0, "t1")
    assert conn.server_status & 1
    insert(conn, "ds_1", 0, "t1")
    assert env.rows("ds_0") == [] and env.rows("ds_1") == []
    run(conn, "COMMIT")
    assert not conn.server_status & 1
    assert env.rows("ds_0") == [(ON["ds_0"], "t1")] and env.rows("ds_1") == [(ON["ds_1"], "t1")]
    env.assert_clean()  # nothing is started before the next statement
    insert(conn, "ds_1", 1, "t2")  # the next transaction, implicitly
    insert(conn, "ds_0", 1, "t2")
    run(conn, "ROLLBACK")
    assert len(env.rows("ds_0")) == 1 and len(env.rows("ds_1")) == 1
    insert(conn, "ds_0", 2, "t3")
    run(conn, "SET autocommit=1")  # commits, as on MySQL
    assert (ON["ds_0"] + 4, "t3") in env.rows("ds_0")
    assert len(env.decisions()) == 1
    env.assert_clean()
    conn.close()


def test_savepoints_work_under_xa(env: Env) -> None:
    """MariaDB accepts SAVEPOINT inside an XA branch: the proxy's savepoints work as under LOCAL, including
    on a data source that joins after the savepoint."""
    conn = env.connect()
    run(conn, "BEGIN")
    insert(conn, "ds_0", 0, "before")
    run(conn, "SAVEPOINT sp1")
    insert(conn, "ds_1", 0, "after")
    insert(conn, "ds_0", 1, "after")
    run(conn, "ROLLBACK TO SAVEPOINT sp1")
    insert(conn, "ds_1", 1, "kept")
    run(conn, "RELEASE SAVEPOINT sp1")
    assert failing(conn, "ROLLBACK TO sp1")[0] == 1305
    run(conn, "COMMIT")
    assert env.rows("ds_0") == [(ON["ds_0"], "before")] and env.rows("ds_1") == [(ON["ds_1"] + 2, "kept")]
    env.assert_clean()
    conn.close()


def test_select_for_update_holds_its_locks_until_commit(env: Env) -> None:
    setup = env.connect()
    a, b = insert(setup, "ds_0", 0, "a"), insert(setup, "ds_1", 0, "b")
    conn = env.connect()
    run(conn, "BEGIN")
    assert sorted(run(conn, f"SELECT id FROM t_xa WHERE id IN ({a}, {b}) FOR UPDATE")) == [(b,), (a,)]
    other = env.servers[1].connect(env.dbs[1])
    run(other, "SET innodb_lock_wait_timeout = 1")
    assert failing(other, f"UPDATE t_xa SET v = 'other' WHERE id = {b}")[0] == 1205  # locked by the branch
    run(conn, f"UPDATE t_xa SET v = 'mine' WHERE id IN ({a}, {b})")
    run(conn, "COMMIT")
    run(other, f"UPDATE t_xa SET v = 'other' WHERE id = {b}")  # free now
    assert env.rows("ds_0") == [(a, "mine")] and env.rows("ds_1") == [(b, "other")]
    other.close()
    conn.close()
    setup.close()


@pytest.mark.parametrize("statement", ["BEGIN", "ALTER TABLE t_xa ADD COLUMN extra INT", "SET autocommit=1"])
def test_implicit_commits_commit_the_xa_transaction(env: Env, statement: str) -> None:
    conn = env.connect()
    run(conn, "SET autocommit=0" if statement == "SET autocommit=1" else "BEGIN")
    insert(conn, "ds_0", 0, "x")
    insert(conn, "ds_1", 0, "x")
    run(conn, statement)  # MariaDB refuses DDL and BEGIN inside an XA branch: the proxy commits first
    assert env.rows("ds_0") == [(ON["ds_0"], "x")] and env.rows("ds_1") == [(ON["ds_1"], "x")]
    assert len(env.decisions()) == 1
    if statement == "BEGIN":
        assert conn.server_status & 1  # and a new transaction is open
        insert(conn, "ds_0", 1, "y")
        run(conn, "ROLLBACK")
        assert len(env.rows("ds_0")) == 1
    env.assert_clean()
    conn.close()


def test_start_transaction_read_only_is_kept_under_xa(env: Env) -> None:
    conn = env.connect()
    run(conn, "START TRANSACTION READ ONLY")
    assert failing(conn, f"INSERT INTO t_xa VALUES ({ON['ds_0']}, 'ro')")[0] == 1792
    run(conn, "ROLLBACK")
    env.assert_clean()
    conn.close()


def test_a_deadlock_victims_commit_rolls_back_every_branch(env: Env) -> None:
    """Under LOCAL, a transaction whose part on one shard was rolled back by a deadlock there would still
    commit its part on the other one. Under XA the COMMIT finds that branch rollback-only and rolls back
    every branch, and says so."""
    setup = env.connect()
    x1, x2 = insert(setup, "ds_0", 0, "x1"), insert(setup, "ds_0", 1, "x2")
    a, b = env.connect(), env.connect()
    for i, c in enumerate((a, b)):
        run(c, "SET innodb_lock_wait_timeout = 10")
        run(c, "BEGIN")
        insert(c, "ds_1", 10 + i, "mine")  # each one has work on ds_1 too
    run(a, f"UPDATE t_xa SET v = 'a' WHERE id = {x1}")
    run(b, f"UPDATE t_xa SET v = 'b' WHERE id = {x2}")
    errors: dict[str, int] = {}

    def a_waits() -> None:
        try:
            run(a, f"UPDATE t_xa SET v = 'a' WHERE id = {x2}")
        except pymysql.MySQLError as exc:
            errors["a"] = exc.args[0]

    t = threading.Thread(target=a_waits)
    t.start()
    time.sleep(0.5)
    try:
        run(b, f"UPDATE t_xa SET v = 'b' WHERE id = {x1}")  # a deadlock on ds_0: InnoDB picks a victim
    except pymysql.MySQLError as exc:
        errors["b"] = exc.args[0]
    t.join(30)
    assert list(errors.values()) == [1213], errors
    victim, winner = (a, b) if "a" in errors else (b, a)
    errno, message = failing(victim, "COMMIT")
    assert errno == 1180 and "ds_0 could not prepare its branch (XA END: 1399" in message, message
    assert "nothing was committed" in message and "rolled back on" in message, message
    assert run(victim, "SELECT @@in_transaction") == [(0,)]  # out of the transaction
    run(winner, "COMMIT")
    w = "b" if victim is a else "a"
    assert env.rows("ds_0") == [(x1, w), (x2, w)]
    assert env.rows("ds_1") == [(ON["ds_1"] + (20 if w == "a" else 22), "mine")]  # the victim's is gone too
    env.assert_clean()
    for c in (a, b, setup):
        c.close()


def test_an_autocommit_statement_on_several_shards_is_one_xa_transaction(env: Env) -> None:
    """Under LOCAL each shard's part of a multi-row INSERT autocommits on its own: one failing leaves the
    others in. Under XA the statement is a transaction of its own: all or nothing, its OK after the commit."""
    conn = env.connect()
    run(conn, f"INSERT INTO t_xa VALUES ({ON['ds_1']}, 'there')")
    errno, message = failing(conn, f"INSERT INTO t_xa VALUES ({ON['ds_0']}, 'a'), ({ON['ds_1']}, 'dup')")
    assert errno == 1062, message
    assert env.rows("ds_0") == []  # ds_0's part was rolled back with the statement
    assert not conn.server_status & 1
    run(conn, f"INSERT INTO t_xa VALUES ({ON['ds_0'] + 2}, 'a'), ({ON['ds_1'] + 2}, 'b')")
    assert conn._result is not None and conn._result.affected_rows == 2
    assert not conn.server_status & 1 and conn.server_status & 2  # autocommit, no transaction left open
    assert run(conn, "UPDATE t_xa SET v = 'all'") == []
    assert env.rows("ds_0") == [(ON["ds_0"] + 2, "all")]
    assert env.rows("ds_1") == [(ON["ds_1"], "all"), (ON["ds_1"] + 2, "all")]
    assert len(env.decisions()) == 2  # the INSERT and the UPDATE, each two-phase
    env.assert_clean()
    conn.close()


# --- sessions and connections ------------------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["quit", "drop", "reset"])
def test_a_session_leaving_an_xa_transaction_leaves_nothing_behind(env: Env, how: str) -> None:
    conn = env.connect()
    run(conn, "BEGIN")
    insert(conn, "ds_0", 0, "x")
    insert(conn, "ds_1", 0, "x")
    threads = {row[0] for row in env.servers[0].execute("SELECT trx_mysql_thread_id FROM "
                                                        "information_schema.INNODB_TRX")}
    if how == "quit":
        conn.close()
    elif how == "drop":
        sock = conn._sock
        assert sock is not None
        sock.shutdown(socket.SHUT_RDWR)
        sock.close()
    elif how == "reset":
        conn._execute_command(0x1F, b"")  # COM_RESET_CONNECTION
        conn._read_ok_packet()
        assert run(conn, "SELECT id FROM t_xa") == []  # the session works on fresh connections
    env.assert_clean()
    assert env.rows("ds_0") == [] and env.rows("ds_1") == []
    # the branch's connection was closed, not reset and pooled (MariaDB leaves such a connection half-open)
    live = {row[0] for row in env.servers[0].execute("SELECT ID FROM information_schema.PROCESSLIST")}
    assert not threads & live
    with env.connect() as other:
        run(other, "BEGIN")
        insert(other, "ds_0", 5, "next")
        insert(other, "ds_1", 5, "next")
        run(other, "COMMIT")
    assert len(env.rows("ds_0")) == 1 and len(env.rows("ds_1")) == 1
    if how == "reset":
        conn.close()


def test_a_connection_holding_a_branch_is_not_lent(servers: list[MariaDBServer], tmp_path: Path) -> None:
    env = Env(servers, tmp_path, max_pool_size=1, data_source_props={"connectionTimeoutMilliseconds": 500})
    try:
        a, b = env.connect(), env.connect()
        run(a, "BEGIN")
        insert(a, "ds_0", 0, "a")  # a holds ds_0's only connection, with its branch
        errno, message = failing(b, f"SELECT * FROM t_xa WHERE id = {ON['ds_0']}")
        assert errno == 1040 and "ds_0" in message, message
        insert(a, "ds_1", 0, "a")
        run(a, "COMMIT")
        assert run(b, f"SELECT v FROM t_xa WHERE id = {ON['ds_0']}") == [("a",)]
        a.close()
        b.close()
    finally:
        env.close()


# --- the transaction rule ------------------------------------------------------------------------------------------


def test_show_and_alter_transaction_rule(servers: list[MariaDBServer], tmp_path: Path) -> None:
    env = Env(servers, tmp_path, default="LOCAL")
    try:
        admin, conn = env.connect(), env.connect()
        assert run(admin, "SHOW TRANSACTION RULE") == [("LOCAL", "Atomikos", '{"xa-recovery-interval-seconds":0.3}')]
        run(conn, "BEGIN")
        insert(conn, "ds_0", 0, "local")
        run(admin, "ALTER TRANSACTION RULE (DEFAULT='XA', TYPE(NAME='Narayana'))")
        assert run(admin, "SHOW TRANSACTION RULE")[0][:2] == ("XA", "Narayana")
        insert(conn, "ds_1", 0, "local")  # the open transaction stays LOCAL
        assert env.prepared("ds_1") == []
        run(conn, "COMMIT")
        assert env.decisions() == []
        run(conn, "BEGIN")  # the next one is XA
        insert(conn, "ds_0", 1, "xa")
        insert(conn, "ds_1", 1, "xa")
        run(conn, "COMMIT")
        assert len(env.decisions()) == 1
        # only admins may change it; BASE and unknown types are refused
        with env.proxy.connect("xa_db", user="app", password="app") as app:
            errno, message = failing(app, "ALTER TRANSACTION RULE (DEFAULT='LOCAL')")
            assert errno == 1227 and "admin" in message
        errno, message = failing(admin, "ALTER TRANSACTION RULE (DEFAULT='BASE', TYPE(NAME='Seata'))")
        assert errno == 1235 and "BASE" in message
        assert failing(admin, "ALTER TRANSACTION RULE (DEFAULT=XA")[0] == 1064
        errno, message = failing(admin, "ALTER TRANSACTION RULE (DEFAULT='XA', TYPE(NAME='Narayana', "
                                        "PROPERTIES('xa-log-dir'='/elsewhere')))")
        assert errno == 1235 and "xa-log-dir cannot change" in message
        run(admin, "ALTER TRANSACTION RULE (DEFAULT=LOCAL)")
        with admin.cursor() as cur:  # the statement is the whole rule, as in ShardingSphere: no TYPE, no provider
            cur.execute("SHOW TRANSACTION RULE")
            assert cur.fetchall()[0][:2] == ("LOCAL", "")
        run(conn, "BEGIN")
        insert(conn, "ds_0", 2, "local")
        insert(conn, "ds_1", 2, "local")
        run(conn, "COMMIT")
        assert len(env.decisions()) == 1
        for c in (admin, conn):
            c.close()
    finally:
        env.close()


def test_show_transaction_in_doubt_lists_prepared_branches_and_recovery_settles_ours(env: Env) -> None:
    tm = env.proxy.server.tm
    ours = f"{tm.prefix}0-1"  # boot 0 never runs: a branch of this proxy no transaction in flight owns
    for gtrid, fmt in ((ours, FORMAT_ID), ("someone-else", 1)):
        direct = env.servers[1].connect(env.dbs[1])
        run(direct, f"XA START '{gtrid}','ds_1',{fmt}")
        run(direct, f"INSERT INTO t_xa VALUES ({ON['ds_1'] + (0 if fmt == 1 else 2)}, 'prepared')")
        run(direct, f"XA END '{gtrid}','ds_1',{fmt}")
        run(direct, f"XA PREPARE '{gtrid}','ds_1',{fmt}")
        direct.close()
    with env.connect() as conn:
        rows = run(conn, "SHOW TRANSACTION IN DOUBT")
        by_gtrid = {r[1]: r for r in rows}
        foreign = by_gtrid["someone-else"]
        assert foreign[3:8] == ("1", "ds_1", f"127.0.0.1:{env.servers[1].port}", "PREPARED", "")
        assert "left alone" in foreign[8]
        deadline = time.monotonic() + 5
        while ours in {r[1] for r in run(conn, "SHOW TRANSACTION IN DOUBT")}:  # rolled back by recovery
            assert time.monotonic() < deadline, "recovery did not settle the branch"
            time.sleep(0.1)
        assert [r[1] for r in run(conn, "SHOW TRANSACTION IN DOUBT")] == ["someone-else"]
    assert env.rows("ds_1") == []  # ours rolled back (no decision logged); the foreign one still prepared
    env.servers[1].execute("XA ROLLBACK 'someone-else','ds_1',1")
    env.assert_clean()


def test_a_log_directory_that_cannot_be_used_stops_the_start(servers: list[MariaDBServer], tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    conf = write_conf(tmp_path / "conf", {"xa_db": {"ds_0": (servers[0], "mysql"), "ds_1": (servers[1], "mysql")}},
                      rules_yaml={"xa_db": RULES},
                      transaction={"defaultType": "XA", "props": {"xa-log-dir": str(blocker / "xa")}})
    with pytest.raises(Exception, match="xa-log-dir"):
        start_proxy(conf)
