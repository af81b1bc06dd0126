# ruff: noqa: E501  (table-driven: one case per line)
"""SHARDINGSPHERE_HINT comments and session hints."""

from __future__ import annotations

import pytest

from routing.errors import RoutingError
from routing.hints import merge_hints, parse_comment_hints
from routing.kernel import ShardingKernel
from routing.plan import SessionHints


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        (
            "/* SHARDINGSPHERE_HINT: t_order.SHARDING_DATABASE_VALUE=1, t_order.SHARDING_TABLE_VALUE=2 */ SELECT 1",
            SessionHints({"t_order": (1,)}, {"t_order": (2,)}),
        ),
        ("/* SHARDINGSPHERE_HINT: SHARDING_DATABASE_VALUE=1 */ SELECT 1", SessionHints({"": (1,)})),
        ("SELECT 1 /* SHARDINGSPHERE_HINT: DATA_SOURCE_NAME=ds_1 */", SessionHints(data_source="ds_1")),
        ("/* SHARDINGSPHERE_HINT: WRITE_ROUTE_ONLY=true */ SELECT 1", SessionHints(write_route_only=True)),
        ("-- SHARDINGSPHERE_HINT: DATA_SOURCE_NAME=ds_1\nSELECT 1", SessionHints()),
        ("SELECT '/* SHARDINGSPHERE_HINT: DATA_SOURCE_NAME=ds_1 */'", SessionHints()),
    ],
)
def test_parse_comment_hints(sql: str, expected: SessionHints) -> None:
    assert parse_comment_hints(sql) == expected


def test_comment_hints_merge_over_session() -> None:
    session = SessionHints({"t_order": (0,), "x": (1,)}, data_source="ds_0")
    merged = merge_hints(session, SessionHints({"t_order": (1,)}, data_source="ds_1"))
    assert merged.database_values == {"t_order": (1,), "x": (1,)}
    assert merged.data_source == "ds_1"


@pytest.mark.parametrize(
    ("sql", "hints", "expected"),
    [
        (
            "/* SHARDINGSPHERE_HINT: t_hint.SHARDING_DATABASE_VALUE=1, t_hint.SHARDING_TABLE_VALUE=0 */ SELECT * FROM t_hint",
            None,
            [
                (
                    "ds_1",
                    "/* SHARDINGSPHERE_HINT: t_hint.SHARDING_DATABASE_VALUE=1, t_hint.SHARDING_TABLE_VALUE=0 */ SELECT * FROM t_hint_0",
                )
            ],
        ),
        ("SELECT * FROM t_hint", SessionHints({"": (0,)}, {"t_hint": (1,)}), [("ds_0", "SELECT * FROM t_hint_1")]),
        (
            "SELECT * FROM t_hint",
            SessionHints({"t_hint": (0,)}),
            [("ds_0", "SELECT * FROM t_hint_0"), ("ds_0", "SELECT * FROM t_hint_1")],
        ),
        (
            "/* SHARDINGSPHERE_HINT: DATA_SOURCE_NAME=ds_1 */ SELECT * FROM t_order garbage (",
            None,
            [("ds_1", "/* SHARDINGSPHERE_HINT: DATA_SOURCE_NAME=ds_1 */ SELECT * FROM t_order garbage (")],
        ),
        ("SELECT * FROM t_order", SessionHints(data_source="ds_0"), [("ds_0", "SELECT * FROM t_order")]),
        (
            "/* SHARDINGSPHERE_HINT: SKIP_SQL_REWRITE=true */ SELECT * FROM t_order WHERE user_id = 1 AND order_id = 1",
            None,
            [
                (
                    "ds_1",
                    "/* SHARDINGSPHERE_HINT: SKIP_SQL_REWRITE=true */ SELECT * FROM t_order WHERE user_id = 1 AND order_id = 1",
                )
            ],
        ),
    ],
)
def test_hinted_routes(
    kernel: ShardingKernel, sql: str, hints: SessionHints | None, expected: list[tuple[str, str]]
) -> None:
    assert [(u.data_source, u.sql) for u in kernel.route(sql, None, hints).execution_units] == expected


def test_write_route_only_hint_sets_write(kernel: ShardingKernel) -> None:
    assert kernel.route("/* SHARDINGSPHERE_HINT: WRITE_ROUTE_ONLY=true */ SELECT * FROM t_user").write
    assert kernel.route("SELECT * FROM t_user", None, SessionHints(write_route_only=True)).write
    assert not kernel.route("SELECT * FROM t_user").write


def test_unknown_hinted_data_source(kernel: ShardingKernel) -> None:
    with pytest.raises(RoutingError, match="ds_9"):
        kernel.route("SELECT 1", None, SessionHints(data_source="ds_9"))
