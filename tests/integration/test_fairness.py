"""One heavy statement never stalls the other sessions (issue 35 part 2): while one client sends a statement whose
routing is CPU work (an IN list of 200,000 values, ~1.3 MiB of text), other sessions' statements keep being
answered. Asserted on the other sessions' progress: the longest gap between two of their answers while the heavy
statement runs, never on the heavy statement's own time."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pymysql
import pytest

from tests.integration.sharding_fixtures import ORACLE_DB, ShardedEnv

IDS = 200_000
# what the other sessions may wait at most, as a share of the heavy statement's own time (a ratio, as the machine
# running the suite is loaded and runs a second test process: both stretch together). Deciding the statement on the
# loop held the others for 70-95 % of it (0.56-1.67 s); off the loop they wait 30-80 ms of its ~1.2 s, at most.
MAX_SHARE = 0.35


ROWS = [(i * 7, i % 5, f"s{i % 3}") for i in range(60)]  # (order_id, user_id, status): some of them in the lists


@pytest.fixture(scope="module")
def orders(sharded_env: ShardedEnv) -> Iterator[None]:
    """The same rows in the sharded t_order and in the oracle's (other modules leave their own rows)."""
    env = sharded_env
    insert = "INSERT INTO t_order (order_id, user_id, status) VALUES " + ", ".join(
        f"({o}, {u}, '{s}')" for o, u, s in ROWS)

    def empty() -> None:
        env.clean("t_order")
        env.backend("ds_0", "DELETE FROM t_order", ORACLE_DB)

    empty()
    env.run(insert)
    env.backend("ds_0", insert, ORACLE_DB)
    yield
    empty()


def _heavy_sql(column: str) -> str:
    return f"SELECT COUNT(*), SUM(order_id) FROM t_order WHERE {column} IN (" + ", ".join(
        str(i) for i in range(IDS)) + ")"


@pytest.mark.parametrize(("column", "protocol"), [("order_id", "text"), ("user_id", "text"),
                                                  ("status", "text"), ("order_id", "prepared")])
def test_other_sessions_are_answered_while_a_heavy_statement_routes(sharded_env: ShardedEnv, orders: None,
                                                                     column: str, protocol: str) -> None:
    env = sharded_env
    heavy = _heavy_sql(column)
    outcome: list[Any] = []

    spent: list[float] = []

    def run_heavy() -> None:
        started = time.monotonic()
        try:
            if protocol == "text":
                with env.connect(read_timeout=120) as conn, conn.cursor() as cur:
                    cur.execute(heavy)
                    outcome.append(cur.fetchall())
            else:  # the statement prepared with a few placeholders beside the long literal list
                import mysql.connector

                conn = mysql.connector.connect(host=env.proxy.host, port=env.proxy.port, user="root",
                                               password="root", database="sharding_db", use_pure=True,
                                               ssl_disabled=True, autocommit=True)
                try:
                    cur = conn.cursor(prepared=True)
                    cur.execute(heavy + " AND status <> ? AND order_id <> ?", ("none", -1))
                    outcome.append(cur.fetchall())
                finally:
                    conn.close()
        except BaseException as exc:  # reported by the test thread
            outcome.append(exc)
        spent.append(time.monotonic() - started)

    others = [env.connect(), env.connect()]  # connected before: their answers are what is timed
    try:
        for conn in others:
            with conn.cursor() as cur:
                cur.execute("SELECT COUNT(*) FROM t_order WHERE user_id = 1 AND order_id = 1")
        worker = threading.Thread(target=run_heavy, daemon=True)
        worker.start()
        gaps: list[float] = []
        answered = 0
        last = time.monotonic()
        while worker.is_alive():
            conn = others[answered % 2]
            with conn.cursor() as cur:  # one session's point select, the other's SELECT 1
                cur.execute("SELECT 1" if answered % 2 else
                            "SELECT COUNT(*) FROM t_order WHERE user_id = 1 AND order_id = 1")
                cur.fetchall()
            now = time.monotonic()
            gaps.append(now - last)
            last = now
            answered += 1
            time.sleep(0.01)
        worker.join()
    finally:
        for conn in others:
            conn.close()
    assert outcome and not isinstance(outcome[0], BaseException), outcome
    server = env.servers[0]
    direct = pymysql.connect(host=server.host, port=server.port, user=server.user, password=server.password,
                             database=ORACLE_DB, autocommit=True, read_timeout=120)
    try:
        with direct.cursor() as cur:
            cur.execute(heavy)
            assert [tuple(r) for r in outcome[0]] == [tuple(r) for r in cur.fetchall()]
    finally:
        direct.close()
    print(f"{column} {protocol}: {answered} answers to the other sessions, the longest wait {max(gaps) * 1000:.0f} ms "
          f"of the heavy statement's {spent[0] * 1000:.0f} ms")
    assert answered >= 3, answered
    assert max(gaps) < MAX_SHARE * spent[0], \
        f"another session waited {max(gaps):.2f} s of the heavy statement's {spent[0]:.2f} s ({answered} answers)"


CLIENTS = 200
# statements each client must have completed, start to end, within the heavy statements' run
PROGRESS = 2


def _client_statements(i: int) -> list[tuple[str, tuple[Any, ...]]]:
    """Client i's statements and their answers, each naming the client (`i AS who`): a point select of one row and a
    scatter aggregate over every node, both chosen by i so that an answer meant for another client differs."""
    order_id, user_id, status = ROWS[i % len(ROWS)]
    chosen = [o for o, _, s in ROWS if s != status]
    return [
        (f"SELECT {i} AS who, status FROM t_order WHERE user_id = {user_id} AND order_id = {order_id}", (i, status)),
        (f"SELECT {i} AS who, COUNT(*), SUM(order_id) FROM t_order WHERE status <> '{status}'",
         (i, len(chosen), _decimal(sum(chosen)))),
    ]


def test_many_clients_beside_a_heavy_statement(sharded_env: ShardedEnv, orders: None) -> None:
    """200 clients alternate a point select and a scatter aggregate while one session runs the 200,000-value IN list
    twice: every answer is its own client's, none is lost or wedged, and every client completes statements while the
    heavy ones run (counted between the heavy statements' start and end, not timed)."""
    env = sharded_env
    heavy = _heavy_sql("order_id")
    ready = threading.Barrier(CLIENTS + 1)
    stop = threading.Event()
    done: list[list[tuple[float, float]]] = [[] for _ in range(CLIENTS)]  # per client: (start, end) of each answer
    failures: list[BaseException] = []

    def client(i: int) -> None:
        statements = _client_statements(i)
        try:
            conn = env.connect(read_timeout=60)
        except BaseException as exc:
            failures.append(exc)
            ready.abort()
            return
        try:
            with conn.cursor() as cur:
                n = 0
                while True:
                    sql, expected = statements[n % 2]
                    started = time.monotonic()
                    cur.execute(sql)
                    got = tuple(cur.fetchall())
                    assert got == (expected,), (i, sql, got, expected)
                    done[i].append((started, time.monotonic()))
                    n += 1
                    if n == 2:
                        ready.wait(60)  # every client connected and answered once before the heavy statement
                    elif stop.is_set() and n >= 2:
                        break
        except BaseException as exc:  # reported by the test thread
            failures.append(exc)
            stop.set()
            ready.abort()
        finally:
            conn.close()

    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(CLIENTS)]
    for t in threads:
        t.start()
    try:
        ready.wait(120)
    except threading.BrokenBarrierError:
        stop.set()
        raise AssertionError(f"the clients did not all start: {failures[:3]}") from None
    heavy_answers = []
    window_start = time.monotonic()
    try:
        with env.connect(read_timeout=120) as conn, conn.cursor() as cur:
            for _ in range(2):
                cur.execute(heavy)
                heavy_answers.append(cur.fetchall())
    finally:
        window_end = time.monotonic()
        stop.set()
        for t in threads:
            t.join(120)
    assert not failures, failures[:3]
    assert not any(t.is_alive() for t in threads), "a client never got its answer (wedged)"
    server = env.servers[0]
    direct = pymysql.connect(host=server.host, port=server.port, user=server.user, password=server.password,
                             database=ORACLE_DB, autocommit=True, read_timeout=120)
    try:
        with direct.cursor() as cur:
            cur.execute(heavy)
            expected = [tuple(r) for r in cur.fetchall()]
    finally:
        direct.close()
    assert [[tuple(r) for r in answer] for answer in heavy_answers] == [expected, expected]
    within = [sum(1 for s, e in spans if s >= window_start and e <= window_end) for spans in done]
    print(f"{CLIENTS} clients beside 2 heavy statements ({window_end - window_start:.2f} s): statements each "
          f"completed within them: min {min(within)}, median {sorted(within)[CLIENTS // 2]}, max {max(within)}")
    assert min(within) >= PROGRESS, sorted(within)[:10]


def _decimal(value: int) -> Decimal:
    return Decimal(value)
