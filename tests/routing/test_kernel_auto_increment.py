# ruff: noqa: E501  (table-driven: one case per line)
"""An INSERT giving NULL or 0 to an AUTO_INCREMENT sharding column: MariaDB stores a generated id, not the value, so
the row must not be routed by it. With a key generator for the column the proxy generates the id (as when the column
is left out) and routes by it; without one it refuses with 1235. Under NO_AUTO_VALUE_ON_ZERO a 0 is a value."""

from __future__ import annotations

from typing import Any

import pytest

from routing.errors import RoutingError
from routing.kernel import ShardingKernel
from routing.model import ColumnInfo
from routing.parse import NO_AUTO_VALUE_ON_ZERO
from tests.routing.conftest import METADATA, build_rules


class AutoMetadata:
    """The example's metadata, t_order.order_id an AUTO_INCREMENT column."""

    def __getattr__(self, name: str) -> Any:
        return getattr(METADATA, name)

    def column_info(self, table: str, column: str) -> ColumnInfo | None:
        if column.lower() not in (c.lower() for c in METADATA.columns(table) or ()):
            return None
        return ColumnInfo(
            column.lower(), "bigint", auto_increment=(table.lower(), column.lower()) == ("t_order", "order_id")
        )


def _kernel(keygen: bool) -> ShardingKernel:
    return ShardingKernel(build_rules(with_keygen=keygen), AutoMetadata())


def _units(keygen: bool, sql: str, params: list[Any] | None, mode: int) -> list[tuple[Any, ...]]:
    routed = _kernel(keygen).route(sql, params, mode=mode)
    return sorted((u.data_source, u.sql, u.params) for u in routed.execution_units)


Z = NO_AUTO_VALUE_ON_ZERO
# fmt: off
GENERATED = [  # (sql, params, sql_mode bits, units): with the key generator (it counts from 1000)
    ("INSERT INTO t_order (order_id, user_id, status) VALUES (NULL, 1, 'a')", None, 0, [("ds_1", "INSERT INTO t_order_0 (order_id, user_id, status) VALUES (1000, 1, 'a')", None)]),
    ("INSERT INTO t_order (order_id, user_id, status) VALUES (0, 1, 'a')", None, 0, [("ds_1", "INSERT INTO t_order_0 (order_id, user_id, status) VALUES (1000, 1, 'a')", None)]),
    ("INSERT INTO t_order (order_id, user_id, status) VALUES ('0', 1, 'a')", None, 0, [("ds_1", "INSERT INTO t_order_0 (order_id, user_id, status) VALUES (1000, 1, 'a')", None)]),
    ("INSERT INTO t_order (user_id, order_id, status) VALUES (1, (NULL), 'a')", None, 0, [("ds_1", "INSERT INTO t_order_0 (user_id, order_id, status) VALUES (1, 1000, 'a')", None)]),
    ("INSERT INTO t_order (order_id, user_id, status) VALUES (NULL, 1, 'a'), (7, 1, 'b'), (0, 2, 'c')", None, 0, [("ds_0", "INSERT INTO t_order_1 (order_id, user_id, status) VALUES (1001, 2, 'c')", None), ("ds_1", "INSERT INTO t_order_0 (order_id, user_id, status) VALUES (1000, 1, 'a')", None), ("ds_1", "INSERT INTO t_order_1 (order_id, user_id, status) VALUES (7, 1, 'b')", None)]),
    ("INSERT INTO t_order (order_id, user_id, status) VALUES (?, ?, ?)", [None, 1, "a"], 0, [("ds_1", "INSERT INTO t_order_0 (order_id, user_id, status) VALUES (1000, ?, ?)", (1, "a"))]),
    ("INSERT INTO t_order (order_id, user_id, status) VALUES (?, ?, ?), (?, ?, ?)", [5, 1, "a", 0, 1, "b"], 0, [("ds_1", "INSERT INTO t_order_0 (order_id, user_id, status) VALUES (1000, ?, ?)", (1, "b")), ("ds_1", "INSERT INTO t_order_1 (order_id, user_id, status) VALUES (?, ?, ?)", (5, 1, "a"))]),
    ("INSERT INTO t_order SET order_id = NULL, user_id = 1, status = 'a'", None, 0, [("ds_1", "INSERT INTO t_order_0 SET order_id = 1000, user_id = 1, status = 'a'", None)]),
    ("INSERT INTO t_order VALUES (0, 1, 'a', 2.5)", None, 0, [("ds_1", "INSERT INTO t_order_0 VALUES (1000, 1, 'a', 2.5)", None)]),
    ("INSERT INTO t_order (order_id, user_id, status) VALUES (0, 1, 'a')", None, Z, [("ds_1", "INSERT INTO t_order_0 (order_id, user_id, status) VALUES (0, 1, 'a')", None)]),
    ("INSERT INTO t_order (order_id, user_id, status) VALUES (?, ?, ?)", [0, 1, "a"], Z, [("ds_1", "INSERT INTO t_order_0 (order_id, user_id, status) VALUES (?, ?, ?)", (0, 1, "a"))]),
    ("INSERT INTO t_order (order_id, user_id, status) VALUES (NULL, 1, 'a')", None, Z, [("ds_1", "INSERT INTO t_order_0 (order_id, user_id, status) VALUES (1000, 1, 'a')", None)]),
    ("INSERT INTO t_order (order_id, user_id, status) VALUES (3, 1, 'a')", None, 0, [("ds_1", "INSERT INTO t_order_1 (order_id, user_id, status) VALUES (3, 1, 'a')", None)]),
]
# fmt: on


@pytest.mark.parametrize(("sql", "params", "mode", "units"), GENERATED)
def test_null_or_zero_takes_the_generated_key(
    sql: str, params: list[Any] | None, mode: int, units: list[tuple[Any, ...]]
) -> None:
    assert _units(True, sql, params, mode) == units


def test_generated_keys_mark_the_rows_they_replace() -> None:
    routed = _kernel(True).route("INSERT INTO t_order (order_id, user_id) VALUES (7, 1), (NULL, 1), (0, 2)")
    assert routed.generated_keys == (None, 1000, 1001)


# fmt: off
REFUSED = [  # (sql, params, sql_mode bits, what the message names): no key generator for the column
    ("INSERT INTO t_order (order_id, user_id, status) VALUES (NULL, 1, 'a')", None, 0, "row 1 gives NULL to order_id"),
    ("INSERT INTO t_order (order_id, user_id, status) VALUES (0, 1, 'a')", None, 0, "row 1 gives 0 to order_id"),
    ("INSERT INTO t_order (order_id, user_id, status) VALUES (-0.0, 1, 'a')", None, 0, "row 1 gives 0 to order_id"),
    ("INSERT INTO t_order (order_id, user_id, status) VALUES (5, 1, 'a'), ('0', 1, 'b')", None, 0, "row 2 gives 0 to order_id"),
    ("INSERT INTO t_order (order_id, user_id, status) VALUES (?, ?, ?)", [None, 1, "a"], 0, "row 1 gives NULL to order_id"),
    ("INSERT INTO t_order (order_id, user_id, status) VALUES (?, ?, ?)", [0, 1, "a"], 0, "row 1 gives 0 to order_id"),
    ("INSERT INTO t_order SET user_id = 1, order_id = 0", None, 0, "row 1 gives 0 to order_id"),
    ("INSERT INTO t_order VALUES (NULL, 1, 'a', 2.5)", None, 0, "row 1 gives NULL to order_id"),
    ("INSERT INTO t_order (order_id, user_id, status) VALUES (NULL, 1, 'a')", None, Z, "row 1 gives NULL to order_id"),
]
# fmt: on


@pytest.mark.parametrize(("sql", "params", "mode", "names"), REFUSED)
def test_null_or_zero_without_a_key_generator_is_refused(
    sql: str, params: list[Any] | None, mode: int, names: str
) -> None:
    with pytest.raises(RoutingError) as info:
        _units(False, sql, params, mode)
    assert info.value.errno == 1235
    message = str(info.value)
    assert (
        names in message and "t_order" in message and "keyGenerateStrategy" in message and "AUTO_INCREMENT" in message
    )


def test_zero_is_a_value_under_no_auto_value_on_zero() -> None:
    units = _units(False, "INSERT INTO t_order (order_id, user_id, status) VALUES (0, 1, 'a'), (3, 2, 'b')", None, Z)
    assert units == [
        ("ds_0", "INSERT INTO t_order_1 (order_id, user_id, status) VALUES (3, 2, 'b')", None),
        ("ds_1", "INSERT INTO t_order_0 (order_id, user_id, status) VALUES (0, 1, 'a')", None),
    ]
