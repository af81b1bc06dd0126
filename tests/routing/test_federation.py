"""routing.federation: which statements are federated, the reads that fill the copies (with the conditions
pushed down only where that is exact) and the statement text with only the table references spliced."""

from __future__ import annotations

import pytest

from routing.federation import federation_plan, preview_rows
from routing.kernel import ShardingKernel
from tests.routing.conftest import METADATA, build_rules

RULES = build_rules()
NAMES = {i: f"s{i}" for i in range(8)}

# (statement, host, rendered on the host, reads: one per copied occurrence, `=k`: copied from read k)
PLANS = [
    ("SELECT * FROM t_order o WHERE o.order_id IN (SELECT order_id FROM t_order_item WHERE status = 'x')", "ds_0",
     "SELECT * FROM `s0` o WHERE o.order_id IN (SELECT order_id FROM `s1` AS `t_order_item` WHERE status = 'x')",
     ["SELECT * FROM `t_order` AS `o`", "SELECT * FROM `t_order_item` WHERE (`status` = 'x')"]),
    ("SELECT a.order_id FROM t_order a JOIN t_order b ON a.status = b.status WHERE a.user_id = 3 AND b.amount > 1",
     "ds_0", "SELECT a.order_id FROM `s0` a JOIN `s1` b ON a.status = b.status WHERE a.user_id = 3 AND b.amount > 1",
     ["SELECT * FROM `t_order` AS `a` WHERE (`a`.`user_id` = 3)",
      "SELECT * FROM `t_order` AS `b` WHERE (`b`.`amount` > 1)"]),
    ("SELECT COUNT(*) FROM t_order a JOIN t_order b ON a.status = b.status", "ds_0",
     "SELECT COUNT(*) FROM `s0` a JOIN `s1` b ON a.status = b.status",
     ["SELECT * FROM `t_order` AS `a`", "SELECT * FROM `t_order` AS `b`"]),
    ("SELECT COUNT(*) FROM t_order JOIN t_order_item USING (order_id) UNION SELECT COUNT(*) FROM t_order", "ds_0",
     "SELECT COUNT(*) FROM `s0` AS `t_order` JOIN `s1` AS `t_order_item` USING (order_id) UNION SELECT COUNT(*) "
     "FROM `s2` AS `t_order`",
     ["SELECT * FROM `t_order`", "SELECT * FROM `t_order_item`", "=0"]),
    ("SELECT * FROM sharding_db.t_order WHERE sharding_db.t_order.user_id = 1", "ds_0",
     "SELECT * FROM `s0` AS `t_order` WHERE t_order.user_id = 1", ["SELECT * FROM `t_order`"]),
    ("SELECT u.id FROM t_user u LEFT JOIN t_order o ON o.user_id = u.id AND o.status = 'x' WHERE o.amount IS NULL",
     "ds_0", "SELECT u.id FROM t_user u LEFT JOIN `s0` o ON o.user_id = u.id AND o.status = 'x' WHERE "
     "o.amount IS NULL", ["SELECT * FROM `t_order` AS `o`"]),
    ("SELECT o.order_id FROM t_order o LEFT JOIN t_order_item i ON i.user_id = o.user_id WHERE o.amount > 5", "ds_0",
     "SELECT o.order_id FROM `s0` o LEFT JOIN `s1` i ON i.user_id = o.user_id WHERE o.amount > 5",
     ["SELECT * FROM `t_order` AS `o` WHERE (`o`.`amount` > 5)", "SELECT * FROM `t_order_item` AS `i`"]),
    ("SELECT o.order_id FROM t_order o RIGHT JOIN t_address a ON a.address_id = o.user_id WHERE o.amount > 5",
     "ds_0", "SELECT o.order_id FROM `s0` o RIGHT JOIN t_address a ON a.address_id = o.user_id WHERE o.amount > 5",
     ["SELECT * FROM `t_order` AS `o`"]),
    ("SELECT s.x, o.order_id FROM t_stat s JOIN t_order o ON o.user_id = s.x WHERE o.user_id IN (?, ?) "
     "AND s.x > ?", "ds_1",
     "SELECT s.x, o.order_id FROM t_stat s JOIN `s0` o ON o.user_id = s.x WHERE o.user_id IN (?, ?) AND s.x > ?",
     ["SELECT * FROM `t_order` AS `o` WHERE (`o`.`user_id` IN (?, ?))"]),
    ("SELECT * FROM t_user u JOIN t_stat s ON s.x = u.id", "ds_0", "SELECT * FROM t_user u JOIN `s0` s ON s.x = u.id",
     ["SELECT * FROM `t_stat` AS `s`"]),
    ("SELECT o.order_id FROM t_order o WHERE EXISTS (SELECT 1 FROM t_order_item i WHERE i.user_id = o.user_id "
     "AND i.status = 'x' AND status = 'y')", "ds_0",
     "SELECT o.order_id FROM `s0` o WHERE EXISTS (SELECT 1 FROM `s1` i WHERE i.user_id = o.user_id AND "
     "i.status = 'x' AND status = 'y')",
     ["SELECT * FROM `t_order` AS `o`", "SELECT * FROM `t_order_item` AS `i` WHERE (`i`.`status` = 'x') AND "
      "(`status` = 'y')"]),
    ("SELECT o.order_id FROM t_order o WHERE o.user_id = 1 AND (o.amount > 3 OR o.status LIKE 'a%') AND "
     "LOWER(o.status) = 'x' AND o.status IN (SELECT status FROM t_order_item)", "ds_0",
     "SELECT o.order_id FROM `s0` o WHERE o.user_id = 1 AND (o.amount > 3 OR o.status LIKE 'a%') AND "
     "LOWER(o.status) = 'x' AND o.status IN (SELECT status FROM `s1` AS `t_order_item`)",
     ["SELECT * FROM `t_order` AS `o` WHERE (`o`.`user_id` = 1) AND (`o`.`amount` > 3 OR `o`.`status` LIKE 'a%')",
      "SELECT * FROM `t_order_item`"]),
    ("WITH RECURSIVE r (n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 3) SELECT * FROM r JOIN t_order "
     "ON t_order.user_id = r.n", "ds_0",
     "WITH RECURSIVE r (n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 3) SELECT * FROM r JOIN `s0` AS "
     "`t_order` ON t_order.user_id = r.n", ["SELECT * FROM `t_order`"]),
]


@pytest.mark.parametrize(("sql", "host", "rendered", "reads"), PLANS, ids=[p[0][:70] for p in PLANS])
def test_plan(sql: str, host: str, rendered: str, reads: list[str]) -> None:
    plan = federation_plan(sql, RULES, METADATA)
    assert plan is not None
    assert plan.host == host
    assert plan.render(NAMES) == rendered
    assert [f"={r.same_as}" if r.same_as is not None else r.sql for r in plan.reads] == reads


# statements federation does not take: the kernel's refusal stands
NOT_FEDERATED = [
    "SELECT * FROM t_order o WHERE o.order_id IN (SELECT order_id FROM t_order_item) FOR UPDATE",
    "SELECT * FROM t_order o WHERE o.order_id IN (SELECT order_id FROM t_order_item) LOCK IN SHARE MODE",
    "SELECT @v := COUNT(*) FROM t_order o JOIN t_order_item i ON i.user_id = o.user_id",
    "SELECT COUNT(*) INTO @n FROM t_order o JOIN t_order_item i ON i.user_id = o.user_id",
    "SELECT SQL_CALC_FOUND_ROWS * FROM t_order o JOIN t_order_item i ON i.user_id = o.user_id LIMIT 1",
    "SELECT * FROM t_order o WHERE o.user_id IN (SELECT id FROM other_db.t_user)",
    "SELECT * FROM t_user u JOIN t_address a ON a.address_id = u.id",  # nothing to copy
    "UPDATE t_order SET status = 'x' WHERE order_id IN (SELECT order_id FROM t_order_item)",
    "DELETE FROM t_order WHERE user_id IN (SELECT user_id FROM t_order_item)",
    "INSERT INTO t_order SELECT * FROM t_order_item",
    "SELECT * FROM t_order PARTITION (p0) JOIN t_order_item USING (user_id)",
]


@pytest.mark.parametrize("sql", NOT_FEDERATED)
def test_not_federated(sql: str) -> None:
    assert federation_plan(sql, RULES, METADATA) is None


def test_read_parameters_follow_the_pushed_conditions() -> None:
    """A prepared statement's `?` inside a pushed condition: the read gets those values, in its own order."""
    sql = "SELECT * FROM t_order o JOIN t_order_item i ON i.status = o.status WHERE i.amount > ? AND o.user_id = ?"
    plan = federation_plan(sql, RULES, METADATA)
    assert plan is not None
    assert [plan.read_params(r, ["a", "b"]) for r in plan.reads] == [["b"], ["a"]]


def test_preview_routes_the_reads_by_their_sharding_conditions() -> None:
    plan = federation_plan("SELECT COUNT(*) FROM t_order o WHERE o.user_id = 3 AND o.order_id IN "
                           "(SELECT order_id FROM t_order_item)", RULES, METADATA)
    assert plan is not None
    rows = preview_rows(plan, ShardingKernel(RULES, METADATA))
    order_reads = [r[1] for r in rows if r[0] == "copy" and "t_order_item" not in r[2]]
    item_reads = [r[1] for r in rows if r[0] == "copy" and "t_order_item" in r[2]]
    assert order_reads == ["ds_1", "ds_1"]  # user_id = 3: one data source, both tables
    assert sorted(item_reads) == ["ds_0", "ds_0", "ds_1", "ds_1"]
    # the host is where most of the nodes read are (ds_1: 4 of 6), the other two stream there
    assert rows[-1][:2] == ("answer", "ds_1") and len(rows) == 7
    assert [r[1] for r in rows if "streamed to ds_1" in r[2]] == ["ds_0", "ds_0"]


def test_single_tables_pin_the_host() -> None:
    plan = federation_plan("SELECT * FROM t_stat s JOIN t_order o ON o.user_id = s.x WHERE o.user_id = 2",
                           RULES, METADATA)
    assert plan is not None and not plan.movable
    assert plan.placed(ShardingKernel(RULES, METADATA)).host == "ds_1"  # t_stat's, though t_order reads ds_0


# issue 33: two occurrences whose reads have the same text bind different parameters: different rows, two reads
DISTINCT_READS = [
    ("SELECT order_id FROM t_order WHERE user_id = ? AND order_id = ? UNION ALL SELECT order_id FROM t_order "
     "WHERE user_id = ? AND order_id = ?", [[1, 11], [2, 12]]),
    ("SELECT status FROM t_order WHERE user_id = ? UNION SELECT status FROM t_order WHERE user_id = ?", [[1], [2]]),
    ("(SELECT order_id FROM t_order WHERE user_id = ? LIMIT 2) UNION ALL (SELECT order_id FROM t_order WHERE "
     "user_id = ? LIMIT 2) ORDER BY 1", [[1], [2]]),
    ("SELECT COUNT(*) FROM t_order WHERE user_id = ? AND status IN (SELECT status FROM t_order WHERE user_id = ?)",
     [[1], [2]]),
    ("SELECT COUNT(*) FROM t_order o WHERE o.user_id = ? AND o.status NOT IN (SELECT o.status FROM t_order o "
     "WHERE o.user_id = ?)", [[1], [2]]),
]


@pytest.mark.parametrize(("sql", "values"), DISTINCT_READS, ids=[d[0][:70] for d in DISTINCT_READS])
def test_reads_of_one_text_with_other_parameters_are_not_shared(sql: str, values: list[list[int]]) -> None:
    plan = federation_plan(sql, RULES, METADATA)
    assert plan is not None
    params = [v for vs in values for v in vs]
    assert [r.same_as for r in plan.reads] == [None] * len(values)
    assert [plan.read_params(r, params) for r in plan.reads] == values


def test_reads_of_one_text_without_parameters_are_shared() -> None:
    plan = federation_plan("SELECT status FROM t_order WHERE user_id = 1 UNION SELECT status FROM t_order "
                           "WHERE user_id = 1", RULES, METADATA)
    assert plan is not None
    assert [r.same_as for r in plan.reads] == [None, 0]


@pytest.mark.parametrize(("values", "same_as"), [
    ([1, 1], [None, 0]),  # equal values: the same rows, one read
    ([1, 2], [None, None]),
    ([1, 1.0], [None, None]),  # equal but of other types: sent as other types, never taken for each other
    ([1, True], [None, None]),
    (["a", "a"], [None, 0]),
    (["a", b"a"], [None, None]),
])
def test_bound_shares_reads_of_equal_values(values: list[object], same_as: list[int | None]) -> None:
    plan = federation_plan("SELECT status FROM t_order WHERE user_id = ? UNION SELECT status FROM t_order "
                           "WHERE user_id = ?", RULES, METADATA)
    assert plan is not None
    bound = plan.bound(values)
    assert [r.same_as for r in bound.reads] == same_as
    assert [r.same_as for r in plan.reads] == [None, None]  # the cached plan is every execution's
    assert bound.render(NAMES) == plan.render(NAMES)


def test_preview_of_bound_values() -> None:
    """EXPLAIN / PREVIEW with values: parts of other values are read each; of equal values, copied once."""
    sql = ("SELECT order_id FROM t_order WHERE user_id = ? UNION ALL SELECT order_id FROM t_order WHERE user_id = ? "
           "UNION ALL SELECT order_id FROM t_order WHERE user_id = ?")
    plan = federation_plan(sql, RULES, METADATA)
    assert plan is not None
    values = [1, 2, 1]
    bound = plan.bound(values)
    shared = [r for r in bound.reads if r.same_as is not None]
    assert len(shared) == 1
    assert bound.read_params(shared[0], values) == bound.read_params(bound.reads[shared[0].same_as], values) == [1]
    rows = preview_rows(plan, ShardingKernel(RULES, METADATA), values)
    copies = [r for r in rows if r[0] == "copy"]
    assert [r[2] for r in copies if r[2].startswith("INSERT INTO")] == [
        f"INSERT INTO `__shardproxy_fed_{shared[0].slot}` SELECT * FROM `__shardproxy_fed_{shared[0].same_as}`"]
    assert sorted(r[1] for r in copies if not r[2].startswith("INSERT INTO")) == ["ds_0", "ds_0", "ds_1", "ds_1"]
