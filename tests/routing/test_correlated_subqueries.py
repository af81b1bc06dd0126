# ruff: noqa: E501  (table-driven: one case per line)
"""Issue 33, section 2: one rule for every correlated subquery, wherever it stands (select list, WHERE
comparison, IN / NOT IN, EXISTS / NOT EXISTS, ANY / ALL, HAVING, ORDER BY, inside a derived table).

t_order and t_order_item: data source by user_id % 2, table by order_id % 2, binding tables. A subquery is
pushed down node by node only when every data node holds all the rows it can see for each of its outer rows:

* its correlation equates EVERY sharding column of the two tables (order_id AND user_id; the binding
  declaration is not trusted for the database level, an item whose user_id differs from its order's lives
  on another node), or
* it reads a broadcast table (a full copy on every data source), or
* the statement runs on one data node and the subquery's own conditions route it to that same node (a
  single-node outer route alone is not enough: the inner rows may be elsewhere).

Anything else is refused by the kernel with 1235; a SELECT is then answered by federation
(routing.federation), a write keeps the refusal.
"""

from __future__ import annotations

import pytest

from routing.errors import RoutingError
from routing.federation import federation_plan
from routing.kernel import ShardingKernel
from tests.routing.conftest import METADATA

PUSHED = "pushed"  # routed by the kernel over several data nodes, the subquery sent as written
ONE = "one"  # routed by the kernel to one data node
FEDERATED = "federated"  # refused by the kernel, answered by federation
REFUSED = "refused"  # refused, and not a statement federation takes (a write)

SCALAR = "SELECT o.order_id, (SELECT COUNT(*) FROM t_order_item i WHERE {c}) AS n FROM t_order o"

CASES = [
    # the statement: select-list scalar subquery
    (SCALAR.format(c="i.order_id = o.order_id") + " ORDER BY o.order_id", FEDERATED),
    (SCALAR.format(c="i.order_id = o.order_id AND i.user_id = o.user_id") + " ORDER BY o.order_id", PUSHED),
    (SCALAR.format(c="o.user_id = i.user_id AND o.order_id = i.order_id AND i.status = 'x'"), PUSHED),
    (SCALAR.format(c="i.user_id = o.user_id"), FEDERATED),
    (SCALAR.format(c="i.status = o.status"), FEDERATED),
    # the correlation through another table of the subquery: i.order_id = x.order_id = o.order_id, same for user_id
    ("SELECT o.order_id, (SELECT MAX(i.status) FROM t_order_item i, t_order x WHERE x.order_id = o.order_id AND x.user_id = o.user_id AND i.order_id = x.order_id AND i.user_id = x.user_id) FROM t_order o", PUSHED),
    # WHERE scalar comparison
    ("SELECT o.order_id FROM t_order o WHERE o.status = (SELECT MIN(i.status) FROM t_order_item i WHERE i.order_id = o.order_id)", FEDERATED),
    ("SELECT o.order_id FROM t_order o WHERE o.status = (SELECT MIN(i.status) FROM t_order_item i WHERE i.order_id = o.order_id AND i.user_id = o.user_id)", PUSHED),
    ("SELECT o.order_id FROM t_order o WHERE (SELECT COUNT(*) FROM t_order_item i WHERE i.order_id = o.order_id) > 1", FEDERATED),
    ("SELECT o.order_id FROM t_order o WHERE 1 < (SELECT COUNT(*) FROM t_order_item i WHERE i.user_id = o.user_id AND i.order_id = o.order_id)", PUSHED),
    # IN / NOT IN
    ("SELECT o.order_id FROM t_order o WHERE o.status IN (SELECT i.status FROM t_order_item i WHERE i.order_id = o.order_id)", FEDERATED),
    ("SELECT o.order_id FROM t_order o WHERE o.status IN (SELECT i.status FROM t_order_item i WHERE i.order_id = o.order_id AND i.user_id = o.user_id)", PUSHED),
    ("SELECT o.order_id FROM t_order o WHERE o.status NOT IN (SELECT i.status FROM t_order_item i WHERE i.order_id = o.order_id)", FEDERATED),
    ("SELECT o.order_id FROM t_order o WHERE o.status NOT IN (SELECT i.status FROM t_order_item i WHERE i.order_id = o.order_id AND i.user_id = o.user_id)", PUSHED),
    # EXISTS / NOT EXISTS
    ("SELECT o.order_id FROM t_order o WHERE EXISTS (SELECT 1 FROM t_order_item i WHERE i.order_id = o.order_id)", FEDERATED),
    ("SELECT o.order_id FROM t_order o WHERE EXISTS (SELECT 1 FROM t_order_item i WHERE i.order_id = o.order_id AND i.user_id = o.user_id)", PUSHED),
    ("SELECT o.order_id FROM t_order o WHERE NOT EXISTS (SELECT 1 FROM t_order_item i WHERE i.order_id = o.order_id)", FEDERATED),
    ("SELECT o.order_id FROM t_order o WHERE NOT EXISTS (SELECT 1 FROM t_order_item i WHERE i.order_id = o.order_id AND i.user_id = o.user_id)", PUSHED),
    ("SELECT o.order_id FROM t_order o WHERE NOT EXISTS (SELECT 1 FROM t_order_item i WHERE i.user_id = o.user_id)", FEDERATED),
    # ANY / ALL
    ("SELECT o.order_id FROM t_order o WHERE o.order_id = SOME (SELECT i.order_id FROM t_order_item i WHERE i.order_id = o.order_id)", FEDERATED),
    ("SELECT o.order_id FROM t_order o WHERE o.amount >= ALL (SELECT x.amount FROM t_order x WHERE x.order_id = o.order_id AND x.user_id = o.user_id)", PUSHED),
    # the same table: the binding declaration never helped there
    ("SELECT o.order_id FROM t_order o WHERE o.amount >= ALL (SELECT x.amount FROM t_order x WHERE x.user_id = o.user_id)", FEDERATED),
    # HAVING, ORDER BY, a derived table around it
    ("SELECT o.user_id, COUNT(*) FROM t_order o GROUP BY o.user_id HAVING COUNT(*) > (SELECT COUNT(*) FROM t_order_item i WHERE i.user_id = o.user_id)", FEDERATED),
    ("SELECT o.order_id FROM t_order o ORDER BY (SELECT COUNT(*) FROM t_order_item i WHERE i.order_id = o.order_id), o.order_id", FEDERATED),
    ("SELECT o.order_id FROM t_order o ORDER BY (SELECT COUNT(*) FROM t_order_item i WHERE i.order_id = o.order_id AND i.user_id = o.user_id), o.order_id", PUSHED),
    ("SELECT x.order_id, x.n FROM (SELECT o.order_id, (SELECT COUNT(*) FROM t_order_item i WHERE i.order_id = o.order_id) n FROM t_order o) x", FEDERATED),
    # other places: a join's ON, inside CASE, a UNION branch, unqualified inner columns
    ("SELECT o.order_id, a.address_name FROM t_order o JOIN t_address a ON a.address_id = (SELECT MIN(i.user_id) FROM t_order_item i WHERE i.order_id = o.order_id)", FEDERATED),
    ("SELECT o.order_id, a.address_name FROM t_order o JOIN t_address a ON a.address_id = (SELECT MIN(i.user_id) FROM t_order_item i WHERE i.order_id = o.order_id AND i.user_id = o.user_id)", PUSHED),
    ("SELECT o.order_id, CASE WHEN EXISTS (SELECT 1 FROM t_order_item i WHERE i.order_id = o.order_id) THEN 'y' ELSE 'n' END FROM t_order o", FEDERATED),
    ("SELECT o.order_id FROM t_order o WHERE o.user_id = 1 UNION ALL SELECT o.order_id FROM t_order o WHERE EXISTS (SELECT 1 FROM t_order_item i WHERE i.order_id = o.order_id)", FEDERATED),
    ("SELECT o.order_id, (SELECT COUNT(*) FROM t_order_item i WHERE order_id = o.order_id AND user_id = o.user_id) FROM t_order o", PUSHED),
    ("SELECT o.order_id, (SELECT COUNT(*) FROM t_order_item i WHERE order_id = o.order_id) FROM t_order o", FEDERATED),
    # correlated with a derived table's columns: nothing proves where its rows are
    ("SELECT d.order_id, (SELECT COUNT(*) FROM t_order_item i WHERE i.order_id = d.order_id AND i.user_id = d.user_id) FROM (SELECT order_id, user_id FROM t_order) d", FEDERATED),
    # nested twice: the innermost anchored through the middle one
    ("SELECT o.order_id FROM t_order o WHERE EXISTS (SELECT 1 FROM t_order_item i WHERE i.order_id = o.order_id AND i.user_id = o.user_id AND EXISTS (SELECT 1 FROM t_order x WHERE x.order_id = i.order_id AND x.user_id = i.user_id))", PUSHED),
    ("SELECT o.order_id FROM t_order o WHERE EXISTS (SELECT 1 FROM t_order_item i WHERE i.order_id = o.order_id AND i.user_id = o.user_id AND EXISTS (SELECT 1 FROM t_order x WHERE x.order_id = i.order_id))", FEDERATED),
    # broadcast tables: on every data source, correlated or not
    ("SELECT o.order_id, (SELECT a.address_name FROM t_address a WHERE a.address_id = o.user_id) FROM t_order o", PUSHED),
    ("SELECT o.order_id FROM t_order o WHERE EXISTS (SELECT 1 FROM t_address a WHERE a.address_name = o.status)", PUSHED),
    ("SELECT order_id FROM t_order WHERE user_id IN (SELECT address_id FROM t_address WHERE address_name = 'x')", PUSHED),
    # a single-node outer route is not enough when the inner rows may be elsewhere
    (SCALAR.format(c="i.order_id = o.order_id") + " WHERE o.user_id = 1 AND o.order_id = 1", FEDERATED),
    (SCALAR.format(c="i.order_id = o.order_id") + " WHERE o.user_id = 1", FEDERATED),
    ("SELECT o.order_id FROM t_order o WHERE o.user_id = 1 AND o.order_id = 1 AND EXISTS (SELECT 1 FROM t_order_item i WHERE i.order_id = o.order_id)", FEDERATED),
    # ... nor its inner table narrowed to another set of nodes than the outer one
    (SCALAR.format(c="i.order_id = o.order_id AND i.user_id = 1") + " WHERE o.user_id = 1 AND o.order_id = 1", FEDERATED),
    # ... but the inner subquery routed by its own conditions to the outer row's one node is
    (SCALAR.format(c="i.order_id = 1 AND i.user_id = 1") + " WHERE o.user_id = 1 AND o.order_id = 1", ONE),
    (SCALAR.format(c="i.order_id = o.order_id AND i.order_id = 3 AND i.user_id = 1") + " WHERE o.user_id = 1 AND o.order_id = 3", ONE),
    # ... and a complete correlation follows the outer route whatever the inner conditions say
    (SCALAR.format(c="i.order_id = o.order_id AND i.user_id = o.user_id") + " WHERE o.user_id = 1 AND o.order_id = 1", ONE),
    (SCALAR.format(c="i.order_id = o.order_id AND i.user_id = o.user_id AND i.user_id = 3") + " WHERE o.user_id = 1 AND o.order_id = 1", ONE),
    # uncorrelated subqueries: as before (over several nodes: federated; on one node: unchanged)
    ("SELECT COUNT(*) FROM t_order WHERE order_id IN (SELECT order_id FROM t_order_item)", FEDERATED),
    ("SELECT order_id, (SELECT COUNT(*) FROM t_order_item) FROM t_order", FEDERATED),
    ("SELECT o.order_id FROM t_order o WHERE o.user_id = 1 AND o.order_id = 1 AND o.order_id IN (SELECT i.order_id FROM t_order_item i WHERE i.user_id = 1 AND i.order_id = 1)", ONE),
    ("SELECT o.order_id FROM t_order o WHERE o.user_id = 1 AND o.order_id = 1 AND o.order_id IN (SELECT i.order_id FROM t_order_item i WHERE i.user_id = 1)", FEDERATED),
    # writes: pushed down when exact, else refused (federation answers SELECTs only)
    ("DELETE FROM t_order WHERE NOT EXISTS (SELECT 1 FROM t_order_item i WHERE i.order_id = t_order.order_id)", REFUSED),
    ("DELETE FROM t_order WHERE NOT EXISTS (SELECT 1 FROM t_order_item i WHERE i.order_id = t_order.order_id AND i.user_id = t_order.user_id)", PUSHED),
    ("UPDATE t_order o SET o.status = 'has' WHERE EXISTS (SELECT 1 FROM t_order_item i WHERE i.order_id = o.order_id)", REFUSED),
    ("UPDATE t_order o SET o.status = 'has' WHERE EXISTS (SELECT 1 FROM t_order_item i WHERE i.order_id = o.order_id AND i.user_id = o.user_id)", PUSHED),
    ("UPDATE t_order o SET o.status = (SELECT MAX(i.status) FROM t_order_item i WHERE i.order_id = o.order_id) WHERE o.user_id = 1 AND o.order_id = 1", REFUSED),
    ("UPDATE t_order o SET o.status = (SELECT MAX(i.status) FROM t_order_item i WHERE i.order_id = o.order_id AND i.user_id = o.user_id)", PUSHED),
]


def outcome(kernel: ShardingKernel, sql: str) -> str:
    try:
        routed = kernel.route(sql)
    except RoutingError as refusal:
        assert refusal.errno == 1235 and refusal.sqlstate == "42000"
        return FEDERATED if federation_plan(sql, kernel.rules, METADATA) is not None else REFUSED
    return ONE if len(routed.execution_units) == 1 else PUSHED


@pytest.mark.parametrize(("sql", "expected"), CASES, ids=[f"{i}-{e}" for i, (_, e) in enumerate(CASES)])
def test_correlated_subqueries(kernel: ShardingKernel, sql: str, expected: str) -> None:
    assert outcome(kernel, sql) == expected


def test_a_pushed_down_statement_keeps_the_subquery_as_written(kernel: ShardingKernel) -> None:
    sql = SCALAR.format(c="i.order_id = o.order_id AND i.user_id = o.user_id")
    routed = kernel.route(sql)
    assert [(u.data_source, u.sql) for u in routed.execution_units] == [
        (f"ds_{d}", sql.replace("t_order_item i", f"t_order_item_{t} i").replace("t_order o", f"t_order_{t} o"))
        for d in (0, 1) for t in (0, 1)
    ]


def _refusal(kernel: ShardingKernel, sql: str) -> str:
    with pytest.raises(RoutingError) as info:
        kernel.route(sql)
    assert info.value.errno == 1235 and info.value.sqlstate == "42000"
    return info.value.message


def test_the_refusal_names_construct_tables_rule_missing_columns_and_fix(kernel: ShardingKernel) -> None:
    message = _refusal(kernel, SCALAR.format(c="i.order_id = o.order_id"))
    assert message.startswith("correlated subquery on sharded table t_order_item (i) cannot run node by node: "
                              "its correlation with t_order (o) equates i.order_id = o.order_id but not "
                              "i.user_id = o.user_id"), message
    assert "sharding rule of t_order_item: by user_id (data sources, db_mod) and order_id (tables, t_mod)" in message
    assert "every sharding column of t_order_item and t_order" in message
    assert "add AND i.user_id = o.user_id to the subquery's WHERE" in message


def test_the_refusal_of_a_write(kernel: ShardingKernel) -> None:
    message = _refusal(kernel, "DELETE FROM t_order WHERE NOT EXISTS (SELECT 1 FROM t_order_item i WHERE i.order_id = t_order.order_id)")
    assert "correlated subquery on sharded table t_order_item (i)" in message
    assert "add AND i.user_id = t_order.user_id" in message


def test_the_refusal_lists_every_missing_column(kernel: ShardingKernel) -> None:
    message = _refusal(kernel, SCALAR.format(c="i.status = o.status"))
    assert "its correlation with t_order (o) does not equate i.user_id = o.user_id and i.order_id = o.order_id" in message
    assert "add AND i.user_id = o.user_id AND i.order_id = o.order_id to the subquery's WHERE" in message


def test_the_same_table_names_no_binding(kernel: ShardingKernel) -> None:
    message = _refusal(kernel, "SELECT o.order_id FROM t_order o WHERE o.amount >= ALL (SELECT x.amount FROM t_order x WHERE x.user_id = o.user_id)")
    assert "its correlation with t_order (o) equates x.user_id = o.user_id but not x.order_id = o.order_id" in message
    assert "binding declaration" not in message


def test_a_single_node_outer_route_with_a_wider_inner_one_is_refused(kernel: ShardingKernel) -> None:
    """The outer rows on ds_1.t_order_1; the subquery's items with order_id 1 may be on ds_0 too."""
    message = _refusal(kernel, SCALAR.format(c="i.order_id = o.order_id") + " WHERE o.user_id = 1 AND o.order_id = 1")
    assert "add AND i.user_id = o.user_id" in message


def test_an_uncorrelated_subquery_keeps_its_message(kernel: ShardingKernel) -> None:
    message = _refusal(kernel, "SELECT COUNT(*) FROM t_order WHERE order_id IN (SELECT order_id FROM t_order_item)")
    assert message.startswith("the subquery on sharded table t_order_item routes to several data nodes")


def test_prepared_values_route_the_same(kernel: ShardingKernel) -> None:
    """The check runs per call: the same prepared shape is answered on one node or refused by its values."""
    sql = SCALAR.format(c="i.order_id = ? AND i.user_id = ?") + " WHERE o.user_id = ? AND o.order_id = ?"
    assert len(kernel.route(sql, [3, 1, 1, 3]).execution_units) == 1
    with pytest.raises(RoutingError):
        kernel.route(sql, [3, 2, 1, 3])  # the items of user 2 are on ds_0, the order on ds_1
    routed = kernel.route(sql, [4, 1, 1, 3])  # another actual table on the same data source: one unit holds both
    assert [(u.data_source, dict(u.table_map)) for u in routed.route_units] == [
        ("ds_1", {"t_order": "t_order_1", "t_order_item": "t_order_item_0"})]
    assert len(kernel.route(sql, [3, 1, 1, 3]).execution_units) == 1


def test_the_correlated_one_is_named_among_several_subqueries(kernel: ShardingKernel) -> None:
    message = _refusal(kernel, "SELECT o.order_id, (SELECT COUNT(*) FROM t_order_item) AS a, (SELECT COUNT(*) "
                               "FROM t_order_item i WHERE i.order_id = o.order_id) AS b FROM t_order o")
    assert message.startswith("correlated subquery on sharded table t_order_item (i)"), message


def test_a_broadcast_outer_table_is_named(kernel: ShardingKernel) -> None:
    message = _refusal(kernel, "SELECT a.address_id FROM t_address a WHERE EXISTS (SELECT 1 FROM t_order o "
                               "WHERE o.status = a.address_name)")
    assert message.startswith("correlated subquery on sharded table t_order (o) cannot run node by node: the table "
                              "it is correlated with (a) is neither t_order itself nor a binding table of it"), message
