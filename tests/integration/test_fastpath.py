"""The synchronous pass-through relay (proxy.execution.fastpath) against a real MariaDB: it answers what it takes
exactly as the session's coroutine would, leaves everything else to it, keeps commands in order, stops
reading the backend for a slow client, and survives a backend that dies mid-answer."""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Iterator
from typing import Any

import mysql.connector
import pymysql
import pytest

from protocol.framing import encode_packet
from protocol.packets import is_err
from proxy.execution.fastpath import STATS, plain_statement
from proxy.sandbox import MariaDBServer
from tests.integration.harness import RunningProxy, start_proxy
from tests.integration.sharding_fixtures import ShardedEnv
from tests.integration.test_malformed import RawClient, assert_serving, err_of

pytestmark = pytest.mark.integration

PLAIN_STATEMENTS = [
    # (SQL, what the fast path may relay without the session's coroutine: None = nothing)
    ("SELECT c FROM fp_t WHERE id=5", "select"),
    ("SELECT SLEEP(0)", "select"),
    ("SELECT COUNT(*) FROM fp_t", "select"),
    ("select id from fp_t", "select"),
    ("INSERT INTO fp_t VALUES (1, 'x')", "write"),
    ("update fp_t SET c = 'y' WHERE id = 1", "write"),
    ("DELETE FROM fp_t WHERE id = 1", "write"),
    ("REPLACE INTO fp_t VALUES (1, 'x')", "write"),
    ("BEGIN", "transaction"),
    ("commit", "transaction"),
    ("ROLLBACK", "transaction"),
    ("BEGIN WORK", None),
    ("ROLLBACK TO SAVEPOINT a", None),
    ("START TRANSACTION READ ONLY", None),
    ("SELECT DATABASE()", None),  # the logical database name: the proxy answers
    ("SELECT LAST_INSERT_ID()", None),
    ("INSERT INTO fp_t VALUES (LAST_INSERT_ID(), 'x')", None),
    ("SELECT * FROM information_schema.TABLES", None),  # logical names
    ("SELECT GET_LOCK('a', 0)", None),  # sticky: the session keeps its connection
    ("SELECT @x := 1", None),
    ("SELECT 1 INTO @y", None),
    ("INSERT INTO fp_t SELECT * FROM fp_t FOR UPDATE INTO @z", None),
    ("SELECT 1; SELECT 2", None),
    (" SELECT 1", None),
    ("/* c */ SELECT 1", None),
    ("/*+ SHARDINGSPHERE_HINT: WRITE_ROUTE_ONLY=true */ SELECT 1", None),
    ("SHOW TABLES", None),
    ("SET @a = 1", None),
    ("CREATE TEMPORARY TABLE t (a INT)", None),
    ("LOCK TABLES fp_t READ", None),
]


@pytest.mark.parametrize(("sql", "kind"), PLAIN_STATEMENTS)
def test_plain_statement(sql: str, kind: str | None) -> None:
    assert plain_statement(sql) == kind


@pytest.fixture(scope="module", params=["asyncio", "uvloop"])
def proxy(request: pytest.FixtureRequest, passthrough_proxy: RunningProxy, mariadb: MariaDBServer,
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningProxy]:
    """The pass-through proxy on asyncio's loop (the shared fixture), and the same configuration served on
    uvloop, as `shardproxy serve` runs: the fast path installs protocols on both kinds of transport."""
    mariadb.execute("CREATE TABLE IF NOT EXISTS demo_ds.fp_t (id INT PRIMARY KEY, c VARCHAR(120))")
    mariadb.execute("DELETE FROM demo_ds.fp_t")
    mariadb.execute("INSERT INTO demo_ds.fp_t SELECT seq, CONCAT('row-', seq) FROM demo_ds.seq_1_to_200")
    if request.param == "asyncio":
        yield passthrough_proxy
        return
    on_uvloop = start_proxy(passthrough_proxy.conf_dir, use_uvloop=True)
    yield on_uvloop
    on_uvloop.stop()


def _direct(mariadb: MariaDBServer, sql: str, args: Any = None) -> Any:
    with pymysql.connect(host=mariadb.host, port=mariadb.port, user="root", password=mariadb.password,
                         database="demo_ds", autocommit=True) as c, c.cursor() as cur:
        cur.execute(sql, args)
        return cur.fetchall()


def test_text_selects_are_taken_and_answer_like_the_server(proxy: RunningProxy, mariadb: MariaDBServer) -> None:
    queries = [f"SELECT c FROM fp_t WHERE id={i}" for i in range(1, 60)] + ["SELECT id, c FROM fp_t ORDER BY id"]
    before = STATS.taken
    with proxy.connect("demo") as conn, conn.cursor() as cur:
        for sql in queries:
            cur.execute(sql)
            assert cur.fetchall() == _direct(mariadb, sql), sql
    # the first statement borrows the connection (the coroutine's path); the others are relayed in callbacks
    assert STATS.taken - before >= len(queries) - 1


def test_prepared_executes_are_taken(proxy: RunningProxy, mariadb: MariaDBServer) -> None:
    raw = RawClient(proxy.host, proxy.port)
    try:
        assert raw.login()[:1] == b"\x00"
        raw.send(b"\x16SELECT c FROM fp_t WHERE id=?")
        ok = raw.read()[1]
        assert ok[:1] == b"\x00", ok
        sid = struct.unpack_from("<I", ok, 1)[0]
        for _ in range(ok[7] + ok[5] + 2):  # parameter and column definitions, each followed by an EOF
            raw.read()
        before = STATS.taken
        for i in (3, 9, 150, 999):
            execute = b"\x17" + struct.pack("<IBI", sid, 0, 1) + b"\x00\x01" + b"\x03\x00" + struct.pack("<i", i)
            answer = raw.command(execute)
            expected = _direct(mariadb, "SELECT c FROM fp_t WHERE id=%s", (i,))
            rows = [p for _s, p in answer[3:-1]]  # after column count, definition and EOF; before the EOF
            assert len(rows) == len(expected)
            if expected:
                assert rows[0][2:].endswith(expected[0][0].encode())
        assert STATS.taken - before == 4
    finally:
        raw.close()


@pytest.mark.parametrize("sql", [s for s, kind in PLAIN_STATEMENTS if kind is None and "fp_t" not in s and "@" not in s
                                 and "GET_LOCK" not in s and "TRANSACTION" not in s and "SAVEPOINT" not in s
                                 and "BEGIN" not in s and " t " not in s])
def test_what_is_not_taken_still_gets_the_proxys_answer(proxy: RunningProxy, sql: str) -> None:
    with proxy.connect("demo", client_flag=pymysql.constants.CLIENT.MULTI_STATEMENTS) as conn, conn.cursor() as cur:
        cur.execute("SELECT 1")  # hold the connection, so a taken statement could be taken
        before = STATS.taken
        cur.execute(sql)
        rows = cur.fetchall()
        assert STATS.taken == before
        if sql == "SELECT DATABASE()":
            assert rows == (("demo",),)  # the logical name, not the backend's demo_ds


def test_commands_sent_during_an_answer_are_answered_in_order(proxy: RunningProxy) -> None:
    raw = RawClient(proxy.host, proxy.port)
    try:
        assert raw.login()[:1] == b"\x00"
        raw.command(b"\x03SELECT 1")  # now the session holds its connection
        before = STATS.taken
        raw.send(b"\x03SELECT SLEEP(0.3), 'first'")
        time.sleep(0.05)  # the first answer is on its way when the next commands arrive
        for command in (b"\x03SELECT 'second'", b"\x0e", b"\x03SELECT 'third'"):  # COM_PING: the coroutine's
            raw.send(command)
            time.sleep(0.02)  # separate reads on the proxy's side
        answers = []
        for _ in range(2):
            *_, row, _eof = _read_result(raw)
            answers.append(row)
        assert raw.read()[1][:1] == b"\x00"  # the ping's OK, after the second answer
        *_, row, _eof = _read_result(raw)
        answers.append(row)
        assert [a[-6:].lstrip(b"\x00\x01\x02\x03\x04\x05\x06") for a in answers] == [b"first", b"second", b"third"]
        assert STATS.taken - before >= 2
    finally:
        raw.close()


def _read_result(raw: RawClient) -> list[bytes]:
    """One text result set's packets (classic EOF framing)."""
    out = [raw.read()[1]]
    eofs = 0
    while eofs < 2:
        p = raw.read()[1]
        out.append(p)
        if p[:1] == b"\xfe" and len(p) < 9:
            eofs += 1
    return out


def test_a_slow_client_stops_the_backend_instead_of_filling_memory(proxy: RunningProxy, mariadb: MariaDBServer) -> None:
    raw = RawClient(proxy.host, proxy.port)
    raw.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 16)
    marker = f"slow{time.monotonic_ns()}"
    try:
        assert raw.login()[:1] == b"\x00"
        raw.command(b"\x03SELECT 1")
        before = STATS.taken
        # ~60 MB: far more than the socket buffers on both sides and the proxy's 256 KB client limit
        raw.send(f"\x03SELECT '{marker}', REPEAT('x', 1000) FROM seq_1_to_60000".encode())
        time.sleep(1.0)
        assert STATS.taken == before + 1
        running = _direct(mariadb, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE %s "
                                   "AND INFO NOT LIKE '%%PROCESSLIST%%'", (f"%{marker}%",))
        assert running == ((1,),), "the backend finished sending: the proxy kept reading for a client that did not"
        raw.sock.settimeout(30)
        result = _read_result(raw)
        rows = len(result) - 5  # column count, two definitions, EOF ... EOF
        assert rows == 60000
        assert raw.command(b"\x03SELECT 2")[-2][1] == b"\x012"
    finally:
        raw.close()


def test_a_backend_killed_mid_answer_is_an_error_and_the_session_goes_on(
    proxy: RunningProxy, mariadb: MariaDBServer
) -> None:
    with proxy.connect("demo") as conn, conn.cursor() as cur:
        cur.execute("SELECT 1")
        marker = f"kill{time.monotonic_ns()}"
        before = STATS.taken

        def kill_soon() -> None:
            time.sleep(0.3)
            ids = _direct(mariadb, "SELECT ID FROM information_schema.PROCESSLIST WHERE INFO LIKE %s "
                                   "AND INFO NOT LIKE '%%PROCESSLIST%%'", (f"%{marker}%",))
            for (thread_id,) in ids:
                _direct(mariadb, f"KILL CONNECTION {int(thread_id)}")

        import threading

        killer = threading.Thread(target=kill_soon)
        killer.start()
        with pytest.raises(pymysql.err.OperationalError) as err:
            cur.execute(f"SELECT SLEEP(5), '{marker}'")
        killer.join()
        assert STATS.taken == before + 1
        assert err.value.args[0] in (1927, 1158), err.value.args
        cur.execute("SELECT c FROM fp_t WHERE id=11")  # a new backend connection
        assert cur.fetchall() == (("row-11",),)
    assert_serving(proxy)


def test_a_client_gone_mid_answer_leaves_the_proxy_serving(proxy: RunningProxy) -> None:
    raw = RawClient(proxy.host, proxy.port)
    assert raw.login()[:1] == b"\x00"
    raw.command(b"\x03SELECT 1")
    raw.send(b"\x03SELECT SLEEP(0.3)")
    raw.close()
    time.sleep(0.5)
    assert_serving(proxy)


def test_pipelined_commands_in_one_write(proxy: RunningProxy) -> None:
    raw = RawClient(proxy.host, proxy.port)
    try:
        assert raw.login()[:1] == b"\x00"
        raw.command(b"\x03SELECT 1")
        raw.send_raw(encode_packet(b"\x03SELECT 'a'", 0)[0] + encode_packet(b"\x03SELECT 'b'", 0)[0])
        first, second = _read_result(raw), _read_result(raw)
        assert first[-2] == b"\x01a" and second[-2] == b"\x01b"
        bad = raw.command(b"\x03SELECT * FROM fp_no_such")
        assert is_err(bad[-1][1]) and err_of(bad[-1][1])[0] == 1146
    finally:
        raw.close()


# --- sharded databases: single-node SELECTs --------------------------------------------------------------

ORDERS = [(1000 + i, i % 4, f"st{i % 3}") for i in range(40)]  # (order_id, user_id, status)


@pytest.fixture(scope="module")
def sharded(sharded_env: ShardedEnv) -> ShardedEnv:
    sharded_env.clean("t_order")
    values = ", ".join(f"({o}, {u}, '{s}')" for o, u, s in ORDERS)
    sharded_env.run(f"INSERT INTO t_order (order_id, user_id, status) VALUES {values}")
    return sharded_env


def test_sharded_single_node_selects_are_taken(sharded: ShardedEnv) -> None:
    with sharded.connect() as conn, conn.cursor() as cur:
        cur.execute("SELECT COUNT(*) FROM t_order")  # a scatter: borrows both connections (slow path)
        assert cur.fetchall() == ((len(ORDERS),),)
        before = STATS.taken
        for order_id, user_id, status in ORDERS:
            cur.execute(f"SELECT order_id, status FROM t_order WHERE user_id = {user_id} AND order_id = {order_id}")
            assert cur.fetchall() == ((order_id, status),)
        cur.execute("SELECT order_id FROM t_order WHERE user_id = 1 AND order_id = 999999")
        assert cur.fetchall() == ()
        assert STATS.taken - before == len(ORDERS) + 1
        # not single-node: the coroutine routes, scatters and merges
        before = STATS.taken
        cur.execute("SELECT order_id FROM t_order WHERE user_id IN (1, 2) ORDER BY order_id")
        assert [r[0] for r in cur.fetchall()] == sorted(o for o, u, _ in ORDERS if u in (1, 2))
        assert STATS.taken == before


def test_sharded_prepared_single_node_selects_are_taken(sharded: ShardedEnv) -> None:
    conn = mysql.connector.connect(host=sharded.proxy.host, port=sharded.proxy.port, user="root", password="root",
                                   database="sharding_db", use_pure=True, ssl_disabled=True, autocommit=True)
    try:
        cur = conn.cursor(prepared=True)
        sql = "SELECT order_id, status FROM t_order WHERE user_id = ? AND order_id = ?"
        cur.execute(sql, (0, 1000))  # first execute: prepares the actual statement on the node (slow path)
        assert cur.fetchall() == [(1000, "st0")]
        before = STATS.taken
        for order_id, user_id, status in ORDERS:
            cur.execute(sql, (user_id, order_id))
            assert cur.fetchall() == [(order_id, status)]
        # both nodes of user_id % 2 = 0 .. 1 and tables order_id % 2: the first execute on each node prepares
        assert STATS.taken - before >= len(ORDERS) - 4
    finally:
        conn.close()


def test_sharded_errors_keep_logical_names(sharded: ShardedEnv) -> None:
    with sharded.connect() as conn, conn.cursor() as cur:
        cur.execute("SELECT status FROM t_order WHERE user_id = 1 AND order_id = 1001")  # hold the connection
        before = STATS.taken
        with pytest.raises(pymysql.err.OperationalError) as err:
            cur.execute("SELECT t_order.nosuch FROM t_order WHERE user_id = 1 AND order_id = 1001")
        assert STATS.taken == before + 1
        assert err.value.args[0] == 1054
        assert "t_order.nosuch" in err.value.args[1] and "t_order_1" not in err.value.args[1]
        cur.execute("SELECT status FROM t_order WHERE user_id = 1 AND order_id = 1001")  # the session goes on
        assert cur.fetchall() == (("st1",),)


def test_sharded_refusals_come_from_the_slow_path(sharded: ShardedEnv) -> None:
    with sharded.connect() as conn, conn.cursor() as cur:
        cur.execute("SELECT status FROM t_order WHERE user_id = 1 AND order_id = 1001")
        before = STATS.taken
        with pytest.raises(pymysql.err.MySQLError) as err:
            cur.execute("SELECT status FROM t_order_nosuch_logic WHERE id = 1")
        assert STATS.taken == before
        assert err.value.args[0] in (1146, 1235)


def test_sharded_transaction_flags_follow_the_session(sharded: ShardedEnv) -> None:
    conn = mysql.connector.connect(host=sharded.proxy.host, port=sharded.proxy.port, user="root", password="root",
                                   database="sharding_db", use_pure=True, ssl_disabled=True, autocommit=True)
    try:
        cur = conn.cursor()
        cur.execute("SELECT status FROM t_order WHERE user_id = 1 AND order_id = 1001")
        cur.fetchall()
        conn.start_transaction()
        cur.execute("SELECT status FROM t_order WHERE user_id = 1 AND order_id = 1001")  # joins ds_1: slow
        cur.fetchall()
        before = STATS.taken
        cur.execute("SELECT status FROM t_order WHERE user_id = 3 AND order_id = 1003")  # ds_1 again: fast
        assert cur.fetchall() == [("st0",)]
        assert STATS.taken == before + 1
        assert conn.in_transaction  # IN_TRANS from the proxy's transaction state
        conn.commit()
        cur.execute("SELECT status FROM t_order WHERE user_id = 3 AND order_id = 1003")
        cur.fetchall()
        assert not conn.in_transaction
    finally:
        conn.close()


def test_text_writes_and_transactions_are_taken(proxy: RunningProxy, mariadb: MariaDBServer) -> None:
    mariadb.execute("CREATE TABLE IF NOT EXISTS demo_ds.fp_w (id INT AUTO_INCREMENT PRIMARY KEY, c VARCHAR(20))")
    with proxy.connect("demo", autocommit=True) as conn, conn.cursor() as cur:
        cur.execute("SELECT 1")
        before = STATS.taken
        cur.execute("INSERT INTO fp_w (c) VALUES ('a')")
        first_id = cur.lastrowid
        cur.execute("SELECT LAST_INSERT_ID()")  # the coroutine's path: the session's own value
        assert cur.fetchall() == ((first_id,),)
        cur.execute("BEGIN")
        assert conn.get_server_info() and conn.server_status & 1  # SERVER_STATUS_IN_TRANS, from the backend
        cur.execute("UPDATE fp_w SET c = 'b' WHERE id = %s", (first_id,))
        assert cur.rowcount == 1
        cur.execute("ROLLBACK")
        assert not conn.server_status & 1
        cur.execute("SELECT c FROM fp_w WHERE id = %s", (first_id,))
        assert cur.fetchall() == (("a",),)
        cur.execute("DELETE FROM fp_w WHERE id = %s", (first_id,))
        assert cur.rowcount == 1
        with pytest.raises(pymysql.err.IntegrityError):
            cur.execute("INSERT INTO fp_w (id, c) VALUES (1, 'x'), (1, 'y')")
        # INSERT, BEGIN, UPDATE, ROLLBACK, SELECT, DELETE, the failed INSERT
        assert STATS.taken - before == 7


@pytest.mark.parametrize("prepared", [False, True], ids=["text", "prepared"])
def test_the_first_select_on_a_node_in_a_transaction_joins_it_on_the_fast_path(sharded: ShardedEnv,
                                                                                 prepared: bool) -> None:
    """BEGIN goes ahead of the statement in the same write. The read sees the transaction's snapshot
    (REPEATABLE READ: taken at the first read after BEGIN, on that node): a change committed by another
    session after it stays unseen until COMMIT, which ends the node's transaction."""
    order_id, user_id, status = ORDERS[5]
    conn = mysql.connector.connect(host=sharded.proxy.host, port=sharded.proxy.port, user="root", password="root",
                                   database="sharding_db", use_pure=True, ssl_disabled=True, autocommit=True)
    other = sharded.connect()
    sql = "SELECT status FROM t_order WHERE user_id = %s AND order_id = %s"
    try:
        cur = conn.cursor(prepared=True) if prepared else conn.cursor()
        if prepared:
            sql = sql.replace("%s", "?")
        cur.execute(sql, (user_id, order_id))  # holds the node's connection (and prepares the statement there)
        assert cur.fetchall() == [(status,)]
        for end in ("COMMIT", "ROLLBACK"):
            conn.start_transaction()
            before = STATS.taken
            cur.execute(sql, (user_id, order_id))
            assert cur.fetchall() == [(status,)]
            assert STATS.taken == before + 1  # joined and answered on the fast path
            assert conn.in_transaction
            with other.cursor() as o:
                o.execute(f"UPDATE t_order SET status = 'changed' WHERE user_id = {user_id} AND order_id = {order_id}")
            cur.execute(sql, (user_id, order_id))
            assert cur.fetchall() == [(status,)]  # the transaction's snapshot
            conn.commit() if end == "COMMIT" else conn.rollback()
            cur.execute(sql, (user_id, order_id))
            assert cur.fetchall() == [("changed",)]
            with other.cursor() as o:
                o.execute(f"UPDATE t_order SET status = '{status}' WHERE user_id = {user_id} AND order_id = {order_id}")
    finally:
        conn.close()
        other.close()
