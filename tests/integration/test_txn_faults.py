"""LOCAL transactions across two data sources end in a known state when a data source fails.

Whatever fails (a shard killed before COMMIT, a connection cut during COMMIT, during ROLLBACK, during a
statement or a SAVEPOINT, a client leaving mid-transaction): the client's error says which data source
committed and which did not, and that is what the servers hold (checked on direct connections); no
transaction is left open on any backend (`information_schema.INNODB_TRX` is empty); the session is out of
the transaction, and its next statement is autocommit for real.

Two ways to fail a data source: killing its server (`MariaDBServer.kill`), and `FaultRelay`, a TCP relay
in front of ds_1's server that cuts the proxy's connections at a chosen command, before or after passing
it on; the server stays up, so its side can be checked too.
"""

from __future__ import annotations

import itertools
import re
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pymysql
import pytest

from proxy.execution.fastpath import STATS
from proxy.sandbox import MariaDBServer, start_servers
from tests.conftest import ServerFactory
from tests.integration.faults import CuttingRelay, abort
from tests.integration.harness import RunningProxy, start_proxy, write_conf

RULES = """\
- !SHARDING
  tables:
    t_tx:
      actualDataNodes: ds_${0..1}.t_tx
      databaseStrategy:
        standard: {shardingColumn: id, shardingAlgorithmName: db_mod}
  shardingAlgorithms:
    db_mod: {type: INLINE, props: {algorithm-expression: 'ds_${id % 2}'}}
"""
# t_tx rows: even ids on ds_0, odd ids on ds_1
ON = {"ds_0": 2, "ds_1": 1}


FaultRelay = CuttingRelay  # (tests.integration.faults)


_NAMES = itertools.count()


class Env:
    """Two servers (ds_1 optionally behind a FaultRelay), a proxy of their own, table t_tx."""

    def __init__(self, servers: list[MariaDBServer], tmp_path: Path, *, relay: bool) -> None:
        self.servers = servers
        # server port -> when INNODB_TRX was last read: shared by every Env, since the servers outlive a test
        # and the previous test's last read may be a few ms old
        self._trx_read = _TRX_READ
        n = next(_NAMES)
        self.dbs = [f"txf{n}_{i}" for i in range(2)]
        for server, db in zip(servers, self.dbs, strict=True):
            server.execute(f"CREATE DATABASE {db}")
        self.relay = FaultRelay(servers[1]) if relay else None
        sources: dict[str, Any] = {"ds_0": (servers[0], self.dbs[0]),
                                   "ds_1": (self.relay or servers[1], self.dbs[1])}
        conf = write_conf(tmp_path / f"conf{n}", {"tx_db": sources}, rules_yaml={"tx_db": RULES})
        self.proxy: RunningProxy = start_proxy(conf)
        with self.connect() as conn:
            run(conn, "CREATE TABLE t_tx (id BIGINT PRIMARY KEY, v VARCHAR(20))")

    def connect(self, **kw: Any) -> pymysql.connections.Connection[Any]:
        kw.setdefault("autocommit", True)
        kw.setdefault("read_timeout", 30)
        return self.proxy.connect("tx_db", **kw)

    def server(self, ds: str) -> MariaDBServer:
        return self.servers[int(ds[-1])]

    def rows(self, ds: str) -> list[tuple[Any, ...]]:
        """What is committed on a data source, read on a fresh direct connection."""
        db = self.dbs[int(ds[-1])]
        return [tuple(r) for r in self.server(ds).execute(f"SELECT id, v FROM {db}.t_tx ORDER BY id")]

    def open_transactions(self, ds: str) -> list[tuple[Any, ...]]:
        """The server's open InnoDB transactions now. MariaDB refreshes what INNODB_TRX shows only once nobody
        has read it for 100 ms (CACHE_MIN_IDLE_TIME_NS in trx0i_s.cc): read sooner, it shows the previous
        snapshot, so reads of one server are spaced out."""
        server = self.server(ds)
        wait = self._trx_read.get(server.port, 0.0) + 0.15 - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        try:
            return [tuple(r) for r in server.execute(
                "SELECT trx_mysql_thread_id, trx_state, trx_rows_modified, trx_query"
                " FROM information_schema.INNODB_TRX")]
        finally:
            self._trx_read[server.port] = time.monotonic()

    def assert_nothing_open(self, *data_sources: str, within: float = 1.0) -> None:
        """No transaction left open on those backends (the server may need a moment to see a client leave)."""
        deadline = time.monotonic() + within
        for ds in data_sources or ("ds_0", "ds_1"):
            while (trx := self.open_transactions(ds)) and time.monotonic() < deadline:
                pass
            assert trx == [], f"open transactions left on {ds}: {trx}"

    def close(self) -> None:
        self.proxy.stop()
        if self.relay is not None:
            self.relay.close()


def run(conn: pymysql.connections.Connection[Any], sql: str) -> list[tuple[Any, ...]]:
    with conn.cursor() as cur:
        cur.execute(sql)
        return list(cur.fetchall())


def failing(conn: pymysql.connections.Connection[Any], sql: str) -> tuple[int, str]:
    with pytest.raises(pymysql.MySQLError) as info:
        run(conn, sql)
    return int(info.value.args[0]), str(info.value.args[1])


def failing_fast(conn: pymysql.connections.Connection[Any], sql: str) -> tuple[int, str]:
    """`failing`, for a COMMIT or ROLLBACK that the fast path answers (proxy.execution.fastcommit): its failures
    are the session coroutine's, word for word (the tests that do not take it check the same wording)."""
    before = STATS.taken
    failure = failing(conn, sql)
    assert STATS.taken == before + 1, "not answered by proxy.execution.fastcommit"
    return failure


_TRX_READ: dict[int, float] = {}


def insert(conn: pymysql.connections.Connection[Any], ds: str, offset: int, v: str) -> int:
    key = ON[ds] + 2 * offset
    run(conn, f"INSERT INTO t_tx (id, v) VALUES ({key}, '{v}')")
    return key


def assert_autocommit_for_real(env: Env, conn: pymysql.connections.Connection[Any], *data_sources: str) -> None:
    """The session is out of any transaction: a write is visible at once from a direct connection, and a
    ROLLBACK afterwards does not take it back; the status flags say so too."""
    keys = {ds: insert(conn, ds, 50, "after") for ds in data_sources}
    for ds, key in keys.items():
        assert (key, "after") in env.rows(ds), ds
    assert not conn.server_status & 1, "SERVER_STATUS_IN_TRANS still set"  # pymysql keeps the last status
    run(conn, "ROLLBACK")
    for ds, key in keys.items():
        assert (key, "after") in env.rows(ds), ds
    env.assert_nothing_open(*data_sources)


def committed_on(message: str, ds: str) -> bool:
    """What the error says happened on `ds`: True for 'committed on ... ds', False for 'rolled back on ...'."""
    committed = re.search(r"(?<!not )committed on ([\w, ]+)", message)
    rolled_back = re.search(r"rolled back on ([\w, ]+)", message)
    says_committed = bool(committed and ds in committed.group(1).split(", "))
    says_rolled_back = bool(rolled_back and ds in rolled_back.group(1).split(", "))
    assert says_committed != says_rolled_back, f"the error does not say what happened on {ds}: {message}"
    return says_committed


@pytest.fixture(scope="module")
def shared_servers() -> Iterator[list[MariaDBServer]]:
    """Two servers for the relay tests (they are never killed: each test has its own databases)."""
    servers = start_servers(2)
    yield servers
    for server in servers:
        server.cleanup()


@pytest.fixture
def relayed(shared_servers: list[MariaDBServer], tmp_path: Path) -> Iterator[Env]:
    env = Env(shared_servers, tmp_path, relay=True)
    yield env
    env.close()


@pytest.fixture
def killable(mariadb_factory: ServerFactory, tmp_path: Path) -> Iterator[Env]:
    env = Env(mariadb_factory.many(2), tmp_path, relay=False)
    yield env
    env.close()


# --- COMMIT -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("order", [("ds_1", "ds_0"), ("ds_0", "ds_1")], ids=["ds_1-first", "ds_0-first"])
def test_commit_with_a_killed_shard_ends_the_transaction_everywhere(killable: Env, order: tuple[str, str]) -> None:
    env = killable
    conn = env.connect()
    run(conn, "BEGIN")
    keys = {ds: insert(conn, ds, 0, "tx") for ds in order}
    env.servers[1].kill()

    errno, message = failing(conn, "COMMIT")
    assert errno == 1180, message
    assert "ds_1" in message and "the transaction is over" in message, message
    # ds_1's part died with its server before COMMIT: the proxy knows nothing can commit atomically
    if committed_on(message, "ds_0"):
        assert env.rows("ds_0") == [(keys["ds_0"], "tx")]
    else:
        assert env.rows("ds_0") == []
    env.assert_nothing_open("ds_0")

    # the session is out of the transaction: autocommit for real on the live shard
    assert_autocommit_for_real(env, conn, "ds_0")
    # the dead shard is reported clearly, and the session uses it again once it is back
    errno, message = failing(conn, f"INSERT INTO t_tx (id, v) VALUES ({ON['ds_1'] + 100}, 'down')")
    assert "ds_1" in message
    env.servers[1].restart()
    deadline = time.monotonic() + 20
    while True:
        try:
            insert(conn, "ds_1", 60, "back")
            break
        except pymysql.MySQLError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    assert (ON["ds_1"] + 120, "back") in env.rows("ds_1")
    assert (keys["ds_1"], "tx") not in env.rows("ds_1")  # crash recovery rolled ds_1's part back
    env.assert_nothing_open()
    conn.close()


def test_a_shard_lost_in_the_same_loop_turn_as_the_commit_commits_nothing(killable: Env) -> None:
    """ds_1's server dies while the proxy's loop is busy, and the client's COMMIT arrives before the loop has handled
    that connection's end: both come in the same turn. The fast path (proxy.execution.fastcommit) must not take the
    COMMIT then (it would commit ds_0 and report ds_1 unknown); the coroutine's path sees ds_1's part lost and
    commits nothing, as when the loss is seen earlier."""
    env = killable
    conn = env.connect()
    run(conn, "BEGIN")
    for ds in ("ds_0", "ds_1"):
        insert(conn, ds, 0, "tx")
    before = STATS.taken
    env.proxy.block_loop(1.5)
    time.sleep(0.1)  # the loop is asleep now
    got: list[tuple[int, str]] = []
    committing = threading.Thread(target=lambda: got.append(failing(conn, "COMMIT")))
    committing.start()  # the client's COMMIT is ready to read first,
    time.sleep(0.2)
    env.servers[1].kill()  # then ds_1's connection closes, both while the loop sleeps
    committing.join(30)
    errno, message = got[0]
    assert STATS.taken == before  # not the fast path
    assert errno == 1180, message
    assert "nothing was committed" in message and not committed_on(message, "ds_0"), message
    assert env.rows("ds_0") == []
    env.assert_nothing_open("ds_0")
    assert_autocommit_for_real(env, conn, "ds_0")
    conn.close()


@pytest.mark.parametrize("order", [("ds_1", "ds_0"), ("ds_0", "ds_1")], ids=["ds_1-first", "ds_0-first"])
def test_commit_failing_on_one_shard_commits_the_others_and_says_so(relayed: Env, order: tuple[str, str]) -> None:
    """ds_1's connection is cut when its COMMIT comes, before the server sees it: every other data source
    commits whatever the order (ShardingSphere's LOCAL), and the error says ds_1's outcome is unknown."""
    env = relayed
    assert env.relay is not None
    conn = env.connect()
    run(conn, "BEGIN")
    keys = {ds: insert(conn, ds, 0, "tx") for ds in order}
    env.relay.cut_at("COMMIT")

    errno, message = failing_fast(conn, "COMMIT")
    assert env.relay.cuts == 1
    assert errno == 1180, message
    assert "COMMIT failed on ds_1 (2013" in message and "whether ds_1 committed is unknown" in message, message
    assert committed_on(message, "ds_0"), message
    assert "the transaction is over" in message
    assert env.rows("ds_0") == [(keys["ds_0"], "tx")]
    assert env.rows("ds_1") == []  # the server never saw the COMMIT: the client's leaving rolled it back
    env.assert_nothing_open()
    assert_autocommit_for_real(env, conn, "ds_0", "ds_1")
    conn.close()


def test_commit_whose_answer_is_lost_reports_an_unknown_outcome(relayed: Env) -> None:
    env = relayed
    assert env.relay is not None
    conn = env.connect()
    run(conn, "BEGIN")
    keys = {ds: insert(conn, ds, 0, "tx") for ds in ("ds_1", "ds_0")}
    env.relay.cut_at("COMMIT", forward=True)  # ds_1 commits, its OK never arrives

    errno, message = failing_fast(conn, "COMMIT")
    assert errno == 1180 and "whether ds_1 committed is unknown" in message, message
    assert committed_on(message, "ds_0"), message
    assert env.rows("ds_0") == [(keys["ds_0"], "tx")]
    assert env.rows("ds_1") == [(keys["ds_1"], "tx")]
    env.assert_nothing_open()
    assert_autocommit_for_real(env, conn, "ds_0", "ds_1")
    conn.close()


def test_a_client_leaving_during_its_commit_does_not_stop_the_fan_out(relayed: Env) -> None:
    """The COMMIT goes to both data sources (the fast path: proxy.execution.fastcommit) and ds_1's answer is held
    back; the client leaves meanwhile. The fan-out still finishes (as the session's coroutine finishes one it
    started): ds_0 has committed, nothing is left open anywhere, and the proxy goes on serving. (What this cannot
    tell apart: whether the session's close waited for the answers before giving the connections back; here both
    COMMITs reach their servers before the client leaves either way.)"""
    env = relayed
    assert env.relay is not None
    conn = env.connect()
    run(conn, "BEGIN")
    keys = {ds: insert(conn, ds, 0, "tx") for ds in ("ds_0", "ds_1")}
    env.relay.cut_at("COMMIT", forward=True)  # ds_1 commits; its OK is swallowed, then its connection cut
    before = STATS.taken
    conn._execute_command(pymysql.constants.COMMAND.COM_QUERY, "COMMIT")  # sent, its answer never read
    time.sleep(0.1)
    abort(conn)
    deadline = time.monotonic() + 5
    while env.rows("ds_0") != [(keys["ds_0"], "tx")] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert STATS.taken == before + 1
    assert env.rows("ds_0") == [(keys["ds_0"], "tx")]
    assert env.rows("ds_1") == [(keys["ds_1"], "tx")]  # it ran the COMMIT it was sent
    env.assert_nothing_open(within=3.0)
    other = env.connect()
    assert run(other, "SELECT id, v FROM t_tx ORDER BY id") == [(keys["ds_1"], "tx"), (keys["ds_0"], "tx")]
    other.close()


# --- ROLLBACK ---------------------------------------------------------------------------------------------


def test_rollback_with_a_dead_shard(killable: Env) -> None:
    env = killable
    conn = env.connect()
    run(conn, "BEGIN")
    insert(conn, "ds_0", 0, "tx")
    insert(conn, "ds_1", 0, "tx")
    env.servers[1].kill()

    errno, message = failing(conn, "ROLLBACK")
    assert errno == 1181, message
    assert "ROLLBACK failed on ds_1" in message and "rolled back on ds_0" in message, message
    assert "nothing was committed" in message and "the transaction is over" in message, message
    assert env.rows("ds_0") == []
    env.assert_nothing_open("ds_0")
    assert_autocommit_for_real(env, conn, "ds_0")
    conn.close()


def test_rollback_cut_on_one_shard_still_rolls_back_the_others(relayed: Env) -> None:
    env = relayed
    assert env.relay is not None
    conn = env.connect()
    run(conn, "BEGIN")
    insert(conn, "ds_1", 0, "tx")
    insert(conn, "ds_0", 0, "tx")
    env.relay.cut_at("ROLLBACK")

    errno, message = failing_fast(conn, "ROLLBACK")
    assert errno == 1181 and "ROLLBACK failed on ds_1" in message and "rolled back on ds_0" in message, message
    assert env.rows("ds_0") == [] and env.rows("ds_1") == []
    env.assert_nothing_open()
    assert_autocommit_for_real(env, conn, "ds_0", "ds_1")
    conn.close()


# --- a data source lost in the middle of a transaction ------------------------------------------------------


def test_a_shard_lost_mid_transaction_cannot_commit(relayed: Env) -> None:
    """A statement loses ds_1's connection in the middle of the transaction: the client hears it at once;
    ds_1 cannot rejoin that transaction (its earlier work is gone); COMMIT reports it and commits nothing;
    ROLLBACK afterwards is a plain OK; the session goes on in autocommit."""
    env = relayed
    assert env.relay is not None
    conn = env.connect()
    run(conn, "BEGIN")
    insert(conn, "ds_0", 0, "tx")
    insert(conn, "ds_1", 0, "tx")
    env.relay.cut_at(f"UPDATE t_tx SET v = 'upd' WHERE id = {ON['ds_1']}")

    errno, message = failing(conn, f"UPDATE t_tx SET v = 'upd' WHERE id = {ON['ds_1']}")
    assert errno == 1158 and "ds_1" in message and "transaction cannot commit" in message, message
    # ds_1 is refused for the rest of the transaction (a new connection would commit apart from it)
    errno, message = failing(conn, f"INSERT INTO t_tx (id, v) VALUES ({ON['ds_1'] + 2}, 'tx2')")
    assert errno == 1158 and "ds_1" in message and "ROLLBACK ends it" in message, message
    insert(conn, "ds_0", 1, "tx2")  # the rest of the transaction goes on (and will be rolled back)
    assert conn.server_status & 1  # still in it (SERVER_STATUS_IN_TRANS)

    errno, message = failing(conn, "COMMIT")
    assert errno == 1180, message
    assert "ds_1" in message and "nothing was committed" in message, message
    assert not committed_on(message, "ds_0"), message
    assert env.rows("ds_0") == [] and env.rows("ds_1") == []
    env.assert_nothing_open()
    run(conn, "ROLLBACK")  # nothing left to end
    assert_autocommit_for_real(env, conn, "ds_0", "ds_1")
    conn.close()


def test_rollback_after_a_reported_loss_is_ok(relayed: Env) -> None:
    env = relayed
    assert env.relay is not None
    conn = env.connect()
    run(conn, "BEGIN")
    insert(conn, "ds_1", 0, "tx")
    insert(conn, "ds_0", 0, "tx")
    env.relay.cut_at(f"SELECT v FROM t_tx WHERE id = {ON['ds_1']}")
    errno, message = failing(conn, f"SELECT v FROM t_tx WHERE id = {ON['ds_1']}")
    assert errno == 1158 and "ds_1" in message, message
    run(conn, "ROLLBACK")  # the client knows ds_1's part is gone; everything is rolled back: OK
    assert env.rows("ds_0") == [] and env.rows("ds_1") == []
    env.assert_nothing_open()
    assert_autocommit_for_real(env, conn, "ds_0", "ds_1")
    conn.close()


def test_a_shard_lost_between_statements_under_autocommit_0(relayed: Env) -> None:
    env = relayed
    assert env.relay is not None
    conn = env.connect()
    run(conn, "SET autocommit=0")
    insert(conn, "ds_0", 0, "tx")
    insert(conn, "ds_1", 0, "tx")
    env.relay.cut_all()  # ds_1's connection goes away between statements
    time.sleep(0.2)
    errno, message = failing(conn, "COMMIT")
    assert errno == 1180 and "ds_1" in message and "nothing was committed" in message, message
    assert env.rows("ds_0") == [] and env.rows("ds_1") == []
    env.assert_nothing_open()
    # still autocommit=0 (as before): the next transaction commits normally, on both data sources
    insert(conn, "ds_0", 1, "next")
    insert(conn, "ds_1", 1, "next")
    assert env.rows("ds_0") == [] and env.rows("ds_1") == []
    run(conn, "COMMIT")
    assert env.rows("ds_0") == [(ON["ds_0"] + 2, "next")] and env.rows("ds_1") == [(ON["ds_1"] + 2, "next")]
    run(conn, "SET autocommit=1")
    assert_autocommit_for_real(env, conn, "ds_0", "ds_1")
    conn.close()


# --- implicit commits ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("statement", ["BEGIN", "SET autocommit=1", "ALTER TABLE t_tx ADD COLUMN extra INT"])
def test_a_failing_implicit_commit_is_reported_and_ends_the_transaction(relayed: Env, statement: str) -> None:
    env = relayed
    assert env.relay is not None
    conn = env.connect()
    run(conn, "SET autocommit=0" if statement == "SET autocommit=1" else "BEGIN")
    insert(conn, "ds_1", 0, "tx")
    insert(conn, "ds_0", 0, "tx")
    env.relay.cut_at("COMMIT")

    errno, message = failing(conn, statement)
    assert errno == 1180, message
    assert "the implicit COMMIT" in message and "failed on ds_1 (2013" in message, message
    assert committed_on(message, "ds_0") and "the transaction is over" in message, message
    assert env.rows("ds_0") == [(ON["ds_0"], "tx")] and env.rows("ds_1") == []
    env.assert_nothing_open()
    if statement.startswith("ALTER"):
        assert "the DDL was not run" in message
        for ds in ("ds_0", "ds_1"):
            columns = env.server(ds).execute(f"SHOW COLUMNS FROM {env.dbs[int(ds[-1])]}.t_tx")
            assert [c[0] for c in columns] == ["id", "v"]
    if statement == "SET autocommit=1":
        assert "autocommit is still 0" in message
        assert run(conn, "SELECT @@autocommit") == [(0,)]
        run(conn, "SET autocommit=1")
    # BEGIN failed: no new transaction was started
    assert_autocommit_for_real(env, conn, "ds_0", "ds_1")
    conn.close()


# --- savepoints ---------------------------------------------------------------------------------------------


def test_savepoints_cover_data_sources_that_join_later(relayed: Env) -> None:
    env = relayed
    conn = env.connect()
    run(conn, "BEGIN")
    insert(conn, "ds_0", 0, "before")
    run(conn, "SAVEPOINT sp1")
    insert(conn, "ds_1", 0, "after")  # ds_1 joins after the savepoint: it is set there too
    insert(conn, "ds_0", 1, "after")
    run(conn, "ROLLBACK TO SAVEPOINT sp1")
    assert failing(conn, "ROLLBACK TO nosuch") == (1305, "SAVEPOINT nosuch does not exist")
    run(conn, "RELEASE SAVEPOINT sp1")
    assert failing(conn, "ROLLBACK TO sp1")[0] == 1305
    run(conn, "COMMIT")
    assert env.rows("ds_0") == [(ON["ds_0"], "before")] and env.rows("ds_1") == []
    env.assert_nothing_open()
    conn.close()


def test_a_savepoint_failing_on_one_shard_dooms_the_transaction(relayed: Env) -> None:
    env = relayed
    assert env.relay is not None
    conn = env.connect()
    run(conn, "BEGIN")
    insert(conn, "ds_0", 0, "tx")
    insert(conn, "ds_1", 0, "tx")
    env.relay.cut_at("SAVEPOINT `sp1`")  # (the form every data source gets)
    errno, message = failing(conn, "SAVEPOINT sp1")
    assert errno == 1158 and "ds_1" in message and "transaction cannot commit" in message, message
    errno, message = failing(conn, "COMMIT")
    assert errno == 1180 and "nothing was committed" in message, message
    assert env.rows("ds_0") == [] and env.rows("ds_1") == []
    env.assert_nothing_open()
    assert_autocommit_for_real(env, conn, "ds_0", "ds_1")
    conn.close()


# --- the client leaves mid-transaction ----------------------------------------------------------------------


@pytest.mark.parametrize("how", ["quit", "drop"])
@pytest.mark.parametrize("begin", ["BEGIN", "SET autocommit=0"])
def test_a_session_closing_mid_transaction_leaves_nothing_open(relayed: Env, how: str, begin: str) -> None:
    env = relayed
    conn = env.connect()
    run(conn, begin)
    insert(conn, "ds_0", 0, "tx")
    insert(conn, "ds_1", 0, "tx")
    assert env.open_transactions("ds_0") and env.open_transactions("ds_1")
    if how == "quit":
        conn.close()
    else:  # the client vanishes without COM_QUIT
        sock = conn._sock
        assert sock is not None
        sock.shutdown(socket.SHUT_RDWR)
        sock.close()
    env.assert_nothing_open(within=1.0)
    assert env.rows("ds_0") == [] and env.rows("ds_1") == []
    # the pooled connections serve the next session cleanly
    with env.connect() as other:
        assert run(other, "SELECT @@autocommit, @@in_transaction") == [(1, 0)]
        assert_autocommit_for_real(env, other, "ds_0", "ds_1")
