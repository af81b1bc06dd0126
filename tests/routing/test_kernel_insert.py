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



@pytest.mark.parametrize("prepared", [False, True], ids=["text", "prepared"])
def test_a_many_row_insert_sends_every_row_to_its_node_once(kernel: ShardingKernel, prepared: bool) -> None:
    """5,000 rows in one INSERT: each row's template is cut out of the statement by bisecting the value tokens
    (a pass over all of them per row made bulk INSERTs quadratic: 20,000 rows took 30 s to route)."""
    n = 5000
    rows = [(u, o, f"s{o}") for o, u in enumerate(range(n))]
    if prepared:
        sql = "INSERT INTO t_order (user_id, order_id, status) VALUES " + ", ".join(["(?, ?, ?)"] * n)
        routed = kernel.route(sql, [v for r in rows for v in r])
        got = [tuple(u.params[i:i + 3]) for u in routed.execution_units for i in range(0, len(u.params), 3)]
    else:
        sql = "INSERT INTO t_order (user_id, order_id, status) VALUES " + ", ".join(
            f"({u}, {o}, 's{o}')" for u, o, _ in rows)
        routed = kernel.route(sql)
        got = []
        for unit in routed.execution_units:
            body = unit.sql.split(" VALUES ", 1)[1][1:-1]
            got += [(int(a), int(b), c.strip(" '")) for a, b, c in (r.split(", ") for r in body.split("), ("))]
    assert sorted(got) == sorted(rows)
    for unit in routed.execution_units:  # each row on the node its user_id and order_id pick
        values = unit.params if prepared else [int(x) for x in unit.sql.replace("(", " ").replace(",", " ").split()
                                                if x.isdigit()]
        users, orders = values[0::3], values[1::3]
        assert {f"ds_{u % 2}" for u in users} == {unit.data_source}
        assert {f"t_order_{o % 2}" for o in orders} == {unit.sql.split()[2]}


@pytest.mark.parametrize(("sql", "message"), [
    ("INSERT INTO t_order (order_id, status) VALUES (1, 'nouser')",
     "INSERT into t_order: row 1 has no value for the sharding column user_id, so it could go to any of 2 data "
     "nodes; give every row a value for user_id"),
    ("INSERT INTO t_order (user_id, order_id) VALUES (1, 1), (NULL, 2)",
     "INSERT into t_order: row 2 gives sharding column user_id a value the proxy cannot evaluate"),
])  # fmt: skip
def test_an_unplaced_row_is_refused_saying_what_to_give(kernel: ShardingKernel, sql: str, message: str) -> None:
    from routing.errors import RoutingError

    with pytest.raises(RoutingError) as info:
        kernel.route(sql, None)
    assert str(info.value).startswith(message), str(info.value)
