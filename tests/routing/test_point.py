"""Point plans (routing.point) answer every call exactly as the general ShardedPlan they were compiled from:
same units, SQL, parameters and flags, and the same refusal when the general plan refuses."""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal
from typing import Any

import pytest

from routing.algorithms.inline_based import InlineShardingAlgorithm
from routing.errors import RoutingError
from routing.kernel import ShardingKernel
from routing.model import DatabaseRules, DataNode, NoneStrategy, StandardStrategy, TableRule
from routing.parse import Shape, scan_shape
from routing.plan import SessionHints
from routing.point import PointPlan, point_plan
from routing.route import Plan
from tests.routing.conftest import METADATA
from tests.routing.conftest import build_rules as build_shared_rules


def build_rules() -> DatabaseRules:
    """The shared rules plus `t_one`: split over the data sources by `user_id`, one table on each named `t_one` (table
    strategy none), as sysbench's `id % 2` layout is: the point plan's one-step form (`PointPlan.table_of`), and units
    whose SQL is the statement's own text (`PointPlan.verbatim_table`)."""
    rules = build_shared_rules()
    assert rules.sharding is not None
    t_other = rules.sharding.tables["t_other"]
    t_one = TableRule("t_one", tuple(DataNode(ds, "t_one") for ds in rules.data_sources), t_other.database_strategy,
                      NoneStrategy())
    return replace(rules, sharding=replace(rules.sharding, tables={**rules.sharding.tables, "t_one": t_one}))

# (sql, params, hints, compiles to a PointPlan)
CASES: list[tuple[str, list[Any] | None, SessionHints | None, bool]] = [
    ("SELECT * FROM t_order WHERE user_id = 1 AND order_id = 2", None, None, True),
    ("SELECT * FROM t_order WHERE order_id = 3 AND user_id = 4", None, None, True),
    ("SELECT * FROM `t_order` WHERE user_id = 1 AND order_id = 2", None, None, True),
    ("SELECT * FROM t_order o WHERE o.user_id = ? AND o.order_id = ?", [3, 5], None, True),
    ("SELECT * FROM t_order WHERE user_id = ? AND order_id = ?", [3, None], None, True),  # NULL: general plan
    ("SELECT * FROM t_order WHERE user_id = ? AND order_id = ?", [3], None, True),  # missing parameter
    ("SELECT * FROM t_order WHERE user_id = ? AND order_id = ?", [3, 5, 7], None, True),  # one too many
    ("SELECT * FROM t_order WHERE user_id = -1 AND order_id = 2", None, None, True),
    ("SELECT * FROM t_order WHERE user_id = 1.0 AND order_id = 2e0", None, None, True),
    ("SELECT * FROM t_order WHERE user_id = '7' AND order_id = '2'", None, None, True),
    ("SELECT * FROM t_order WHERE user_id = 'abc' AND order_id = 2", None, None, True),  # the algorithm refuses
    ("SELECT * FROM t_order WHERE user_id = 1", None, None, False),  # two tables on ds_1: not a point
    ("SELECT * FROM t_order WHERE user_id IN (1, 2) AND order_id = 2", None, None, False),
    ("SELECT * FROM t_order WHERE user_id = 1 AND order_id = 2 LIMIT 5", None, None, True),
    ("SELECT * FROM t_order WHERE user_id = ? AND order_id = ? LIMIT ?", [1, 2, 3], None, True),
    ("SELECT * FROM t_order WHERE user_id = 1 AND order_id = 2", None,
     SessionHints(database_values={"t_order": (0,)}), True),
    ("SELECT * FROM t_order WHERE user_id = 1 AND order_id = 2", None, SessionHints(write_route_only=True), True),
    ("SELECT id FROM t_log WHERE id = 6", None, None, True),  # auto table
    ("SELECT id FROM t_log WHERE id = ?", [7], None, True),
    ("SELECT * FROM t_other WHERE user_id = ?", [9], None, True),  # table strategy none, two tables per source
    ("SELECT * FROM t_one WHERE user_id = ?", [9], None, True),  # one table per source (PointPlan.table_of)
    ("SELECT * FROM t_one WHERE user_id = ?", [None], None, True),
    ("SELECT * FROM t_one WHERE user_id = ?", ["x"], None, True),
    ("SELECT * FROM t_one WHERE user_id = 4", None, None, True),
    ("SELECT * FROM t_one WHERE user_id = -3", None, None, True),
    ("SELECT * FROM t_one WHERE user_id = 3.0", None, None, True),
    ("SELECT * FROM `t_one` WHERE user_id = '5'", None, None, True),
    ("SELECT * FROM t_one WHERE user_id = 'abc'", None, None, True),
    ("SELECT * FROM t_one WHERE user_id = 2 FOR UPDATE", None, None, True),
    ("SELECT * FROM T_ONE WHERE user_id = 2", None, None, True),  # the unit names the actual table as it is
    ("SELECT * FROM sharding_db.t_one WHERE user_id = 7", None, None, True),
    ("SELECT o.user_id FROM t_one o WHERE o.user_id = 6 /* 8 */ -- 9\n", None, None, True),
    ("SELECT * FROM t_one WHERE user_id = 7 AND name = 'a''b' AND 5 = 5", None, None, True),
    ("SELECT 1, t_one.user_id FROM t_one WHERE t_one.user_id = 9", None, None, True),
    ("UPDATE t_one SET name = 'x' WHERE user_id = 11", None, None, True),
    ("UPDATE t_order SET status = 'x' WHERE user_id = ? AND order_id = ?", [1, 1], None, True),
    ("DELETE FROM t_order WHERE user_id = 2 AND order_id = 3", None, None, True),
    ("SELECT * FROM t_order WHERE user_id = 1 AND order_id = 2 FOR UPDATE", None, None, True),
    ("SELECT * FROM t_order o JOIN t_order_item i ON o.order_id = i.order_id AND o.user_id = i.user_id "
     "WHERE o.user_id = 1 AND o.order_id = 2", None, None, False),
    ("SELECT * FROM t_order WHERE user_id = 1 OR order_id = 2", None, None, False),
]


def answer(plan: Plan, shape: Shape, params: list[Any] | None, hints: SessionHints | None) -> object:
    """What a plan answers for a call: its route, or ("refused", the refusal's words)."""
    try:
        return plan.execute(shape, params, hints)
    except RoutingError as exc:
        return ("refused", str(exc))


@pytest.mark.parametrize(("sql", "params", "hints", "point"), CASES)
def test_point_plan_answers_as_the_general_plan(sql: str, params: list[Any] | None, hints: SessionHints | None,
                                                point: bool) -> None:
    kernel = ShardingKernel(build_rules(), METADATA)
    shape = scan_shape(sql)
    try:
        kernel.route(sql, params, hints)
    except RoutingError:
        pass
    plan = kernel.cache.get(shape.key)
    assert isinstance(plan, PointPlan) is point
    base = plan.base if isinstance(plan, PointPlan) else plan
    assert base is not None
    for _ in range(2):  # the second call uses the SQL cached per actual table
        assert answer(plan, shape, params, hints) == answer(base, shape, params, hints)


def test_point_plan_leaves_other_plans_alone() -> None:
    kernel = ShardingKernel(build_rules(), METADATA)
    for sql in ("SELECT * FROM t_address WHERE address_id = 1", "SELECT * FROM t_order ORDER BY order_id LIMIT 3"):
        kernel.route(sql)
        plan = kernel.cache.get(scan_shape(sql).key)
        assert plan is not None and point_plan(plan) is plan


@pytest.mark.parametrize(("sql", "params", "hints", "point"), [c for c in CASES if c[2] is None])
def test_route_point_is_the_one_unit_route_gives(sql: str, params: list[Any] | None, hints: None, point: bool) -> None:
    kernel = ShardingKernel(build_rules(), METADATA)
    assert kernel.route_point(sql, params) is None  # nothing compiled yet: route() compiles
    try:
        routed = kernel.route(sql, params)
    except RoutingError:
        assert kernel.route_point(sql, params) is None
        return
    got = kernel.route_point(sql, params)
    if got is None:
        return  # route() answers (a general plan, or a call the point plan hands over)
    assert point and len(routed.execution_units) == 1
    unit = routed.execution_units[0]
    assert got == (routed.kind, unit.data_source, unit.sql)
    assert unit.params == (tuple(params) if params is not None else None)


def test_route_point_answers_the_point_calls() -> None:
    kernel = ShardingKernel(build_rules(), METADATA)
    kernel.route("SELECT * FROM t_order WHERE user_id = ? AND order_id = ?", [1, 2])
    assert kernel.route_point("SELECT * FROM t_order WHERE user_id = ? AND order_id = ?", [3, 4]) is not None
    assert kernel.route_point("SELECT * FROM t_order WHERE user_id = ? AND order_id = ?", [3, None]) is None
    assert kernel.route_point("/* c */ SELECT * FROM t_order WHERE user_id = ? AND order_id = ?", [3, 4]) is None


@pytest.mark.parametrize(("sql", "params", "hints", "point"), [c for c in CASES if c[2] is None and c[1] is not None])
def test_prepared_point_answers_as_route_point(sql: str, params: list[Any], hints: None, point: bool) -> None:
    """What the proxy keeps with a prepared statement (`prepared_point`) answers every execute as `route_point`
    does, for the statement's other values too."""
    kernel = ShardingKernel(build_rules(), METADATA)
    assert kernel.prepared_point(sql) is None  # nothing compiled yet
    try:
        kernel.route(sql, params)
    except RoutingError:
        pass
    kept = kernel.prepared_point(sql)
    assert kept is not None  # compiled: to a point plan, or to another one (None, None)
    plan, shape = kept
    assert (plan is not None) is (point and "/*" not in sql)
    if plan is None or shape is None:
        assert kernel.route_point(sql, params) is None
        return
    for values in (params, [v + 1 if isinstance(v, int) else v for v in params], [None] * len(params), params[:1]):
        got = plan.single(shape, values)
        assert (None if got is None else (plan.kind, *got)) == kernel.route_point(sql, values)


@pytest.mark.parametrize(("sql", "verbatim"), [
    ("SELECT * FROM t_one WHERE user_id = 1", True),
    ("SELECT * FROM `t_one` WHERE user_id = ?", True),
    ("SELECT o.user_id FROM t_one o WHERE o.user_id = 6 /* 8 */", True),
    ("SELECT * FROM T_ONE WHERE user_id = 2", False),  # units name `t_one`
    ("SELECT * FROM t_order WHERE user_id = 1 AND order_id = 2", False),  # units name t_order_0 / t_order_1
])
def test_units_of_tables_named_as_written_are_the_text(sql: str, verbatim: bool) -> None:
    """`PointPlan.verbatim_table`: where a unit's SQL is the statement's own text, texts of the same shape
    with other values route to units whose SQL is their own text too, as the general plan renders them."""
    kernel = ShardingKernel(build_rules(), METADATA)
    params = [1] if "?" in sql else None
    kernel.route(sql, params)
    plan = kernel.cache.get(scan_shape(sql).key)
    assert isinstance(plan, PointPlan)
    for value in range(-3, 12):
        text = sql.replace(" = 1", f" = {value}").replace(" = 6", f" = {value}").replace(" = 2", f" = {value}")
        routed = kernel.route(text, params)
        assert (routed.execution_units[0].sql == text) is verbatim, text
        shape = scan_shape(text)  # (a negative value is another shape: its own plan)
        own = kernel.cache.get(shape.key)
        assert isinstance(own, PointPlan) and own.base is not None
        assert routed.execution_units == own.base.execute(shape, params, None).execution_units


def test_one_table_per_data_source_takes_the_one_step_form() -> None:
    """`PointPlan.table_of` is set exactly where the table strategy is none and each data source holds one
    table of the rule; the cases above compare that form with the general plan."""
    kernel = ShardingKernel(build_rules(), METADATA)
    for sql, one_step in (("SELECT * FROM t_one WHERE user_id = 1", True),
                          ("SELECT * FROM t_other WHERE user_id = 1", False),
                          ("SELECT * FROM t_order WHERE user_id = 1 AND order_id = 2", False),
                          ("SELECT id FROM t_log WHERE id = 6", False)):
        kernel.route(sql)
        plan = kernel.cache.get(scan_shape(sql).key)
        assert isinstance(plan, PointPlan)
        assert (plan.table_of is not None) is one_step


def inline_rules(expression: str) -> DatabaseRules:
    """`t_one` split over ds_0 / ds_1 by a real INLINE algorithm (`expression` over user_id): the one-step form's
    lookup by remainder (`PointPlan.by_remainder`)."""
    rules = build_rules()
    assert rules.sharding is not None
    t_one = rules.sharding.tables["t_one"]
    algorithm = InlineShardingAlgorithm("inline", {"algorithm-expression": expression})
    t_one = replace(t_one, database_strategy=StandardStrategy("user_id", "inline", algorithm))
    return replace(rules, sharding=replace(rules.sharding, tables={**rules.sharding.tables, "t_one": t_one}))


# every value kind a point select's token or parameter may carry, the usual ones and those the lookup leaves to the
# general form
INLINE_VALUES = ["0", "1", "2", "3", "7", "007", "18446744073709551617", "-1", "-4", "3.0", "1e0", "'5'", "'x'",
                 "NULL", "TRUE"]
INLINE_PARAMS: list[Any] = [0, 1, 2, 3, 7, 2**64 + 1, -1, -4, 3.0, Decimal("5"), "5", "x", None, True, b"1"]


@pytest.mark.parametrize("expression", ["ds_${user_id % 2}", "ds_${user_id % 3}", "DS_${USER_ID % 2}"])
def test_lookup_by_remainder_answers_as_the_general_plan(expression: str) -> None:
    kernel = ShardingKernel(inline_rules(expression), METADATA)
    calls: list[tuple[str, list[Any] | None]] = [(f"SELECT * FROM t_one WHERE user_id = {v}", None)
                                                  for v in INLINE_VALUES]
    calls += [("SELECT * FROM t_one WHERE user_id = ? AND name = ?", [v, "a"]) for v in INLINE_PARAMS]
    calls += [("SELECT * FROM t_one WHERE name = ? AND user_id = ?", ["a", v]) for v in INLINE_PARAMS]
    calls += [("SELECT * FROM t_one WHERE user_id = -?", [v]) for v in (1, 2)]
    seen = 0
    for sql, params in calls:
        shape = scan_shape(sql)
        try:
            kernel.route(sql, params)
        except RoutingError:
            pass
        plan = kernel.cache.get(shape.key)
        if not isinstance(plan, PointPlan):
            continue
        seen += plan.by_remainder is not None
        base = plan.base
        assert base is not None
        assert answer(plan, shape, params, None) == answer(base, shape, params, None), (sql, params)
    assert seen > len(INLINE_VALUES)  # the lookup was there to take


def test_generations_differ_across_kernels() -> None:
    """A plan kept with its kernel's generation is never taken for the plan of the kernel that replaces it
    (DistSQL makes a new kernel; both begin without an invalidate)."""
    a, b = ShardingKernel(build_rules(), METADATA), ShardingKernel(build_rules(), METADATA)
    seen = {a.generation, b.generation}
    a.invalidate()
    b.invalidate()
    seen |= {a.generation, b.generation}
    assert len(seen) == 4
