# ruff: noqa: E501  (table-driven: one case per line)
"""Writes the kernel hands to the proxy to run in steps (routing.stepwise): which ones, and the steps' text."""

from __future__ import annotations

import pytest

from routing.errors import RoutingError
from routing.kernel import ShardingKernel
from routing.plan import SessionHints
from routing.stepwise import INSERT_SELECT, ROWS, split_insert_select, split_rows_write


@pytest.mark.parametrize(
    ("sql", "kind"),
    [
        ("UPDATE t_order SET user_id = 5 WHERE order_id = 1", ROWS),  # Django save(): the row may stay or move
        ("UPDATE t_order SET order_id = 4 WHERE user_id = 1 AND order_id = 3", ROWS),
        ("UPDATE t_order SET user_id = 1 WHERE user_id = 1 AND order_id = 3", None),  # pinned to the same value: runs as is
        ("DELETE FROM t_order WHERE status = 'x' LIMIT 10", ROWS),
        ("UPDATE t_order SET status = 'y' ORDER BY order_id DESC LIMIT 2", ROWS),
        ("DELETE FROM t_order WHERE user_id = 1 AND order_id = 1 LIMIT 10", None),  # one node: runs as is
        ("UPDATE t_order SET status = 'y' WHERE user_id = 1 ORDER BY order_id LIMIT 1", ROWS),  # one data source, two tables
        ("INSERT INTO t_order (user_id, order_id) SELECT user_id, order_id FROM t_order_item", INSERT_SELECT),
        ("INSERT INTO t_order (user_id, order_id) SELECT id, id FROM t_user", INSERT_SELECT),
    ],
)
def test_marked(kernel: ShardingKernel, sql: str, kind: str | None) -> None:
    routed = kernel.route(sql)
    assert (routed.stepwise.kind if routed.stepwise else None) == kind


@pytest.mark.parametrize(
    ("sql", "fragment"),
    [
        ("INSERT INTO t_user (id) SELECT order_id FROM t_order", "INSERT ... SELECT"),
        ("UPDATE t_order SET status = 'y' WHERE status IN (SELECT status FROM t_order_item) LIMIT 1", "subquery"),
        ("INSERT INTO t_order (user_id, order_id) SELECT user_id, order_id FROM t_order_item ON DUPLICATE KEY UPDATE status = 'x'", "INSERT ... SELECT"),
    ],
)
def test_still_refused(kernel: ShardingKernel, sql: str, fragment: str) -> None:
    with pytest.raises(RoutingError) as info:
        kernel.route(sql)
    assert fragment in info.value.message


def test_inner_steps_run_as_written(kernel: ShardingKernel) -> None:
    """A step's write goes to the nodes of the selected rows only, its SET and ORDER BY as written."""
    sql = "UPDATE t_order SET user_id = 5 WHERE ((`t_order`.`order_id` = 1 AND `t_order`.`user_id` = 2) OR (`t_order`.`order_id` = 3 AND `t_order`.`user_id` = 2)) ORDER BY order_id"
    routed = kernel.route(sql, None, SessionHints(stepwise_inner=True))
    assert routed.stepwise is None and [u.data_source for u in routed.execution_units] == ["ds_0"]


@pytest.mark.parametrize(
    ("sql", "columns", "select", "write"),
    [
        ("UPDATE t_order o SET status = 'x' WHERE user_id > 3 ORDER BY order_id DESC LIMIT 2;", ["order_id", "user_id"],
         "SELECT `o`.`order_id`, `o`.`user_id` FROM t_order o WHERE user_id > 3 ORDER BY order_id DESC LIMIT 2 FOR UPDATE",
         "UPDATE t_order o SET status = 'x' WHERE ((`o`.`order_id` = 1 AND `o`.`user_id` = 2) OR (`o`.`order_id` = 3 AND `o`.`user_id` = 4)) ORDER BY order_id DESC"),
        ("DELETE FROM t_order ORDER BY order_id LIMIT 2", ["order_id"],
         "SELECT `t_order`.`order_id` FROM t_order ORDER BY order_id LIMIT 2 FOR UPDATE",
         "DELETE FROM t_order WHERE `t_order`.`order_id` IN (1, 3)"),
        ("UPDATE IGNORE `t_order` SET user_id = (SELECT 5 WHERE 1) WHERE order_id = 7", ["order_id"],
         "SELECT `t_order`.`order_id` FROM `t_order` WHERE order_id = 7 FOR UPDATE",
         "UPDATE IGNORE `t_order` SET user_id = (SELECT 5 WHERE 1) WHERE `t_order`.`order_id` IN (1, 3)"),
        ("/* SHARDINGSPHERE_HINT: t_order.SHARDING_DATABASE_VALUE=1 */ DELETE FROM t_order LIMIT 5", ["order_id"],
         "/* SHARDINGSPHERE_HINT: t_order.SHARDING_DATABASE_VALUE=1 */ SELECT `t_order`.`order_id` FROM t_order LIMIT 5 FOR UPDATE",
         "/* SHARDINGSPHERE_HINT: t_order.SHARDING_DATABASE_VALUE=1 */ DELETE FROM t_order WHERE `t_order`.`order_id` IN (1, 3)"),
        ("DELETE FROM db.t_order WHERE a = 'LIMIT' LIMIT 5", ["order_id"],
         "SELECT `t_order`.`order_id` FROM db.t_order WHERE a = 'LIMIT' LIMIT 5 FOR UPDATE",
         "DELETE FROM db.t_order WHERE `t_order`.`order_id` IN (1, 3)"),
    ],
)
def test_rows_steps(sql: str, columns: list[str], select: str, write: str) -> None:
    """The steps' text, for key values (1, 2) and (3, 4), or 1 and 3."""
    split = split_rows_write(sql)
    rows = [("1", "2"), ("3", "4")] if len(columns) == 2 else [("1",), ("3",)]
    assert split.select_sql(columns) == select
    assert split.write_sql(columns, rows) == write


@pytest.mark.parametrize(
    ("sql", "columns", "query", "values"),
    [
        ("INSERT INTO t_order (order_id, user_id) SELECT a, b FROM x", ("order_id", "user_id"), "SELECT a, b FROM x",
         "INSERT INTO t_order (`order_id`, `user_id`) VALUES (1, 2)"),
        ("INSERT IGNORE INTO `t_order` (`order_id`, user_id) (SELECT a, b FROM x);", ("order_id", "user_id"), "(SELECT a, b FROM x)",
         "INSERT IGNORE INTO `t_order` (`order_id`, `user_id`) VALUES (1, 2)"),
        ("INSERT INTO db.t_order SELECT * FROM x", None, "SELECT * FROM x",
         "INSERT INTO db.t_order (`order_id`, `user_id`) VALUES (1, 2)"),
        ("/*+ hint */ INSERT INTO t SELECT 1", None, "/*+ hint */ SELECT 1", "/*+ hint */ INSERT INTO t (`order_id`, `user_id`) VALUES (1, 2)"),
    ],
)
def test_insert_select_steps(sql: str, columns: tuple[str, ...] | None, query: str, values: str) -> None:
    split = split_insert_select(sql)
    assert (split.columns, split.query) == (columns, query)
    assert split.values_sql(["order_id", "user_id"], [("1", "2")]) == values


@pytest.mark.parametrize(
    ("columns", "rows", "condition"),
    [
        (["k"], [("1",), ("NULL",)], "(`t`.`k` IN (1) OR `t`.`k` IS NULL)"),  # IN never matches NULL
        (["k"], [("NULL",)], "`t`.`k` IS NULL"),
        (["k", "s"], [("1", "NULL")], "(`t`.`k` = 1 AND `t`.`s` IS NULL)"),
    ],
)
def test_null_key_values_are_matched(columns: list[str], rows: list[tuple[str, ...]], condition: str) -> None:
    assert split_rows_write("DELETE FROM t LIMIT 1").write_sql(columns, rows) == f"DELETE FROM t WHERE {condition}"
