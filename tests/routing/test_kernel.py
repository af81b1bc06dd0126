# ruff: noqa: E501  (table-driven: one case per line)
"""Routing and rewrite of the common statements, one table row per case."""

from __future__ import annotations

from typing import Any

import pytest

from routing.errors import RoutingError
from routing.kernel import ShardingKernel
from routing.model import DatabaseRules, NoneStrategy, ShardingRule, StandardStrategy, TableRule
from routing.plan import StatementKind
from tests.routing.conftest import METADATA, nodes


def units(kernel: ShardingKernel, sql: str, params: list[Any] | None = None) -> list[tuple[str, str]]:
    return [(u.data_source, u.sql) for u in kernel.route(sql, params).execution_units]


ALL_ORDERS = [
    ("ds_0", "SELECT * FROM t_order_0"),
    ("ds_0", "SELECT * FROM t_order_1"),
    ("ds_1", "SELECT * FROM t_order_0"),
    ("ds_1", "SELECT * FROM t_order_1"),
]


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        # standard route: point select, IN, ranges, OR
        (
            "SELECT * FROM t_order WHERE user_id = 1 AND order_id = 2",
            [("ds_1", "SELECT * FROM t_order_0 WHERE user_id = 1 AND order_id = 2")],
        ),
        (
            "SELECT * FROM t_order WHERE 2 = order_id AND 1 = user_id",
            [("ds_1", "SELECT * FROM t_order_0 WHERE 2 = order_id AND 1 = user_id")],
        ),
        (
            "SELECT * FROM t_order WHERE user_id = -3 AND order_id = '4'",
            [("ds_1", "SELECT * FROM t_order_0 WHERE user_id = -3 AND order_id = '4'")],
        ),
        ("SELECT * FROM t_order", ALL_ORDERS),
        (
            "SELECT * FROM t_order WHERE user_id IN (1, 3) AND order_id IN (5, 7)",
            [("ds_1", "SELECT * FROM t_order_1 WHERE user_id IN (1, 3) AND order_id IN (5, 7)")],
        ),
        (
            "SELECT * FROM t_order WHERE user_id = 1 OR user_id = 2",
            [(d, s.replace("t_order_", "t_order_") + " WHERE user_id = 1 OR user_id = 2") for d, s in ALL_ORDERS],
        ),
        (
            "SELECT * FROM t_order WHERE user_id = 1 OR status = 'x'",
            [(d, s + " WHERE user_id = 1 OR status = 'x'") for d, s in ALL_ORDERS],
        ),
        (
            "SELECT * FROM t_order WHERE (user_id = 1 AND order_id = 1) OR (user_id = 2 AND order_id = 2)",
            [
                (d, s + " WHERE (user_id = 1 AND order_id = 1) OR (user_id = 2 AND order_id = 2)")
                for d, s in [ALL_ORDERS[0], ALL_ORDERS[3]]
            ],
        ),
        (
            "SELECT * FROM t_order WHERE user_id = 2 AND order_id BETWEEN 3 AND 3",
            [("ds_0", "SELECT * FROM t_order_1 WHERE user_id = 2 AND order_id BETWEEN 3 AND 3")],
        ),
        (
            "SELECT * FROM t_order WHERE user_id = 2 AND order_id >= 4 AND order_id < 5",
            [("ds_0", "SELECT * FROM t_order_0 WHERE user_id = 2 AND order_id >= 4 AND order_id < 5")],
        ),
        ("SELECT * FROM t_order WHERE user_id + 0 = 1", [(d, s + " WHERE user_id + 0 = 1") for d, s in ALL_ORDERS]),
        ("SELECT * FROM t_order WHERE NOT user_id = 1", [(d, s + " WHERE NOT user_id = 1") for d, s in ALL_ORDERS]),
        (
            "SELECT * FROM t_order WHERE user_id = 1 AND user_id = 2",
            [("ds_0", "SELECT * FROM t_order_0 WHERE user_id = 1 AND user_id = 2")],
        ),
        # qualifiers, aliases, schema prefix, backquotes, comments
        (
            "SELECT t_order.amount FROM t_order WHERE t_order.user_id = 2 AND t_order.order_id = 1",
            [("ds_0", "SELECT t_order_1.amount FROM t_order_1 WHERE t_order_1.user_id = 2 AND t_order_1.order_id = 1")],
        ),
        (
            "SELECT o.amount FROM t_order o WHERE o.user_id = 2 AND o.order_id = 1",
            [("ds_0", "SELECT o.amount FROM t_order_1 o WHERE o.user_id = 2 AND o.order_id = 1")],
        ),
        (
            "SELECT sharding_db.t_order.amount FROM sharding_db.t_order WHERE sharding_db.t_order.user_id = 2 AND order_id = 1",
            [("ds_0", "SELECT t_order_1.amount FROM t_order_1 WHERE t_order_1.user_id = 2 AND order_id = 1")],
        ),
        (
            "select /* keep */ `amount` from `sharding_db`.`T_ORDER` where `user_id` = 2 and `order_id` = 1 -- tail",
            [("ds_0", "select /* keep */ `amount` from `t_order_1` where `user_id` = 2 and `order_id` = 1 -- tail")],
        ),
        (
            "SELECT * FROM t_order WHERE status REGEXP '^a' AND user_id = 2 AND order_id = 0",
            [("ds_0", "SELECT * FROM t_order_0 WHERE status REGEXP '^a' AND user_id = 2 AND order_id = 0")],
        ),
        # binding tables: 1:1 by position, conditions carried through the join
        (
            "SELECT * FROM t_order o JOIN t_order_item i ON o.order_id = i.order_id WHERE o.order_id = 5 AND o.user_id = 2",
            [
                (
                    "ds_0",
                    "SELECT * FROM t_order_1 o JOIN t_order_item_1 i ON o.order_id = i.order_id WHERE o.order_id = 5 AND o.user_id = 2",
                )
            ],
        ),
        (
            "SELECT * FROM t_order o JOIN t_order_item i ON o.order_id = i.order_id WHERE i.user_id = 1",
            [
                (
                    "ds_1",
                    "SELECT * FROM t_order_0 o JOIN t_order_item_0 i ON o.order_id = i.order_id WHERE i.user_id = 1",
                ),
                (
                    "ds_1",
                    "SELECT * FROM t_order_1 o JOIN t_order_item_1 i ON o.order_id = i.order_id WHERE i.user_id = 1",
                ),
            ],
        ),
        # cartesian within one data source
        (
            "SELECT * FROM t_order o JOIN t_other x ON o.user_id = x.user_id WHERE o.user_id = 1 AND o.order_id = 1",
            [
                (
                    "ds_1",
                    "SELECT * FROM t_order_1 o JOIN t_other_0 x ON o.user_id = x.user_id WHERE o.user_id = 1 AND o.order_id = 1",
                ),
                (
                    "ds_1",
                    "SELECT * FROM t_order_1 o JOIN t_other_1 x ON o.user_id = x.user_id WHERE o.user_id = 1 AND o.order_id = 1",
                ),
            ],
        ),
        # broadcast: reads to one, writes to all; joins follow the sharded table
        ("SELECT * FROM t_address", [("ds_0", "SELECT * FROM t_address")]),
        (
            "INSERT INTO t_address (address_id, address_name) VALUES (1, 'a')",
            [
                ("ds_0", "INSERT INTO t_address (address_id, address_name) VALUES (1, 'a')"),
                ("ds_1", "INSERT INTO t_address (address_id, address_name) VALUES (1, 'a')"),
            ],
        ),
        (
            "UPDATE sharding_db.t_address SET address_name = 'b'",
            [("ds_0", "UPDATE t_address SET address_name = 'b'"), ("ds_1", "UPDATE t_address SET address_name = 'b'")],
        ),
        (
            "SELECT * FROM t_order o JOIN t_address a ON o.address_id = a.address_id WHERE o.user_id = 1 AND o.order_id = 2",
            [
                (
                    "ds_1",
                    "SELECT * FROM t_order_0 o JOIN t_address a ON o.address_id = a.address_id WHERE o.user_id = 1 AND o.order_id = 2",
                )
            ],
        ),
        # single tables and statements without a table
        ("SELECT * FROM t_user WHERE id = 1", [("ds_0", "SELECT * FROM t_user WHERE id = 1")]),
        ("SELECT * FROM sharding_db.t_stat", [("ds_1", "SELECT * FROM t_stat")]),
        ("CREATE TABLE t_new (id INT)", [("ds_0", "CREATE TABLE t_new (id INT)")]),
        ("SELECT 1", [("ds_0", "SELECT 1")]),
        ("SET NAMES utf8mb4", [("ds_0", "SET NAMES utf8mb4")]),
        ("SHOW VARIABLES LIKE 'x%'", [("ds_0", "SHOW VARIABLES LIKE 'x%'")]),
        ("SELECT * FROM information_schema.TABLES", [("ds_0", "SELECT * FROM information_schema.TABLES")]),
        ("CALL my_proc(1)", [("ds_0", "CALL my_proc(1)")]),
        ("SELECT * FROM t_user WHERE a = 1 AND", [("ds_0", "SELECT * FROM t_user WHERE a = 1 AND")]),
        # auto table: table strategy over all nodes, data source follows the node
        ("SELECT * FROM t_log WHERE id = 6", [("ds_0", "SELECT * FROM t_log_2 WHERE id = 6")]),
        # DDL: every data node
        (
            "ALTER TABLE t_order ADD COLUMN note VARCHAR(10)",
            [(d, f"ALTER TABLE {s[14:]} ADD COLUMN note VARCHAR(10)") for d, s in ALL_ORDERS],
        ),
        (
            "CREATE INDEX idx_status ON t_order (status)",
            [(d, f"CREATE INDEX idx_status ON {s[14:]} (status)") for d, s in ALL_ORDERS],
        ),
        ("TRUNCATE TABLE t_order", [(d, f"TRUNCATE TABLE {s[14:]}") for d, s in ALL_ORDERS]),
        (
            "DROP TABLE t_order, t_order_item",
            [
                ("ds_0", "DROP TABLE t_order_0, t_order_item_0"),
                ("ds_0", "DROP TABLE t_order_1, t_order_item_1"),
                ("ds_1", "DROP TABLE t_order_0, t_order_item_0"),
                ("ds_1", "DROP TABLE t_order_1, t_order_item_1"),
            ],
        ),
        (
            "CREATE TABLE t_address (id INT)",
            [("ds_0", "CREATE TABLE t_address (id INT)"), ("ds_1", "CREATE TABLE t_address (id INT)")],
        ),
        # unicast metadata statements
        ("DESCRIBE t_order", [("ds_0", "DESCRIBE t_order_0")]),
        ("SHOW CREATE TABLE sharding_db.t_order", [("ds_0", "SHOW CREATE TABLE t_order_0")]),
        ("SHOW COLUMNS FROM `t_order` FROM sharding_db", [("ds_0", "SHOW COLUMNS FROM `t_order_0` ")]),
        ("SHOW INDEX FROM t_order", [("ds_0", "SHOW INDEX FROM t_order_0")]),
        # UPDATE / DELETE
        (
            "UPDATE t_order SET status = 'x' WHERE user_id = 1 AND order_id = 3",
            [("ds_1", "UPDATE t_order_1 SET status = 'x' WHERE user_id = 1 AND order_id = 3")],
        ),
        (
            "UPDATE t_order SET order_id = 3, status = 'x' WHERE user_id = 1 AND order_id = 3",
            [("ds_1", "UPDATE t_order_1 SET order_id = 3, status = 'x' WHERE user_id = 1 AND order_id = 3")],
        ),
        (
            "DELETE FROM t_order WHERE order_id = 3",
            [
                ("ds_0", "DELETE FROM t_order_1 WHERE order_id = 3"),
                ("ds_1", "DELETE FROM t_order_1 WHERE order_id = 3"),
            ],
        ),
        (
            "DELETE FROM t_order WHERE user_id = 2 AND order_id = 3 ORDER BY order_id LIMIT 1",
            [("ds_0", "DELETE FROM t_order_1 WHERE user_id = 2 AND order_id = 3 ORDER BY order_id LIMIT 1")],
        ),
        (
            "UPDATE t_order o JOIN t_order_item i ON o.order_id = i.order_id SET i.status = 'x' WHERE o.user_id = 2 AND o.order_id = 2",
            [
                (
                    "ds_0",
                    "UPDATE t_order_0 o JOIN t_order_item_0 i ON o.order_id = i.order_id SET i.status = 'x' WHERE o.user_id = 2 AND o.order_id = 2",
                )
            ],
        ),
        (
            "DELETE t_order FROM t_order WHERE user_id = 2 AND order_id = 2",
            [("ds_0", "DELETE t_order_0 FROM t_order_0 WHERE user_id = 2 AND order_id = 2")],
        ),
        # subqueries routed to one unit
        (
            "SELECT * FROM t_order WHERE user_id = 2 AND order_id = 2 AND status IN (SELECT status FROM t_order_item WHERE user_id = 2 AND order_id = 2)",
            [
                (
                    "ds_0",
                    "SELECT * FROM t_order_0 WHERE user_id = 2 AND order_id = 2 AND status IN (SELECT status FROM t_order_item_0 WHERE user_id = 2 AND order_id = 2)",
                )
            ],
        ),
        (
            "SELECT * FROM t_order WHERE user_id = 2 AND address_id IN (SELECT address_id FROM t_address)",
            [
                (
                    "ds_0",
                    "SELECT * FROM t_order_0 WHERE user_id = 2 AND address_id IN (SELECT address_id FROM t_address)",
                ),
                (
                    "ds_0",
                    "SELECT * FROM t_order_1 WHERE user_id = 2 AND address_id IN (SELECT address_id FROM t_address)",
                ),
            ],
        ),
    ],
)
def test_route_and_rewrite(kernel: ShardingKernel, sql: str, expected: list[tuple[str, str]]) -> None:
    assert units(kernel, sql) == expected


@pytest.mark.parametrize(
    ("sql", "fragment"),
    [
        (
            "INSERT INTO t_order (user_id, order_id) VALUES (1, 1) ON DUPLICATE KEY UPDATE user_id = 2",
            "ON DUPLICATE KEY UPDATE",
        ),
        ("INSERT INTO t_user (id) SELECT order_id FROM t_order", "INSERT ... SELECT"),
        ("SELECT * FROM t_order WHERE status IN (SELECT status FROM t_order_item)", "subquery"),
        ("SELECT * FROM (SELECT * FROM t_order) x", "subquery"),
        ("SELECT * FROM t_order o JOIN t_other x ON o.status = x.status WHERE o.user_id = 1", "different data sources"),
        ("SELECT * FROM t_order o JOIN t_user u ON o.user_id = u.id", "single table"),
        ("SELECT * FROM t_user u JOIN t_stat s ON u.id = s.id", "different data sources"),
        (
            "UPDATE t_address a JOIN t_order o ON a.address_id = o.address_id SET a.address_name = 'x'",
            "broadcast table",
        ),
        ("LOCK TABLES t_order WRITE", "cannot parse"),
        ("SELECT * FROM t_order WHERE user_id = 1 UNION SELECT * FROM t_order WHERE user_id = 2", "UNION"),
        ("INSERT INTO t_order (user_id, order_id) VALUES (NOW(), 1)", "cannot evaluate"),
        ("INSERT INTO t_order (order_id, status) VALUES (1, 'a')", "user_id"),
        ("INSERT INTO t_order VALUES (1, 2)", "row 1 has 2 values for 4 columns"),
        ("INSERT INTO t_order_item VALUES (1, 2, 3, 'a')", None),
        ("INSERT INTO t_other (a) VALUES (1)", "user_id"),
        ("DROP TABLE t_order, t_other", "not binding"),
        ("DROP TABLE t_order, t_user", "mixes"),
    ],
)
def test_refusals(kernel: ShardingKernel, sql: str, fragment: str | None) -> None:
    if fragment is None:
        kernel.route(sql)  # control case: routes fine
        return
    with pytest.raises(RoutingError) as info:
        kernel.route(sql)
    assert fragment in info.value.message
    assert info.value.errno in (1235, 1136)


def test_insert_without_column_list_needs_metadata(kernel: ShardingKernel) -> None:
    with pytest.raises(RoutingError, match="list the columns"):
        kernel.route("INSERT INTO t_log VALUES (1)")


@pytest.mark.parametrize(
    ("sql", "kind", "write"),
    [
        ("SELECT * FROM t_order", StatementKind.SELECT, False),
        ("SELECT * FROM t_order WHERE user_id = 1 FOR UPDATE", StatementKind.SELECT, True),
        ("SELECT * FROM t_order WHERE user_id = 1 LOCK IN SHARE MODE", StatementKind.SELECT, True),
        ("SELECT * FROM t_user FOR SHARE", StatementKind.SELECT, True),
        ("DELETE FROM t_user", StatementKind.DELETE, True),
        ("INSERT INTO t_user (id) VALUES (1)", StatementKind.INSERT, True),
        ("CREATE TABLE t_x (id INT)", StatementKind.DDL, True),
        ("SET autocommit = 1", StatementKind.OTHER, True),
    ],
)
def test_kind_and_write_flag(kernel: ShardingKernel, sql: str, kind: StatementKind, write: bool) -> None:
    routed = kernel.route(sql)
    assert (routed.kind, routed.write) == (kind, write)


def test_describe_reports_renames(kernel: ShardingKernel) -> None:
    routed = kernel.route("DESC t_order")
    assert routed.result_table_renames == {"t_order_0": "t_order"}
    assert routed.route_units[0].table_map == {"t_order": "t_order_0"}


class _Nowhere:
    def shard_precise(self, targets: Any, column: str, value: Any) -> str:
        return "ds_9"

    def shard_range(self, targets: Any, column: str, bound: Any) -> list[str]:
        return list(targets)


def test_precise_value_outside_nodes_is_an_error() -> None:
    rule = TableRule("t_x", nodes("t_x"), StandardStrategy("id", "nowhere", _Nowhere()), NoneStrategy())
    rules = DatabaseRules("sharding_db", ("ds_0", "ds_1"), ShardingRule({"t_x": rule}))
    kernel = ShardingKernel(rules, METADATA)
    with pytest.raises(RoutingError, match="not among the configured"):
        kernel.route("SELECT * FROM t_x WHERE id = 1")
    with pytest.raises(RoutingError, match="not among the configured"):
        kernel.route("INSERT INTO t_x (id) VALUES (1)")
    assert len(kernel.route("SELECT * FROM t_x WHERE id > 1").route_units) == 4


def test_algorithm_failure_becomes_routing_error(kernel: ShardingKernel) -> None:
    with pytest.raises(RoutingError, match="db_mod of table t_order"):
        kernel.route("SELECT * FROM t_order WHERE user_id = 'abc'")
