# ruff: noqa: E501  (table-driven: one line per case)
"""proxy.execution.decide as a table, without servers (in the style of Vitess' planbuilder test data).

One line per case: (statement, parameters, session view) -> the plan's kind and its units (data source, actual
SQL), or the refusal's errno, or the federation host and tables. The kernel is built from the shipped
conf/database-sharding.yaml (t_order and t_order_item over ds_0/ds_1 x 2 tables by user_id % 2 / order_id % 2,
bound; t_address broadcast), with t_order_item's PRIMARY KEY (order_item_id) lacking the sharding columns.

Kinds: a `Run`'s strategy (`ddl/fan_out_write`: DDL whose units fan out; `select_into/relay`; `+merge`: the
scatter select's rows are merged), `explain:<kind>`, `refused`, `federated`, `explain:federated`. Nothing here
depends on a transaction being open: that changes how a plan's units join it, never the plan.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from proxy.execution.decide import NO_FEDERATION, PLAIN, SessionView, decide
from proxy.execution.plans import Explained, Federated, FederatedExplain, Plan, Refused, Run, Strategy
from routing.config import load_database_rules, load_yaml
from routing.kernel import ShardingKernel
from routing.model import ColumnInfo, UniqueKey
from routing.plan import SessionHints

ROOT = Path(__file__).resolve().parents[2]
COLUMNS = {"t_order": ["order_id", "user_id", "status"],
           "t_order_item": ["order_item_id", "order_id", "user_id", "status"],
           "t_address": ["address_id", "address_name"]}
TEXT_COLUMNS = {"status", "address_name"}


class Metadata:
    """What the proxy would load from the backends for these tables."""

    def columns(self, table: str) -> list[str] | None:
        return COLUMNS.get(table.lower())

    def single_table_data_source(self, table: str) -> str | None:
        return None

    def column_type(self, table: str, column: str) -> str | None:
        if column.lower() not in COLUMNS.get(table.lower(), ()):
            return None
        return "varchar" if column.lower() in TEXT_COLUMNS else "bigint"

    def unique_keys(self, table: str) -> tuple[UniqueKey, ...]:
        return (UniqueKey("PRIMARY", ("order_item_id",)),) if table.lower() == "t_order_item" else ()

    def column_info(self, table: str, column: str) -> ColumnInfo | None:
        return ColumnInfo(column, "varchar" if column in TEXT_COLUMNS else "bigint")


def shipped_kernel() -> ShardingKernel:
    doc = load_yaml((ROOT / "conf" / "database-sharding.yaml").read_text(), "database-sharding.yaml")
    return ShardingKernel(load_database_rules(doc, file="database-sharding.yaml"), Metadata())


KERNEL = shipped_kernel()

HINT_DS0 = SessionView(SessionHints(data_source="ds_0"))
FOUND_ROWS_ON_DS1 = SessionView(found_rows_source="ds_1")
ALL_ORDERS = [("ds_0", "{} t_order_0{}"), ("ds_0", "{} t_order_1{}"), ("ds_1", "{} t_order_0{}"), ("ds_1", "{} t_order_1{}")]


def every_order_node(head: str, tail: str = "") -> list[tuple[str, str]]:
    return [(ds, sql.format(head, tail)) for ds, sql in ALL_ORDERS]


FEDERATED_JOIN = "SELECT o.status, i.status FROM t_order o JOIN t_order_item i ON o.status = i.status"

CASES: list[tuple[str, list[Any] | None, SessionView, str, Any]] = [
    # point selects: one node
    ("SELECT * FROM t_order WHERE user_id = 1 AND order_id = 2", None, PLAIN, "relay", [("ds_1", "SELECT * FROM t_order_0 WHERE user_id = 1 AND order_id = 2")]),
    ("SELECT * FROM t_order WHERE user_id = ? AND order_id = ?", [1, 3], PLAIN, "relay", [("ds_1", "SELECT * FROM t_order_1 WHERE user_id = ? AND order_id = ?")]),
    ("SELECT * FROM t_address", None, PLAIN, "relay", [("ds_0", "SELECT * FROM t_address")]),
    # scatter selects: rows concatenated, or merged (ORDER BY ... LIMIT, aggregates)
    ("SELECT * FROM t_order", None, PLAIN, "scatter_select", every_order_node("SELECT * FROM")),
    ("SELECT * FROM t_order WHERE order_id = ?", [2], PLAIN, "scatter_select", [("ds_0", "SELECT * FROM t_order_0 WHERE order_id = ?"), ("ds_1", "SELECT * FROM t_order_0 WHERE order_id = ?")]),
    ("SELECT order_id FROM t_order ORDER BY order_id LIMIT 2", None, PLAIN, "scatter_select+merge", every_order_node("SELECT order_id FROM", " ORDER BY order_id LIMIT 2")),
    ("SELECT COUNT(*) FROM t_order", None, PLAIN, "scatter_select+merge", every_order_node("SELECT COUNT(*) FROM")),
    # writes
    ("INSERT INTO t_order (order_id, user_id, status) VALUES (1, 1, 'a'), (2, 2, 'b')", None, PLAIN, "fan_out_write", [("ds_0", "INSERT INTO t_order_0 (order_id, user_id, status) VALUES (2, 2, 'b')"), ("ds_1", "INSERT INTO t_order_1 (order_id, user_id, status) VALUES (1, 1, 'a')")]),
    ("INSERT INTO t_order (order_id, user_id, status) VALUES (?, ?, ?), (?, ?, ?)", [1, 1, "a", 4, 2, "b"], PLAIN, "fan_out_write", [("ds_0", "INSERT INTO t_order_0 (order_id, user_id, status) VALUES (?, ?, ?)"), ("ds_1", "INSERT INTO t_order_1 (order_id, user_id, status) VALUES (?, ?, ?)")]),
    ("INSERT INTO t_address VALUES (1, 'a')", None, PLAIN, "fan_out_write", [("ds_0", "INSERT INTO t_address VALUES (1, 'a')"), ("ds_1", "INSERT INTO t_address VALUES (1, 'a')")]),
    ("DELETE FROM t_order WHERE user_id = 1", None, PLAIN, "fan_out_write", [("ds_1", "DELETE FROM t_order_0 WHERE user_id = 1"), ("ds_1", "DELETE FROM t_order_1 WHERE user_id = 1")]),
    # DDL: the transaction committed first, the units fanned out, the metadata reloaded
    ("CREATE TABLE t_order (order_id BIGINT PRIMARY KEY, user_id INT, status VARCHAR(10))", None, PLAIN, "ddl/fan_out_write", every_order_node("CREATE TABLE", " (order_id BIGINT PRIMARY KEY, user_id INT, status VARCHAR(10))")),
    ("DROP TABLE t_order", None, PLAIN, "ddl/fan_out_write", every_order_node("DROP TABLE")),
    # stepwise writes: the units are not run as they are (proxy.execution.stepwise runs steps)
    ("UPDATE t_order SET status = 'x' ORDER BY order_id LIMIT 2", None, PLAIN, "stepwise/fan_out_write", every_order_node("UPDATE", " SET status = 'x' ORDER BY order_id LIMIT 2")),
    ("UPDATE t_order SET user_id = 2 WHERE order_id = 1 AND user_id = 1", None, PLAIN, "stepwise/relay", [("ds_1", "UPDATE t_order_1 SET user_id = 2 WHERE order_id = 1 AND user_id = 1")]),
    ("INSERT INTO t_order (order_id, user_id, status) SELECT order_id, user_id, status FROM t_order_item", None, PLAIN, "stepwise/fan_out_write", every_order_node("INSERT INTO", " (order_id, user_id, status) SELECT order_id, user_id, status FROM t_order_item_0")),
    # upsert on a unique key without the sharding columns: looked up everywhere first
    ("INSERT INTO t_order_item (order_item_id, order_id, user_id, status) VALUES (7, 1, 1, 'a') ON DUPLICATE KEY UPDATE status = 'b'", None, PLAIN, "upsert", [("ds_1", "INSERT INTO t_order_item_1 (order_item_id, order_id, user_id, status) VALUES (7, 1, 1, 'a') ON DUPLICATE KEY UPDATE status = 'b'")]),
    # SELECT ... INTO @v: on one node as written; over several, merged without its INTO
    ("SELECT status INTO @s FROM t_order WHERE user_id = 1 AND order_id = 1", None, PLAIN, "select_into/relay", [("ds_1", "SELECT status INTO @s FROM t_order_1 WHERE user_id = 1 AND order_id = 1")]),
    ("SELECT COUNT(*) INTO @n FROM t_order", None, PLAIN, "select_into/scatter_select", every_order_node("SELECT COUNT(*)  FROM")),
    # metadata of a logic table: actual names mapped back in the answer
    ("DESCRIBE t_order", None, PLAIN, "renamed_metadata", [("ds_0", "DESCRIBE t_order_0")]),
    ("SHOW CREATE TABLE t_order", None, PLAIN, "renamed_metadata", [("ds_0", "SHOW CREATE TABLE t_order_0")]),
    # federation: a SELECT the kernel refuses, unless federation is off or the session has hints
    (FEDERATED_JOIN, None, PLAIN, "federated", ("ds_0", ("t_order", "t_order_item"))),
    ("SELECT o.status FROM t_order o WHERE o.order_id IN (SELECT order_id FROM t_order_item WHERE status = 'x')", None, PLAIN, "federated", ("ds_0", ("t_order", "t_order_item"))),
    (FEDERATED_JOIN, None, NO_FEDERATION, "refused", 1235),
    (FEDERATED_JOIN, None, HINT_DS0, "relay", [("ds_0", FEDERATED_JOIN)]),
    # session state: hints, and the node that knows FOUND_ROWS()
    ("SELECT * FROM t_order WHERE user_id = 1", None, HINT_DS0, "relay", [("ds_0", "SELECT * FROM t_order WHERE user_id = 1")]),
    ("SELECT FOUND_ROWS()", None, FOUND_ROWS_ON_DS1, "relay", [("ds_1", "SELECT FOUND_ROWS()")]),
    ("SELECT FOUND_ROWS()", None, PLAIN, "relay", [("ds_0", "SELECT FOUND_ROWS()")]),
    # refusals
    ("XA START 'x'", None, PLAIN, "refused", 1235),
    ("EXPLAIN FOR CONNECTION 3", None, PLAIN, "refused", 1235),
    ("ANALYZE DELETE FROM t_order", None, PLAIN, "refused", 1235),
    # EXPLAIN: the explained statement's units behind the EXPLAIN words
    ("EXPLAIN SELECT * FROM t_order WHERE user_id = 1 AND order_id = 2", None, PLAIN, "explain:relay", [("ds_1", "EXPLAIN SELECT * FROM t_order_0 WHERE user_id = 1 AND order_id = 2")]),
    ("EXPLAIN SELECT * FROM t_order", None, PLAIN, "explain:scatter_select", every_order_node("EXPLAIN SELECT * FROM")),
    ("EXPLAIN " + FEDERATED_JOIN, None, PLAIN, "explain:federated", ("ds_0", ("t_order", "t_order_item"))),
    ("EXPLAIN " + FEDERATED_JOIN, None, NO_FEDERATION, "refused", 1235),
]


def _run_kind(run: Run) -> str:
    kind = run.strategy.value if run.strategy is run.units else f"{run.strategy.value}/{run.units.value}"
    if run.units is Strategy.SCATTER_SELECT and run.routed.merge_spec is not None and run.strategy is run.units:
        kind += "+merge"
    return kind


def summary(plan: Plan) -> tuple[str, Any]:
    """(kind, units as (data source, SQL) | errno | (federation host, tables)) of a plan."""
    if isinstance(plan, Run):
        return _run_kind(plan), [(u.data_source, u.sql) for u in plan.routed.execution_units]
    if isinstance(plan, Explained):
        return "explain:" + _run_kind(plan.run), [(u.data_source, u.sql) for u in plan.run.routed.execution_units]
    if isinstance(plan, Refused):
        return "refused", plan.error.errno
    if isinstance(plan, Federated):
        return "federated", (plan.plan.host, plan.plan.tables)
    assert isinstance(plan, FederatedExplain)
    assert plan.steps[-1][:2] == ("answer", plan.plan.host)
    return "explain:federated", (plan.plan.host, plan.plan.tables)


@pytest.mark.parametrize(("sql", "params", "view", "kind", "units"), CASES, ids=[c[0][:60] for c in CASES])
def test_decide(sql: str, params: list[Any] | None, view: SessionView, kind: str, units: Any) -> None:
    assert summary(decide(KERNEL, sql, params, view)) == (kind, units)


def test_parameters_stay_with_their_units() -> None:
    plan = decide(KERNEL, "INSERT INTO t_order (order_id, user_id, status) VALUES (?, ?, ?), (?, ?, ?)", [1, 1, "a", 4, 2, "b"])
    assert isinstance(plan, Run)
    assert [u.params for u in plan.routed.execution_units] == [(4, 2, "b"), (1, 1, "a")]


def test_a_refusal_is_a_plan_not_an_exception() -> None:
    plan = decide(KERNEL, FEDERATED_JOIN, None, NO_FEDERATION)
    assert isinstance(plan, Refused) and plan.error.sqlstate == "42000"
    federated = decide(KERNEL, FEDERATED_JOIN, None)
    assert isinstance(federated, Federated) and federated.refusal.errno == 1235


def test_plans_are_frozen_values() -> None:
    plan = decide(KERNEL, "SELECT * FROM t_order WHERE user_id = 1 AND order_id = 2", None)
    assert plan == decide(KERNEL, "SELECT * FROM t_order WHERE user_id = 1 AND order_id = 2", None)
    with pytest.raises(AttributeError):
        plan.strategy = Strategy.SCATTER_SELECT  # type: ignore[misc]


def test_a_federated_plan_is_placed_and_its_copies_routed() -> None:
    """Federation is decided whole: the host, and each copy's read as the kernel routes it (nothing routed later)."""
    plan = decide(KERNEL, FEDERATED_JOIN, None)
    assert isinstance(plan, Federated)
    slots = {read.slot for read in plan.plan.reads if read.same_as is None}
    assert set(plan.reads) == slots and len(slots) == 2
    for routed in plan.reads.values():
        assert {u.data_source for u in routed.execution_units} == {"ds_0", "ds_1"}
