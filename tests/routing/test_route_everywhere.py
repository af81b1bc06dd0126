"""The kernel's shortcut for tables a statement reads everywhere: when no condition pins a sharding
column to values and every strategy routes any range to all its targets (INLINE with
allow-range-query-with-inline-sharding, HASH_MOD, CONSISTENT_HASH, no strategy), the table's nodes are all of
them without asking the algorithms, the units are those of the previous such call, and a merge spec with
nothing taken from the statement's values is made once. Every statement here routes exactly as it does with
the shortcut turned off: same units, SQL, parameters, merge spec, or the same refusal."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

import routing.route
from routing.config import load_database_rules, load_yaml
from routing.errors import RoutingError
from routing.kernel import ShardingKernel
from routing.plan import SessionHints
from routing.rewrite import MergeTemplate
from tests.routing.conftest import METADATA

RULES = """
databaseName: everywhere_db
dataSources: {ds_0: {url: 'jdbc:mysql://127.0.0.1:1/a'}, ds_1: {url: 'jdbc:mysql://127.0.0.1:1/b'}}
rules:
- !SHARDING
  tables:
    t_order:
      actualDataNodes: ds_${0..1}.t_order_${0..1}
      databaseStrategy: {standard: {shardingColumn: user_id, shardingAlgorithmName: db_inline}}
      tableStrategy: {standard: {shardingColumn: order_id, shardingAlgorithmName: t_hash}}
    t_order_item:
      actualDataNodes: ds_${0..1}.t_order_item_${0..1}
      databaseStrategy: {standard: {shardingColumn: user_id, shardingAlgorithmName: db_inline}}
      tableStrategy: {standard: {shardingColumn: order_id, shardingAlgorithmName: t_hash}}
    t_strict:
      actualDataNodes: ds_${0..1}.t_strict
      databaseStrategy: {standard: {shardingColumn: user_id, shardingAlgorithmName: strict_inline}}
    t_same:
      actualDataNodes: ds_${0..1}.t_same
      databaseStrategy: {standard: {shardingColumn: user_id, shardingAlgorithmName: db_inline}}
    t_mod:
      actualDataNodes: ds_${0..1}.t_mod_${0..1}
      databaseStrategy: {standard: {shardingColumn: user_id, shardingAlgorithmName: db_inline}}
      tableStrategy: {standard: {shardingColumn: order_id, shardingAlgorithmName: t_mod2}}
  autoTables:
    t_ring:
      actualDataSources: ds_0,ds_1
      shardingStrategy: {standard: {shardingColumn: order_id, shardingAlgorithmName: ring}}
  bindingTables: [t_order,t_order_item]
  shardingAlgorithms:
    db_inline: {type: INLINE, props: {algorithm-expression: 'ds_${user_id % 2}',
                                      allow-range-query-with-inline-sharding: true}}
    strict_inline: {type: INLINE, props: {algorithm-expression: 'ds_${user_id % 2}'}}
    t_hash: {type: HASH_MOD, props: {sharding-count: 2}}
    t_mod2: {type: MOD, props: {sharding-count: 2}}
    ring: {type: CONSISTENT_HASH, props: {sharding-count: 4}}
"""

CONDITIONS = [
    "", "WHERE user_id BETWEEN 1 AND 9", "WHERE user_id BETWEEN 9 AND 1", "WHERE user_id > 3",
    "WHERE user_id >= 3 AND user_id < 3", "WHERE order_id < 10", "WHERE order_id BETWEEN 5 AND 5",
    "WHERE user_id BETWEEN 1 AND 4 AND order_id > 2", "WHERE user_id = 3", "WHERE order_id = 7",
    "WHERE user_id IN (1, 2)", "WHERE user_id BETWEEN 1 AND 9 OR order_id = 4",
    "WHERE user_id BETWEEN 1 AND 9 OR user_id > 20", "WHERE user_id = 1 AND user_id = 2",
    "WHERE user_id BETWEEN ? AND ?", "WHERE user_id > ? AND order_id < ?", "WHERE user_id = ?",
    "WHERE user_id IS NULL", "WHERE user_id = NULL", "WHERE status = 'x'", "WHERE user_id + 0 > 3",
    "WHERE NOT user_id > 3", "WHERE user_id BETWEEN 1 AND 9 AND user_id = 4",
]
TABLES = ["t_order", "t_strict", "t_mod", "t_ring", "t_order o JOIN t_order_item i ON o.order_id = i.order_id",
          # named on every node as in the text: units whose SQL is the text itself (rewrite.renders_as_text)
          "t_same", "`t_same`", "T_SAME", "everywhere_db.t_same", "t_same /* ? 1 */ s",
          "t_same s JOIN t_strict x ON 1 = 1"]
SHAPES = ["SELECT * FROM {t} {w}", "SELECT status, COUNT(*) FROM {t} {w} GROUP BY status",
          "SELECT * FROM {t} {w} ORDER BY order_id LIMIT 2, 3", "SELECT SUM(amount) FROM {t} {w}",
          "SELECT DISTINCT status FROM {t} {w} ORDER BY status", "UPDATE {t} SET status = 'y' {w}",
          "DELETE FROM {t} {w}"]
PARAMS = [[1, 9], [9, 1], [4, 4], [None, 3]]
HINTS = [None, SessionHints(database_values={"t_order": (1,)}), SessionHints(write_route_only=True)]


def _statements(shape: str, table: str) -> list[str]:
    out = []
    for where in CONDITIONS:
        if "o JOIN" in table:
            where = where.replace("user_id", "o.user_id").replace("order_id", "o.order_id")
        out.append(shape.format(t=table, w=where))
    return out


def _route(kernel: ShardingKernel, sql: str, params: list[Any] | None, hints: SessionHints | None) -> object:
    try:
        routed = kernel.route(sql, params, hints)
    except RoutingError as exc:
        return ("refused", str(exc))
    return routed


FAST = ShardingKernel(load_database_rules(load_yaml(RULES)), METADATA)
SLOW = ShardingKernel(load_database_rules(load_yaml(RULES)), METADATA)


@pytest.mark.parametrize(("shape", "table"), [
    (shape, table) for shape, table in itertools.product(SHAPES, TABLES)
    if not (shape.startswith(("UPDATE", "DELETE")) and " JOIN " in table)])
def test_the_shortcut_routes_as_the_algorithms_do(shape: str, table: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for sql in _statements(shape, table):
        n = sql.count("?")
        calls = [(p[:n] if n else None, h) for p in PARAMS for h in HINTS] * 2  # twice: the kept units and spec
        got = [_route(FAST, sql, params, hints) for params, hints in calls]
        with monkeypatch.context() as m:
            m.setattr(routing.route, "_routes_everywhere", lambda groups, columns: False)
            m.setattr(routing.route, "renders_as_text", lambda *a: False)
            m.setattr(MergeTemplate, "spec", lambda self, values, shape=None: self._spec(values, shape))
            expected = [_route(SLOW, sql, params, hints) for params, hints in calls]
        assert got == expected, sql


def test_which_strategies_route_ranges_everywhere() -> None:
    rules = load_database_rules(load_yaml(RULES))
    assert rules.sharding is not None
    tables = rules.sharding.tables
    assert routing.route.range_blind_columns(tables["t_order"]) == frozenset({"user_id", "order_id"})
    assert routing.route.range_blind_columns(tables["t_ring"]) == frozenset({"order_id"})
    assert routing.route.range_blind_columns(tables["t_strict"]) is None  # INLINE without allow-range refuses
    assert routing.route.range_blind_columns(tables["t_mod"]) is None  # MOD routes a short range by value


def test_the_shortcut_is_taken() -> None:
    kernel = ShardingKernel(load_database_rules(load_yaml(RULES)), METADATA)
    calls = []
    original = routing.route.route_table

    def counting(*args: Any, **kw: Any) -> Any:
        calls.append(args)
        return original(*args, **kw)

    with pytest.MonkeyPatch.context() as m:
        m.setattr(routing.route, "route_table", counting)
        routed = kernel.route("SELECT * FROM t_order WHERE user_id BETWEEN ? AND ?", [1, 9])
        kernel.route("SELECT * FROM t_order WHERE user_id = 3")
    assert len(routed.execution_units) == 4 and len(calls) == 1  # only the point select asked


@pytest.mark.parametrize(("sql", "params", "as_text"), [
    ("SELECT * FROM t_same WHERE user_id BETWEEN 1 AND 9", None, True),
    ("SELECT * FROM `t_same` WHERE user_id BETWEEN ? AND ? /* ? */", [1, 9], True),
    ("SELECT SUM(user_id) FROM t_same", None, True),
    ("SELECT user_id FROM t_same ORDER BY user_id LIMIT 3", None, False),  # the nodes' LIMIT is rendered
    ("SELECT * FROM T_SAME WHERE user_id > 2", None, False),  # the units name `t_same`
    ("SELECT * FROM t_order WHERE user_id > 2", None, False),  # t_order_0, t_order_1
])
def test_units_named_as_the_text_are_the_text(sql: str, params: list[Any] | None, as_text: bool) -> None:
    """A statement routed to every node of tables named there as the text names them goes to the nodes as
    the text itself (the shortcut's answers are compared with rendering's above)."""
    kernel = ShardingKernel(load_database_rules(load_yaml(RULES)), METADATA)
    calls = []
    original = routing.route.render_sql

    def counting(*args: Any, **kw: Any) -> Any:
        calls.append(args)
        return original(*args, **kw)

    kernel.route(sql, params)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(routing.route, "render_sql", counting)
        other = sql.replace("9", "7").replace("3", "4")  # another text of the same shape
        routed = kernel.route(other, params)
    assert all((u.sql == other) for u in routed.execution_units) is as_text
    assert (not calls) is as_text
    assert all(u.params == (tuple(params) if params is not None else None) for u in routed.execution_units)


def test_a_plan_made_from_another_keeps_nothing_of_its_memos() -> None:
    """`dataclasses.replace` of a plan (the kernel makes one for SET @v = (SELECT ...)) or of a merge template starts
    with empty memos: what was kept for the old one is not taken for the new one."""
    from dataclasses import replace

    from routing.plan import StatementKind
    from routing.rewrite import MergeTemplate
    from routing.route import ShardedPlan

    plan = ShardedPlan(kind=StatementKind.SELECT, write=False, param_index=())
    plan._blind["t"] = None
    plan._all_units.append(())
    plan._as_text[True] = 0
    copy = replace(plan, set_variables=("v",))
    assert copy._blind == {} and copy._all_units == [] and copy._as_text == {}
    template = MergeTemplate(visible_columns=1)
    template._constant.append(template.spec(()))
    assert replace(template, offset_slot=0)._constant == []
