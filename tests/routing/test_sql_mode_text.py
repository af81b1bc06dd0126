# ruff: noqa: E501  (table-driven: one case per line)
"""Issue 34 item 2: the kernel reads text by the session's sql_mode (NO_BACKSLASH_ESCAPES, ANSI_QUOTES)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from routing.errors import RoutingError
from routing.kernel import ShardingKernel
from routing.model import DatabaseRules, ShardingRule, StandardStrategy, TableRule
from routing.parse import (
    ANSI_QUOTES,
    NO_BACKSLASH_ESCAPES,
    PIPES_AS_CONCAT,
    ansi_backquoted,
    literal_value,
    parse_statement,
    reading,
    scan_shape,
    tokenize,
)
from routing.split import split_statements
from tests.routing.conftest import METADATA, nodes

NBE = NO_BACKSLASH_ESCAPES
ANSI = ANSI_QUOTES
BOTH = NBE | ANSI


def units(kernel: ShardingKernel, sql: str, mode: int, params: list[Any] | None = None) -> list[tuple[str, str]]:
    return [(u.data_source, u.sql) for u in kernel.route(sql, params, None, mode).execution_units]


CASES = [
    # (text, mode, units)
    ("SELECT * FROM t_order WHERE user_id = 1 AND status = 'a\\'", NBE,
     [("ds_1", "SELECT * FROM t_order_0 WHERE user_id = 1 AND status = 'a\\'"),
      ("ds_1", "SELECT * FROM t_order_1 WHERE user_id = 1 AND status = 'a\\'")]),
    ("SELECT * FROM t_order WHERE status = 'a\\' AND user_id = 1 AND order_id = 2", NBE,
     [("ds_1", "SELECT * FROM t_order_0 WHERE status = 'a\\' AND user_id = 1 AND order_id = 2")]),
    ("SELECT * FROM t_order WHERE status = 'a\\' AND user_id = ? AND order_id = ?", NBE,
     [("ds_1", "SELECT * FROM t_order_0 WHERE status = 'a\\' AND user_id = ? AND order_id = ?")]),
    ("INSERT INTO t_order (order_id, user_id, status) VALUES (3, 2, 'x\\'), (4, 3, 'y')", NBE,
     [("ds_0", "INSERT INTO t_order_1 (order_id, user_id, status) VALUES (3, 2, 'x\\')"),
      ("ds_1", "INSERT INTO t_order_0 (order_id, user_id, status) VALUES (4, 3, 'y')")]),
    ('SELECT * FROM "t_order" WHERE "user_id" = 1 AND "order_id" = 3', ANSI,
     [("ds_1", "SELECT * FROM `t_order_1` WHERE `user_id` = 1 AND `order_id` = 3")]),
    ("SELECT * FROM \"t_order\" WHERE \"user_id\" = 1 AND \"order_id\" = 3 AND status = 'a\\'", BOTH,
     [("ds_1", "SELECT * FROM `t_order_1` WHERE `user_id` = 1 AND `order_id` = 3 AND status = 'a\\'")]),
    ("SELECT * FROM t_order WHERE user_id = 1 AND order_id = 3 AND status = 'say \"hi\"'", ANSI,
     [("ds_1", "SELECT * FROM t_order_1 WHERE user_id = 1 AND order_id = 3 AND status = 'say \"hi\"'")]),
]


@pytest.mark.parametrize(("sql", "mode", "expected"), CASES)
def test_routes_by_mode(kernel: ShardingKernel, sql: str, mode: int, expected: list[tuple[str, str]]) -> None:
    params = [1, 2] if "?" in sql else None
    assert units(kernel, sql, mode, params) == expected


def test_issue_example_ansi_group_by_alias(kernel: ShardingKernel) -> None:
    sql = 'SELECT "user_id", COUNT(*) AS "n" FROM "t_order" GROUP BY "user_id" ORDER BY "n" DESC'
    routed = kernel.route(sql, None, None, ANSI)
    assert sorted(units(kernel, sql, ANSI)) == [
        ("ds_0", "SELECT `user_id`, COUNT(*) AS `n` FROM `t_order_0` GROUP BY `user_id` ORDER BY `n` DESC"),
        ("ds_0", "SELECT `user_id`, COUNT(*) AS `n` FROM `t_order_1` GROUP BY `user_id` ORDER BY `n` DESC"),
        ("ds_1", "SELECT `user_id`, COUNT(*) AS `n` FROM `t_order_0` GROUP BY `user_id` ORDER BY `n` DESC"),
        ("ds_1", "SELECT `user_id`, COUNT(*) AS `n` FROM `t_order_1` GROUP BY `user_id` ORDER BY `n` DESC"),
    ]
    spec = routed.merge_spec
    assert spec is not None and spec.order_by and spec.order_by[0].index == 1 and spec.order_by[0].descending


@pytest.mark.parametrize("sql", [
    "SELECT * FROM t_order WHERE user_id = 1 AND status = 'a\\'",
    "INSERT INTO t_order (order_id, user_id, status) VALUES (3, 2, 'x\\')",
])
def test_backslash_before_quote_is_refused_by_default(kernel: ShardingKernel, sql: str) -> None:
    with pytest.raises(RoutingError):
        kernel.route(sql)
    assert kernel.route(sql, None, None, NBE).execution_units  # and routed under NO_BACKSLASH_ESCAPES


def test_modes_do_not_share_plans(kernel: ShardingKernel) -> None:
    """One text, three readings: each mode's plan is its own (a cached plan of one mode is never another's)."""
    sql = 'SELECT "user_id" FROM t_order WHERE user_id = 1 AND order_id = 3'
    default = units(kernel, sql, 0)
    ansi = units(kernel, sql, ANSI)
    assert default == [("ds_1", 'SELECT "user_id" FROM t_order_1 WHERE user_id = 1 AND order_id = 3')]
    assert ansi == [("ds_1", "SELECT `user_id` FROM t_order_1 WHERE user_id = 1 AND order_id = 3")]
    assert units(kernel, sql, 0) == default and units(kernel, sql, ANSI | 2) == ansi  # other bits: ignored
    kernel.invalidate()
    assert units(kernel, sql, ANSI) == ansi


class Recorder:
    """Sharding by a string: records the values it is asked about; `_0` for an even length."""

    def __init__(self) -> None:
        self.seen: list[Any] = []

    def shard_precise(self, targets: Sequence[str], column: str, value: Any) -> str | None:
        self.seen.append(value)
        return next(t for t in targets if t.endswith(f"_{len(value) % 2}"))

    def shard_range(self, targets: Sequence[str], column: str, bound: Any) -> list[str]:
        return list(targets)


def _name_kernel() -> tuple[ShardingKernel, Recorder]:
    rec = Recorder()
    rule = TableRule("t_name", nodes("t_name"), StandardStrategy("name", "len", rec), StandardStrategy("name", "len", rec))
    rules = DatabaseRules(name="db", data_sources=("ds_0", "ds_1"), sharding=ShardingRule(tables={"t_name": rule}))
    return ShardingKernel(rules, METADATA), rec


@pytest.mark.parametrize(("sql", "mode", "value"), [
    ("SELECT * FROM t_name WHERE name = 'ab\\'", NBE, "ab\\"),
    ("SELECT * FROM t_name WHERE name = 'ab\\\\'", NBE, "ab\\\\"),
    ("SELECT * FROM t_name WHERE name = 'ab\\\\'", 0, "ab\\"),
    ("SELECT * FROM t_name WHERE name = 'a\\nb'", NBE, "a\\nb"),
    ("SELECT * FROM t_name WHERE name = 'a\\nb'", 0, "a\nb"),
    ("SELECT * FROM t_name WHERE name = 'it''s\\'", NBE, "it's\\"),
    ('SELECT * FROM t_name WHERE "name" = \'q"\\\'', BOTH, 'q"\\'),
    ("INSERT INTO t_name (name) VALUES ('x\\')", NBE, "x\\"),
])
def test_sharding_value_with_backslash(sql: str, mode: int, value: str) -> None:
    kernel, rec = _name_kernel()
    routed = kernel.route(sql, None, None, mode)
    assert rec.seen and set(rec.seen) == {value}
    assert {u.data_source for u in routed.execution_units} == {f"ds_{len(value) % 2}"}


@pytest.mark.parametrize(("text", "mode", "expected"), [
    ('SELECT "a" FROM "t"', ANSI, "SELECT `a` FROM `t`"),
    ('SELECT "a""b", "c`d" FROM t', ANSI, 'SELECT `a"b`, `c``d` FROM t'),
    ("SELECT '\"x\"', `\"y\"` /* \"z\" */ -- \"w\"\n FROM t", ANSI, "SELECT '\"x\"', `\"y\"` /* \"z\" */ -- \"w\"\n FROM t"),
    ("SELECT 'a\\'\"b\"' FROM t", ANSI, "SELECT 'a\\'\"b\"' FROM t"),  # one string, by default escapes
    ("SELECT 'a\\', \"b\" FROM t", BOTH, "SELECT 'a\\', `b` FROM t"),  # a string, then a name
])
def test_ansi_backquoted(text: str, mode: int, expected: str) -> None:
    assert ansi_backquoted(text, mode) == expected


def test_scanners_read_backslash_by_mode() -> None:
    sql = "SELECT * FROM t WHERE a = 'x\\' AND b = ?"
    assert [k for _, _, k in scan_shape(sql).spans] == ["p"]  # by default: one unterminated string
    with reading(NBE):
        shape = scan_shape(sql)
        assert [k for _, _, k in shape.spans] == ["s", "p"]
        assert literal_value(shape.text(0), "s") == "x\\"
        assert [t.text for t in tokenize(sql) if t.kind in "sp"] == ["'x\\'", "?"]
        assert parse_statement(shape) is not None
    assert parse_statement(scan_shape(sql)) is None


@pytest.mark.parametrize(("sql", "mode", "parts"), [
    ("SELECT 'a\\'; SELECT 2", NBE, ["SELECT 'a\\'", " SELECT 2"]),
    ("SELECT 'a\\'; SELECT 2", 0, ["SELECT 'a\\'; SELECT 2"]),
    ("SELECT \"a\\\"; SELECT 2", ANSI, ["SELECT \"a\\\"", " SELECT 2"]),
    ("SELECT \"a\\\"; SELECT 2", 0, ["SELECT \"a\\\"; SELECT 2"]),
    ("SELECT 'a\\';' ; SELECT 2", ANSI, ["SELECT 'a\\';' ", " SELECT 2"]),
    ("SELECT \"a\\\", 'b\\'; SELECT 2", BOTH, ["SELECT \"a\\\", 'b\\'", " SELECT 2"]),
])
def test_split_by_mode(sql: str, mode: int, parts: list[str]) -> None:
    assert split_statements(sql, mode) == parts


PIPES = PIPES_AS_CONCAT


@pytest.mark.parametrize(("sql", "params", "mode", "expected"), [
    # under PIPES_AS_CONCAT `||` concatenates (MariaDB: '10', user 10's node); by default it is OR (every node)
    ("SELECT * FROM t_order WHERE user_id = 1 || 0", None, PIPES, [("ds_0", "SELECT * FROM t_order_0 WHERE user_id = CONCAT(1, 0)"), ("ds_0", "SELECT * FROM t_order_1 WHERE user_id = CONCAT(1, 0)")]),
    ("SELECT * FROM t_order WHERE user_id = 1 || 0", None, 0, "every"),
    ("SELECT * FROM t_order WHERE user_id = ? || ?", [1, 1], PIPES, [("ds_1", "SELECT * FROM t_order_0 WHERE user_id = CONCAT(?, ?)"), ("ds_1", "SELECT * FROM t_order_1 WHERE user_id = CONCAT(?, ?)")]),
    ("SELECT * FROM t_order WHERE user_id = ? || ?", [1, 1], 0, "every"),
    ("SELECT * FROM t_order WHERE user_id = 1 || user_id = 3", None, 0, [("ds_1", "SELECT * FROM t_order_0 WHERE user_id = 1 || user_id = 3"), ("ds_1", "SELECT * FROM t_order_1 WHERE user_id = 1 || user_id = 3")]),
    ("SELECT * FROM t_order WHERE user_id = 1 || user_id = 3", None, PIPES, "every"),  # user_id = CONCAT(1, user_id) = 3
    ("SELECT * FROM t_order WHERE user_id = -1 || 2 AND order_id = 2 || 0", None, PIPES, [("ds_0", "SELECT * FROM t_order_0 WHERE user_id = CONCAT(-1, 2) AND order_id = CONCAT(2, 0)")]),
    ("SELECT * FROM t_order WHERE user_id = 1 + 1 || 1", None, PIPES, "every"),  # 1 + '11': an expression, not narrowed
    ("SELECT * FROM t_order WHERE user_id = (1 || 1)", None, PIPES, [("ds_1", "SELECT * FROM t_order_0 WHERE user_id = (CONCAT(1, 1))"), ("ds_1", "SELECT * FROM t_order_1 WHERE user_id = (CONCAT(1, 1))")]),
    ("SELECT * FROM t_order WHERE user_id = 1 || NULL", None, PIPES, "every"),  # NULL: no row, nothing narrowed
    ("SELECT * FROM t_order WHERE user_id = '1' || '3' || '' AND order_id IN (2 || 2, 4)", None, PIPES, [("ds_1", "SELECT * FROM t_order_0 WHERE user_id = CONCAT('1', '3', '') AND order_id IN (CONCAT(2, 2), 4)")]),
    ("SELECT * FROM t_order WHERE user_id = 1 AND status = 'a||b' /* || */", None, PIPES, [("ds_1", "SELECT * FROM t_order_0 WHERE user_id = 1 AND status = 'a||b' /* || */"), ("ds_1", "SELECT * FROM t_order_1 WHERE user_id = 1 AND status = 'a||b' /* || */")]),
    ("SELECT status || '!' FROM t_order WHERE user_id = 2 AND order_id = 2", None, PIPES, [("ds_0", "SELECT CONCAT(status, '!') AS `status || '!'` FROM t_order_0 WHERE user_id = 2 AND order_id = 2")]),
    ("INSERT INTO t_order (order_id, user_id, status) VALUES (1, 1 || 2, 'a' || 'b')", None, PIPES, [("ds_0", "INSERT INTO t_order_1 (order_id, user_id, status) VALUES (1, CONCAT(1, 2), CONCAT('a', 'b'))")]),
    ("INSERT INTO t_order (order_id, user_id, status) VALUES (?, ? || ?, 'x'), (2, 3, 'y')", [1, 1, 3], PIPES, [("ds_1", "INSERT INTO t_order_0 (order_id, user_id, status) VALUES (2, 3, 'y')"), ("ds_1", "INSERT INTO t_order_1 (order_id, user_id, status) VALUES (?, CONCAT(?, ?), 'x')")]),
    ("INSERT INTO t_order (order_id, user_id, status) VALUES (1, 1 || 2, 'a')", None, 0, "refused"),  # 1 OR 2
    ("UPDATE t_order SET status = status || 'x' WHERE user_id = 4 || 1 AND order_id = 1", None, PIPES, [("ds_1", "UPDATE t_order_1 SET status = CONCAT(status, 'x') WHERE user_id = CONCAT(4, 1) AND order_id = 1")]),
    ("SELECT * FROM t_order WHERE user_id = 1 ||", None, PIPES, "refused"),
])
def test_pipes_as_concat(kernel: ShardingKernel, sql: str, params: list[Any] | None, mode: int, expected: Any) -> None:
    """Issue 34 item 2: `||` as a sharding value under PIPES_AS_CONCAT is CONCAT (routed by its value), as OR
    otherwise; what the proxy cannot delimit is refused, never read the other way."""
    if expected == "refused":
        with pytest.raises(RoutingError):
            kernel.route(sql, params, None, mode)
        return
    got = units(kernel, sql, mode, params)
    if expected == "every":
        assert len(got) == 4
    else:
        assert got == expected
