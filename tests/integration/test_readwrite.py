"""Read/write splitting against real MariaDB GTID replication: one primary and two replicas.

Which server answered is proved two ways: ``@@server_id``, and marker rows written directly on one server
with ``sql_log_bin=0`` (so they exist there only). Every test runs on two layouts:

* ``single``: logical database ``rw`` = one group ``readwrite_ds`` (write_ds + read_ds_0/1), a pass-through
  database behind read/write splitting;
* ``sharded``: logical database ``rws`` = ``t_order`` sharded over two groups ``readwrite_ds_${0..1}`` (by
  user_id % 2) and two tables each (by order_id % 2); every group has its physical database on all three
  servers (``rws_0`` / ``rws_1``, replicated), so each group has the same primary and two replicas.

The servers are session-scoped; tests that stop a replica, stop its SQL thread or lock it, undo that.
"""

from __future__ import annotations

import contextlib
import itertools
import struct
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pymysql
import pytest

from protocol.binary import (
    CURSOR_TYPE_READ_ONLY,
    ComStmtClose,
    ComStmtFetch,
    ComStmtPrepare,
    ComStmtSendLongData,
    PrepareResponse,
    StmtPrepareOK,
    decode_binary_row,
)
from protocol.constants import ColumnType, ServerStatus
from protocol.packets import ColumnDefinition41, EOFPacket, ERRPacket, is_eof, is_err
from proxy.sandbox import MariaDBServer, setup_replication, start_servers, wait_for_replica
from tests.integration.harness import RunningProxy, start_proxy, write_conf

MARK_PRIMARY, MARK_R0, MARK_R1 = 900, 901, 902  # marker rows' ids; user_id 0 -> group 0, table order_id % 2


@dataclass
class Cluster:
    primary: MariaDBServer
    replicas: tuple[MariaDBServer, MariaDBServer]

    def server_name(self, server_id: int) -> str:
        for name, s in (("primary", self.primary), ("read_ds_0", self.replicas[0]), ("read_ds_1", self.replicas[1])):
            if s.server_id == server_id:
                return name
        raise AssertionError(f"unknown server id {server_id}")

    def sync(self) -> None:
        for r in self.replicas:
            wait_for_replica(self.primary, r)


SCHEMA = "CREATE TABLE {t} (order_id BIGINT PRIMARY KEY, user_id INT NOT NULL, status VARCHAR(45))"


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    servers = start_servers(3, binlog=True)
    try:
        primary, r0, r1 = servers
        for r in (r0, r1):
            setup_replication(primary, r)
        # replicated: the databases and tables exist everywhere
        primary.execute("CREATE DATABASE rw_ds")
        primary.execute(SCHEMA.format(t="t_rw"), "rw_ds")
        for db in ("rws_0", "rws_1"):
            primary.execute(f"CREATE DATABASE {db}")
            for t in ("t_order_0", "t_order_1"):
                primary.execute(SCHEMA.format(t=t), db)
        c = Cluster(primary, (r0, r1))
        c.sync()
        # not replicated: one marker row per server, so a row tells which server answered
        for server, mark, name in ((primary, MARK_PRIMARY, "primary"), (r0, MARK_R0, "read_ds_0"),
                                   (r1, MARK_R1, "read_ds_1")):
            conn = server.connect()
            with conn.cursor() as cur:
                cur.execute("SET sql_log_bin = 0")
                cur.execute("INSERT INTO rw_ds.t_rw VALUES (%s, 0, %s)", (mark, name))
                cur.execute(f"INSERT INTO rws_0.t_order_{mark % 2} VALUES (%s, 0, %s)", (mark, name))
            conn.close()
        yield c
    finally:
        for s in servers:
            s.cleanup()


def rules(layout: str, *, lb: str = "ROUND_ROBIN", lb_props: str = "", strategy: str = "PRIMARY",
          raw: str = "SESSION", extra: str = "") -> str:
    groups = ["readwrite_ds"] if layout == "single" else ["readwrite_ds_0", "readwrite_ds_1"]
    text = "- !READWRITE_SPLITTING\n  dataSourceGroups:\n"
    for i, g in enumerate(groups):
        suffix = "" if layout == "single" else f"_{i}"
        text += (f"    {g}:\n      writeDataSourceName: write_ds{suffix}\n"
                 f"      readDataSourceNames: [read_ds_0{suffix}, read_ds_1{suffix}]\n"
                 f"      transactionalReadQueryStrategy: {strategy}\n      loadBalancerName: lb\n"
                 f"      readAfterWrite: {raw}\n      healthCheckIntervalMilliseconds: 100\n"
                 f"      gtidWaitTimeoutMilliseconds: 300\n")
        for line in extra.splitlines():
            text += f"      {line}\n"
    text += f"  loadBalancers:\n    lb:\n      type: {lb}\n"
    if lb_props:
        text += f"      props: {lb_props}\n"
    if layout == "sharded":
        text += """- !SHARDING
  tables:
    t_order:
      actualDataNodes: readwrite_ds_${0..1}.t_order_${0..1}
      databaseStrategy: {standard: {shardingColumn: user_id, shardingAlgorithmName: db_inline}}
      tableStrategy: {standard: {shardingColumn: order_id, shardingAlgorithmName: t_inline}}
  shardingAlgorithms:
    db_inline: {type: INLINE, props: {algorithm-expression: 'readwrite_ds_${user_id % 2}'}}
    t_inline: {type: INLINE, props: {algorithm-expression: 't_order_${order_id % 2}'}}
"""
    return text


class Env:
    """A proxy in front of the cluster with one rule variant, and the statements a layout needs."""

    def __init__(self, cluster: Cluster, layout: str, proxy: RunningProxy) -> None:
        self.cluster = cluster
        self.layout = layout
        self.proxy = proxy
        self.db = "rw" if layout == "single" else "rws"
        self.table = "t_rw" if layout == "single" else "t_order"

    def connect(self) -> pymysql.connections.Connection[Any]:
        return self.proxy.connect(self.db)

    def who(self, cur: Any, sql: str = "SELECT @@server_id") -> str:
        """The member that answered a read (by server id)."""
        cur.execute(sql)
        return self.cluster.server_name(int(cur.fetchone()[0]))

    def marker(self, cur: Any, prefix: str = "") -> str:
        """The member that answered, by the marker row only that server has (user_id 0: group 0)."""
        cur.execute(f"{prefix}SELECT status FROM {self.table} WHERE user_id = 0 AND order_id IN "
                    f"({MARK_PRIMARY}, {MARK_R0}, {MARK_R1})")
        rows = cur.fetchall()
        assert len(rows) == 1, rows
        return str(rows[0][0])

    def has_row(self, cur: Any, order_id: int) -> bool:
        cur.execute(f"SELECT COUNT(*) FROM {self.table} WHERE user_id = 0 AND order_id = {order_id}")
        return int(cur.fetchone()[0]) == 1

    def insert(self, cur: Any, order_id: int) -> None:
        cur.execute(f"INSERT INTO {self.table} (order_id, user_id, status) VALUES ({order_id}, 0, "
                    "CONCAT('written by ', @@server_id))")


_ids = iter(range(10_000, 1_000_000))


@pytest.fixture(params=["single", "sharded"])
def layout(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def make_env(cluster: Cluster, layout: str, tmp_path: Path) -> Iterator[Callable[..., Env]]:
    proxies: list[RunningProxy] = []

    def make(**kw: Any) -> Env:
        p, (r0, r1) = cluster.primary, cluster.replicas
        if layout == "single":
            dbs = {"rw": {"write_ds": (p, "rw_ds"), "read_ds_0": (r0, "rw_ds"), "read_ds_1": (r1, "rw_ds")}}
        else:
            dbs = {"rws": {f"{n}_{i}": (s, f"rws_{i}") for i in (0, 1)
                           for n, s in (("write_ds", p), ("read_ds_0", r0), ("read_ds_1", r1))}}
        name = next(iter(dbs))
        conf = write_conf(tmp_path / f"conf{len(proxies)}", dbs, rules_yaml={name: rules(layout, **kw)})
        proxy = start_proxy(conf)
        proxies.append(proxy)
        return Env(cluster, layout, proxy)

    yield make
    time.sleep(0.1)  # let the proxy see the clients' COM_QUIT: a session cancelled while closing delays the stop
    for proxy in proxies:
        proxy.stop()


def wait_until(check: Callable[[], bool], timeout: float = 15.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


@contextlib.contextmanager
def replica_locked(server: MariaDBServer, table: str) -> Iterator[None]:
    """The replica's SQL thread waits on a read lock: it falls behind while staying 'running'."""
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            cur.execute(f"LOCK TABLES {table} READ")
        yield
    finally:
        with conn.cursor() as cur:
            cur.execute("UNLOCK TABLES")
        conn.close()


# --- load balancing, writes ------------------------------------------------------------------------------


def test_round_robin_alternates_replicas_and_writes_land_on_the_primary(make_env: Callable[..., Env]) -> None:
    env = make_env(lb="ROUND_ROBIN")
    with env.connect() as conn, conn.cursor() as cur:
        seen = [env.who(cur) for _ in range(6)]
        assert set(seen) == {"read_ds_0", "read_ds_1"}
        assert all(a != b for a, b in itertools.pairwise(seen)), seen
        marks = [env.marker(cur) for _ in range(4)]
        assert sorted(marks) == ["read_ds_0", "read_ds_0", "read_ds_1", "read_ds_1"]
    # a second session: writes go to the primary, whose server id the row carries
    oid = next(_ids)
    with env.connect() as conn, conn.cursor() as cur:
        env.insert(cur, oid)
    table = "rw_ds.t_rw" if env.layout == "single" else f"rws_0.t_order_{oid % 2}"
    status = env.cluster.primary.execute(f"SELECT status FROM {table} WHERE order_id = {oid}")
    assert status == [(f"written by {env.cluster.primary.server_id}",)]


def test_random_and_weight_balancers(make_env: Callable[..., Env]) -> None:
    env = make_env(lb="RANDOM")
    with env.connect() as conn, conn.cursor() as cur:
        seen = Counter(env.who(cur) for _ in range(40))
    assert set(seen) == {"read_ds_0", "read_ds_1"}, seen
    heavy = make_env(lb="WEIGHT", lb_props="{read_ds_0: 3, read_ds_1: 1, read_ds_0_0: 3, read_ds_1_0: 1, "
                                          "read_ds_0_1: 3, read_ds_1_1: 1}")
    with heavy.connect() as conn, conn.cursor() as cur:
        seen = Counter(heavy.who(cur) for _ in range(200))
    assert seen["primary"] == 0 and 110 <= seen["read_ds_0"] <= 185, seen
    only = make_env(lb="WEIGHT", lb_props="{read_ds_0: 0, read_ds_1: 1, read_ds_0_0: 0, read_ds_1_0: 1, "
                                         "read_ds_0_1: 0, read_ds_1_1: 1}")
    with only.connect() as conn, conn.cursor() as cur:
        assert {only.marker(cur) for _ in range(10)} == {"read_ds_1"}


# --- read after write ------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["SESSION", "TRANSACTION", "GTID"])
def test_a_read_after_a_write_sees_it_even_on_a_stale_replica(make_env: Callable[..., Env], mode: str) -> None:
    """Both replicas are held back (their SQL thread waits on a lock), so a read served by one of them
    could not see the write: it must go where the write is."""
    env = make_env(raw=mode, strategy="DYNAMIC")
    table = "rw_ds.t_rw" if env.layout == "single" else "rws_0.t_order_0"
    oid = next(_ids) * 2  # even: t_order_0
    r0, r1 = env.cluster.replicas
    with replica_locked(r0, table), replica_locked(r1, table), env.connect() as conn, conn.cursor() as cur:
        if mode == "TRANSACTION":
            cur.execute("BEGIN")
            assert env.who(cur) in ("read_ds_0", "read_ds_1")  # DYNAMIC: replicas inside the transaction
        env.insert(cur, oid)
        assert env.has_row(cur, oid)
        assert env.marker(cur) == "primary"
        with env.connect() as other, other.cursor() as ocur:  # another session still reads from replicas
            assert env.who(ocur) in ("read_ds_0", "read_ds_1")
            assert not env.has_row(ocur, oid)  # (and they are stale)
        if mode == "TRANSACTION":
            cur.execute("COMMIT")
            assert env.who(cur) in ("read_ds_0", "read_ds_1")  # the writing transaction ended
        elif mode == "GTID":
            assert env.has_row(cur, oid)  # the replicas time out in MASTER_GTID_WAIT: still the primary
    env.cluster.sync()
    if mode == "GTID":  # once the replicas applied the write, GTID mode reads from them again
        with env.connect() as conn, conn.cursor() as cur:
            env.insert(cur, next(_ids) * 2)
            env.cluster.sync()
            assert {env.who(cur) for _ in range(4)} == {"read_ds_0", "read_ds_1"}
            assert env.has_row(cur, oid)


def test_session_mode_pins_the_writing_session_only(make_env: Callable[..., Env]) -> None:
    env = make_env(raw="SESSION")
    with env.connect() as conn, conn.cursor() as cur, env.connect() as other, other.cursor() as ocur:
        assert env.who(cur) != "primary"
        env.insert(cur, next(_ids))
        assert {env.who(cur) for _ in range(4)} == {"primary"}
        assert {env.who(ocur) for _ in range(4)} == {"read_ds_0", "read_ds_1"}


def test_gtid_mode_uses_replicas_that_applied_the_write(make_env: Callable[..., Env]) -> None:
    env = make_env(raw="GTID")
    with env.connect() as conn, conn.cursor() as cur:
        for _ in range(3):
            oid = next(_ids) * 2
            env.insert(cur, oid)
            assert env.has_row(cur, oid)  # wherever it was read, it is there
        env.cluster.sync()
        assert {env.who(cur) for _ in range(4)} == {"read_ds_0", "read_ds_1"}


# --- transactions, hint --------------------------------------------------------------------------------


@pytest.mark.parametrize("strategy", ["PRIMARY", "FIXED", "DYNAMIC"])
def test_transactional_read_query_strategy(make_env: Callable[..., Env], strategy: str) -> None:
    env = make_env(strategy=strategy, raw="TRANSACTION")
    with env.connect() as conn, conn.cursor() as cur:
        cur.execute("BEGIN")
        inside = [env.who(cur) for _ in range(4)]
        cur.execute("COMMIT")
        after = [env.who(cur) for _ in range(2)]
    expected = {"PRIMARY": lambda s: s == {"primary"}, "FIXED": lambda s: len(s) == 1 and "primary" not in s,
                "DYNAMIC": lambda s: s == {"read_ds_0", "read_ds_1"}}[strategy]
    assert expected(set(inside)), inside
    assert set(after) == {"read_ds_0", "read_ds_1"}


def test_write_route_only_hint_forces_the_primary(make_env: Callable[..., Env]) -> None:
    env = make_env()
    hint = "/* SHARDINGSPHERE_HINT: WRITE_ROUTE_ONLY=true */ "
    with env.connect() as conn, conn.cursor() as cur:
        assert env.who(cur, hint + "SELECT @@server_id") == "primary"
        assert env.marker(cur, hint) == "primary"
        assert env.who(cur) != "primary"  # the hint does not count as a write
        assert env.who(cur, "SELECT @@server_id FOR UPDATE") == "primary" if env.layout == "single" else True


# --- health ----------------------------------------------------------------------------------------------


def _units(env: Env) -> dict[str, tuple[str, str]]:
    with env.connect() as conn, conn.cursor() as cur:
        cur.execute("SHOW STORAGE UNITS")
        cols = [d[0] for d in cur.description]
        return {r[0]: (r[cols.index("status")], r[cols.index("status_detail")]) for r in cur.fetchall()}


def test_a_stopped_replica_leaves_rotation_without_client_errors_and_comes_back(make_env: Callable[..., Env]) -> None:
    env = make_env()
    r1 = env.cluster.replicas[1]
    suffix = "" if env.layout == "single" else "_0"
    with env.connect() as conn, conn.cursor() as cur:
        assert {env.who(cur) for _ in range(4)} == {"read_ds_0", "read_ds_1"}  # holds a connection to both
        r1.stop()
        try:
            assert {env.who(cur) for _ in range(6)} == {"read_ds_0"}
            assert {env.marker(cur) for _ in range(3)} == {"read_ds_0"}
            with env.connect() as other, other.cursor() as ocur:
                assert {env.who(ocur) for _ in range(4)} == {"read_ds_0"}
            assert _units(env)[f"read_ds_1{suffix}"][0] == "disabled"
        finally:
            r1.restart()
        wait_until(lambda: _units(env)[f"read_ds_1{suffix}"][0] == "enabled", what="replica back")
        assert {env.who(cur) for _ in range(4)} == {"read_ds_0", "read_ds_1"}
    env.cluster.sync()


def test_stopped_replication_and_lag_take_a_replica_out(make_env: Callable[..., Env]) -> None:
    env = make_env(extra="maxReplicationLagSeconds: 1")
    r1 = env.cluster.replicas[1]
    suffix = "" if env.layout == "single" else "_0"
    with env.connect() as conn, conn.cursor() as cur:
        r1.execute("STOP SLAVE SQL_THREAD")
        try:
            wait_until(lambda: _units(env)[f"read_ds_1{suffix}"][0] == "disabled", what="stopped SQL thread seen")
            with env.connect() as writer, writer.cursor() as wcur:
                for _ in range(3):
                    env.insert(wcur, next(_ids))
            assert {env.who(cur) for _ in range(4)} == {"read_ds_0"}
        finally:
            r1.execute("START SLAVE SQL_THREAD")
        wait_until(lambda: _units(env)[f"read_ds_1{suffix}"][0] == "enabled", what="replica enabled again")
        assert {env.who(cur) for _ in range(4)} == {"read_ds_0", "read_ds_1"}
        # lag with running threads: the SQL thread waits on a lock while the primary writes
        table = "rw_ds.t_rw" if env.layout == "single" else "rws_0.t_order_0"
        with replica_locked(r1, table):
            with env.connect() as writer, writer.cursor() as wcur:
                env.insert(wcur, next(_ids) * 2)
            wait_until(lambda: _units(env)[f"read_ds_1{suffix}"][0] == "disabled", what="lag seen")
            assert "lag" in _units(env)[f"read_ds_1{suffix}"][1]
            assert {env.who(cur) for _ in range(4)} == {"read_ds_0"}
        wait_until(lambda: _units(env)[f"read_ds_1{suffix}"][0] == "enabled", what="caught up")
    env.cluster.sync()


def test_no_usable_replica_reads_from_the_primary(make_env: Callable[..., Env]) -> None:
    env = make_env()
    for r in env.cluster.replicas:
        r.execute("STOP SLAVE SQL_THREAD")
    try:
        wait_until(lambda: {s for n, (s, _d) in _units(env).items() if n.startswith("read")} == {"disabled"},
                   what="both replicas disabled")
        with env.connect() as conn, conn.cursor() as cur:
            assert {env.who(cur) for _ in range(3)} == {"primary"}
    finally:
        for r in env.cluster.replicas:
            r.execute("START SLAVE SQL_THREAD")
    env.cluster.sync()


def test_show_readwrite_splitting_rules(make_env: Callable[..., Env]) -> None:
    env = make_env(lb="WEIGHT", lb_props="{read_ds_0: 2, read_ds_1: 1, read_ds_0_0: 2, read_ds_1_0: 1, "
                                        "read_ds_0_1: 2, read_ds_1_1: 1}", raw="GTID", strategy="FIXED")
    with env.connect() as conn, conn.cursor() as cur:
        cur.execute("SHOW READWRITE_SPLITTING RULES")
        cols = [d[0] for d in cur.description]
        rows = cur.fetchall()
    assert cols[:6] == ["name", "write_storage_unit_name", "read_storage_unit_names",
                        "transactional_read_query_strategy", "load_balancer_type", "load_balancer_props"]
    first = dict(zip(cols, rows[0], strict=True))
    assert first["load_balancer_type"] == "WEIGHT" and first["read_after_write"] == "GTID"
    assert first["transactional_read_query_strategy"] == "FIXED"
    assert "enabled" in first["read_storage_unit_status"]
    assert len(rows) == (1 if env.layout == "single" else 2)


# --- prepared statements follow the text rules (issue 13, item 14) --------------------------------------

# read_ds_0 gets no reads: every replica read is read_ds_1's, so answers are deterministic and text and
# prepared runs of one scenario must match statement for statement
ONLY_R1 = ("{read_ds_0: 0, read_ds_1: 1, read_ds_0_0: 0, read_ds_1_0: 1, read_ds_0_1: 0, read_ds_1_1: 1}")
MODES = ("text", "prepared", "raw_cursor")


class RawCursorClient:
    """The binary protocol spoken by the project's codec: every statement is COM_STMT_PREPAREd, its string
    parameters sent as COM_STMT_SEND_LONG_DATA, executed with CURSOR_TYPE_READ_ONLY and its rows read by
    COM_STMT_FETCH two at a time, then COM_STMT_CLOSEd: the paths mysql-connector's prepared cursor does not
    take."""

    def __init__(self, env: Env) -> None:
        from tests.integration.test_malformed import RawClient

        self.c = RawClient(env.proxy.host, env.proxy.port)
        assert self.c.login("root", "root", database=env.db)[:1] == b"\x00"

    def _read(self) -> bytes:
        p = self.c.read()[1]
        if is_err(p):
            err = ERRPacket.decode(p)
            raise AssertionError(f"{err.errno} {err.message}")
        return p

    def rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        self.c.send(ComStmtPrepare(sql.encode()).encode())
        first = self._read()
        ok = StmtPrepareOK.decode(first)
        sid = PrepareResponse.decode([first, *(self.c.read()[1] for _ in range(ok.following_packets(False)))],
                                     False).ok.statement_id
        types, values = b"", b""
        for i, v in enumerate(params):
            if isinstance(v, str):
                self.c.send(ComStmtSendLongData(sid, i, v.encode()).encode())  # no answer, by protocol
                types += bytes((ColumnType.VAR_STRING, 0))
            else:
                types += bytes((ColumnType.LONGLONG, 0))
                values += struct.pack("<q", v)
        body = struct.pack("<BIBI", 0x17, sid, CURSOR_TYPE_READ_ONLY, 1)
        if params:
            body += bytes((len(params) + 7) // 8) + b"\x01" + types + values
        self.c.send(body)
        first = self._read()
        out: list[tuple[Any, ...]] = []
        if first[0] not in (0x00, 0xFE):
            columns = [ColumnDefinition41.decode(self._read()) for _ in range(first[0])]
            status = EOFPacket.decode(self._read()).status
            payloads: list[bytes] = []
            if not status & ServerStatus.CURSOR_EXISTS:  # the server may answer without a cursor
                while not is_eof(p := self._read()):
                    payloads.append(p)
            while status & ServerStatus.CURSOR_EXISTS and not status & ServerStatus.LAST_ROW_SENT:
                self.c.send(ComStmtFetch(sid, 2).encode())
                while not is_eof(p := self._read()):
                    payloads.append(p)
                status = EOFPacket.decode(p).status
            out = [tuple(v.decode() if isinstance(v, bytes) else v for v in decode_binary_row(p, columns))
                   for p in payloads]
        self.c.send(ComStmtClose(sid).encode())
        return out

    def close(self) -> None:
        self.c.close()


class ModeClient:
    """One client connection in one mode: ``text`` (mysql-connector-python, COM_QUERY with the values
    interpolated by the driver), ``prepared`` (its ``cursor(prepared=True)``: COM_STMT_PREPARE / EXECUTE /
    CLOSE) or ``raw_cursor`` (`RawCursorClient`)."""

    def __init__(self, env: Env, mode: str) -> None:
        import mysql.connector

        self.mode = mode
        if mode == "raw_cursor":
            self.raw = RawCursorClient(env)
            return
        self.conn = mysql.connector.connect(host=env.proxy.host, port=env.proxy.port, user="root", password="root",
                                            database=env.db, autocommit=True)
        self.cur = self.conn.cursor(prepared=mode != "text")

    def rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        if self.mode == "raw_cursor":
            return self.raw.rows(sql, params)
        if self.mode == "text":
            self.cur.execute(sql.replace("?", "%s"), params)
        else:
            self.cur.execute(sql, params)
        rows = self.cur.fetchall() if self.cur.with_rows else []
        return [tuple(v.decode() if isinstance(v, bytes | bytearray) else v for v in r) for r in rows]

    def close(self) -> None:
        if self.mode == "raw_cursor":
            self.raw.close()
            return
        self.cur.close()
        self.conn.close()


def _scenario(env: Env, mode: str, oid: int) -> list[tuple[str, Any]]:
    """Which member answers each read (the marker row only that server has), statement by statement."""
    marks = f"({MARK_PRIMARY}, {MARK_R0}, {MARK_R1})"
    read = f"SELECT status FROM {env.table} WHERE user_id = ? AND order_id IN {marks}"
    hint = "/* SHARDINGSPHERE_HINT: WRITE_ROUTE_ONLY=true */ "
    out: list[tuple[str, Any]] = []
    c = ModeClient(env, mode)
    other = ModeClient(env, mode)
    try:
        out.append(("read", c.rows(read, (0,))))
        out.append(("read without parameters", c.rows(read.replace("?", "0"))))
        out.append(("rows", c.rows(f"SELECT order_id, status FROM {env.table} WHERE user_id = ? AND status LIKE ? "
                                   "ORDER BY order_id", (0, "read%"))))
        out.append(("server", env.cluster.server_name(int(c.rows("SELECT @@server_id")[0][0]))))
        out.append(("for update", c.rows(read + " FOR UPDATE", (0,))))
        out.append(("lock in share mode", c.rows(read + " LOCK IN SHARE MODE", (0,))))
        out.append(("hint", c.rows(hint + read, (0,))))
        out.append(("read after the hint", c.rows(read, (0,))))
        c.rows("BEGIN")
        out.append(("in a transaction", c.rows(read, (0,))))
        c.rows("COMMIT")
        out.append(("after the transaction", c.rows(read, (0,))))
        c.rows(f"INSERT INTO {env.table} (order_id, user_id, status) VALUES (?, ?, ?)", (oid, 0, mode))
        out.append(("after a write", c.rows(read, (0,))))
        out.append(("own write", c.rows(f"SELECT status FROM {env.table} WHERE user_id = ? AND order_id = ?",
                                        (0, oid))))
        out.append(("another session", other.rows(read, (0,))))
    finally:
        c.close()
        other.close()
    return out


def test_prepared_reads_follow_the_text_rules(make_env: Callable[..., Env]) -> None:
    """ShardingSphere's readwrite_splitting e2e shape: the replicas hold rows the primary has not (marker
    rows written with sql_log_bin=0). Text and prepared statements of both drivers get the same answers:
    plain reads from the replica, locking / hinted reads, reads in a PRIMARY-strategy transaction and reads
    after a write (readAfterWrite SESSION) from the primary; another session keeps reading the replica."""
    env = make_env(lb="WEIGHT", lb_props=ONLY_R1)
    expected = [
        ("read", [("read_ds_1",)]), ("read without parameters", [("read_ds_1",)]),
        ("rows", [(MARK_PRIMARY + 2, "read_ds_1")]), ("server", "read_ds_1"),
        ("for update", [("primary",)]), ("lock in share mode", [("primary",)]), ("hint", [("primary",)]),
        ("read after the hint", [("read_ds_1",)]), ("in a transaction", [("primary",)]),
        ("after the transaction", [("read_ds_1",)]), ("after a write", [("primary",)]),
        ("another session", [("read_ds_1",)]),
    ]
    for mode in MODES:
        oid = next(_ids) * 2
        got = _scenario(env, mode, oid)
        own = dict(got).pop("own write")
        assert own == [(mode,)], (mode, own)
        assert [g for g in got if g[0] != "own write"] == expected, mode
    env.cluster.sync()


@pytest.mark.parametrize("strategy", ["FIXED", "DYNAMIC"])
def test_prepared_reads_in_transactions_follow_the_strategy(make_env: Callable[..., Env], strategy: str) -> None:
    """FIXED / DYNAMIC: prepared reads in a transaction use a replica until the transaction writes, then the
    primary (readAfterWrite TRANSACTION: the replica again once it committed) — as text reads do."""
    env = make_env(lb="WEIGHT", lb_props=ONLY_R1, strategy=strategy, raw="TRANSACTION")
    read = f"SELECT status FROM {env.table} WHERE user_id = ? AND order_id IN ({MARK_PRIMARY}, {MARK_R0}, {MARK_R1})"
    answers = {}
    for mode in MODES:
        c = ModeClient(env, mode)
        try:
            c.rows("START TRANSACTION")
            seen = [c.rows(read, (0,))[0][0]]
            c.rows(f"UPDATE {env.table} SET status = status WHERE user_id = ? AND order_id = ?", (0, MARK_PRIMARY))
            seen.append(c.rows(read, (0,))[0][0])
            c.rows("COMMIT")
            seen.append(c.rows(read, (0,))[0][0])
        finally:
            c.close()
        answers[mode] = seen
    assert answers == {mode: ["read_ds_1", "primary", "read_ds_1"] for mode in MODES}


# --- LOCK TABLES ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("release", ["UNLOCK TABLES", "START TRANSACTION"])
def test_reads_under_lock_tables_go_to_the_primary(make_env: Callable[..., Env], release: str) -> None:
    """The locks are taken on the primary; a replica's tables are not locked, so a read there would neither wait
    for another session's lock nor answer 1100 for a table left out: under LOCK TABLES reads are the primary's,
    and after the locks are released (UNLOCK TABLES, or START TRANSACTION's implicit unlock) the replicas' again."""
    env = make_env(lb="ROUND_ROBIN")
    with env.connect() as conn, conn.cursor() as cur:
        cur.execute(f"LOCK TABLES {env.table} READ")
        assert {env.marker(cur) for _ in range(4)} == {"primary"}
        assert {env.who(cur) for _ in range(2)} == {"primary"}
        cur.execute(release)
        if release != "UNLOCK TABLES":
            cur.execute("COMMIT")
        assert {env.marker(cur) for _ in range(4)} == {"read_ds_0", "read_ds_1"}
