"""BEGIN, COMMIT and ROLLBACK on a sharded database answered by the fast path: the client hears the same
OK (IN_TRANS set or cleared), the data sources join the transaction at their first statement exactly as after the
session's own BEGIN, COMMIT and ROLLBACK end it on every one of them (proxy.execution.fastcommit; its failures:
tests/integration/test_txn_faults.py), and those that must do more (commit the open transaction first,
autocommit=0, SET TRANSACTION pending) still go to the session's coroutine, which does it."""

from __future__ import annotations

import pytest

from protocol.binary import ComStmtExecute
from protocol.constants import ServerStatus
from protocol.packets import OKPacket
from proxy.execution.fastpath import STATS
from tests.integration.sharding_fixtures import ShardedEnv, order_node
from tests.integration.test_fastpath_point import prepare
from tests.integration.test_malformed import RawClient

pytestmark = pytest.mark.integration


@pytest.fixture()
def sharded(sharded_env: ShardedEnv) -> ShardedEnv:
    sharded_env.clean("t_order")
    sharded_env.run("INSERT INTO t_order (order_id, user_id, status) VALUES (10, 0, 'a'), (11, 1, 'b')")
    return sharded_env


def _taken(conn: object, sql: str) -> int:
    before = STATS.taken
    conn.cursor().execute(sql)  # type: ignore[attr-defined]
    return STATS.taken - before


def test_begin_is_answered_by_the_fast_path_and_the_nodes_join_at_their_first_statement(sharded: ShardedEnv) -> None:
    conn, other = sharded.connect(), sharded.connect()
    try:
        cur = conn.cursor()
        assert _taken(conn, "BEGIN") == 1  # answered without the session's coroutine
        assert conn.server_status & ServerStatus.IN_TRANS
        cur.execute("SELECT status FROM t_order WHERE user_id = 0 AND order_id = 10")  # joins the first node
        assert cur.fetchall() == (("a",),)
        cur.execute("UPDATE t_order SET status = 'x' WHERE user_id = 1 AND order_id = 11")  # joins the second one
        cur.execute("UPDATE t_order SET status = 'y' WHERE user_id = 0 AND order_id = 10")
        ocur = other.cursor()
        ocur.execute("SELECT order_id, status FROM t_order ORDER BY order_id")
        assert ocur.fetchall() == ((10, "a"), (11, "b"))  # nothing visible outside before COMMIT
        # a BEGIN in a transaction that touched data sources commits it first: the session's coroutine
        assert _taken(conn, "BEGIN") == 0
        assert conn.server_status & ServerStatus.IN_TRANS
        ocur.execute("SELECT order_id, status FROM t_order ORDER BY order_id")
        assert ocur.fetchall() == ((10, "y"), (11, "x"))
        cur.execute("UPDATE t_order SET status = 'z' WHERE user_id = 1 AND order_id = 11")
        cur.execute("ROLLBACK")
        assert not conn.server_status & ServerStatus.IN_TRANS
        ocur.execute("SELECT order_id, status FROM t_order ORDER BY order_id")
        assert ocur.fetchall() == ((10, "y"), (11, "x"))
        # BEGIN twice with nothing in between: the second one is answered here too
        assert _taken(conn, "begin") == 1
        assert _taken(conn, "BEGIN") == 1
        cur.execute("SELECT status FROM t_order WHERE user_id = 1 AND order_id = 11")
        assert cur.fetchall() == (("x",),)
        cur.execute("UPDATE t_order SET status = 'v' WHERE user_id = 0 AND order_id = 10")
        cur.execute("COMMIT")
        assert not conn.server_status & ServerStatus.IN_TRANS
        ds, table = order_node(0, 10)
        assert sharded.backend(ds, f"SELECT status FROM {table} WHERE order_id = 10") == [("v",)]
    finally:
        conn.close()
        other.close()


def _rows(env: ShardedEnv) -> list[tuple[object, ...]]:
    """t_order as the data sources hold it (committed), read on the backends directly."""
    rows = []
    for user_id, order_id in ((0, 10), (1, 11)):
        ds, table = order_node(user_id, order_id)
        rows += [(order_id, *r) for r in env.backend(ds, f"SELECT status FROM {table} WHERE order_id = {order_id}")]
    return rows


def test_commit_and_rollback_are_answered_by_the_fast_path(sharded: ShardedEnv) -> None:
    conn = sharded.connect()
    try:
        cur = conn.cursor()
        assert _taken(conn, "BEGIN") == 1
        cur.execute("UPDATE t_order SET status = 'c0' WHERE user_id = 0 AND order_id = 10")
        cur.execute("UPDATE t_order SET status = 'c1' WHERE user_id = 1 AND order_id = 11")
        assert _rows(sharded) == [(10, "a"), (11, "b")]
        assert _taken(conn, "COMMIT") == 1  # both data sources, one callback each
        assert not conn.server_status & ServerStatus.IN_TRANS
        assert _rows(sharded) == [(10, "c0"), (11, "c1")]
        assert _taken(conn, "BEGIN") == 1
        cur.execute("UPDATE t_order SET status = 'r1' WHERE user_id = 1 AND order_id = 11")
        assert _taken(conn, "rollback") == 1
        assert not conn.server_status & ServerStatus.IN_TRANS
        assert _rows(sharded) == [(10, "c0"), (11, "c1")]
        assert _taken(conn, "BEGIN") == 1
        assert _taken(conn, "COMMIT") == 1  # nothing joined: nothing to send, OK
        assert _taken(conn, "COMMIT") == 1  # no transaction: OK, as MySQL answers
        cur.execute("UPDATE t_order SET status = 'a' WHERE user_id = 0 AND order_id = 10")  # autocommit for real
        assert _rows(sharded) == [(10, "a"), (11, "c1")]
        cur.execute("SELECT @@in_transaction")  # (a data source's own: the session is out of any transaction)
        assert cur.fetchall() == ((0,),)
    finally:
        conn.close()


@pytest.mark.parametrize("before", ["SET autocommit = 0", "SET TRANSACTION ISOLATION LEVEL SERIALIZABLE"])
def test_begins_that_do_more_go_to_the_session(sharded: ShardedEnv, before: str) -> None:
    conn = sharded.connect()
    try:
        cur = conn.cursor()
        cur.execute(before)
        assert _taken(conn, "BEGIN") == 0
        assert conn.server_status & ServerStatus.IN_TRANS
        cur.execute("UPDATE t_order SET status = 'w' WHERE user_id = 0 AND order_id = 10")
        # under autocommit=0 the next transaction starts at once on every connection: the session's coroutine
        assert _taken(conn, "ROLLBACK") == (0 if "autocommit" in before else 1)
        cur.execute("SELECT status FROM t_order WHERE user_id = 0 AND order_id = 10")
        assert cur.fetchall() == (("a",),)
    finally:
        conn.close()


def test_a_prepared_begin_is_answered_as_the_text_one(sharded: ShardedEnv) -> None:
    """sysbench --db-ps-mode=auto prepares BEGIN and COMMIT: the executed BEGIN is answered by the fast path too, with
    the same OK (IN_TRANS), and the data sources join at their first statement; one that must do more (here: commit
    the open transaction first) still goes to the session's coroutine, which does it."""
    client = RawClient(sharded.proxy.host, sharded.proxy.port)
    other = sharded.connect()
    try:
        client.login(database="sharding_db")
        begin = prepare(client, "BEGIN")
        assert begin.num_params == 0

        def execute_begin() -> tuple[int, OKPacket]:
            before = STATS.taken
            packets = client.command(ComStmtExecute(begin.statement_id, 0, 1, (), (), False).encode())
            assert len(packets) == 1 and packets[0][0] == 1, packets
            return STATS.taken - before, OKPacket.decode(packets[0][1])

        def query(sql: str) -> OKPacket:
            packets = client.command(b"\x03" + sql.encode())
            assert packets[-1][1][:1] != b"\xff", packets
            return OKPacket.decode(packets[-1][1]) if len(packets) == 1 else OKPacket()

        taken, ok = execute_begin()
        assert taken == 1 and ok.status & ServerStatus.IN_TRANS
        query("UPDATE t_order SET status = 'p' WHERE user_id = 0 AND order_id = 10")  # joins the first node
        ocur = other.cursor()
        ocur.execute("SELECT order_id, status FROM t_order ORDER BY order_id")
        assert ocur.fetchall() == ((10, "a"), (11, "b"))  # not committed yet
        taken, ok = execute_begin()  # commits the open transaction first: the session's coroutine
        assert taken == 0 and ok.status & ServerStatus.IN_TRANS
        ocur.execute("SELECT order_id, status FROM t_order ORDER BY order_id")
        assert ocur.fetchall() == ((10, "p"), (11, "b"))
        query("UPDATE t_order SET status = 'q' WHERE user_id = 1 AND order_id = 11")
        assert not query("ROLLBACK").status & ServerStatus.IN_TRANS
        ocur.execute("SELECT order_id, status FROM t_order ORDER BY order_id")
        assert ocur.fetchall() == ((10, "p"), (11, "b"))
        # a prepared COMMIT too
        commit = prepare(client, "COMMIT")
        taken, ok = execute_begin()
        assert taken == 1
        query("UPDATE t_order SET status = 's' WHERE user_id = 1 AND order_id = 11")
        before = STATS.taken
        packets = client.command(ComStmtExecute(commit.statement_id, 0, 1, (), (), False).encode())
        assert STATS.taken == before + 1 and len(packets) == 1, packets
        assert not OKPacket.decode(packets[0][1]).status & ServerStatus.IN_TRANS
        ocur.execute("SELECT order_id, status FROM t_order ORDER BY order_id")
        assert ocur.fetchall() == ((10, "p"), (11, "s"))
    finally:
        client.close()
        other.close()
