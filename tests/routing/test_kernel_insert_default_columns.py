# ruff: noqa: E501  (table-driven: one case per line)
"""INSERT INTO t VALUES (...) without a column list into a table with a generated key: rows with one value
fewer than the table's columns are for the other columns; the proxy names them and adds the key."""

from __future__ import annotations

from typing import Any

import pytest

from routing.errors import RoutingError
from routing.kernel import ShardingKernel


@pytest.mark.parametrize(("sql", "params", "expected"), [
    ("INSERT INTO t_order VALUES (1, 'a', 2.5), (2, 'b', 3)", None, [("ds_0", "INSERT INTO t_order_1 (`user_id`, `status`, `amount`, `order_id`) VALUES (2, 'b', 3, 1001)", None), ("ds_1", "INSERT INTO t_order_0 (`user_id`, `status`, `amount`, `order_id`) VALUES (1, 'a', 2.5, 1000)", None)]),
    ("INSERT INTO t_order VALUES (?, ?, ?)", [1, "x", 2], [("ds_1", "INSERT INTO t_order_0 (`user_id`, `status`, `amount`, `order_id`) VALUES (?, ?, ?, 1000)", (1, "x", 2))]),
    ("INSERT INTO t_order VALUES (5, 1, 'a', 2.5)", None, [("ds_1", "INSERT INTO t_order_1 VALUES (5, 1, 'a', 2.5)", None)]),  # every column: as written
])
def test_insert_without_column_list_generates_the_key(kernel: ShardingKernel, sql: str, params: list[Any] | None, expected: list[tuple[Any, ...]]) -> None:
    routed = kernel.route(sql, params) if params is not None else kernel.route(sql)
    assert sorted((u.data_source, u.sql, u.params) for u in routed.execution_units) == expected


def test_other_value_counts_are_still_1136(kernel: ShardingKernel) -> None:
    with pytest.raises(RoutingError) as info:
        kernel.route("INSERT INTO t_order VALUES (1, 'a')")
    assert info.value.errno == 1136
