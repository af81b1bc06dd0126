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
