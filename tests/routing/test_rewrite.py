# ruff: noqa: E501  (table-driven: one case per line)
"""Multi-node SELECT rewrite: derived columns, pagination and the MergeSpec handed to the merge engine."""

from __future__ import annotations

from typing import Any

import pytest

from merge.spec import AggregateItem, AggregateKind, MergeSpec, OrderItem
from merge.weights import weight_sql
from routing.errors import RoutingError
from routing.kernel import ShardingKernel
from tests.routing.conftest import METADATA

A = AggregateKind
W_STATUS = weight_sql("status")  # text keys carry the node's sort key (merge.weights)


@pytest.mark.parametrize(
    ("sql", "params", "node_sql", "node_params", "spec"),
    [
        (
            "SELECT * FROM t_order ORDER BY order_id DESC LIMIT 10, 5",
            None,
            "SELECT * FROM t_order_0 ORDER BY order_id DESC LIMIT 0, 15",
            None,
            MergeSpec(4, order_by=(OrderItem(0, True),), offset=10, limit=5, node_rows=15),
        ),
        (
            "SELECT status FROM t_order ORDER BY amount LIMIT ?, ?",
            [1, 20],
            "SELECT status, amount AS ORDER_BY_DERIVED_0 FROM t_order_0 ORDER BY amount LIMIT ?, ?",
            (0, 21),
            MergeSpec(1, order_by=(OrderItem(1),), offset=1, limit=20, node_rows=21),
        ),
        (
            "SELECT status FROM t_order LIMIT ? OFFSET ?",
            [5, 7],
            "SELECT status FROM t_order_0 LIMIT ? OFFSET ?",
            (12, 0),
            MergeSpec(1, offset=7, limit=5, node_rows=12),
        ),
        (
            "SELECT status FROM t_order LIMIT 3",
            None,
            "SELECT status FROM t_order_0 LIMIT 3",
            None,
            MergeSpec(1, limit=3, node_rows=3),
        ),
        (
            "SELECT user_id, COUNT(*) AS c, AVG(amount) FROM t_order GROUP BY user_id",
            None,
            "SELECT user_id, COUNT(*) AS c, AVG(amount), COUNT(amount) AS AVG_DERIVED_COUNT_0, SUM(amount) AS AVG_DERIVED_SUM_1 FROM t_order_0 GROUP BY user_id ORDER BY user_id",
            None,
            MergeSpec(
                3,
                group_by=(0,),
                aggregates=(AggregateItem(A.COUNT, 1), AggregateItem(A.AVG, 2, sum_index=4, count_index=3)),
                groups_sorted=True,
            ),
        ),
        (
            "SELECT COUNT(*) FROM t_order",
            None,
            "SELECT COUNT(*) FROM t_order_0",
            None,
            MergeSpec(1, aggregates=(AggregateItem(A.COUNT, 0),), node_rows=1),
        ),
        (
            "SELECT MIN(amount), MAX(amount), SUM(amount) FROM t_order",
            None,
            "SELECT MIN(amount), MAX(amount), SUM(amount) FROM t_order_0",
            None,
            MergeSpec(3, aggregates=(AggregateItem(A.MIN, 0), AggregateItem(A.MAX, 1), AggregateItem(A.SUM, 2)),
                      node_rows=1),
        ),
        (
            "SELECT SUM(amount) FROM t_order GROUP BY status",
            None,
            f"SELECT SUM(amount), status AS GROUP_BY_DERIVED_0, {W_STATUS} AS WEIGHT_DERIVED_1 FROM t_order_0 GROUP BY status ORDER BY status",
            None,
            MergeSpec(1, group_by=(1,), aggregates=(AggregateItem(A.SUM, 0),), groups_sorted=True, weights=((1, 2),)),
        ),
        (
            "SELECT COUNT(DISTINCT status), SUM(amount) FROM t_order",
            None,
            f"SELECT COUNT(DISTINCT status), SUM(amount), status AS AGGREGATION_DISTINCT_DERIVED_0, {W_STATUS} AS WEIGHT_DERIVED_1 FROM t_order_0 GROUP BY status",
            None,
            MergeSpec(2, aggregates=(AggregateItem(A.COUNT_DISTINCT, 0, distinct_index=2), AggregateItem(A.SUM, 1)),
                      weights=((2, 3),)),
        ),
        (
            "SELECT status, COUNT(*) FROM t_order GROUP BY status HAVING COUNT(*) > 1 AND MAX(amount) > 3 ORDER BY 2 DESC",
            None,
            f"SELECT status, COUNT(*), MAX(amount) AS `MAX(amount)`, {W_STATUS} AS WEIGHT_DERIVED_1 FROM t_order_0 GROUP BY status ORDER BY 2 DESC",
            None,
            MergeSpec(
                2,
                order_by=(OrderItem(1, True),),
                group_by=(0,),
                aggregates=(AggregateItem(A.COUNT, 1), AggregateItem(A.MAX, 2)),
                having_sql="COUNT(*) > 1 AND MAX(amount) > 3",
                weights=((0, 3),),
                having_bindings=(("count(*)", 1), ("max(amount)", 2)),
            ),
        ),
        (
            "SELECT DISTINCT status FROM t_order",
            None,
            f"SELECT DISTINCT status, {W_STATUS} AS WEIGHT_DERIVED_0 FROM t_order_0",
            None,
            MergeSpec(1, distinct=True, weights=((0, 1),)),
        ),
        (
            "SELECT t_order.status FROM t_order ORDER BY t_order.amount",
            None,
            "SELECT t_order_0.status, t_order_0.amount AS ORDER_BY_DERIVED_0 FROM t_order_0 ORDER BY t_order_0.amount",
            None,
            MergeSpec(1, order_by=(OrderItem(1),)),
        ),
        (
            "SELECT status AS s FROM t_order ORDER BY s",
            None,
            f"SELECT status AS s, {W_STATUS} AS WEIGHT_DERIVED_0 FROM t_order_0 ORDER BY s",
            None,
            MergeSpec(1, order_by=(OrderItem(0),), weights=((0, 1),)),
        ),
        ("SELECT status FROM t_order", None, "SELECT status FROM t_order_0", None, None),
    ],
)
def test_multi_node_select(
    kernel: ShardingKernel, sql: str, params: list[Any] | None, node_sql: str, node_params: Any, spec: MergeSpec | None
) -> None:
    routed = kernel.route(sql, params)
    assert len(routed.execution_units) == 4
    first = routed.execution_units[0]
    assert (first.sql, first.params) == (node_sql, node_params)
    assert routed.merge_spec == spec


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM t_order WHERE user_id = 1 AND order_id = 1 ORDER BY amount LIMIT 10, 5",
        "SELECT COUNT(*) FROM t_order WHERE user_id = 1 AND order_id = 1",
    ],
)
def test_single_unit_select_is_untouched(kernel: ShardingKernel, sql: str) -> None:
    routed = kernel.route(sql)
    assert [u.sql for u in routed.execution_units] == [sql.replace("t_order ", "t_order_1 ")]
    assert routed.merge_spec is None


@pytest.mark.parametrize(
    ("sql", "fragment"),
    [
        ("SELECT LENGTH(GROUP_CONCAT(status)) FROM t_order", "GROUP_CONCAT\\(status\\) inside an expression"),
        ("SELECT CONCAT(status, COUNT(*)) FROM t_order", "cannot be computed by the proxy"),
        ("SELECT user_id + COUNT(*) FROM t_order GROUP BY user_id", "the column user_id outside the aggregates"),
        ("SELECT STD(amount) + 1 FROM t_order", "StddevPop is an aggregate the merge does not implement"),
        ("SELECT * FROM t_log ORDER BY id", "list the columns"),
        ("SELECT status FROM t_order GROUP BY status WITH ROLLUP ORDER BY status", "ORDER BY with GROUP BY ... WITH ROLLUP"),
        ("SELECT status FROM t_order GROUP BY status DESC WITH ROLLUP", "cannot parse"),
    ],
)
def test_multi_node_select_refusals(kernel: ShardingKernel, sql: str, fragment: str) -> None:
    with pytest.raises(RoutingError, match=fragment):
        kernel.route(sql)


def test_backquotes_comments_and_hints_survive(kernel: ShardingKernel) -> None:
    sql = "SELECT /*+ MAX_EXECUTION_TIME(10) */ `t_order`.`status` FROM `t_order` # c\nWHERE `user_id` = 2 AND `order_id` = 3"
    routed = kernel.route(sql)
    assert [u.sql for u in routed.execution_units] == [
        "SELECT /*+ MAX_EXECUTION_TIME(10) */ `t_order_1`.`status` FROM `t_order_1` # c\nWHERE `user_id` = 2 AND `order_id` = 3"
    ]


# --- issue 13: names as MariaDB resolves them, OFFSET ... FETCH, SQL_CALC_FOUND_ROWS -----------------------


def test_group_by_name_of_an_alias_and_a_column_means_the_column(kernel: ShardingKernel) -> None:
    """MariaDB: 'Column user_id in GROUP BY is ambiguous' and groups by the column; the nodes' added
    ORDER BY must name it by position (as ORDER BY, user_id would mean the alias)."""
    routed = kernel.route("SELECT amount AS user_id, COUNT(*) FROM t_order GROUP BY user_id HAVING user_id > 3")
    # HAVING user_id means the GROUP BY column too: a condition on a group key, left to the nodes
    assert routed.execution_units[0].sql == (
        "SELECT amount AS user_id, COUNT(*), user_id AS GROUP_BY_DERIVED_0 FROM t_order_0 GROUP BY user_id "
        "HAVING (user_id > 3) ORDER BY 3")
    spec = routed.merge_spec
    assert spec is not None and spec.group_by == (2,) and spec.groups_sorted and spec.having_sql is None
    routed = kernel.route("SELECT amount AS user_id, COUNT(*) AS k FROM t_order GROUP BY user_id HAVING user_id > k")
    spec = routed.merge_spec
    assert spec is not None and spec.having_bindings == (("user_id", 2), ("k", 1))


@pytest.mark.parametrize(("sql", "index"), [
    ("SELECT -amount AS amount, order_id FROM t_order ORDER BY amount", 0),  # the alias
    ("SELECT amount AS x, -amount AS x, order_id FROM t_order ORDER BY x", 1),  # an expression's alias wins
    ("SELECT order_id, amount + 1 FROM t_order ORDER BY `amount + 1`", 1),  # the item's own name
])
def test_order_by_names(kernel: ShardingKernel, sql: str, index: int) -> None:
    spec = kernel.route(sql).merge_spec
    assert spec is not None and spec.order_by == (OrderItem(index),)


def test_qualified_order_by_name_ignores_aliases(kernel: ShardingKernel) -> None:
    routed = kernel.route("SELECT -amount AS amount FROM t_order ORDER BY t_order.amount")
    assert "t_order_0.amount AS ORDER_BY_DERIVED_0" in routed.execution_units[0].sql
    assert routed.merge_spec is not None and routed.merge_spec.order_by == (OrderItem(1),)


@pytest.mark.parametrize(("sql", "node_tail", "offset", "limit", "ties"), [
    ("SELECT order_id FROM t_order ORDER BY order_id OFFSET 5 ROWS FETCH FIRST 3 ROWS WITH TIES",
     "ORDER BY order_id OFFSET 0 ROWS FETCH FIRST 8 ROWS WITH TIES", 5, 3, True),
    ("SELECT order_id FROM t_order ORDER BY order_id OFFSET 2 ROWS FETCH NEXT ROW ONLY",
     "ORDER BY order_id OFFSET 0 ROWS FETCH NEXT 3 ROW ONLY", 2, 1, False),
    ("SELECT order_id FROM t_order ORDER BY order_id OFFSET 7 ROWS", "ORDER BY order_id OFFSET 0 ROWS", 7, None,
     False),
    ("SELECT user_id, COUNT(*) FROM t_order GROUP BY user_id ORDER BY COUNT(*) FETCH FIRST 2 ROWS ONLY",
     "GROUP BY user_id ORDER BY COUNT(*) ", 0, 2, False),
])
def test_offset_fetch_after_the_merge(kernel: ShardingKernel, sql: str, node_tail: str, offset: int,
                                      limit: int | None, ties: bool) -> None:
    routed = kernel.route(sql)
    assert routed.execution_units[0].sql.endswith(node_tail)
    spec = routed.merge_spec
    assert spec is not None and (spec.offset, spec.limit, spec.with_ties) == (offset, limit, ties)


def test_sql_calc_found_rows(kernel: ShardingKernel) -> None:
    routed = kernel.route("SELECT SQL_CALC_FOUND_ROWS order_id FROM t_order ORDER BY order_id LIMIT 0")
    assert routed.execution_units[0].sql == (
        "SELECT SQL_CALC_FOUND_ROWS order_id, COUNT(*) OVER () AS FOUND_ROWS_DERIVED_0 FROM t_order_0 "
        "ORDER BY order_id LIMIT 1")
    spec = routed.merge_spec
    assert spec is not None and (spec.found_rows, spec.found_rows_index, spec.limit) == ("window", 1, 0)
    grouped = kernel.route("SELECT SQL_CALC_FOUND_ROWS user_id, COUNT(*) FROM t_order GROUP BY user_id LIMIT 3")
    assert "LIMIT" not in grouped.execution_units[0].sql  # the merge counts the groups: it needs them all
    assert grouped.merge_spec is not None and grouped.merge_spec.found_rows == "count"


class _Collations:
    """METADATA plus each text column's collation, as proxy.backends.runtime.SchemaSnapshot.column_info
    answers it (a ColumnInfo-like object)."""

    def __init__(self, collation: str | None) -> None:
        self.collation = collation

    def __getattr__(self, name: str) -> Any:
        return getattr(METADATA, name)

    def column_info(self, logic_table: str, column: str) -> Any:
        data_type = METADATA.column_type(logic_table, column)
        text = data_type in ("varchar", "char")
        return None if data_type is None else type("Info", (), {"collation": self.collation if text else None})()


W_SHORT = "CONCAT(COLLATION(status), ':', @@max_sort_length, ':::', WEIGHT_STRING(status))"


@pytest.mark.parametrize(("collation", "weight"), [
    ("utf8mb4_general_ci", W_SHORT),  # one level: one WEIGHT_STRING, no level lengths
    ("latin1_swedish_ci", W_SHORT),
    ("utf8mb4_bin", W_SHORT),
    ("utf8mb4_uca1400_as_cs", W_STATUS),  # several levels: their lengths are needed
    ("latin2_czech_cs", W_STATUS),
    ("binary", W_STATUS),
    (None, W_STATUS),  # unknown
])
@pytest.mark.parametrize(("sql", "node_sql"), [
    ("SELECT status FROM t_order ORDER BY status", "SELECT status, {w} AS WEIGHT_DERIVED_0 FROM t_order_0 ORDER BY status"),
    ("SELECT DISTINCT status FROM t_order ORDER BY status", "SELECT DISTINCT status, {w} AS WEIGHT_DERIVED_0 FROM t_order_0 ORDER BY status"),
    ("SELECT * FROM t_order ORDER BY status", "SELECT *, {wq} AS WEIGHT_DERIVED_0 FROM t_order_0 ORDER BY status"),
    ("SELECT order_id FROM t_order ORDER BY status", "SELECT order_id, status AS ORDER_BY_DERIVED_0, {w} AS WEIGHT_DERIVED_1 FROM t_order_0 ORDER BY status"),
])
def test_weights_of_a_one_level_collation_column_are_asked_for_in_the_short_form(
    rules: Any, collation: str | None, weight: str, sql: str, node_sql: str,
) -> None:
    routed = ShardingKernel(rules, _Collations(collation)).route(sql)
    quoted = weight.replace("status", "`status`")  # a star's columns are named quoted
    assert routed.execution_units[0].sql == node_sql.format(w=weight, wq=quoted)


@pytest.mark.parametrize(
    ("sql", "params", "node_rows"),
    [
        ("SELECT status FROM t_order ORDER BY order_id LIMIT 10", None, 10),
        ("SELECT status FROM t_order ORDER BY order_id LIMIT 990, 10", None, 1000),
        ("SELECT status FROM t_order ORDER BY order_id LIMIT ? OFFSET ?", [10, 5], 15),
        ("SELECT status FROM t_order ORDER BY order_id LIMIT 0", None, 1),
        ("SELECT status FROM t_order ORDER BY order_id OFFSET 5 ROWS FETCH FIRST 3 ROWS ONLY", None, 8),
        ("SELECT status FROM t_order ORDER BY order_id FETCH FIRST ROW ONLY", None, 1),
        ("SELECT status FROM t_order ORDER BY order_id FETCH FIRST 3 ROWS WITH TIES", None, None),  # ties: any number
        ("SELECT status FROM t_order ORDER BY order_id OFFSET 5 ROWS", None, None),  # from row 0 to the end
        ("SELECT SQL_CALC_FOUND_ROWS status FROM t_order ORDER BY order_id LIMIT 3", None, 3),
        ("SELECT user_id, COUNT(*) FROM t_order GROUP BY user_id LIMIT 4", None, 4),  # groups in merge order
        ("SELECT user_id, COUNT(*) FROM t_order GROUP BY user_id ORDER BY 2 LIMIT 4", None, None),  # all groups
        ("SELECT user_id, COUNT(*) FROM t_order GROUP BY user_id HAVING COUNT(*) > 1 LIMIT 4", None, None),
        ("SELECT COUNT(*), MAX(amount) FROM t_order", None, 1),
        ("SELECT COUNT(*) FROM t_order LIMIT 5", None, 1),
        ("SELECT COUNT(DISTINCT status) FROM t_order", None, None),  # GROUP BY status on the nodes
        ("SELECT GROUP_CONCAT(status ORDER BY amount) FROM t_order", None, None),
        ("SELECT DISTINCT status FROM t_order", None, None),
        ("SELECT status FROM t_order ORDER BY amount", None, None),
    ],
)
def test_node_rows_bound(kernel: ShardingKernel, sql: str, params: list[Any] | None, node_rows: int | None) -> None:
    """MergeSpec.node_rows: the rows each node can return by its rewritten statement (the proxy pipelines units on
    one connection only within a bound, proxy.execution.multipath)."""
    routed = kernel.route(sql, params)
    assert len(routed.execution_units) == 4
    assert routed.merge_spec is not None and routed.merge_spec.node_rows == node_rows
