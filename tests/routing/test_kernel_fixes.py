"""Regression tests for kernel bugs found by the integration suites (one table per bug)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from merge.weights import weight_sql
from routing.algorithms import create_algorithm
from routing.errors import RoutingError
from routing.kernel import ShardingKernel
from routing.model import DatabaseRules, DataNode, NoneStrategy, ShardingRule, StandardStrategy, TableRule
from tests.routing.conftest import METADATA, nodes


def _inline_kernel() -> ShardingKernel:
    """t_order as in the shipped config: INLINE expressions (they fail on a str operand of '%')."""
    def inline(name: str, expression: str) -> Any:
        return create_algorithm(name, "INLINE", {"algorithm-expression": expression})

    db = StandardStrategy("user_id", "db_inline", inline("db_inline", "ds_${user_id % 2}"))
    tbl = StandardStrategy("order_id", "t_inline", inline("t_inline", "t_order_${order_id % 2}"))
    bad = StandardStrategy("id", "bad_inline", inline("bad_inline", "t_bad_${id}"))
    rules = ShardingRule(
        tables={
            "t_order": TableRule("t_order", nodes("t_order"), db, tbl),
            "t_bad": TableRule("t_bad", nodes("t_bad"), db, bad),
        }
    )
    return ShardingKernel(DatabaseRules("sharding_db", ("ds_0", "ds_1"), rules), METADATA)


# --- bug 6: quoted numbers and integral decimals as sharding values ------------------------------------


@pytest.mark.parametrize(
    ("sql", "params", "expected"),
    [
        ("SELECT * FROM t_order WHERE user_id = '7' AND order_id = 2", None, [("ds_1", "t_order_0")]),
        ("SELECT * FROM t_order WHERE user_id = ' 8' AND order_id = '3'", None, [("ds_0", "t_order_1")]),
        ("SELECT * FROM t_order WHERE user_id = 7.0 AND order_id = 2", None, [("ds_1", "t_order_0")]),
        ("SELECT * FROM t_order WHERE user_id = 7e0 AND order_id = 2.00", None, [("ds_1", "t_order_0")]),
        ("SELECT * FROM t_order WHERE user_id IN ('6', 8.0) AND order_id = 2", None, [("ds_0", "t_order_0")]),
        ("SELECT * FROM t_order WHERE user_id = ? AND order_id = ?", ["7", Decimal("2.0")], [("ds_1", "t_order_0")]),
        ("INSERT INTO t_order (order_id, user_id) VALUES ('3', '7')", None, [("ds_1", "t_order_1")]),
        ("INSERT INTO t_order (order_id, user_id) VALUES (3.0, 7.0)", None, [("ds_1", "t_order_1")]),
    ],
)
def test_numeric_text_and_integral_decimals_route_like_integers(
    sql: str, params: list[Any] | None, expected: list[tuple[str, str]]
) -> None:
    routed = _inline_kernel().route(sql, params)
    assert [(u.data_source, u.table_map["t_order"]) for u in routed.route_units] == expected


@pytest.mark.parametrize("value", ["'abc'", "'7x'", "7.5"])
def test_non_numeric_values_are_still_refused(value: str) -> None:
    with pytest.raises(RoutingError, match="t_order"):
        _inline_kernel().route(f"SELECT * FROM t_order WHERE user_id = {value} AND order_id = 1")


@pytest.mark.parametrize(
    ("expression", "value", "expected"),
    [
        ("ds_${user_id % 2}", "7", "ds_1"),
        ("ds_${user_id % 2}", "-8", "ds_0"),
        ("ds_${user_id % 2}", b"9", "ds_1"),
        ("ds_${user_id}", "1", "ds_1"),  # no arithmetic: the text is used as is
    ],
)
def test_inline_coerces_numeric_text(expression: str, value: Any, expected: str) -> None:
    algorithm = create_algorithm("a", "INLINE", {"algorithm-expression": expression})
    assert algorithm.shard_precise(["ds_0", "ds_1"], "user_id", value) == expected


# --- bug 8: a value that routes outside actualDataNodes names the computed target ----------------------


@pytest.mark.parametrize(
    ("sql", "fragments"),
    [
        ("INSERT INTO t_bad (id, user_id) VALUES (5, 0)", ("'t_bad_5'", "t_bad", "bad_inline", "actualDataNodes")),
        ("SELECT * FROM t_bad WHERE id = 7 AND user_id = 1", ("'t_bad_7'", "bad_inline")),
    ],
)
def test_value_outside_data_nodes_names_the_computed_target(sql: str, fragments: tuple[str, ...]) -> None:
    with pytest.raises(RoutingError) as info:
        _inline_kernel().route(sql)
    for fragment in fragments:
        assert fragment in info.value.message, info.value.message
    assert "None" not in info.value.message


class _Nowhere:
    def shard_precise(self, targets: Any, column: str, value: Any) -> None:
        return None

    def shard_range(self, targets: Any, column: str, bound: Any) -> list[str]:
        return list(targets)


def test_value_mapping_to_no_target_says_so() -> None:
    rule = TableRule("t_x", (DataNode("ds_0", "t_x"),), StandardStrategy("id", "nowhere", _Nowhere()),
                     StandardStrategy("id", "nowhere", _Nowhere()))
    kernel = ShardingKernel(DatabaseRules("sharding_db", ("ds_0",), ShardingRule({"t_x": rule})), METADATA)
    with pytest.raises(RoutingError) as info:
        kernel.route("SELECT * FROM t_x WHERE id = 1")
    assert "None" not in info.value.message and "t_x.id" in info.value.message


# --- bug 7: index names of a sharded table's DDL are not tables -----------------------------------------


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("ALTER TABLE t_order DROP INDEX idx_user", "ALTER TABLE {t} DROP INDEX idx_user"),
        ("ALTER TABLE t_order DROP KEY idx_user", "ALTER TABLE {t} DROP KEY idx_user"),
        ("DROP INDEX idx_user ON t_order", "DROP INDEX idx_user ON {t}"),
        ("DROP INDEX `idx_user` ON `t_order`", "DROP INDEX `idx_user` ON `{t}`"),
        ("ALTER TABLE t_order DROP INDEX idx_user, ADD INDEX idx_user (user_id, status)",
         "ALTER TABLE {t} DROP INDEX idx_user, ADD INDEX idx_user (user_id, status)"),
        ("ALTER TABLE t_order DROP FOREIGN KEY fk_user", "ALTER TABLE {t} DROP FOREIGN KEY fk_user"),
        ("ALTER TABLE t_order DROP CONSTRAINT chk_user", "ALTER TABLE {t} DROP CONSTRAINT chk_user"),
        # an index named like a sharded table is still an index
        ("DROP INDEX t_order_item ON t_order", "DROP INDEX t_order_item ON {t}"),
    ],
)
def test_drop_index_of_sharded_table_reaches_every_node(kernel: ShardingKernel, sql: str, expected: str) -> None:
    routed = kernel.route(sql)
    want = [(n.data_source, expected.format(t=n.table)) for n in nodes("t_order")]
    assert [(u.data_source, u.sql) for u in routed.execution_units] == want


# --- bugs 1 and 2: nothing taken from a literal is frozen into a cached plan's MergeSpec -----------------


def _spec_after(kernel: ShardingKernel, steps: list[tuple[str, list[Any] | None]]) -> Any:
    """Route every step through one kernel (one plan cache); the last step's merge spec."""
    routed = None
    for sql, params in steps:
        routed = kernel.route(sql, params)
    assert routed is not None and routed.merge_spec is not None
    return routed.merge_spec


HAVING_N = "SELECT user_id, COUNT(*) AS n FROM t_order GROUP BY user_id HAVING n > {}"


@pytest.mark.parametrize(
    ("steps", "having"),
    [
        ([(HAVING_N.format(1000), None), (HAVING_N.format(70), None)], "n > 70"),
        ([(HAVING_N.format(70), None), (HAVING_N.format(1000), None)], "n > 1000"),
        ([(HAVING_N.format("?"), [1000]), (HAVING_N.format("?"), [70])], "n > 70"),
        ([(HAVING_N.format("?"), [Decimal("1.5")])], "n > 1.5"),
        # a condition on the group keys alone is the nodes' (see test_having_on_group_keys_stays_on_the_nodes)
        ([("SELECT status, COUNT(*) FROM t_order GROUP BY status HAVING status <> ?", ["it's"])], None),
        ([("SELECT user_id FROM t_order GROUP BY user_id HAVING SUM(amount) < 5", None),
          ("SELECT user_id FROM t_order GROUP BY user_id HAVING SUM(amount) < -2", None)], "SUM(amount) < -2"),
        ([("SELECT user_id, COUNT(*) FROM t_order GROUP BY user_id HAVING user_id < 9 AND COUNT(*) > 1", None),
          ("SELECT user_id, COUNT(*) FROM t_order GROUP BY user_id HAVING user_id < 2 AND COUNT(*) > 0", None)],
         "(COUNT(*) > 0)"),
        ([("SELECT user_id, COUNT(*) AS n FROM t_order GROUP BY user_id HAVING n > 'x' ORDER BY user_id LIMIT 3",
           None),
          ("SELECT user_id, COUNT(*) AS n FROM t_order GROUP BY user_id HAVING n > '5' ORDER BY user_id LIMIT 4",
           None)], "n > '5'"),
    ],
)
def test_having_is_rendered_per_statement(
    kernel: ShardingKernel, steps: list[tuple[str, list[Any] | None]], having: str
) -> None:
    assert _spec_after(kernel, steps).having_sql == having


def test_having_on_group_keys_stays_on_the_nodes(kernel: ShardingKernel) -> None:
    """A group's key is the same on every node holding part of it: the nodes filter on it (comparing by
    their collation), each statement with its own literals; the rest of the HAVING is the merge's."""
    sql = "SELECT user_id, COUNT(*) FROM t_order GROUP BY user_id HAVING user_id < {} AND COUNT(*) > 0 LIMIT 3"
    kernel.route(sql.format(9))
    routed = kernel.route(sql.format(2))
    assert routed.execution_units[0].sql == (
        "SELECT user_id, COUNT(*) FROM t_order_0 GROUP BY user_id HAVING (user_id < 2) ORDER BY user_id ")
    assert routed.merge_spec is not None and routed.merge_spec.having_sql == "(COUNT(*) > 0)"
    routed = kernel.route("SELECT status, COUNT(*) FROM t_order GROUP BY status HAVING status <> ? LIMIT 2", ["x"])
    assert routed.execution_units[0].sql.startswith(
        "SELECT status, COUNT(*), IF(COLLATION(status)") and routed.execution_units[0].params == ("x",)
    assert "GROUP BY status HAVING (status <> ?) ORDER BY status LIMIT 2" in routed.execution_units[0].sql
    assert routed.merge_spec is not None and routed.merge_spec.having_sql is None


def test_having_parameter_must_be_supplied(kernel: ShardingKernel) -> None:
    with pytest.raises(RoutingError, match="HAVING"):
        kernel.route(HAVING_N.format("?"), [])


@pytest.mark.parametrize(
    ("steps", "separators"),
    [
        ([("SELECT GROUP_CONCAT(order_id SEPARATOR '|') FROM t_order WHERE user_id IN (5, 6)", None),
          ("SELECT GROUP_CONCAT(order_id SEPARATOR '#') FROM t_order WHERE user_id IN (5, 6)", None)], ["#"]),
        ([("SELECT GROUP_CONCAT(order_id SEPARATOR '') FROM t_order", None),
          ("SELECT GROUP_CONCAT(order_id SEPARATOR ', ') FROM t_order", None)], [", "]),
        ([("SELECT GROUP_CONCAT(order_id SEPARATOR 'a'), GROUP_CONCAT(status SEPARATOR 'b') FROM t_order", None),
          ("SELECT GROUP_CONCAT(order_id SEPARATOR 'c'), GROUP_CONCAT(status SEPARATOR 'd') FROM t_order", None)],
         ["c", "d"]),
        ([("SELECT GROUP_CONCAT(order_id) FROM t_order", None)], [","]),
    ],
)
def test_group_concat_separator_is_per_statement(
    kernel: ShardingKernel, steps: list[tuple[str, list[Any] | None]], separators: list[str]
) -> None:
    spec = _spec_after(kernel, steps)
    assert [a.separator for a in spec.aggregates] == separators


@pytest.mark.parametrize(
    ("first", "second"),
    [
        # ORDER BY an expression that matches a select item only for some literals
        ("SELECT amount + 1 FROM t_order ORDER BY amount + 1", "SELECT amount + 1 FROM t_order ORDER BY amount + 2"),
        ("SELECT amount + 1 FROM t_order ORDER BY amount + 2", "SELECT amount + 1 FROM t_order ORDER BY amount + 1"),
        ("SELECT amount + 1 FROM t_order ORDER BY amount + 2", "SELECT amount + 2 FROM t_order ORDER BY amount + 2"),
        # GROUP BY expressions likewise
        ("SELECT user_id % 3, COUNT(*) FROM t_order GROUP BY user_id % 3",
         "SELECT user_id % 3, COUNT(*) FROM t_order GROUP BY user_id % 4"),
        # a HAVING aggregate is a derived column named by its text, or the select item of the same text
        ("SELECT user_id FROM t_order GROUP BY user_id HAVING SUM(amount * 2) > 0",
         "SELECT user_id FROM t_order GROUP BY user_id HAVING SUM(amount * 3) > 0"),
        ("SELECT user_id, SUM(amount * 2) FROM t_order GROUP BY user_id HAVING SUM(amount * 2) > 0",
         "SELECT user_id, SUM(amount * 3) FROM t_order GROUP BY user_id HAVING SUM(amount * 2) > 0"),
        # ORDER BY position
        ("SELECT status, amount FROM t_order ORDER BY 1", "SELECT status, amount FROM t_order ORDER BY 2"),
    ],
)
def test_cached_plan_equals_a_fresh_plan(kernel: ShardingKernel, first: str, second: str) -> None:
    kernel.route(first)
    cached = kernel.route(second)
    fresh = ShardingKernel(kernel.rules, kernel.metadata).route(second)
    assert cached.merge_spec == fresh.merge_spec
    assert [u.sql for u in cached.execution_units] == [u.sql for u in fresh.execution_units]


def test_parameter_inside_having_aggregate_is_refused(kernel: ShardingKernel) -> None:
    with pytest.raises(RoutingError, match="HAVING aggregate"):
        kernel.route("SELECT user_id FROM t_order GROUP BY user_id HAVING SUM(amount * ?) > 0", [2])


# --- bug 3: grouped queries over several nodes: every node returns every group, LIMIT after merging --------


@pytest.mark.parametrize(
    ("sql", "params", "node_sql", "node_params", "offset", "limit"),
    [
        ("SELECT user_id, COUNT(*) AS n FROM t_order GROUP BY user_id ORDER BY n DESC, user_id LIMIT 3", None,
         "SELECT user_id, COUNT(*) AS n FROM t_order_0 GROUP BY user_id ORDER BY n DESC, user_id ", None, 0, 3),
        ("SELECT user_id, COUNT(*) AS n FROM t_order GROUP BY user_id ORDER BY n, user_id LIMIT 2, 3", None,
         "SELECT user_id, COUNT(*) AS n FROM t_order_0 GROUP BY user_id ORDER BY n, user_id ", None, 2, 3),
        ("SELECT user_id, COUNT(*) AS n FROM t_order GROUP BY user_id ORDER BY n LIMIT 3 OFFSET 2", None,
         "SELECT user_id, COUNT(*) AS n FROM t_order_0 GROUP BY user_id ORDER BY n ", None, 2, 3),
        ("SELECT user_id, COUNT(*) AS n FROM t_order WHERE status = ? GROUP BY user_id ORDER BY n LIMIT ?, ?",
         ["a", 1, 2],
         "SELECT user_id, COUNT(*) AS n FROM t_order_0 WHERE status = ? GROUP BY user_id ORDER BY n ", ("a",), 1, 2),
        ("SELECT user_id FROM t_order GROUP BY user_id ORDER BY SUM(amount) DESC LIMIT 5", None,
         "SELECT user_id, SUM(amount) AS ORDER_BY_DERIVED_0 FROM t_order_0 GROUP BY user_id "
         "ORDER BY SUM(amount) DESC ", None, 0, 5),
        # HAVING is applied after merging: a node's first groups may all be filtered out
        ("SELECT user_id, COUNT(*) AS n FROM t_order GROUP BY user_id HAVING n > 60 ORDER BY user_id LIMIT 3", None,
         "SELECT user_id, COUNT(*) AS n FROM t_order_0 GROUP BY user_id ORDER BY user_id ", None, 0, 3),
        # aggregates without GROUP BY, COUNT(DISTINCT) (one node row per distinct value)
        ("SELECT COUNT(*) FROM t_order LIMIT 1", None, "SELECT COUNT(*) FROM t_order_0 ", None, 0, 1),
        ("SELECT user_id, COUNT(DISTINCT status) FROM t_order GROUP BY user_id ORDER BY user_id LIMIT 2", None,
         "SELECT user_id, COUNT(DISTINCT status), status AS AGGREGATION_DISTINCT_DERIVED_0, "
         f"{weight_sql('status')} AS WEIGHT_DERIVED_1 FROM t_order_0 GROUP BY user_id, status ORDER BY user_id ",
         None, 0, 2),
        # ORDER BY the group columns: each node's first groups hold every global first group, complete
        ("SELECT user_id, COUNT(*) FROM t_order GROUP BY user_id ORDER BY user_id DESC LIMIT 1, 5", None,
         "SELECT user_id, COUNT(*) FROM t_order_0 GROUP BY user_id ORDER BY user_id DESC LIMIT 0, 6", None, 1, 5),
        ("SELECT user_id, COUNT(*) FROM t_order GROUP BY user_id LIMIT 5", None,
         "SELECT user_id, COUNT(*) FROM t_order_0 GROUP BY user_id ORDER BY user_id LIMIT 5", None, 0, 5),
        # no grouping: every node returns offset + count rows
        ("SELECT order_id FROM t_order ORDER BY order_id LIMIT 2, 3", None,
         "SELECT order_id FROM t_order_0 ORDER BY order_id LIMIT 0, 5", None, 2, 3),
    ],
)
def test_grouped_limit_applies_after_merging(
    kernel: ShardingKernel,
    sql: str,
    params: list[Any] | None,
    node_sql: str,
    node_params: tuple[Any, ...] | None,
    offset: int,
    limit: int,
) -> None:
    routed = kernel.route(sql, params)
    first = routed.execution_units[0]
    assert len(routed.execution_units) == 4
    assert (first.sql, first.params) == (node_sql, node_params)
    assert routed.merge_spec is not None
    assert (routed.merge_spec.offset, routed.merge_spec.limit) == (offset, limit)


# --- bugs 4 and 5: joins route 1:1 / per data source only when their conditions prove it ---------------


def _join_kernel() -> ShardingKernel:
    """The conftest rules plus t_acct (database by acct_id) and t_member (database by user_id), one table each."""
    from tests.routing.conftest import Mod, build_rules

    base = build_rules()
    assert base.sharding is not None
    mod = Mod()
    by_user = StandardStrategy("user_id", "db_mod", mod)
    by_acct = StandardStrategy("acct_id", "acct_mod", mod)
    tables = dict(base.sharding.tables)
    for name, strategy in (("t_member", by_user), ("t_acct", by_acct)):
        tables[name] = TableRule(name, (DataNode("ds_0", name), DataNode("ds_1", name)), strategy, NoneStrategy())
    sharding = ShardingRule(tables, base.sharding.binding_groups)
    return ShardingKernel(DatabaseRules(base.name, base.data_sources, sharding, base.broadcast, base.single), METADATA)


def _routes(sql: str) -> list[tuple[str, tuple[str, ...]]]:
    routed = _join_kernel().route(sql)
    return [(u.data_source, tuple(sorted(u.table_map.values()))) for u in routed.route_units]


def _cartesian(ds: str, a: str, b: str) -> list[tuple[str, tuple[str, ...]]]:
    return [(ds, (f"{a}_{x}", f"{b}_{y}")) for x in (0, 1) for y in (0, 1)]


ONE_TO_ONE_DS1 = [("ds_1", ("t_order_0", "t_order_item_0")), ("ds_1", ("t_order_1", "t_order_item_1"))]


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        # joined on the database column only: same data source, any table: cartesian within ds_1
        ("SELECT COUNT(*) FROM t_order o JOIN t_order_item i ON o.user_id = i.user_id WHERE o.user_id = 3",
         _cartesian("ds_1", "t_order", "t_order_item")),
        ("SELECT * FROM t_order o JOIN t_order_item i ON o.user_id = i.user_id",
         _cartesian("ds_0", "t_order", "t_order_item") + _cartesian("ds_1", "t_order", "t_order_item")),
        ("SELECT * FROM t_order o JOIN t_order_item i ON i.user_id = o.user_id AND o.status = i.status "
         "WHERE i.user_id IN (1, 3)", _cartesian("ds_1", "t_order", "t_order_item")),
        # joined on the table sharding column (and the database one): 1:1
        ("SELECT * FROM t_order o JOIN t_order_item i ON o.order_id = i.order_id WHERE o.user_id = 3",
         ONE_TO_ONE_DS1),
        ("SELECT * FROM t_order o JOIN t_order_item i ON o.order_id = i.order_id AND o.user_id = i.user_id "
         "WHERE o.user_id = 3", ONE_TO_ONE_DS1),
        ("SELECT * FROM t_order o JOIN t_order_item i USING (order_id, user_id) WHERE o.user_id = 3",
         ONE_TO_ONE_DS1),
        ("SELECT * FROM t_order o, t_order_item i WHERE o.order_id = i.order_id AND o.user_id = 3",
         ONE_TO_ONE_DS1),
        ("SELECT * FROM t_order o LEFT JOIN t_order_item i ON o.order_id = i.order_id WHERE o.user_id = 3",
         ONE_TO_ONE_DS1),
        # nothing equated, but every row that can match lives on ds_1
        ("SELECT * FROM t_order o, t_order_item i WHERE o.user_id = 3 AND i.user_id = 1",
         _cartesian("ds_1", "t_order", "t_order_item")),
        # unbound tables: same database algorithm and column equated
        ("SELECT * FROM t_order o JOIN t_member m ON o.user_id = m.user_id",
         [(ds, ("t_member", f"t_order_{t}")) for ds in ("ds_0", "ds_1") for t in (0, 1)]),
        ("SELECT * FROM t_member m JOIN t_acct a ON m.user_id = a.user_id WHERE m.user_id = 1 AND a.acct_id = 3",
         [("ds_1", ("t_acct", "t_member"))]),
        # a self-join equated on every sharding column
        ("SELECT * FROM t_order a JOIN t_order b ON a.order_id = b.order_id AND a.user_id = b.user_id "
         "WHERE a.user_id = 1", [("ds_1", ("t_order_0",)), ("ds_1", ("t_order_1",))]),
    ],
)
def test_join_routes_follow_what_the_conditions_prove(sql: str, expected: list[tuple[str, tuple[str, ...]]]) -> None:
    assert _routes(sql) == expected


@pytest.mark.parametrize(
    ("sql", "fragments"),
    [
        # different database columns / algorithms: matching rows may sit on different data sources
        ("SELECT * FROM t_member m JOIN t_acct a ON m.user_id = a.user_id",
         ("t_member", "t_acct", "user_id", "acct_id", "database sharding columns")),
        ("SELECT * FROM t_member m JOIN t_acct a ON m.user_id = a.acct_id",
         ("t_member", "t_acct", "acct_mod", "db_mod")),
        ("SELECT * FROM t_order o JOIN t_order_item i ON o.status = i.status",
         ("t_order", "t_order_item", "user_id")),
        ("SELECT * FROM t_order o, t_order_item i WHERE o.user_id = 3", ("t_order", "t_order_item")),
        # an outer join as a cartesian product would invent unmatched rows
        ("SELECT * FROM t_order o LEFT JOIN t_order_item i ON o.user_id = i.user_id WHERE o.user_id = 3 "
         "AND i.user_id = 3", ("outer join", "t_order", "t_order_item")),
        ("SELECT * FROM t_order o LEFT JOIN t_order_item i ON o.user_id = i.user_id WHERE o.user_id = 3",
         ("t_order", "t_order_item", "different data sources")),
        # a self-join on other columns: rows of different nodes would never meet
        ("SELECT * FROM t_order a JOIN t_order b ON a.status = b.status WHERE a.user_id = 1 AND b.user_id = 1",
         ("t_order with itself", "order_id", "user_id")),
    ],
)
def test_joins_that_cannot_run_per_node_are_refused(sql: str, fragments: tuple[str, ...]) -> None:
    with pytest.raises(RoutingError) as info:
        _join_kernel().route(sql)
    for fragment in fragments:
        assert fragment in info.value.message, info.value.message


@pytest.mark.parametrize(
    ("on", "expected"),
    [
        ("o.order_id = i.order_id", ONE_TO_ONE_DS1),
        ("o.user_id = i.user_id", _cartesian("ds_1", "t_order", "t_order_item")),
    ],
)
def test_binding_tables_with_their_own_algorithm_names(on: str, expected: list[tuple[str, tuple[str, ...]]]) -> None:
    """As in the shipped config (t_order_inline / t_order_item_inline): binding declares them equivalent."""
    from tests.routing.conftest import Mod

    mod = Mod()
    rules = ShardingRule(
        tables={
            name: TableRule(name, nodes(name), StandardStrategy("user_id", f"{name}_db", mod),
                            StandardStrategy("order_id", f"{name}_inline", mod))
            for name in ("t_order", "t_order_item")
        },
        binding_groups=(("t_order", "t_order_item"),),
    )
    kernel = ShardingKernel(DatabaseRules("sharding_db", ("ds_0", "ds_1"), rules), METADATA)
    routed = kernel.route(f"SELECT * FROM t_order o JOIN t_order_item i ON {on} WHERE o.user_id = 3")
    assert [(u.data_source, tuple(sorted(u.table_map.values()))) for u in routed.route_units] == expected
