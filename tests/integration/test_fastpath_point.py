"""Sharded point selects on the fast path (routing.point + protocol.retarget) against real MariaDB: a client's
COM_STMT_EXECUTE, with or without its parameter types bound, re-addressed to the node's statement with the
parameter bytes as sent, answers exactly the rows the data holds, also after the slow path executed the same
backend statement with types of its own."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pymysql
import pytest

from protocol.binary import ColumnType, ComStmtExecute, ComStmtPrepare, ParamType, StmtPrepareOK, decode_binary_row
from protocol.packets import ColumnDefinition41, is_eof
from proxy.execution.fastpath import STATS
from tests.integration.sharding_fixtures import ShardedEnv
from tests.integration.test_malformed import RawClient

pytestmark = pytest.mark.integration

ORDERS = [(2000 + i, i % 4, f"pt{i % 3}") for i in range(16)]  # (order_id, user_id, status)
SQL = "SELECT order_id, status FROM t_order WHERE user_id = ? AND order_id = ?"
LONG, STR = ParamType(ColumnType.LONG), ParamType(ColumnType.VAR_STRING)
ULONGLONG = ParamType(ColumnType.LONGLONG, True)
TINY, SHORT, UTINY = ParamType(ColumnType.TINY), ParamType(ColumnType.SHORT), ParamType(ColumnType.TINY, True)
LONGLONG = ParamType(ColumnType.LONGLONG)


@pytest.fixture(scope="module")
def sharded(sharded_env: ShardedEnv) -> Iterator[ShardedEnv]:
    sharded_env.clean("t_order")
    values = ", ".join(f"({o}, {u}, '{s}')" for o, u, s in ORDERS)
    sharded_env.run(f"INSERT INTO t_order (order_id, user_id, status) VALUES {values}")
    yield sharded_env
    # modules sharing sharded_env compare t_order with the oracle's (test_bytes): leave it as it was found
    sharded_env.clean("t_order")


def prepare(client: RawClient, sql: str) -> StmtPrepareOK:
    client.send(ComStmtPrepare(sql.encode()).encode())
    ok = StmtPrepareOK.decode(client.read()[1])
    for count in (ok.num_params, ok.num_columns):
        for _ in range(count + (1 if count else 0)):  # definitions, then an EOF (no DEPRECATE_EOF)
            client.read()
    return ok


def execute(client: RawClient, stmt: int, values: tuple[Any, ...], types: tuple[ParamType, ...],
            bound: bool) -> list[tuple[object, ...]]:
    payload = ComStmtExecute(stmt, 0, 1, values, types, True).encode()
    if not bound:  # what libmysqlclient sends on later executes: flag 0, no type block
        at = 10 + (len(values) + 7) // 8
        payload = payload[:at] + b"\x00" + payload[at + 1 + 2 * len(values):]
    packets = [p for _, p in client.command(payload)]
    assert packets[0][:1] not in (b"\xff",), packets[0]
    n = packets[0][0]
    columns = [ColumnDefinition41.decode(p) for p in packets[1:1 + n]]
    return [decode_binary_row(p, columns) for p in packets[2 + n:] if not is_eof(p)]


def expected(user_id: object, order_id: object) -> list[tuple[object, ...]]:
    wanted = int(user_id) if isinstance(user_id, bytes) else user_id
    return [(o, s.encode()) for o, u, s in ORDERS if u == wanted and o == order_id]


# (user_id, order_id, types, bound): in order, on one statement; None = NULL (the slow path answers)
CALLS: list[tuple[object, object, tuple[ParamType, ...], bool]] = [
    (1, 2001, (LONG, LONG), True),
    (2, 2002, (LONG, LONG), False),
    (3, 2003, (LONG, LONG), False),
    (0, 2004, (LONG, LONG), False),
    (1, 2005, (LONG, ULONGLONG), True),
    (2, 2006, (LONG, ULONGLONG), False),
    (b"3", 2007, (STR, LONG), True),
    (b"0", 2008, (STR, LONG), False),
    (1, None, (LONG, LONG), True),  # NULL: a scatter on the slow path, which binds the backends' types itself
    (1, 2009, (LONG, LONG), False),  # then unbound again: the client's types are written in
    (2, 2010, (LONG, LONG), False),
    (3, 999999, (LONG, LONG), False),  # no such row
    (2, 2010, (TINY, SHORT), True),  # other integer widths: read at their offsets (protocol.retarget.ExecuteLayout)
    (3, 2011, (TINY, SHORT), False),
    (3, 2003, (TINY, SHORT), False),
    (1, 2013, (UTINY, LONGLONG), True),
    (1, 2013, (UTINY, LONGLONG), False),
    (0, 2012, (UTINY, LONGLONG), False),
]


def test_point_executes_answer_the_rows_the_data_holds(sharded: ShardedEnv) -> None:
    client = RawClient(sharded.proxy.host, sharded.proxy.port)
    try:
        client.login(database="sharding_db")
        ok = prepare(client, SQL)
        for user_id, order_id, types, _ in CALLS[:4]:  # prepares the actual statement on every node
            execute(client, ok.statement_id, (user_id, order_id), types, True)
        before = STATS.taken
        for user_id, order_id, types, bound in CALLS:
            got = execute(client, ok.statement_id, (user_id, order_id), types, bound)
            assert got == ([] if order_id is None else expected(user_id, order_id)), (user_id, order_id, bound)
        assert STATS.taken - before >= len(CALLS) - 2  # all but the NULL (and a node first prepared by it)
    finally:
        client.close()


def test_many_clients_executing_without_types_get_their_own_rows(sharded: ShardedEnv) -> None:
    """16 clients at once, each with its own prepared statement executed with and without bound types and of its
    own integer widths (each statement keeps its point plan and layout: protocol.retarget.ExecuteLayout): every
    answer is the row its client asked for."""
    import random
    import threading

    failures: list[str] = []

    def run(c: int) -> None:
        rng = random.Random(c)
        types = [(LONG, LONG), (TINY, SHORT), (UTINY, LONGLONG), (LONG, ULONGLONG)][c % 4]
        client = RawClient(sharded.proxy.host, sharded.proxy.port)
        try:
            client.login(database="sharding_db")
            ok = prepare(client, SQL)
            for i in range(60):
                order_id, user_id, _ = ORDERS[rng.randrange(len(ORDERS))]
                got = execute(client, ok.statement_id, (user_id, order_id), types, i == 0 or rng.random() < 0.1)
                if got != expected(user_id, order_id):
                    failures.append(f"client {c}: ({user_id}, {order_id}) -> {got}")
        except Exception as exc:  # the thread's failure is the test's
            failures.append(f"client {c}: {exc!r}")
        finally:
            client.close()

    threads = [threading.Thread(target=run, args=(c,)) for c in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not failures, failures[:5]


def test_text_point_selects_on_tables_named_as_their_logic_table(sharded: ShardedEnv) -> None:
    """`t_user` is `t_user` on both data sources, so the unit's SQL is the client's text and the fast path sends the
    client's own packet: every text point select answers the rows of its node, on the fast path, and an
    error raised there reaches the client whole."""
    sharded.clean("t_user", db="extra_db")
    sharded.run("INSERT INTO t_user (user_id, name) VALUES " + ", ".join(f"({u}, 'u{u}')" for u in range(12)),
                db="extra_db")
    conn = sharded.connect("extra_db")
    try:
        with conn.cursor() as cur:
            for u in range(3):  # warm: the statement's plan is compiled and cached by the slow path
                cur.execute(f"SELECT name FROM t_user WHERE user_id = {u}")
                cur.fetchall()
            before = STATS.taken
            for u in [*range(12), 40, 7, 7]:
                cur.execute(f"SELECT name FROM t_user WHERE user_id = {u}")
                assert cur.fetchall() == (((f"u{u}",),) if u < 12 else ())
            assert STATS.taken - before == 15
            with pytest.raises(pymysql.err.OperationalError) as err:
                cur.execute("SELECT no_such_column FROM t_user WHERE user_id = 3")
            assert err.value.args[0] == 1054 and "no_such_column" in err.value.args[1]
            cur.execute("SELECT name FROM t_user WHERE user_id = 5")  # the session goes on
            assert cur.fetchall() == (("u5",),)
    finally:
        conn.close()
