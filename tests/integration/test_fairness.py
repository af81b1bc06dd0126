"""One heavy statement never stalls the other sessions (issue 35 part 2): while one client sends a statement whose
routing is CPU work (an IN list of 200,000 values, ~1.3 MiB of text), other sessions' statements keep being
answered. Asserted on the other sessions' progress: the longest gap between two of their answers while the heavy
statement runs, never on the heavy statement's own time."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
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
