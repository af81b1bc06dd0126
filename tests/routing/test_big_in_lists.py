"""Long IN lists and OR chains (issue 35): routed as the values say, each unit given exactly its own values (from
`routing.kernel.PER_UNIT_MIN` values on; a shorter list goes whole to each unit).

The shipped rules (conf/database-sharding.yaml: t_order over ds_${user_id % 2} x t_order_${order_id % 2}); every
case is checked against a brute-force reference that works out each value's home by hand, on random lists of mixed
types with repeats, literal and prepared, below and above `routing.lists.LIST_MIN` (lists compiled cut short).
"""

from __future__ import annotations

import random
import re
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

import routing.kernel
from routing.conditions import Distinct, Eq, Slot, evaluate
from routing.config import load_database_rules, load_yaml
from routing.errors import RoutingError
from routing.kernel import PER_UNIT_MIN, ShardingKernel
from routing.lists import LIST_MIN
from routing.parse import scan_shape
from routing.plan import RoutedStatement
from tests.routing.conftest import Metadata

REPO = Path(__file__).resolve().parents[2]
RULES = load_database_rules(load_yaml((REPO / "conf" / "database-sharding.yaml").read_text()), warn=lambda m: None)
METADATA = Metadata({"t_order": ["order_id", "user_id", "status"],
                     "t_order_item": ["order_item_id", "order_id", "user_id", "status"]}, {})
NODES = [("ds_0", "t_order_0"), ("ds_0", "t_order_1"), ("ds_1", "t_order_0"), ("ds_1", "t_order_1")]


def kernel() -> ShardingKernel:
    return ShardingKernel(RULES, METADATA)


def number(value: Any) -> int:
    """The integer MySQL compares a key value as (the reference: every value here is integral)."""
    return int(Decimal(str(value))) if not isinstance(value, bool) else int(value)


def belongs(column: str, value: Any, node: tuple[str, str]) -> bool:
    ds, table = node
    if column == "order_id":
        return table.endswith(f"_{number(value) % 2}")
    if column == "user_id":
        return ds.endswith(f"_{number(value) % 2}")
    return True  # off the keys: every node reads the whole list


def random_values(rng: random.Random, n: int, prepared: bool) -> list[Any]:
    """Mixed types and repeats: ints, numeric strings, integral decimals and floats. (No bools: INLINE refuses
    ``TRUE % 2``, in a list as alone.)"""
    pool = [rng.randint(0, 40) for _ in range(max(2, n // 3))]  # few distinct: many repeats
    out: list[Any] = []
    for _ in range(n):
        v = rng.choice(pool)
        kind = rng.random()
        if kind < 0.55:
            out.append(v)
        elif kind < 0.7:
            out.append(str(v))
        elif kind < 0.8:
            out.append(Decimal(f"{v}.0"))
        else:
            out.append(float(v))
    return out


def literal(value: Any) -> str:
    if isinstance(value, str):
        return f"'{value}'"
    if isinstance(value, float):
        return f"{int(value)}e0"
    return str(value)


def statement(template: str, column: str, values: list[Any], prepared: bool) -> tuple[str, list[Any] | None]:
    listed = ", ".join("?" * len(values)) if prepared else ", ".join(literal(v) for v in values)
    return template.format(c=column, list=listed), (list(values) if prepared else None)


def in_list_of(sql: str, params: tuple[Any, ...] | None, column: str) -> list[Any]:
    """The values a unit's SQL gives ``column IN (...)``: its parameters, or its literal tokens."""
    m = re.search(rf"\b{column} IN \(([^)]*)\)", sql)
    assert m is not None, sql
    tokens = [t.strip() for t in m.group(1).split(",")]
    if params is not None:
        assert set(tokens) == {"?"}
        return list(params[-len(tokens):])
    return tokens


TEMPLATES = [
    "SELECT COUNT(*), SUM(order_id) FROM t_order WHERE {c} IN ({list})",
    "SELECT * FROM t_order WHERE status <> 'x' AND {c} IN ({list}) ORDER BY order_id LIMIT 3",
    "UPDATE t_order SET status = 'y' WHERE {c} IN ({list})",
    "DELETE FROM t_order WHERE {c} IN ({list})",
]
CASES = [(t, c, n, p) for t in TEMPLATES for c in ("order_id", "user_id", "status")
         for n in (3, PER_UNIT_MIN - 1, PER_UNIT_MIN + 8, LIST_MIN + 6, 1500)
         for p in (False, True)]


@pytest.mark.parametrize(("template", "column", "n", "prepared"), CASES,
                         ids=[f"{t.split()[0]}-{c}-{n}-{'prepared' if p else 'literal'}" for t, c, n, p in CASES])
def test_each_unit_gets_exactly_its_values(template: str, column: str, n: int, prepared: bool) -> None:
    rng = random.Random(f"{template}{column}{n}{prepared}")
    values = random_values(rng, n, prepared)
    if column == "status":
        values = [str(v) for v in values]
    sql, params = statement(template, column, values, prepared)
    routed = kernel().route(sql, params)
    expected_nodes = [node for node in NODES if any(belongs(column, v, node) for v in values)]
    assert [(u.data_source, u.table_map["t_order"]) for u in routed.route_units] == expected_nodes
    tokens = [("?" if prepared else literal(v)) for v in values]
    for unit, route in zip(routed.execution_units, routed.route_units, strict=True):
        node = (route.data_source, route.table_map["t_order"])
        own = [i for i, v in enumerate(values) if belongs(column, v, node)]
        got = in_list_of(unit.sql, unit.params, column)
        if len(expected_nodes) == 1 or n < PER_UNIT_MIN:
            own = list(range(len(values)))  # one unit, or a short list: the list as written
        if prepared:
            assert got == [values[i] for i in own]
            assert [type(v) for v in got] == [type(values[i]) for i in own]  # sent as they came
        else:
            assert got == [tokens[i] for i in own]


@pytest.mark.parametrize("prepared", [False, True])
@pytest.mark.parametrize("template", [
    *TEMPLATES,
    "SELECT * FROM t_order o JOIN t_order_item i ON o.order_id = i.order_id WHERE o.{c} IN ({list})",
    "SELECT * FROM t_order WHERE {c} IN ({list}) OR user_id = 3",
    "SELECT * FROM t_order WHERE {c} NOT IN ({list}) AND order_id IN (1, 3)",
    "SELECT * FROM t_order WHERE NOT ({c} IN ({list}) AND user_id = 3) AND order_id IN (1, 3)",
    "SELECT * FROM t_order WHERE ({c} IN ({list}) OR {c} IN ({list})) AND user_id IN (1, 3)",
    "SELECT status, COUNT(*) FROM t_order WHERE {c} IN ({list}) AND user_id IN ({list}) GROUP BY status",
    "SELECT * FROM t_order WHERE order_id IN (SELECT order_id FROM t_order_item WHERE {c} IN ({list}))",
])
def test_a_list_cut_short_routes_as_the_text_itself(template: str, prepared: bool,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A statement with a long list compiled from its compact text (`routing.lists`) routes and rewrites exactly as
    when compiled from the text itself; and the compact text is what was compiled, when the plan allows it."""
    rng = random.Random(template)
    for column in ("order_id", "user_id", "status"):
        values = random_values(rng, 400, prepared)
        if column == "status":
            values = [str(v) for v in values]
        sql, params = statement(template, column, values, prepared)
        if params is not None:
            params = params * (sql.count("?") // len(values))
        compiled: list[int] = []
        original = routing.kernel.compile_plan

        def counting(shape: Any, *args: Any, _log: list[int] = compiled, _compile: Any = original) -> Any:
            _log.append(len(shape.spans))
            return _compile(shape, *args)

        monkeypatch.setattr(routing.kernel, "compile_plan", counting)
        got = _route(kernel(), sql, params)
        if "SELECT order_id" not in template:  # (a list in a subquery: the text itself is compiled)
            assert max(compiled) < LIST_MIN, (template, compiled)  # the compact text only
        monkeypatch.setattr(routing.kernel, "LIST_MIN", 10**9)
        expected = _route(kernel(), sql, params)
        monkeypatch.undo()
        assert got == expected, (template, column)


def _route(k: ShardingKernel, sql: str, params: list[Any] | None) -> RoutedStatement | str:
    try:
        return k.route(sql, params)
    except RoutingError as exc:
        return str(exc)


def test_a_value_no_node_takes_is_refused_as_before(monkeypatch: pytest.MonkeyPatch) -> None:
    sql = "SELECT * FROM t_order WHERE order_id IN (" + ", ".join([*map(str, range(200)), "'x'"]) + ")"
    with pytest.raises(RoutingError) as got:
        kernel().route(sql)
    monkeypatch.setattr(routing.kernel, "LIST_MIN", 10**9)
    with pytest.raises(RoutingError) as expected:
        kernel().route(sql)
    assert str(got.value) == str(expected.value)


LONG = ", ".join(map(str, range(4, PER_UNIT_MIN + 4)))


@pytest.mark.parametrize("where", [
    "order_id IN (2, 3)",  # short
    f"order_id IN (-2, 2, 3, {LONG})",  # a negative value is an expression: the list as written
    f"order_id IN ((1), 2, 3, {LONG})",
    f"order_id IN (1, 2 + 0, 3, {LONG})",
    f"order_id IN (1, /* c */ 2, 3, {LONG})",
    f"order_id IN (1, 2, 3, {LONG}) OR user_id = 1",
    f"NOT order_id IN (1, 2, 4, {LONG})",
    "status IN ('1', '2', '3', '4', '5', '6', '7', '8', '9', '10', '11', '12', '13', '14', '15', '16', '17', '18', "
    "'19', '20', '21', '22', '23', '24', '25', '26', '27', '28', '29', '30', '31', '32', '33')",
])
def test_lists_written_whole_to_every_unit(where: str) -> None:
    sql = f"SELECT * FROM t_order WHERE {where}"
    routed = kernel().route(sql)
    for unit in routed.execution_units:
        assert where in unit.sql


def test_an_or_chain_is_one_group_of_values() -> None:
    """``order_id = v OR order_id = w ...``: past 256 values it was routed everywhere; now by its values."""
    values = [2 * i for i in range(600)]  # even: t_order_0 only
    sql = "SELECT COUNT(*) FROM t_order WHERE " + " OR ".join(f"order_id = {v}" for v in values)
    routed = kernel().route(sql)
    assert [(u.data_source, u.table_map["t_order"]) for u in routed.route_units] == [
        ("ds_0", "t_order_0"), ("ds_1", "t_order_0")]
    mixed = "SELECT COUNT(*) FROM t_order WHERE " + " OR ".join(f"order_id = {v}" for v in [*values, 7])
    assert len(kernel().route(mixed).route_units) == 4


def test_a_long_or_chain_has_no_recursion_limit() -> None:
    sql = "SELECT COUNT(*) FROM t_order WHERE " + " OR ".join(f"user_id = {2 * i + 1}" for i in range(3000))
    routed = kernel().route(sql)
    assert {u.data_source for u in routed.route_units} == {"ds_1"}


class Unhashable:
    def __init__(self, v: int) -> None:
        self.v = v

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Unhashable) and other.v == self.v) or other == self.v

    __hash__ = None  # type: ignore[assignment]


@pytest.mark.parametrize("values", [
    [1, 1.0, True, Decimal("1.00"), "1", 2, 2.5, "1", b"1", 2],
    [Unhashable(3), 3, Unhashable(3), 4, [5], [5], (6,), 1],
    [float("nan"), 1, Decimal(1), "a", "A", "a"],
    list(range(50)) * 3,
])
def test_distinct_keeps_what_a_list_scan_kept(values: list[Any]) -> None:
    """The de-duplication by hash keeps exactly the values ``if v not in kept: kept.append(v)`` kept, in order."""
    kept: list[Any] = []
    for v in values:
        if v not in kept:
            kept.append(v)
    distinct = Distinct(values)
    assert len(distinct.values) == len(kept) and all(a is b for a, b in zip(distinct.values, kept, strict=True))
    bulk = Distinct()
    bulk.extend(values)
    assert len(bulk.values) == len(kept) and all(a is b for a, b in zip(bulk.values, kept, strict=True))


def test_evaluate_expands_a_list_cut_short() -> None:
    cond = Eq((0, "a"), (Slot(0), Slot(1)))
    groups = evaluate(cond, [10, 11], {0: [5, 6, 5.0, True], 1: ()})
    assert groups is not None and groups[0]["a"].values == (5, 6, True)
    assert evaluate(cond, [10, 11], {0: [5, None], 1: ()}) is None  # NULL among them: no restriction


def test_shape_of_a_long_list_is_scanned_directly() -> None:
    sql = "SELECT * FROM t_order WHERE order_id IN (" + ", ".join(map(str, range(20000))) + ")"
    k = kernel()
    assert k._shape(sql, None) == scan_shape(sql)


def test_big_lists_literal_and_prepared() -> None:
    """50,000 values on each key and off them, literal and prepared: every value reaches exactly its node."""
    rng = random.Random(35)
    values = [rng.randint(1, 10**9) for _ in range(50000)]
    for column in ("order_id", "user_id", "status"):
        for prepared in (False, True):
            sql, params = statement(TEMPLATES[0], column, values, prepared)
            routed = kernel().route(sql, params)
            seen = 0
            for unit, route in zip(routed.execution_units, routed.route_units, strict=True):
                node = (route.data_source, route.table_map["t_order"])
                got = in_list_of(unit.sql, unit.params, column)
                own = [v for v in values if belongs(column, v, node)]
                assert got == (own if prepared else [str(v) for v in own])
                seen += len(got)
            assert seen == len(values) * (2 if column != "status" else 4)


def test_plans_of_compact_texts_are_kept_apart_and_dropped_with_the_rest() -> None:
    k = kernel()
    sql = "SELECT * FROM t_order WHERE order_id IN (" + ", ".join(map(str, range(100))) + ")"
    k.route(sql)
    assert len(k._compact_plans) == 1 and len(k.cache) == 0
    k.route(sql.replace("(0, 1, ", "(0, 1, 2, "))  # another length, the same compact text: its plan
    assert len(k._compact_plans) == 1
    k.invalidate()
    assert len(k._compact_plans) == 0


def test_true_after_a_1_routes_as_before() -> None:
    """TRUE after a 1 is the same value for routing (the 1 is asked; INLINE refuses ``TRUE % 2`` alone, as it did): the
    route is the list's, and since TRUE cannot be placed on its own every unit gets the whole list."""
    params: list[Any] = [1, True, *range(2, PER_UNIT_MIN + 8)]
    sql = "SELECT * FROM t_order WHERE order_id IN (" + ", ".join("?" * len(params)) + ")"
    routed = kernel().route(sql, params)
    assert len(routed.route_units) == 4
    assert all(unit.params == tuple(params) for unit in routed.execution_units)
    with pytest.raises(RoutingError):
        kernel().route(sql, [True, *params])


def test_routes_of_long_texts_are_not_kept() -> None:
    """A scatter SELECT's route is kept by its text, each unit's text with it: not for a long text."""
    k = kernel()
    short = "SELECT * FROM t_order WHERE status IN ('a', 'b')"
    assert k.route(short) is k.route(short)
    long = "SELECT * FROM t_order WHERE status IN (" + ", ".join(f"'{i}'" for i in range(20000)) + ")"
    assert k.route(long) is not k.route(long)
    assert k.route(long) == k.route(long)
