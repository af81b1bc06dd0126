"""IN lists of 50,000 values through the proxy, on each sharding key and off them, literal and prepared, answered
exactly as MariaDB answers them on the unsharded oracle database (issue 35).

Why: such a statement took 11.8 s of routing (a list scan per value), and each of the 4 nodes got the whole list;
now each node gets its own values (`rewrite.InListSlot`) and the list is compiled cut short (`routing.lists`). The
rows: 6,000 orders of the shipped layout (t_order: ds = user_id % 2, table = order_id % 2), written straight into
the backends and into ``sht_oracle_db``; the lists mix ids that exist with ids that do not, with repeats.
Prepared statements run through mysql.connector's ``cursor(prepared=True)``, up to MySQL's 65,535 placeholders.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from decimal import Decimal
from typing import Any

import mysql.connector
import pytest

from tests.integration.sharding_fixtures import ORACLE_DB, ShardedEnv, order_node

pytestmark = pytest.mark.integration

ROWS = 6000
LIST = 50000
PLACEHOLDERS = 65535  # the most a prepared statement may have


@pytest.fixture(scope="module")
def orders(sharded_env: ShardedEnv) -> Iterator[list[tuple[int, int, str]]]:
    env = sharded_env
    rng = random.Random(35)
    rows = [(order_id, rng.randint(1, 400), f"s{rng.randint(1, 60)}") for order_id in range(1, ROWS + 1)]
    env.clean("t_order")
    env.backend("ds_0", "DELETE FROM t_order", ORACLE_DB)
    by_node: dict[tuple[str, str], list[tuple[int, int, str]]] = {}
    for row in rows:
        by_node.setdefault(order_node(row[1], row[0]), []).append(row)
    for (ds, table), node_rows in by_node.items():
        env.backend(ds, f"INSERT INTO {table} (order_id, user_id, status) VALUES {_values(node_rows)}")
    env.backend("ds_0", f"INSERT INTO t_order (order_id, user_id, status) VALUES {_values(rows)}", ORACLE_DB)
    yield rows
    env.clean("t_order")
    env.backend("ds_0", "DELETE FROM t_order", ORACLE_DB)


def _values(rows: Sequence[tuple[int, int, str]]) -> str:
    return ", ".join(f"({o}, {u}, '{s}')" for o, u, s in rows)


def _ids(rng: random.Random, n: int, top: int) -> list[int]:
    """n ids, about half of them existing (1..top), the rest not, with repeats, in no order."""
    return [rng.randint(1, top) if rng.random() < 0.5 else rng.randint(top + 1, 10 * top) for _ in range(n)]


def _normal(rows: Sequence[Sequence[Any]]) -> list[tuple[Any, ...]]:
    return [tuple(int(v) if isinstance(v, Decimal) else v for v in row) for row in rows]


def _both(env: ShardedEnv, sql: str, params: Sequence[Any] | None = None) -> tuple[list[Any], list[Any]]:
    """The statement's rows through the proxy and on the oracle database (prepared when `params` are given)."""
    answers = []
    s0 = env.servers[0]
    for host, port, password, database in ((env.proxy.host, env.proxy.port, "root", "sharding_db"),
                                           (s0.host, s0.port, s0.password, ORACLE_DB)):
        conn = mysql.connector.connect(host=host, port=port, user="root", password=password, database=database,
                                       use_pure=True, ssl_disabled=True, autocommit=True)
        try:
            cur = conn.cursor(prepared=params is not None)
            cur.execute(sql, tuple(params) if params is not None else ())
            answers.append(_normal(cur.fetchall()))
            cur.close()
        finally:
            conn.close()
    return answers[0], answers[1]


SELECTS = [
    "SELECT COUNT(*), SUM(order_id), MIN(user_id), MAX(status) FROM t_order WHERE {c} IN ({list})",
    "SELECT order_id, user_id, status FROM t_order WHERE {c} IN ({list}) AND status <> 'zz' ORDER BY order_id",
]


@pytest.mark.parametrize("column", ["order_id", "user_id", "status"])
def test_literal_lists(sharded_env: ShardedEnv, orders: list[tuple[int, int, str]], column: str) -> None:
    rng = random.Random(column)
    top = {"order_id": ROWS, "user_id": 400, "status": 60}[column]
    ids = _ids(rng, LIST, top)
    listed = ", ".join(f"'s{i}'" for i in ids) if column == "status" else ", ".join(map(str, ids))
    for template in SELECTS:
        got, expected = _both(sharded_env, template.format(c=column, list=listed))
        assert got == expected
        assert expected and expected[0][0]  # the lists do find rows


@pytest.mark.parametrize(("column", "n"), [("order_id", PLACEHOLDERS), ("user_id", LIST), ("status", LIST)])
def test_prepared_lists(sharded_env: ShardedEnv, orders: list[tuple[int, int, str]], column: str, n: int) -> None:
    rng = random.Random(f"prepared {column}")
    top = {"order_id": ROWS, "user_id": 400, "status": 60}[column]
    ids: list[Any] = _ids(rng, n, top)
    if column == "status":
        ids = [f"s{i}" for i in ids]
    template = SELECTS[0] if column != "order_id" else SELECTS[1]
    got, expected = _both(sharded_env, template.format(c=column, list=", ".join("?" * n)), ids)
    assert got == expected
    assert expected and expected[0][0]


def test_an_update_of_a_long_list_changes_exactly_its_rows(sharded_env: ShardedEnv,
                                                            orders: list[tuple[int, int, str]]) -> None:
    env = sharded_env
    ids = _ids(random.Random("update"), LIST, ROWS)
    sql = f"UPDATE t_order SET status = 'moved' WHERE order_id IN ({', '.join(map(str, ids))})"
    count, _, _ = env.run(sql)
    env.backend("ds_0", sql, ORACLE_DB)
    assert count == len({i for i in ids if i <= ROWS})
    every = "SELECT order_id, user_id, status FROM t_order ORDER BY order_id"
    assert _normal(env.query(every)[1]) == _normal(env.oracle(every)[1])
    # and each row stayed where the rules put it
    for (ds, table), rows in env.actual_rows("t_order", columns="order_id, user_id").items():
        assert all(order_node(int(u), int(o)) == (ds, table) for o, u in rows)
