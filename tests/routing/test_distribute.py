"""The kernel's allow-list (routing.distribute): what a statement over several data nodes may contain.

A statement that routes to one data node runs unchanged whatever it holds; over several nodes every
construct must be one the kernel knows how to distribute, anything else is refused with 1235 naming it.
"""

from __future__ import annotations

import pytest
import sqlglot
from sqlglot import exp

from routing import distribute
from routing.distribute import ALLOWED, MERGED_AGGREGATES, REFUSED, ROW_LOCAL_FUNCTIONS
from routing.errors import RoutingError
from routing.kernel import ShardingKernel
from routing.rewrite import _AGGREGATES


def _expression_classes() -> set[type]:
    out: set[type] = set()
    pending = [exp.Expression]
    while pending:
        for sub in pending.pop().__subclasses__():
            if sub not in out:
                out.add(sub)
                pending.append(sub)
    return out


# --- the two explicit sets ------------------------------------------------------------------------------


def test_every_sqlglot_expression_class_is_allowed_or_refused_explicitly() -> None:
    """A new sqlglot release adding an expression class makes this fail: decide whether the kernel can
    distribute it (ALLOWED) or not (REFUSED) in routing/distribute.py."""
    names = {cls.__name__ for cls in _expression_classes()}
    unclassified = sorted(names - ALLOWED - REFUSED)
    assert not unclassified, f"classify these sqlglot classes in routing/distribute.py: {unclassified}"


def test_the_sets_are_disjoint_and_name_real_classes() -> None:
    assert not ALLOWED & REFUSED
    names = {cls.__name__ for cls in _expression_classes()}
    assert not (ALLOWED | REFUSED) - names, "names of classes sqlglot no longer has"


def test_the_merged_aggregates_are_the_ones_the_rewrite_merges() -> None:
    assert {cls.__name__ for cls in _AGGREGATES} == MERGED_AGGREGATES
    assert MERGED_AGGREGATES <= ALLOWED
    others = {c.__name__ for c in _expression_classes() if issubclass(c, exp.AggFunc)} - MERGED_AGGREGATES
    assert others <= REFUSED  # every other aggregate (and window function) is refused


@pytest.mark.parametrize("name", sorted(ROW_LOCAL_FUNCTIONS))
def test_row_local_function_names_are_what_sqlglot_leaves_anonymous(name: str) -> None:
    """The name list only matters for calls sqlglot does not model; a name it starts modelling lands in
    the class sets instead (and this test says the list entry is dead)."""
    node = sqlglot.parse_one(f"SELECT {name}(a, b) FROM t", read="mysql").expressions[0]
    assert isinstance(node, exp.Anonymous), f"{name} is now {type(node).__name__}: classify that class"
    assert name not in distribute._NOT_ROW_LOCAL_FUNCTIONS


# --- the kernel: several nodes refused, one node unchanged ------------------------------------------------


def _refusal(kernel: ShardingKernel, sql: str) -> str:
    with pytest.raises(RoutingError) as info:
        kernel.route(sql)
    assert info.value.errno == 1235 and info.value.sqlstate == "42000"
    return info.value.message


REFUSED_OVER_SEVERAL = [
    # item 1: window functions, named windows
    ("SELECT order_id, ROW_NUMBER() OVER (ORDER BY order_id) rn FROM t_order WHERE user_id = 1", "ROW_NUMBER()"),
    ("SELECT order_id, RANK() OVER w FROM t_order WHERE user_id = 1 WINDOW w AS (ORDER BY amount)",
     "a named WINDOW clause: a window function sees only the rows of the data node"),
    ("SELECT order_id, SUM(amount) OVER (PARTITION BY user_id) FROM t_order", "SUM(amount) OVER"),
    ("SELECT order_id FROM t_order ORDER BY ROW_NUMBER() OVER (ORDER BY amount)", "ROW_NUMBER()"),
    # item 2: subqueries that are not co-located with the outer rows
    ("DELETE FROM t_order WHERE NOT EXISTS (SELECT 1 FROM t_order_item i WHERE i.user_id = t_order.user_id)",
     "subquery on sharded table t_order_item"),
    ("UPDATE t_order SET status = 'x' WHERE EXISTS (SELECT 1 FROM t_order_item i WHERE i.user_id = t_order.user_id)",
     "subquery on sharded table t_order_item"),
    ("SELECT address_id FROM t_address a WHERE EXISTS (SELECT 1 FROM t_order o WHERE o.status = a.address_name)",
     "subquery on sharded table t_order"),
    ("SELECT order_id FROM t_order WHERE amount > ALL (SELECT amount FROM t_order_item)",
     "subquery on sharded table t_order_item"),
    ("SELECT order_id FROM t_order o WHERE o.user_id = SOME (SELECT i.user_id FROM t_order_item i)",
     "subquery on sharded table t_order_item"),
    ("SELECT order_id FROM t_order o WHERE EXISTS (SELECT 1 FROM t_other x WHERE x.user_id = o.user_id)",
     "subquery on sharded table t_other"),
    # correlated on the table sharding column of a binding table only: an item whose user_id differs from its
    # order's is on another node (issue 33)
    ("DELETE FROM t_order WHERE NOT EXISTS (SELECT 1 FROM t_order_item i WHERE i.order_id = t_order.order_id)",
     "add AND i.user_id = t_order.user_id"),
    ("SELECT o.order_id, (SELECT COUNT(*) FROM t_order_item i WHERE i.order_id = o.order_id) AS n FROM t_order o",
     "correlated subquery on sharded table t_order_item (i)"),
    # item 3: a broadcast table on the preserved side of an outer join with a sharded table
    ("SELECT a.address_id, o.order_id FROM t_address a LEFT JOIN t_order o ON o.status = a.address_name",
     "preserved side of an outer join"),
    ("SELECT a.address_id, o.order_id FROM t_order o RIGHT JOIN t_address a ON o.status = a.address_name",
     "preserved side of an outer join"),
    ("SELECT a.address_id, COUNT(*) FROM t_address a LEFT JOIN t_order o ON o.status = a.address_name "
     "GROUP BY a.address_id", "preserved side of an outer join"),
    ("SELECT a.address_id, COUNT(o.order_id) FROM t_address a LEFT JOIN t_order o ON o.status = a.address_name "
     "WHERE o.order_id IS NULL GROUP BY a.address_id", "preserved side of an outer join"),
    ("SELECT o.user_id, COUNT(o.order_id) FROM t_address a LEFT JOIN t_order o ON o.status = a.address_name "
     "GROUP BY o.user_id", "preserved side of an outer join"),
    ("SELECT a.address_id, SUM(a.address_id) FROM t_address a LEFT JOIN t_order o ON o.status = a.address_name "
     "GROUP BY a.address_id", "preserved side of an outer join"),
    ("SELECT u.id, o.order_id FROM t_user u LEFT JOIN t_order o ON o.user_id = u.id WHERE o.user_id IN (2, 4)",
     "preserved side of an outer join"),
    # item 6: aggregates the merge does not implement
    ("SELECT JSON_ARRAYAGG(order_id) FROM t_order", "JSON_ARRAYAGG"),
    ("SELECT user_id, JSON_OBJECTAGG(order_id, status) FROM t_order GROUP BY user_id", "JSON_OBJECTAGG"),
    ("SELECT STDDEV(amount) FROM t_order", "STDDEV_POP(amount)"),
    ("SELECT VARIANCE(amount) FROM t_order", "aggregate the merge does not implement"),
    ("SELECT user_id FROM t_order GROUP BY user_id ORDER BY CONCAT(SUM(amount), 'x')", "cannot be computed"),
    # functions the kernel does not know, or that are not row-local
    ("SELECT my_udf(order_id) FROM t_order", "MY_UDF()"),
    ("SELECT GET_LOCK('x', 1), order_id FROM t_order", "GET_LOCK"),
    ("SELECT USER(), order_id FROM t_order", "USER()"),
    ("SELECT IF(1, USER(), 'u@h'), order_id FROM t_order", "USER()"),  # evaluated: a node's value
    ("SELECT IF(0, 'u@h', USER()), order_id FROM t_order", "USER()"),
    ("SELECT IF(order_id, CONNECTION_ID(), 0) FROM t_order", "CONNECTION_ID()"),
    ("SELECT @n := @n + 1, order_id FROM t_order", "@n := @n + 1"),
    ("SELECT order_id FROM t_order ORDER BY RAND(7)", "RAND(seed)"),
    ("SELECT order_id FROM t_order WHERE MATCH (status) AGAINST ('paid')", "full-text"),
    # HAVING is evaluated by the merge: only what it computes
    ("SELECT user_id, COUNT(*) FROM t_order GROUP BY user_id HAVING COUNT(*) > (SELECT COUNT(*) FROM t_address)",
     "HAVING is evaluated by the proxy"),
    ("SELECT user_id, COUNT(*) c FROM t_order GROUP BY user_id HAVING ABS(c) > 2", "ABS(c)"),
    # clauses the rewrite does not handle
    ("SELECT user_id, COUNT(*) FROM t_order GROUP BY user_id WITH CUBE", "CUBE"),
    ("SELECT order_id FROM t_order PARTITION (p0)", "partition"),
]


@pytest.mark.parametrize(("sql", "fragment"), REFUSED_OVER_SEVERAL)
def test_refused_over_several_nodes(kernel: ShardingKernel, sql: str, fragment: str) -> None:
    message = _refusal(kernel, sql)
    assert fragment in message, message


def test_the_message_names_construct_table_rule_and_what_to_do(kernel: ShardingKernel) -> None:
    message = _refusal(kernel, "SELECT order_id, ROW_NUMBER() OVER (ORDER BY order_id) FROM t_order")
    assert message.startswith("ROW_NUMBER() OVER (ORDER BY order_id): a window function")
    assert "sharded table(s) t_order" in message
    assert "sharding rule of t_order: by user_id (data sources, db_mod) and order_id (tables, t_mod)" in message
    assert "add conditions on order_id, user_id that route it to one data node" in message


SINGLE_NODE = [
    # the same constructs, routed to one data node: sent as written, only table names spliced
    "SELECT order_id, ROW_NUMBER() OVER (ORDER BY order_id) rn FROM t_order WHERE user_id = 1 AND order_id = 3",
    "SELECT JSON_ARRAYAGG(order_id), STDDEV(amount) FROM t_order WHERE user_id = 2 AND order_id = 4",
    "SELECT my_udf(order_id), @n := @n + 1 FROM t_order WHERE user_id = 1 AND order_id = 1",
    "DELETE FROM t_order WHERE user_id = 1 AND order_id = 1 AND NOT EXISTS "
    "(SELECT 1 FROM t_order_item i WHERE i.user_id = 1 AND i.order_id = 1)",
    "SELECT address_id FROM t_address a WHERE EXISTS (SELECT 1 FROM t_order o WHERE o.user_id = 1 "
    "AND o.order_id = 3 AND o.status = a.address_name)",
    "SET @x = (SELECT MAX(order_id) FROM t_order WHERE user_id = 1 AND order_id = 3)",
]


@pytest.mark.parametrize("sql", SINGLE_NODE)
def test_single_node_statements_pass_unchanged(kernel: ShardingKernel, sql: str) -> None:
    routed = kernel.route(sql)
    assert len(routed.execution_units) == 1
    unit = routed.execution_units[0]
    expected = sql
    for logic, actual in routed.route_units[0].table_map.items():
        expected = expected.replace(f"{logic} ", f"{actual} ")
    assert unit.sql == expected


ANSWERED_OVER_SEVERAL = [
    # row-local functions of every kind (generous: nothing the merge answers today becomes a refusal)
    "SELECT CONCAT(status, '-', user_id), UPPER(status), LOWER(status), SUBSTRING(status, 1, 2), TRIM(status), "
    "LENGTH(status), CHAR_LENGTH(status), REPLACE(status, 'a', 'b'), LPAD(status, 5, 'x'), LEFT(status, 1), "
    "INSTR(status, 'a'), LOCATE('a', status), REVERSE(status), REPEAT(status, 2), HEX(status), MD5(status), "
    "SHA1(status), SHA2(status, 256), CRC32(status), FIELD(status, 'a', 'b'), FIND_IN_SET(status, 'a,b'), "
    "CONCAT_WS(',', status, user_id), ELT(1, status), SUBSTRING_INDEX(status, ',', 1), ORD(status) FROM t_order",
    "SELECT ABS(amount), ROUND(amount, 1), TRUNCATE(amount, 1), CEIL(amount), FLOOR(amount), MOD(user_id, 3), "
    "user_id % 3, user_id DIV 2, POW(user_id, 2), SQRT(user_id), LN(user_id), LOG10(user_id), SIGN(amount), "
    "GREATEST(user_id, 3), LEAST(user_id, 3), CONV(user_id, 10, 2), BIT_COUNT(user_id), user_id & 3, "
    "user_id | 4, user_id ^ 1, user_id << 1, ~user_id FROM t_order",
    "SELECT ATAN(user_id), ATAN(user_id, 2), ATAN2(user_id), ATAN2(user_id, 2) FROM t_order",  # ATAN2(x) = ATAN(x)
    "SELECT NOW(), CURDATE(), CURRENT_TIMESTAMP, DATE(NOW()), DATE_FORMAT(NOW(), '%Y'), YEAR(NOW()), "
    "MONTH(NOW()), DAY(NOW()), HOUR(NOW()), DATE_ADD(NOW(), INTERVAL 1 DAY), DATEDIFF(NOW(), NOW()), "
    "TIMESTAMPDIFF(DAY, NOW(), NOW()), UNIX_TIMESTAMP(), FROM_UNIXTIME(0), STR_TO_DATE('2024', '%Y'), "
    "EXTRACT(YEAR FROM NOW()), LAST_DAY(NOW()), WEEKDAY(NOW()), DAYNAME(NOW()), order_id FROM t_order",
    "SELECT CASE WHEN amount > 0 THEN 'p' WHEN amount < 0 THEN 'n' ELSE 'z' END, IF(amount > 0, 1, 0), "
    "IFNULL(amount, 0), COALESCE(amount, 0), NULLIF(amount, 0), CAST(amount AS CHAR), "
    "CONVERT(amount, SIGNED), amount IS NULL, ISNULL(amount), amount BETWEEN 1 AND 2, status LIKE 'p%', "
    "status REGEXP '^p', status COLLATE utf8mb4_bin, BINARY status, UUID(), RAND(), @v, @@session.sql_mode, "
    "JSON_OBJECT('a', order_id), JSON_ARRAY(order_id), JSON_EXTRACT('{\"a\": 1}', '$.a') FROM t_order",
    "SELECT user_id, COUNT(*), SUM(amount), MIN(amount), MAX(amount), AVG(amount), COUNT(DISTINCT status), "
    "BIT_OR(order_id), GROUP_CONCAT(order_id) FROM t_order GROUP BY user_id HAVING COUNT(*) > 1 "
    "ORDER BY user_id LIMIT 5",
    "SELECT UPPER(status), COUNT(*) AS c FROM t_order GROUP BY UPPER(status) HAVING UPPER(status) <> 'X' "
    "AND c BETWEEN 1 AND 9 AND MAX(amount) IS NOT NULL AND NOT (c IN (3, 4) OR UPPER(status) LIKE 'p%')",
    "SELECT DISTINCT user_id FROM t_order WHERE status IN ('a', 'b') AND NOT (user_id = 3) ORDER BY user_id",
    "SELECT /*+ MAX_EXECUTION_TIME(1000) */ order_id FROM t_order USE INDEX (PRIMARY) FOR UPDATE",
    # co-located subqueries (correlated on every sharding column of a binding table or the same table, database
    # and table level: issue 33, tests/routing/test_correlated_subqueries.py)
    "SELECT o.order_id FROM t_order o WHERE EXISTS (SELECT 1 FROM t_order_item i WHERE i.order_id = o.order_id "
    "AND i.user_id = o.user_id)",
    "SELECT o.order_id FROM t_order o WHERE NOT EXISTS (SELECT 1 FROM t_order_item i "
    "WHERE i.order_id = o.order_id AND i.user_id = o.user_id)",
    "DELETE FROM t_order WHERE NOT EXISTS (SELECT 1 FROM t_order_item i WHERE i.order_id = t_order.order_id "
    "AND i.user_id = t_order.user_id)",
    "SELECT o.order_id FROM t_order o WHERE o.order_id = SOME (SELECT i.order_id FROM t_order_item i "
    "WHERE i.order_id = o.order_id AND i.user_id = o.user_id)",
    "SELECT o.order_id FROM t_order o WHERE o.amount >= ALL (SELECT x.amount FROM t_order x "
    "WHERE x.order_id = o.order_id AND x.user_id = o.user_id)",
    "SELECT o.order_id, (SELECT COUNT(*) FROM t_order_item i WHERE i.order_id = o.order_id AND i.user_id = o.user_id) "
    "AS n FROM t_order o",
    # subqueries on broadcast tables
    "SELECT order_id FROM t_order WHERE user_id IN (SELECT address_id FROM t_address WHERE address_name = 'x')",
    "SELECT order_id FROM t_order o WHERE EXISTS (SELECT 1 FROM t_address a WHERE a.address_id = o.user_id)",
    # outer joins: the sharded table preserved, binding tables, and the harmless grouped forms
    "SELECT o.order_id, a.address_name FROM t_order o LEFT JOIN t_address a ON a.address_id = o.user_id",
    "SELECT o.order_id, i.order_item_id FROM t_order o LEFT JOIN t_order_item i ON i.order_id = o.order_id",
    "SELECT a.address_id, COUNT(o.order_id), SUM(o.amount), MAX(o.amount), COUNT(DISTINCT o.status) "
    "FROM t_address a LEFT JOIN t_order o ON o.user_id = a.address_id GROUP BY a.address_id ORDER BY a.address_id",
    "SELECT a.address_name, MIN(a.address_id), COUNT(o.order_id) AS n FROM t_address a LEFT JOIN t_order o "
    "ON o.user_id = a.address_id WHERE a.address_id < 9 GROUP BY a.address_name HAVING n > 0 ORDER BY n",
    "SELECT DISTINCT a.address_name FROM t_address a LEFT JOIN t_order o ON o.user_id = a.address_id",
    # item 13: LIMIT o, 18446744073709551615 (to the end)
    "SELECT order_id FROM t_order ORDER BY order_id LIMIT 5, 18446744073709551615",
    # IF(0, f(), v) never calls f(): the proxy's session functions typed as the call (proxy.session.metadata)
    "SELECT IF(0, USER(), 'u@h') AS `USER()`, order_id FROM t_order ORDER BY order_id",
    "SELECT user_id, COUNT(*), IF(0, LAST_INSERT_ID(), CAST(4 AS UNSIGNED)) AS `LAST_INSERT_ID()` FROM t_order "
    "GROUP BY user_id",
    "SELECT CONCAT(IF(FALSE, CONNECTION_ID(), CAST(7 AS UNSIGNED)), status) FROM t_order",
]


@pytest.mark.parametrize("sql", ANSWERED_OVER_SEVERAL)
def test_answered_over_several_nodes(kernel: ShardingKernel, sql: str) -> None:
    assert len(kernel.route(sql).execution_units) > 1


def test_a_correlated_subquery_does_not_narrow_the_outer_rows(kernel: ShardingKernel) -> None:
    """NOT EXISTS (... AND i.order_id = 3) keeps every outer row whose items are elsewhere:
    t_order_item must follow t_order's nodes, not restrict them to order 3's actual table."""
    routed = kernel.route(
        "SELECT * FROM t_order o WHERE NOT EXISTS (SELECT 1 FROM t_order_item i WHERE i.order_id = o.order_id "
        "AND i.user_id = o.user_id AND i.order_id = 3)"
    )
    assert [(u.data_source, dict(u.table_map)) for u in routed.route_units] == [
        (f"ds_{d}", {"t_order": f"t_order_{t}", "t_order_item": f"t_order_item_{t}"})
        for d in (0, 1) for t in (0, 1)
    ]


def test_limit_to_the_end_stays_a_valid_limit(kernel: ShardingKernel) -> None:
    routed = kernel.route("SELECT order_id FROM t_order ORDER BY order_id LIMIT 5, 18446744073709551615")
    assert all(u.sql.endswith("LIMIT 0, 18446744073709551615") for u in routed.execution_units)
    assert routed.merge_spec is not None
    assert (routed.merge_spec.offset, routed.merge_spec.limit) == (5, 18446744073709551615)
    prepared = kernel.route("SELECT order_id FROM t_order ORDER BY order_id LIMIT ?, ?", [5, 18446744073709551615])
    assert all(u.params == (0, 18446744073709551615) for u in prepared.execution_units)


# --- item 12: SET @v = (SELECT ...) ------------------------------------------------------------------------


def test_set_from_a_query_routed_to_one_node_is_rewritten(kernel: ShardingKernel) -> None:
    routed = kernel.route("SET @x = (SELECT MAX(order_id) FROM t_order WHERE user_id = 1 AND order_id = 3)")
    assert [(u.data_source, u.sql) for u in routed.execution_units] == [
        ("ds_1", "SET @x = (SELECT MAX(order_id) FROM t_order_1 WHERE user_id = 1 AND order_id = 3)")
    ]
    assert routed.set_variables == ("@x",)


def test_set_from_a_broadcast_or_single_table_runs_on_one_data_source(kernel: ShardingKernel) -> None:
    routed = kernel.route("SET @a := (SELECT MAX(address_id) FROM t_address)")
    assert [u.data_source for u in routed.execution_units] == ["ds_0"]
    assert routed.set_variables == ("@a",)
    routed = kernel.route("SET @s = (SELECT COUNT(*) FROM t_stat)")
    assert [u.data_source for u in routed.execution_units] == ["ds_1"]


def test_set_from_a_query_over_several_nodes_is_refused(kernel: ShardingKernel) -> None:
    message = _refusal(kernel, "SET @x = (SELECT MAX(order_id) FROM t_order)")
    assert "the subquery of this SET on sharded table t_order routes to several data nodes" in message
    message = _refusal(kernel, "SET SESSION sql_mode = (SELECT MAX(status) FROM t_order WHERE user_id = 1)")
    assert "only for user variables" in message


# --- writes to broadcast tables run on every data source: they must do the same there ------------------------


@pytest.mark.parametrize(("sql", "fragment"), [
    ("UPDATE t_address SET address_name = UUID()", "UUID()"),
    ("INSERT INTO t_address (address_id, address_name) VALUES (RAND() * 100, 'x')", "RAND()"),
    ("UPDATE t_address SET address_id = UUID_SHORT() WHERE address_id = 1", "UUID_SHORT()"),
    ("DELETE FROM t_address LIMIT 1", "LIMIT without ORDER BY"),
    ("UPDATE t_address SET address_name = 'x' LIMIT 2", "LIMIT without ORDER BY"),
])
def test_broadcast_writes_that_would_diverge_are_refused(kernel: ShardingKernel, sql: str, fragment: str) -> None:
    message = _refusal(kernel, sql)
    assert fragment in message and "copies of broadcast table t_address" in message, message


@pytest.mark.parametrize("sql", [
    "UPDATE t_address SET address_name = CONCAT(address_name, NOW()) WHERE address_id = 1",
    "DELETE FROM t_address ORDER BY address_id LIMIT 1",
    "INSERT INTO t_address (address_id, address_name) VALUES (1, 'a')",
    "SELECT RAND(), UUID() FROM t_address",  # a read: one data source
])
def test_repeatable_broadcast_statements_are_accepted(kernel: ShardingKernel, sql: str) -> None:
    kernel.route(sql)
