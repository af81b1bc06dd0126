# ruff: noqa: E501  (table-driven: one case per line)
"""Issue 33, section 2: correlated subqueries over binding tables, compared with one unsharded database.

t_order and t_order_item (shipped rules: data source by user_id % 2, table by order_id % 2, bound) hold items
whose user_id differs from their order's, so they live on another data node than their order. A correlated
subquery pushed down node by node sees only its own node's rows: that is exact only when the correlation
equates every sharding column of the two tables (order_id AND user_id), or the inner table's rows are on the
outer row's node for another reason (a broadcast table). Every other form must be answered some other way
(federation, for a SELECT) or refused (1235), never answered wrong.

Each case runs through the proxy and on the oracle database (``sht_oracle_db``) holding the same rows, text
protocol and prepared (``cursor(prepared=True)``).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.differential_session import MODES, pair, seed
from tests.integration.sharding_fixtures import ORACLE_DB, ShardedEnv

pytestmark = pytest.mark.integration

ORDER_COLS = "order_id, user_id, status"
ORDERS = [(1, 1, "a"), (2, 1, "b"), (3, 2, "a"), (4, 2, "c"), (5, 3, "a"), (6, 4, None), (7, 3, "b"), (8, 2, "x")]
ITEM_COLS = "order_item_id, order_id, user_id, status"
ITEMS = [
    (101, 1, 1, "x"),
    (102, 1, 2, "y"),  # order 1 is user 1's (ds_1): this item is on ds_0
    (103, 2, 1, "x"),
    (104, 3, 2, "x"),
    (105, 3, 1, "z"),  # order 3 is user 2's (ds_0): this item is on ds_1
    (106, 4, 2, "y"),
    (107, 9, 3, "x"),  # no order 9
    (108, 5, 4, "a"),  # order 5 is user 3's (ds_1): this item is on ds_0
    (109, 7, 3, "b"),
]
ADDRESS_COLS = "address_id, address_name"
ADDRESSES = [(1, "a"), (2, "x"), (3, "c"), (5, "a")]
ADDRESS_DDL = (
    "CREATE TABLE IF NOT EXISTS t_address (address_id BIGINT NOT NULL, address_name VARCHAR(100) NOT NULL, "
    "PRIMARY KEY (address_id))"
)


@pytest.fixture(scope="module")
def env(sharded_env: ShardedEnv) -> Any:
    sharded_env.servers[0].execute(ADDRESS_DDL, ORACLE_DB)
    seed(sharded_env, "t_order", ORDER_COLS, ORDERS)
    seed(sharded_env, "t_order_item", ITEM_COLS, ITEMS)
    seed(sharded_env, "t_address", ADDRESS_COLS, ADDRESSES)
    yield sharded_env
    sharded_env.servers[0].execute("DROP TABLE IF EXISTS t_address", ORACLE_DB)


def test_the_rows_are_where_the_case_needs_them(env: ShardedEnv) -> None:
    """The point of the data: items 102, 105 and 108 are on another data source than their orders."""
    assert env.where_is("t_order_item", "order_item_id", 102) == [("ds_0", "t_order_item_1")]
    assert env.where_is("t_order", "order_id", 1) == [("ds_1", "t_order_1")]
    assert env.where_is("t_order_item", "order_item_id", 105) == [("ds_1", "t_order_item_1")]
    assert env.where_is("t_order", "order_id", 3) == [("ds_0", "t_order_1")]


ISSUE = "SELECT o.order_id, (SELECT COUNT(*) FROM t_order_item i WHERE i.order_id = o.order_id) AS n FROM t_order o ORDER BY o.order_id"


@pytest.mark.parametrize("mode", MODES)
def test_the_issue_statement(env: ShardedEnv, mode: str) -> None:
    with pair(env, mode) as p:
        got = p.same(ISSUE)
    assert got.rows[0] == (("int", 1), ("int", 2))  # order 1: both its items, one of them on the other node


# --- every place a correlated subquery can stand, compared with the oracle ------------------------------------

CASES: list[tuple[str, tuple[Any, ...]]] = [
    # select list
    (ISSUE, ()),
    ("SELECT o.order_id, (SELECT COUNT(*) FROM t_order_item i WHERE i.order_id = o.order_id AND i.user_id = o.user_id) AS n FROM t_order o ORDER BY o.order_id", ()),
    ("SELECT o.order_id, (SELECT MAX(i.order_item_id) FROM t_order_item i WHERE i.order_id = o.order_id) AS m FROM t_order o ORDER BY o.order_id", ()),
    ("SELECT o.order_id, (SELECT GROUP_CONCAT(i.order_item_id ORDER BY i.order_item_id) FROM t_order_item i WHERE i.order_id = o.order_id) AS m FROM t_order o ORDER BY o.order_id", ()),
    # WHERE comparisons with a scalar subquery
    ("SELECT o.order_id FROM t_order o WHERE (SELECT COUNT(*) FROM t_order_item i WHERE i.order_id = o.order_id) > 1 ORDER BY o.order_id", ()),
    ("SELECT o.order_id FROM t_order o WHERE (SELECT COUNT(*) FROM t_order_item i WHERE i.order_id = o.order_id) = %s ORDER BY o.order_id", (0,)),
    ("SELECT o.order_id FROM t_order o WHERE o.status <> (SELECT MIN(i.status) FROM t_order_item i WHERE i.order_id = o.order_id) ORDER BY o.order_id", ()),
    ("SELECT o.order_id FROM t_order o WHERE o.user_id < (SELECT MAX(i.user_id) FROM t_order_item i WHERE i.order_id = o.order_id) ORDER BY o.order_id", ()),
    # IN / NOT IN, EXISTS / NOT EXISTS, ANY / ALL
    ("SELECT o.order_id FROM t_order o WHERE o.status IN (SELECT i.status FROM t_order_item i WHERE i.order_id = o.order_id) ORDER BY o.order_id", ()),
    ("SELECT o.order_id FROM t_order o WHERE %s NOT IN (SELECT i.status FROM t_order_item i WHERE i.order_id = o.order_id) ORDER BY o.order_id", ("y",)),
    ("SELECT o.order_id FROM t_order o WHERE EXISTS (SELECT 1 FROM t_order_item i WHERE i.order_id = o.order_id) ORDER BY o.order_id", ()),
    ("SELECT o.order_id FROM t_order o WHERE NOT EXISTS (SELECT 1 FROM t_order_item i WHERE i.order_id = o.order_id) ORDER BY o.order_id", ()),
    ("SELECT o.order_id FROM t_order o WHERE NOT EXISTS (SELECT 1 FROM t_order_item i WHERE i.order_id = o.order_id AND i.user_id = o.user_id) ORDER BY o.order_id", ()),
    ("SELECT o.order_id FROM t_order o WHERE o.user_id >= ALL (SELECT i.user_id FROM t_order_item i WHERE i.order_id = o.order_id) ORDER BY o.order_id", ()),
    ("SELECT o.order_id FROM t_order o WHERE o.user_id <> ANY (SELECT i.user_id FROM t_order_item i WHERE i.order_id = o.order_id) ORDER BY o.order_id", ()),
    # HAVING, ORDER BY, inside a derived table, nested twice
    ("SELECT o.user_id, COUNT(*) AS c FROM t_order o GROUP BY o.user_id HAVING COUNT(*) <= (SELECT COUNT(*) FROM t_order_item i WHERE i.user_id = o.user_id) ORDER BY o.user_id", ()),
    ("SELECT o.order_id FROM t_order o ORDER BY (SELECT COUNT(*) FROM t_order_item i WHERE i.order_id = o.order_id) DESC, o.order_id", ()),
    ("SELECT x.order_id, x.n FROM (SELECT o.order_id, (SELECT COUNT(*) FROM t_order_item i WHERE i.order_id = o.order_id) AS n FROM t_order o) x ORDER BY x.order_id", ()),
    ("SELECT o.order_id FROM t_order o WHERE EXISTS (SELECT 1 FROM t_order_item i WHERE i.order_id = o.order_id AND i.user_id = o.user_id AND EXISTS (SELECT 1 FROM t_order x WHERE x.order_id = i.order_id)) ORDER BY o.order_id", ()),
    # a join's ON, inside CASE, a UNION branch, unqualified inner columns, a derived table's columns
    ("SELECT o.order_id, a.address_name FROM t_order o JOIN t_address a ON a.address_id = (SELECT MIN(i.user_id) FROM t_order_item i WHERE i.order_id = o.order_id) ORDER BY o.order_id", ()),
    ("SELECT o.order_id, CASE WHEN EXISTS (SELECT 1 FROM t_order_item i WHERE i.order_id = o.order_id AND i.user_id <> %s) THEN 'y' ELSE 'n' END AS e FROM t_order o ORDER BY o.order_id", (0,)),
    ("SELECT o.order_id FROM t_order o WHERE o.user_id = 1 UNION ALL SELECT o.order_id FROM t_order o WHERE EXISTS (SELECT 1 FROM t_order_item i WHERE i.order_id = o.order_id) ORDER BY 1", ()),
    ("SELECT o.order_id, (SELECT COUNT(*) FROM t_order_item i WHERE order_id = o.order_id) AS n FROM t_order o ORDER BY o.order_id", ()),
    ("SELECT d.order_id, (SELECT COUNT(*) FROM t_order_item i WHERE i.order_id = d.order_id AND i.user_id = d.user_id) AS n FROM (SELECT order_id, user_id FROM t_order) d ORDER BY d.order_id", ()),
    # the same table, correlated on one sharding column
    ("SELECT o.order_id FROM t_order o WHERE o.order_id = (SELECT MAX(x.order_id) FROM t_order x WHERE x.user_id = o.user_id) ORDER BY o.order_id", ()),
    # a single-node outer route: the inner rows of order 1 are on both data sources
    ("SELECT o.order_id, (SELECT COUNT(*) FROM t_order_item i WHERE i.order_id = o.order_id) AS n FROM t_order o WHERE o.user_id = 1 AND o.order_id = 1", ()),
    ("SELECT o.order_id, (SELECT COUNT(*) FROM t_order_item i WHERE i.order_id = o.order_id) AS n FROM t_order o WHERE o.user_id = %s AND o.order_id = %s", (1, 1)),
    ("SELECT o.order_id FROM t_order o WHERE o.user_id = %s AND NOT EXISTS (SELECT 1 FROM t_order_item i WHERE i.order_id = o.order_id AND i.user_id <> o.user_id) ORDER BY o.order_id", (2,)),
    # the inner subquery routed to the outer row's node by its own conditions
    ("SELECT o.order_id, (SELECT COUNT(*) FROM t_order_item i WHERE i.order_id = 1 AND i.user_id = 1) AS n FROM t_order o WHERE o.user_id = 1 AND o.order_id = 1", ()),
    ("SELECT o.order_id, (SELECT COUNT(*) FROM t_order_item i WHERE i.order_id = %s AND i.user_id = %s) AS n FROM t_order o WHERE o.user_id = %s AND o.order_id = %s", (1, 2, 1, 1)),
    # broadcast table: every data source has all of it
    ("SELECT o.order_id, (SELECT a.address_name FROM t_address a WHERE a.address_id = o.user_id) AS name FROM t_order o ORDER BY o.order_id", ()),
    ("SELECT o.order_id FROM t_order o WHERE EXISTS (SELECT 1 FROM t_address a WHERE a.address_name = o.status) ORDER BY o.order_id", ()),
    # uncorrelated
    ("SELECT COUNT(*) FROM t_order WHERE order_id IN (SELECT order_id FROM t_order_item)", ()),
    ("SELECT order_id, (SELECT COUNT(*) FROM t_order_item) AS n FROM t_order ORDER BY order_id", ()),
    ("SELECT order_id FROM t_order WHERE user_id IN (SELECT address_id FROM t_address WHERE address_name = %s) ORDER BY order_id", ("a",)),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("sql", "params"), CASES, ids=[f"case{i}" for i in range(len(CASES))])
def test_same_as_one_database(env: ShardedEnv, mode: str, sql: str, params: tuple[Any, ...]) -> None:
    with pair(env, mode) as p:
        got = p.same(sql, params)
    assert got.kind == "rows"


PUSHED_DOWN = [
    "SELECT o.order_id, (SELECT COUNT(*) FROM t_order_item i WHERE i.order_id = o.order_id AND i.user_id = o.user_id) AS n FROM t_order o ORDER BY o.order_id",
    "SELECT o.order_id FROM t_order o WHERE NOT EXISTS (SELECT 1 FROM t_order_item i WHERE i.order_id = o.order_id AND i.user_id = o.user_id) ORDER BY o.order_id",
    "SELECT o.order_id, (SELECT a.address_name FROM t_address a WHERE a.address_id = o.user_id) AS name FROM t_order o ORDER BY o.order_id",
]
FEDERATED = [
    ISSUE,
    "SELECT o.order_id FROM t_order o WHERE EXISTS (SELECT 1 FROM t_order_item i WHERE i.order_id = o.order_id) ORDER BY o.order_id",
    "SELECT o.order_id, (SELECT COUNT(*) FROM t_order_item i WHERE i.order_id = o.order_id) AS n FROM t_order o WHERE o.user_id = 1 AND o.order_id = 1",
]


@pytest.mark.parametrize("sql", PUSHED_DOWN)
def test_a_complete_correlation_is_still_pushed_down(env: ShardedEnv, sql: str) -> None:
    rows = env.preview(sql)
    assert len(rows) == 4 and not any("federation" in actual for _ds, actual in rows), rows


@pytest.mark.parametrize("sql", FEDERATED)
def test_an_incomplete_correlation_is_federated(env: ShardedEnv, sql: str) -> None:
    assert any("federation" in actual for _ds, actual in env.preview(sql))


# --- writes: pushed down when the correlation is complete, else refused -----------------------------------------


@pytest.fixture
def fresh(env: ShardedEnv) -> ShardedEnv:
    seed(env, "t_order", ORDER_COLS, ORDERS)
    seed(env, "t_order_item", ITEM_COLS, ITEMS)
    return env


WRITES = [
    ("DELETE FROM t_order WHERE NOT EXISTS (SELECT 1 FROM t_order_item i WHERE i.order_id = t_order.order_id AND i.user_id = t_order.user_id)", ()),
    ("UPDATE t_order o SET o.status = 'has' WHERE EXISTS (SELECT 1 FROM t_order_item i WHERE i.order_id = o.order_id AND i.user_id = o.user_id AND i.status = %s)", ("x",)),
    ("UPDATE t_order o SET o.status = (SELECT MAX(i.status) FROM t_order_item i WHERE i.order_id = o.order_id AND i.user_id = o.user_id)", ()),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("sql", "params"), WRITES, ids=[f"write{i}" for i in range(len(WRITES))])
def test_a_complete_correlation_writes_as_one_database(fresh: ShardedEnv, mode: str, sql: str, params: tuple[Any, ...]) -> None:
    with pair(fresh, mode) as p:
        p.same(sql, params)
        p.same("SELECT order_id, user_id, status FROM t_order ORDER BY order_id")


REFUSED_WRITES = [
    "DELETE FROM t_order WHERE NOT EXISTS (SELECT 1 FROM t_order_item i WHERE i.order_id = t_order.order_id)",
    "UPDATE t_order o SET o.status = 'has' WHERE EXISTS (SELECT 1 FROM t_order_item i WHERE i.order_id = o.order_id)",
    "UPDATE t_order o SET o.status = (SELECT MAX(i.status) FROM t_order_item i WHERE i.order_id = o.order_id) WHERE o.user_id = 1 AND o.order_id = 1",
]


@pytest.mark.parametrize("sql", REFUSED_WRITES)
def test_an_incomplete_correlation_write_is_refused(fresh: ShardedEnv, sql: str) -> None:
    refusal = fresh.refusal(sql)
    assert (refusal.errno, refusal.sqlstate) == (1235, "42000")
    assert refusal.message.startswith("correlated subquery on sharded table t_order_item (i) cannot run node by node")
    assert "but not i.user_id = " in refusal.message and "add AND i.user_id = " in refusal.message
    with pair(fresh, "text") as p:
        p.same("SELECT order_id, user_id, status FROM t_order ORDER BY order_id")  # nothing written


# --- generated: every position x correlation x inner table x outer route --------------------------------------

# where the subquery stands; {q}: the subquery's FROM ... WHERE ..., {v}: a value column of the inner table
POSITIONS = {
    "select": "SELECT o.order_id, (SELECT COUNT(*) FROM {q}) AS n FROM t_order o{w} ORDER BY o.order_id",
    "scalar": "SELECT o.order_id FROM t_order o WHERE {w_and}o.status = (SELECT MIN({v}) FROM {q}) ORDER BY o.order_id",
    "count": "SELECT o.order_id FROM t_order o WHERE {w_and}(SELECT COUNT(*) FROM {q}) > 0 ORDER BY o.order_id",
    "in": "SELECT o.order_id FROM t_order o WHERE {w_and}o.status IN (SELECT {v} FROM {q}) ORDER BY o.order_id",
    "not_in": "SELECT o.order_id FROM t_order o WHERE {w_and}o.status NOT IN (SELECT {v} FROM {q}) ORDER BY o.order_id",
    "exists": "SELECT o.order_id FROM t_order o WHERE {w_and}EXISTS (SELECT 1 FROM {q}) ORDER BY o.order_id",
    "not_exists": "SELECT o.order_id FROM t_order o WHERE {w_and}NOT EXISTS (SELECT 1 FROM {q}) ORDER BY o.order_id",
    "order_by": "SELECT o.order_id FROM t_order o{w} ORDER BY (SELECT COUNT(*) FROM {q}) DESC, o.order_id",
    "derived": "SELECT d.order_id, d.n FROM (SELECT o.order_id, (SELECT COUNT(*) FROM {q}) AS n FROM t_order o{w}) d ORDER BY d.order_id",
}
# inner table -> (its reference, value column, correlations)
INNER = {
    "t_order_item": ("t_order_item i", "i.status", {
        "order_id": "i.order_id = o.order_id",
        "user_id": "i.user_id = o.user_id",
        "both": "i.order_id = o.order_id AND i.user_id = o.user_id",
        "both_reversed": "o.user_id = i.user_id AND i.status <> 'q' AND o.order_id = i.order_id",
        "status": "i.status = o.status",
        "none": "i.status <> 'q'",
    }),
    "t_order": ("t_order i", "i.status", {
        "order_id": "i.order_id = o.order_id",
        "user_id": "i.user_id = o.user_id",
        "both": "i.order_id = o.order_id AND i.user_id = o.user_id",
        "status": "i.status = o.status AND i.order_id <> o.order_id",
    }),
    "t_address": ("t_address i", "i.address_name", {
        "user_id": "i.address_id = o.user_id",
        "status": "i.address_name = o.status",
        "none": "i.address_id > 1",
    }),
}
# the outer route: everywhere, one data source, one data node, a parameter
OUTER: dict[str, tuple[str, tuple[Any, ...]]] = {
    "all": ("", ()),
    "ds": ("o.user_id = 1", ()),
    "node": ("o.user_id = 2 AND o.order_id = 3", ()),
    "param": ("o.user_id = %s", (3,)),
}


def _generated() -> list[Any]:
    out = []
    for position, template in POSITIONS.items():
        for table, (ref, value, correlations) in INNER.items():
            for corr, condition in correlations.items():
                for route, (where, params) in OUTER.items():
                    sql = template.format(
                        q=f"{ref} WHERE {condition}", v=value, w=f" WHERE {where}" if where else "",
                        w_and=f"{where} AND " if where else "",
                    )
                    out.append(pytest.param(sql, params, id=f"{position}-{table}-{corr}-{route}"))
    return out


GENERATED = _generated()


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("sql", "params"), GENERATED)
def test_generated_same_as_one_database(env: ShardedEnv, mode: str, sql: str, params: tuple[Any, ...]) -> None:
    with pair(env, mode) as p:
        got = p.same(sql, params)
    assert got.kind == "rows"
