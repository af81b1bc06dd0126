"""executor._logic_columns (cached per node column object) answers as `_logic_column` + `encode` would, for
every name mapping and schema, however often and in whatever order the same column objects come back."""

from __future__ import annotations

import pytest

from protocol.packets import ColumnDefinition41
from proxy.execution.executor import _logic_column, _logic_columns

COLS = [
    ColumnDefinition41("order_id", schema="ds_0", table="t_order_0", org_table="t_order_0", org_name="order_id"),
    ColumnDefinition41("status", schema="ds_1", table="T_ORDER_1", org_table="t_order_1", org_name="status"),
    ColumnDefinition41("total", schema="", table="", org_table=""),  # an expression: no table
    ColumnDefinition41("a", schema="ds_0", table="o", org_table="t_order_0"),  # an alias
]
# (renames, schema)
MAPPINGS: list[tuple[dict[str, str], str]] = [
    ({"t_order_0": "t_order", "t_order_1": "t_order"}, "sharding_db"),
    ({"t_order_0": "t_order"}, "sharding_db"),
    ({}, "sharding_db"),
    ({"t_order_0": "t_order", "t_order_1": "t_order"}, "other_db"),
    ({"t_order_0": "orders", "t_order_1": "orders"}, "sharding_db"),
]


@pytest.mark.parametrize("rounds", [1, 3])
def test_same_as_uncached(rounds: int) -> None:
    for _ in range(rounds):
        for renames, schema in MAPPINGS + MAPPINGS[::-1]:
            logic, payloads = _logic_columns(COLS, renames, schema)
            expected = [_logic_column(c, renames, schema) for c in COLS]
            assert logic == expected
            assert payloads == [c.encode() for c in expected]


def test_equal_but_distinct_objects() -> None:
    twin = ColumnDefinition41("order_id", schema="ds_0", table="t_order_0", org_table="t_order_0",
                              org_name="order_id")
    renames = {"t_order_0": "t_order"}
    for col in (COLS[0], twin, COLS[0]):
        logic, payloads = _logic_columns([col], renames, "db")
        assert logic == [_logic_column(col, renames, "db")] and payloads == [logic[0].encode()]
