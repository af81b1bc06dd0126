"""Memory budgets (issue 35 item 3, proxy.execution.budget): what one statement may hold in the proxy
(props.proxy-statement-memory-bytes, ERR 1038 HY001) and what every statement of the process may hold together
(props.proxy-global-memory-bytes, ERR 1041 HY000). A refused statement fails alone: the same session goes on and
answers as the oracle does, and the bytes it held are given back.

A proxy of its own, started with the props in its global.yaml, in front of the sharded_env's databases.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mysql.connector
import pymysql
import pytest

from proxy.execution.budget import DEFAULT_GLOBAL_BYTES
from tests.integration.harness import RunningProxy, start_proxy, write_conf
from tests.integration.sharding_fixtures import DATA_SOURCES, ORACLE_DB, ShardedEnv, shipped_rules_yaml

pytestmark = pytest.mark.integration

STATEMENT_BYTES = 64 * 1024
PAD = "x" * 30
# (order_id, user_id, status): 1,000 rows on ds_0 (even user_id), 500 on ds_1.t_order_0, one on ds_1.t_order_1
ROWS = (
    [(2 * i + i % 2, 2 * (i % 50), f"s{i}-{PAD}") for i in range(1000)]
    + [(2 * i + 4000, 2 * (i % 50) + 1, f"t{i}-{PAD}") for i in range(500)]
    + [(9999, 1, f"u-{PAD}")]
)
# the statement whose merge is held in memory: GROUP BY groups the nodes cannot order by COUNT(*), then sorted
GROUPED = "SELECT order_id, COUNT(*) AS c FROM t_order {where}GROUP BY order_id ORDER BY c, order_id"


@pytest.fixture(scope="module")
def bounded(sharded_env: ShardedEnv, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningProxy]:
    """The same rows in the sharded t_order and in the oracle's, behind a proxy with a small statement budget."""
    env = sharded_env
    insert = "INSERT INTO t_order (order_id, user_id, status) VALUES " + ", ".join(
        f"({o}, {u}, '{s}')" for o, u, s in ROWS
    )

    def empty() -> None:
        env.clean("t_order")
        env.backend("ds_0", "DELETE FROM t_order", ORACLE_DB)

    empty()
    env.run(insert)
    env.backend("ds_0", insert, ORACLE_DB)
    databases = {
        "sharding_db": {
            ds: (server, env.physical["sharding_db"][ds]) for ds, server in zip(DATA_SOURCES, env.servers, strict=True)
        }
    }
    conf = write_conf(
        tmp_path_factory.mktemp("budget-conf"),
        databases,
        rules_yaml={"sharding_db": shipped_rules_yaml()},
        props={"proxy-statement-memory-bytes": STATEMENT_BYTES},
    )
    proxy = start_proxy(Path(conf))
    try:
        yield proxy
    finally:
        proxy.stop()
        empty()


def _oracle(env: ShardedEnv, sql: str) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in env.oracle(sql)[1]]


class _Client:
    """One session of the bounded proxy in a protocol: text (PyMySQL) or prepared (mysql-connector)."""

    def __init__(self, proxy: RunningProxy, protocol: str) -> None:
        self.protocol = protocol
        if protocol == "text":
            self.conn: Any = proxy.connect("sharding_db", autocommit=True)
        else:
            self.conn = mysql.connector.connect(
                host=proxy.host,
                port=proxy.port,
                user="root",
                password="root",
                database="sharding_db",
                use_pure=True,
                ssl_disabled=True,
                autocommit=True,
            )

    def rows(self, sql: str) -> list[tuple[Any, ...]]:
        cur = self.conn.cursor(prepared=True) if self.protocol == "prepared" else self.conn.cursor()
        try:
            cur.execute(sql)
            return [tuple(int(v) if isinstance(v, int) else v for v in r) for r in cur.fetchall()]
        finally:
            cur.close()

    def refusal(self, sql: str) -> tuple[int, str]:
        try:
            self.rows(sql)
        except (pymysql.MySQLError, mysql.connector.Error) as exc:
            if isinstance(exc, mysql.connector.Error):
                return int(exc.errno), str(exc.sqlstate)
            return int(exc.args[0]), _SQLSTATES.get(int(exc.args[0]), "")
        raise AssertionError(f"the proxy answered {sql!r}")

    def close(self) -> None:
        self.conn.close()


_SQLSTATES = {1038: "HY001", 1041: "HY000"}  # PyMySQL keeps no SQLSTATE: the errno's own (checked with the connector)

# (what is held, the statement over the budget, the same shape within it, the protocols). DISTINCT streams: its
# refusal comes after rows, which mysql-connector's pure binary reader never returns from (an ERR after a row
# keeps that row's values set, and it reads on), so it is checked in the text protocol only.
BOTH, TEXT = ("text", "prepared"), ("text",)
CASES = [
    ("in-memory GROUP BY and sort", GROUPED.format(where=""), GROUPED.format(where="WHERE user_id = 2 "), BOTH),
    (
        "DISTINCT keys",
        "SELECT DISTINCT status FROM t_order",
        "SELECT DISTINCT status FROM t_order WHERE user_id = 4",
        TEXT,
    ),
    (
        "federation copy",
        "SELECT COUNT(*), SUM(o.order_id) FROM t_order o WHERE o.order_id IN "
        "(SELECT i.order_id FROM t_order i WHERE i.status <> 'none')",
        "SELECT COUNT(*), SUM(o.order_id) FROM t_order o WHERE o.user_id = 3 AND o.order_id IN "
        "(SELECT i.order_id FROM t_order i WHERE i.user_id = 3)",
        BOTH,
    ),
    (
        "routing of a long text",
        "SELECT COUNT(*) FROM t_order WHERE order_id IN (" + ", ".join(str(i) for i in range(5000)) + ")",
        "SELECT COUNT(*) FROM t_order WHERE order_id IN (1, 2, 3)",
        BOTH,
    ),
]
RUNS = [(held, heavy, light, protocol) for held, heavy, light, protocols in CASES for protocol in protocols]


@pytest.mark.parametrize(("held", "heavy", "light", "protocol"), RUNS, ids=[f"{r[0]}-{r[3]}" for r in RUNS])
def test_statement_budget_refuses_and_the_session_goes_on(
    sharded_env: ShardedEnv, bounded: RunningProxy, held: str, heavy: str, light: str, protocol: str
) -> None:
    client = _Client(bounded, protocol)
    try:
        assert client.refusal(heavy) == (1038, "HY001"), held
        # the same session: a statement within the budget, a point select, the heavy one's shape narrowed
        assert sorted(client.rows(light)) == sorted(_oracle(sharded_env, light))
        assert client.rows("SELECT status FROM t_order WHERE user_id = 1 AND order_id = 9999") == [(f"u-{PAD}",)]
        assert client.refusal(heavy) == (1038, "HY001")  # what it held was given back: the same refusal again
    finally:
        client.close()


def test_statement_budget_is_live(sharded_env: ShardedEnv, bounded: RunningProxy) -> None:
    """SET DIST VARIABLE raises it for the next statement; 0 turns it off."""
    client = _Client(bounded, "text")
    sql = GROUPED.format(where="")
    try:
        client.rows("SET DIST VARIABLE proxy_statement_memory_bytes = 0")
        assert client.rows(sql) == _oracle(sharded_env, sql)
    finally:
        client.rows(f"SET DIST VARIABLE proxy_statement_memory_bytes = {STATEMENT_BYTES}")
        client.close()


def _least_bytes(client: _Client, sql: str) -> int:
    """The smallest global budget `sql` passes alone under (a bisection by SET DIST VARIABLE), from the refusals."""
    low, high = 1, 64 * 1024 * 1024
    while low < high:
        mid = (low + high) // 2
        client.rows(f"SET DIST VARIABLE proxy_global_memory_bytes = {mid}")
        try:
            client.rows(sql)
        except pymysql.MySQLError as exc:
            assert exc.args[0] == 1041, exc
            low = mid + 1
        else:
            high = mid
    return low


def test_global_budget_is_shared_by_the_sessions(sharded_env: ShardedEnv, bounded: RunningProxy) -> None:
    """Two statements that each fit the global budget alone: while the first holds rows it read ahead, the second is
    refused with 1041; once the first is done, the second passes. Neither is refused by its own budget (off).

    What the first holds, and for how long, is fixed by the test: with one connection per data source and query
    (max-connections-size-per-query 1), a merge reads each data source's second unit into memory before its first
    unit streams; ds_0's (500 rows) is read and held, ds_1's waits for a row its locking read meets, locked on the
    backend by the test, until the test lets it go."""
    env = sharded_env
    first_sql = "SELECT order_id, status FROM t_order ORDER BY order_id FOR UPDATE"
    second_sql = (
        "SELECT order_id, status FROM t_order WHERE user_id IN ("
        + ", ".join(str(u) for u in range(0, 100, 2))
        + ") ORDER BY order_id"
    )
    admin, second = _Client(bounded, "text"), _Client(bounded, "text")
    locker = env.servers[1].connect(env.physical["sharding_db"]["ds_1"])
    outcome: list[Any] = []
    try:
        admin.rows("SET DIST VARIABLE max_connections_size_per_query = 1")
        admin.rows("SET DIST VARIABLE proxy_statement_memory_bytes = 0")
        need_first, need_second = _least_bytes(admin, first_sql), _least_bytes(admin, second_sql)
        # while it waits, the first holds ds_0's read-ahead: all it needs but ds_1's one row; the second needs as
        # much (ds_0's read-ahead): each fits alone, not both
        limit = need_first + need_second // 2
        admin.rows(f"SET DIST VARIABLE proxy_global_memory_bytes = {limit}")
        assert second.rows(second_sql) == _oracle(env, second_sql)
        with locker.cursor() as cur:
            cur.execute("BEGIN")
            cur.execute("SELECT * FROM t_order_1 WHERE order_id = 9999 FOR UPDATE")

        def run_first() -> None:
            client = _Client(bounded, "text")
            try:
                outcome.append(client.rows(first_sql))
            except BaseException as exc:  # reported by the test thread
                outcome.append(exc)
            finally:
                client.close()

        worker = threading.Thread(target=run_first, daemon=True)
        worker.start()
        # the second is sent once the first waits for the locked row (its ds_0 read-ahead is then held, or about
        # to be): sent sooner, it could hold its own bytes while the first asks for its, and refuse the first
        for _ in range(400):
            if env.servers[1].execute(
                "SELECT COUNT(*) FROM information_schema.INNODB_TRX WHERE trx_state = 'LOCK WAIT'"
            )[0][0]:
                break
            time.sleep(0.05)
        refused = 0
        for _ in range(400):  # until the first statement holds its read-ahead: then the second is refused
            try:
                assert second.rows(second_sql) == _oracle(env, second_sql)
            except pymysql.MySQLError as exc:
                assert exc.args[0] == 1041, exc
                assert "proxy-global-memory-bytes" in exc.args[1]
                refused += 1
                break
            time.sleep(0.05)
        assert refused, f"the second statement was never refused while the first held its read-ahead: {outcome}"
        assert worker.is_alive()  # still waiting for the locked node
        locker.rollback()
        worker.join(60)
        assert outcome and outcome[0] == _oracle(env, first_sql), outcome
        # the first gave back what it held: the second passes again, on the same session
        assert second.rows(second_sql) == _oracle(env, second_sql)
    finally:
        locker.rollback()
        locker.close()
        admin.rows(f"SET DIST VARIABLE proxy_global_memory_bytes = {DEFAULT_GLOBAL_BYTES}")
        admin.rows("SET DIST VARIABLE max_connections_size_per_query = 4")
        admin.rows(f"SET DIST VARIABLE proxy_statement_memory_bytes = {STATEMENT_BYTES}")
        admin.close()
        second.close()
