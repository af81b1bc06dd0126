"""executor._logic_columns (cached per node column object) answers as `_logic_column` + `encode` would, for
every name mapping and schema, however often and in whatever order the same column objects come back; a column's
schema is shown as the logical database only when it is one of the data sources' physical databases."""

from __future__ import annotations

import pytest

from protocol.packets import ColumnDefinition41
from proxy.backends.runtime import ColumnSchema
from proxy.execution.executor import _logic_column, _logic_columns

SHARDING_DB = ColumnSchema("sharding_db", frozenset({"ds_0", "ds_1"}))
OTHER_DB = ColumnSchema("other_db", frozenset({"ds_0", "ds_1"}))

COLS = [
    ColumnDefinition41("order_id", schema="ds_0", table="t_order_0", org_table="t_order_0", org_name="order_id"),
    ColumnDefinition41("status", schema="ds_1", table="T_ORDER_1", org_table="t_order_1", org_name="status"),
    ColumnDefinition41("total", schema="", table="", org_table=""),  # an expression: no table
    ColumnDefinition41("a", schema="ds_0", table="o", org_table="t_order_0"),  # an alias
    ColumnDefinition41("Field", schema="information_schema", table="COLUMNS", org_table="COLUMNS",
                       org_name="COLUMN_NAME"),  # SHOW COLUMNS
    ColumnDefinition41("User", schema="mysql", table="u", org_table="user", org_name="User"),
]
# (renames, schema)
MAPPINGS: list[tuple[dict[str, str], ColumnSchema]] = [
    ({"t_order_0": "t_order", "t_order_1": "t_order"}, SHARDING_DB),
    ({"t_order_0": "t_order"}, SHARDING_DB),
    ({}, SHARDING_DB),
    ({"t_order_0": "t_order", "t_order_1": "t_order"}, OTHER_DB),
    ({"t_order_0": "orders", "t_order_1": "orders"}, SHARDING_DB),
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
        logic, payloads = _logic_columns([col], renames, SHARDING_DB)
        assert logic == [_logic_column(col, renames, SHARDING_DB)] and payloads == [logic[0].encode()]


# (node column's schema, what the client sees): a data source's physical database is the logical one, nothing else
@pytest.mark.parametrize(("schema", "shown"), [
    ("ds_0", "sharding_db"),
    ("ds_1", "sharding_db"),
    ("", ""),  # an expression
    ("information_schema", "information_schema"),  # SHOW COLUMNS / SHOW INDEX / SHOW TABLE STATUS
    ("mysql", "mysql"),
    ("ds_2", "ds_2"),  # a database of no data source
])
def test_schema_shown(schema: str, shown: str) -> None:
    col = ColumnDefinition41("c", schema=schema, table="t", org_table="t", org_name="c")
    assert _logic_column(col, {}, SHARDING_DB).schema == shown
    assert _logic_columns([col], {}, SHARDING_DB)[0][0].schema == shown
