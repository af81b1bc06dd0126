# ruff: noqa: E501  (table-driven: one case per line)
"""INSERT: multi-row split (text and prepared), key generation, SET form, REPLACE, IGNORE."""

from __future__ import annotations

from typing import Any

import pytest

from routing.kernel import ShardingKernel


@pytest.mark.parametrize(
    ("sql", "params", "expected", "keys"),
    [
        (
            "INSERT INTO t_order (user_id, order_id, status) VALUES (1, 2, 'a'), (2, 3, 'b'), (3, 4, 'c')",
            None,
            [
                ("ds_0", "INSERT INTO t_order_1 (user_id, order_id, status) VALUES (2, 3, 'b')", None),
                ("ds_1", "INSERT INTO t_order_0 (user_id, order_id, status) VALUES (1, 2, 'a'), (3, 4, 'c')", None),
            ],
            (),
        ),
        (
            "INSERT INTO t_order (user_id, order_id, status) VALUES (?, ?, ?), (?, ?, ?)",
            [1, 2, "a", 2, 3, "b"],
            [
                ("ds_0", "INSERT INTO t_order_1 (user_id, order_id, status) VALUES (?, ?, ?)", (2, 3, "b")),
                ("ds_1", "INSERT INTO t_order_0 (user_id, order_id, status) VALUES (?, ?, ?)", (1, 2, "a")),
            ],
            (),
        ),
        (
            "INSERT INTO t_order (user_id, status) VALUES (1, 'a'), (1, 'b')",
            None,
            [
                ("ds_1", "INSERT INTO t_order_0 (user_id, status, order_id) VALUES (1, 'a', 1000)", None),
                ("ds_1", "INSERT INTO t_order_1 (user_id, status, order_id) VALUES (1, 'b', 1001)", None),
            ],
            (1000, 1001),
        ),
        (
            "INSERT INTO t_order (user_id, status) VALUES (?, ?)",
            [2, "x"],
            [("ds_0", "INSERT INTO t_order_0 (user_id, status, order_id) VALUES (?, ?, 1000)", (2, "x"))],
            (1000,),
        ),
        (
            "INSERT INTO t_order SET user_id = 2, status = 'x'",
            None,
            [("ds_0", "INSERT INTO t_order_0 SET user_id = 2, status = 'x', order_id = 1000", None)],
            (1000,),
        ),
        (
            "INSERT INTO t_order SET user_id = 2, order_id = 5 ON DUPLICATE KEY UPDATE status = 'y'",
            None,
            [
                (
                    "ds_0",
                    "INSERT INTO t_order_1 SET user_id = 2, order_id = 5 ON DUPLICATE KEY UPDATE status = 'y'",
                    None,
                )
            ],
            (),
        ),
        (
            "REPLACE INTO sharding_db.t_order (user_id, order_id) VALUES (2, 5)",
            None,
            [("ds_0", "REPLACE INTO t_order_1 (user_id, order_id) VALUES (2, 5)", None)],
            (),
        ),
        (
            "INSERT IGNORE INTO `t_order` (`user_id`, `order_id`) VALUES (2, 5) ON DUPLICATE KEY UPDATE status = VALUES(status)",
            None,
            [
                (
                    "ds_0",
                    "INSERT IGNORE INTO `t_order_1` (`user_id`, `order_id`) VALUES (2, 5) ON DUPLICATE KEY UPDATE status = VALUES(status)",
                    None,
                )
            ],
            (),
        ),
        (
            "INSERT INTO t_order VALUES (5, 2, 'a', 1.5)",
            None,
            [("ds_0", "INSERT INTO t_order_1 VALUES (5, 2, 'a', 1.5)", None)],
            (),
        ),
        (
            "INSERT INTO t_order_item (order_item_id, order_id, user_id) VALUES (1, 2, 3), (4, 5, 6)",
            None,
            [
                ("ds_0", "INSERT INTO t_order_item_1 (order_item_id, order_id, user_id) VALUES (4, 5, 6)", None),
                ("ds_1", "INSERT INTO t_order_item_0 (order_item_id, order_id, user_id) VALUES (1, 2, 3)", None),
            ],
            (),
        ),
        (
            "INSERT INTO t_order (user_id, order_id, status) VALUES (2, 4, ?) ON DUPLICATE KEY UPDATE status = ?",
            ["a", "b"],
            [
                (
                    "ds_0",
                    "INSERT INTO t_order_0 (user_id, order_id, status) VALUES (2, 4, ?) ON DUPLICATE KEY UPDATE status = ?",
                    ("a", "b"),
                )
            ],
            (),
        ),
    ],
)
def test_insert(
    kernel: ShardingKernel,
    sql: str,
    params: list[Any] | None,
    expected: list[tuple[str, str, Any]],
    keys: tuple[Any, ...],
) -> None:
    routed = kernel.route(sql, params)
    assert [(u.data_source, u.sql, u.params) for u in routed.execution_units] == expected
    assert routed.generated_keys == keys
    assert routed.write


def test_insert_select_on_one_unit_is_allowed(kernel: ShardingKernel) -> None:
    sql = "INSERT INTO t_user (id) SELECT id FROM t_user WHERE id = 1"
    assert [u.sql for u in kernel.route(sql).execution_units] == [sql]
