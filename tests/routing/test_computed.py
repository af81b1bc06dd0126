# ruff: noqa: E501  (table-driven: one case per line)
"""Expressions over aggregates planned for the merge (routing.computed): the node query keeps the item (its
column definition) and gains the partial aggregates; the merge computes the item from ``__c<N>`` names."""

from __future__ import annotations

from typing import Any

import pytest

from routing.kernel import ShardingKernel


# (sql, params, node SQL of the first unit, computed items of the merge spec)
@pytest.mark.parametrize(("sql", "params", "node_sql", "computed"), [
    ("SELECT COUNT(*) + 1 FROM t_order", None, "SELECT COUNT(*) + 1, COUNT(*) AS AGGREGATION_EXPR_DERIVED_0, @@div_precision_increment AS DIV_PRECISION_DERIVED_1 FROM t_order_0", ((0, " __c1  + 1"),)),
    ("SELECT COUNT(*) + ? FROM t_order", [5], "SELECT COUNT(*) + ?, COUNT(*) AS AGGREGATION_EXPR_DERIVED_0, @@div_precision_increment AS DIV_PRECISION_DERIVED_1 FROM t_order_0", ((0, " __c1  + 5"),)),
    ("SELECT IFNULL(SUM(amount * 2), 0) AS s FROM t_order", None, "SELECT IFNULL(SUM(amount * 2), 0) AS s, SUM(amount * 2) AS AGGREGATION_EXPR_DERIVED_0, @@div_precision_increment AS DIV_PRECISION_DERIVED_1 FROM t_order_0", ((0, "IFNULL( __c1 , 0)"),)),
    ("SELECT ROUND(AVG(amount), 2) FROM t_order", None, "SELECT ROUND(AVG(amount), 2), COUNT(amount) AS AVG_DERIVED_COUNT_0, SUM(amount) AS AVG_DERIVED_SUM_1, @@div_precision_increment AS DIV_PRECISION_DERIVED_2 FROM t_order_0", ((0, "ROUND( (__c2 / __c1) , 2)"),)),
    ("SELECT COUNT(DISTINCT status) * 2 FROM t_order", None, "SELECT COUNT(DISTINCT status) * 2, status AS AGGREGATION_DISTINCT_DERIVED_0, COUNT(DISTINCT status) AS AGGREGATION_EXPR_DERIVED_1, @@div_precision_increment AS DIV_PRECISION_DERIVED_2, IF(COLLATION(status) = 'binary', NULL, CONCAT(COLLATION(status), ':', @@max_sort_length, ':', LENGTH(WEIGHT_STRING(IF(status = RTRIM(status), RTRIM(status), status) /*M! LEVEL 1 */)), ':', LENGTH(WEIGHT_STRING(IF(status = RTRIM(status), RTRIM(status), status) /*M! LEVEL 1, 2 */)), ':', WEIGHT_STRING(IF(status = RTRIM(status), RTRIM(status), status)))) AS WEIGHT_DERIVED_3 FROM t_order_0 GROUP BY status", ((0, " __c2  * 2"),)),
    ("SELECT user_id FROM t_order GROUP BY user_id ORDER BY MAX(amount) - MIN(amount)", None, "SELECT user_id, MAX(amount) - MIN(amount) AS ORDER_BY_DERIVED_0, MAX(amount) AS AGGREGATION_EXPR_DERIVED_1, MIN(amount) AS AGGREGATION_EXPR_DERIVED_2, @@div_precision_increment AS DIV_PRECISION_DERIVED_3 FROM t_order_0 GROUP BY user_id ORDER BY MAX(amount) - MIN(amount)", ((1, " __c2  -  __c3 "),)),
])
def test_computed_items_are_planned(kernel: ShardingKernel, sql: str, params: list[Any] | None, node_sql: str, computed: tuple[tuple[int, str], ...]) -> None:
    routed = kernel.route(sql, params) if params is not None else kernel.route(sql)
    assert routed.execution_units[0].sql == node_sql
    assert routed.merge_spec is not None and routed.merge_spec.computed == computed


def test_having_avg_divides_the_merged_sum_and_count(kernel: ShardingKernel) -> None:
    routed = kernel.route("SELECT user_id FROM t_order GROUP BY user_id HAVING AVG(amount) > 3")
    assert "COUNT(amount) AS HAVING_AVG_COUNT_0, SUM(amount) AS HAVING_AVG_SUM_1" in routed.execution_units[0].sql
    spec = routed.merge_spec
    assert spec is not None and dict(spec.having_bindings)["avg_sum:avg(amount)"] == 2 and spec.increment_index == 3
