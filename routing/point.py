"""Point plans: a cached sharded plan specialised for statements that pin one table's sharding columns.

Why: a sharded point select (``SELECT c FROM sbtest1 WHERE id = ?``) differs from a pass-through one only by
evaluating an algorithm and renaming a table, but the general `ShardedPlan.execute` builds DNF groups,
routes every strategy over target lists, combines route units and renders its template piece by piece
(most of a sharded point select's kernel time, were it used for every call). A `PointPlan` is
compiled once from such a plan: it reads the one value per sharding column straight from its token or
parameter, asks the same algorithms for the target, and renders the unit's SQL by concatenating
precomputed text around the actual table name (for a prepared text, whose values are all ``?``, the
rendered SQL is cached per actual table).

It never decides anything the general plan would decide differently: whenever its shortcut does not apply
to a call (hints, a NULL or missing value, a value the algorithm refuses or maps to no target, a route to
more than one node) it hands the call to the plan it was compiled from, which answers or refuses exactly
as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from routing.conditions import And, Const, Eq, Slot
from routing.model import NoneStrategy, ShardingStrategy, StandardStrategy, TableRule
from routing.parse import Shape, literal_value
from routing.plan import ExecutionUnit, RoutedStatement, RouteUnit, SessionHints, StatementKind
from routing.rewrite import TableSlot, ValueSlot, renders_as_text
from routing.route import Plan, ShardedPlan, sharding_value

__all__ = ["PointPlan", "point_plan"]

_POINT_KINDS = (StatementKind.SELECT, StatementKind.UPDATE, StatementKind.DELETE)
_TABLE = -1  # a template hole for the unit's actual table (quoted as the user quoted it)


class _Fallback(Exception):
    """This call is not a point route: the general plan answers it."""


@dataclass(frozen=True)
class _Value:
    """Where a sharding column's one value comes from: a value token (`slot`, maybe negated) or a constant."""

    slot: int | None
    negate: bool = False
    const: Any = None


@dataclass(frozen=True)
class PointPlan(Plan):
    """A `ShardedPlan` whose one sharded table is pinned by one value per sharding column (see module doc)."""

    base: ShardedPlan | None = None
    rule: TableRule | None = None
    logic: str = ""  # the logic table, lower case
    values: dict[str, _Value] = field(default_factory=dict)  # sharding column (lower case) -> its value
    data_sources: tuple[str, ...] = ()
    tables: dict[str, tuple[str, ...]] = field(default_factory=dict)  # data source -> its tables, in node order
    pieces: tuple[str | int, ...] = ()  # static text, _TABLE, or a value-token index
    quote: str = ""
    params_in_order: bool = True  # the unit's parameters are the statement's, in the same order
    param_slots: tuple[int, ...] = ()  # the parameter index of each `?` the template renders
    all_params: bool = False  # every rendered value token is a `?`: the SQL depends only on the table
    n_params: int = 0  # the statement's `?` count
    # A rule whose database strategy alone decides (table strategy none, one table per data source, as
    # sysbench's `id % 2` layout): data source -> its one table, for `_node`'s one-step form; None: the general form
    table_of: dict[str, str] | None = None
    # With `table_of`, when the database algorithm answers by remainder (`targets_by_remainder`): the
    # data source per remainder, in which `_node` looks an unsigned int value up
    by_remainder: tuple[str | None, ...] | None = None
    # The actual table whose unit SQL is the statement's own text (named as the logic table is written:
    # `_verbatim_table`); "" when no table is
    verbatim_table: str = ""
    _sql_by_table: dict[str, str] = field(default_factory=dict, compare=False)

    def accepts(self, shape: Shape) -> bool:
        base = self.base
        assert base is not None
        return not base.pins or base.accepts(shape)

    def execute(self, shape: Shape, params: Sequence[Any] | None, hints: SessionHints | None) -> RoutedStatement:
        base = self.base
        assert base is not None
        if (hints is not None and (hints.database_values or hints.table_values)) or \
                (params is not None and len(params) != self.n_params):
            return base.execute(shape, params, hints)
        try:
            ds, table = self._node(shape, params)
        except _Fallback:
            return base.execute(shape, params, hints)
        if params is None:
            unit_params = None
        elif self.params_in_order:
            unit_params = tuple(params)
        else:
            unit_params = tuple(params[i] for i in self.param_slots)
        return RoutedStatement(
            kind=self.kind,
            route_units=(RouteUnit(ds, {self.logic: table}),),
            execution_units=(ExecutionUnit(ds, self._sql(shape, table), unit_params),),
            write=self._write(hints),
            logic_tables=self.logic_tables,
            into_variables=self.into_variables,
            into_trailing=self.into_trailing,
            set_variables=self.set_variables,
        )

    def single(self, shape: Shape, params: Sequence[Any] | None) -> tuple[str, str] | None:
        """(data source, actual SQL) of `execute(shape, params, None)`, whose one unit then has the statement's
        parameters as given; None when the general plan must answer."""
        if params is not None and (len(params) != self.n_params or not self.params_in_order):
            return None
        try:
            ds, table = self._node(shape, params)
        except _Fallback:
            return None
        return ds, self._sql(shape, table)

    # -- routing ------------------------------------------------------------------------------------------

    def _value(self, column: str, shape: Shape, params: Sequence[Any] | None) -> Any:
        ref = self.values.get(column)
        if ref is None:
            raise _Fallback
        k = ref.slot
        if k is None:
            return ref.const
        start, end, kind = shape.spans[k]
        if kind == "p":
            p = self.param_index[k]
            if params is None or p is None or p >= len(params):
                raise _Fallback
            value = params[p]
        else:
            try:
                value = literal_value(shape.sql[start:end], kind)
            except (ValueError, ArithmeticError):
                raise _Fallback from None
        if value is None:
            raise _Fallback
        if ref.negate:
            try:
                value = -value
            except TypeError:
                raise _Fallback from None
        return value

    def _target(self, strategy: ShardingStrategy, targets: Sequence[str], shape: Shape,
                params: Sequence[Any] | None) -> str:
        if isinstance(strategy, NoneStrategy):
            if len(targets) != 1:
                raise _Fallback
            return targets[0]
        assert isinstance(strategy, StandardStrategy)
        value = sharding_value(self._value(strategy.column.lower(), shape, params))
        try:
            target = strategy.algorithm.shard_precise(targets, strategy.column, value)
        except Exception:  # the general plan words the algorithm's refusal
            raise _Fallback from None
        if target is None or target not in targets:
            raise _Fallback
        return target

    def _node(self, shape: Shape, params: Sequence[Any] | None) -> tuple[str, str]:
        rule = self.rule
        assert rule is not None
        table_of = self.table_of
        if table_of is not None:  # `_target` of the database strategy, then the one table there (see table_of)
            strategy = rule.database_strategy
            assert isinstance(strategy, StandardStrategy)
            value = self._value(strategy.column.lower(), shape, params)
            by_rest = self.by_remainder
            if by_rest is not None and type(value) is int and value >= 0:  # the usual value: looked up
                ds = by_rest[value % len(by_rest)]
                if ds is not None:
                    return ds, table_of[ds]
            value = sharding_value(value)
            try:
                ds = strategy.algorithm.shard_precise(self.data_sources, strategy.column, value)
            except Exception:  # the general plan words the algorithm's refusal
                raise _Fallback from None
            if type(ds) is not str:
                raise _Fallback
            table = table_of.get(ds)
            if table is None:
                raise _Fallback
            return ds, table
        if rule.auto:
            table = self._target(rule.table_strategy, self.tables[""], shape, params)
            nodes = [n for n in rule.data_nodes if n.table == table]
            if len(nodes) != 1:
                raise _Fallback
            return nodes[0].data_source, table
        ds = self._target(rule.database_strategy, self.data_sources, shape, params)
        return ds, self._target(rule.table_strategy, self.tables[ds], shape, params)

    # -- rendering ----------------------------------------------------------------------------------------

    def _sql(self, shape: Shape, table: str) -> str:
        if table == self.verbatim_table:
            return shape.sql
        if self.all_params:
            sql = self._sql_by_table.get(table)
            if sql is not None:
                return sql
        q = self.quote
        actual = f"{q}{table}{q}" if q else table
        text = shape.sql
        spans = shape.spans
        out: list[str] = []
        for p in self.pieces:
            if type(p) is str:
                out.append(p)
            elif p == _TABLE:
                out.append(actual)
            else:
                start, end, _ = spans[p]  # type: ignore[index]
                out.append(text[start:end])
        sql = "".join(out)
        if self.all_params and len(self._sql_by_table) < 4096:
            self._sql_by_table[table] = sql
        return sql


def _eq_values(cond: object) -> dict[str, _Value] | None:
    """One value per column, when the condition is ``col = v`` or a conjunction of those on distinct columns."""
    eqs = cond.children if isinstance(cond, And) else (cond,)
    out: dict[str, _Value] = {}
    for eq in eqs:
        if not isinstance(eq, Eq) or len(eq.values) != 1:
            return None
        column = eq.column[1]
        if column in out:
            return None
        ref = eq.values[0]
        if isinstance(ref, Slot):
            out[column] = _Value(ref.index, ref.negate)
        elif isinstance(ref, Const):
            if ref.value is None:
                return None
            out[column] = _Value(None, False, ref.value)
        else:
            return None
    return out


def _strategy_ok(strategy: ShardingStrategy, values: dict[str, _Value]) -> bool:
    if isinstance(strategy, NoneStrategy):
        return True
    return isinstance(strategy, StandardStrategy) and strategy.column.lower() in values


def _verbatim_table(plan: ShardedPlan, logic: str, quote: str, logic_original: str | None, shape: Shape | None) -> str:
    """The actual table for which `PointPlan._sql` renders every text of this shape key as the text itself (named as
    the text names the logic table, `logic_original`), or "": `rewrite.renders_as_text` of the plan's template."""
    if shape is None or not logic_original:
        return ""
    table = logic_original[len(quote):len(logic_original) - len(quote)] if quote else logic_original
    if f"{quote}{table}{quote}" != logic_original:
        return ""
    return table if renders_as_text(plan.single_template, {logic: table}, shape, plan.param_index) else ""


def point_plan(plan: Plan, shape: Shape | None = None) -> Plan:
    """`plan` as a `PointPlan` when its shape allows one, else `plan` itself. `shape`: the text it was compiled from
    (for `PointPlan.verbatim_table`)."""
    if type(plan) is not ShardedPlan or plan.sharding is None or len(plan.conditions) != 1:
        return plan
    if plan.single_data_source is not None or plan.set_checks or plan.into_variables:
        return plan
    if plan.kind not in _POINT_KINDS or plan.stepwise is not None or plan.dual_read is not None \
            or plan.dual_refusal is not None:
        return plan  # INSERTs (upserts, generated keys), stepwise writes, resharding windows: the general plan
    logic, cond = plan.conditions[0]
    if plan.order != (logic,):
        return plan
    rule = plan.sharding.tables.get(logic)
    values = _eq_values(cond)
    if rule is None or values is None or rule.window is not None:
        return plan
    strategies = (rule.table_strategy,) if rule.auto else (rule.database_strategy, rule.table_strategy)
    if not all(_strategy_ok(s, values) for s in strategies):
        return plan
    pieces: list[str | int] = []
    quote: str | None = None
    logic_original: str | None = None  # how the text writes the logic table ("": in two ways)
    param_slots: list[int] = []
    all_params = True
    for piece in plan.single_template.pieces:
        tp = type(piece)
        if tp is str:
            pieces.append(piece)  # type: ignore[arg-type]
        elif tp is TableSlot:
            if piece.logic != logic:  # type: ignore[union-attr]
                pieces.append(piece.original)  # type: ignore[union-attr]
                continue
            if quote is not None and piece.quote != quote:  # type: ignore[union-attr]
                return plan
            quote = piece.quote  # type: ignore[union-attr]
            original = piece.original  # type: ignore[union-attr]
            logic_original = original if logic_original in (None, original) else ""
            pieces.append(_TABLE)
        elif tp is ValueSlot:
            k = piece.index  # type: ignore[union-attr]
            pieces.append(k)
            p = plan.param_index[k] if k < len(plan.param_index) else None
            if p is None:
                all_params = False
            else:
                param_slots.append(p)
        else:  # LIMIT slots, generated keys: the general renderer
            return plan
    if quote is None:
        return plan
    n_params = sum(1 for p in plan.param_index if p is not None)
    in_order = param_slots == list(range(n_params))
    if not in_order:
        return plan  # a unit whose `?` differ from the statement's: rare, left to the general renderer
    data_sources = tuple(rule.data_sources)
    tables = {"": tuple(n.table for n in rule.data_nodes)} if rule.auto else \
        {ds: tuple(rule.tables_in(ds)) for ds in data_sources}
    table_of = None
    if not rule.auto and isinstance(rule.database_strategy, StandardStrategy) \
            and isinstance(rule.table_strategy, NoneStrategy) and all(len(t) == 1 for t in tables.values()):
        table_of = {ds: t[0] for ds, t in tables.items()}
    by_remainder = None
    if table_of is not None:
        strategy = rule.database_strategy
        assert isinstance(strategy, StandardStrategy)
        table_by = getattr(strategy.algorithm, "targets_by_remainder", None)  # built-in algorithms have it
        by_remainder = (table_by(data_sources, strategy.column) or None) if table_by is not None else None
    return PointPlan(
        kind=plan.kind, write=plan.write, param_index=plan.param_index, logic_tables=plan.logic_tables,
        pins=plan.pins, into_variables=plan.into_variables, into_trailing=plan.into_trailing,
        set_variables=plan.set_variables, base=plan, rule=rule, logic=logic, values=values,
        data_sources=data_sources, tables=tables, pieces=tuple(pieces), quote=quote,
        params_in_order=in_order, param_slots=tuple(param_slots), all_params=all_params, n_params=n_params,
        table_of=table_of, by_remainder=by_remainder,
        verbatim_table=_verbatim_table(plan, logic, quote, logic_original, shape),
    )
