"""From sharding conditions to data nodes, and from data nodes to route units.

`route_table` applies one table's database and table strategies to the DNF groups produced by
`routing.conditions`; `build_units` combines the routed tables of a statement: binding tables pair 1:1 by
their position in the data node lists, unrelated sharded tables combine within one data source (cartesian)
and anything that would need rows from two data sources at once is refused.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal
from itertools import chain, product
from typing import Any

from routing.conditions import Cond, Constraint, Group, ValueRef, evaluate, resolve_value
from routing.errors import RoutingError
from routing.lists import ListTokens
from routing.model import (
    ComplexStrategy,
    DataNode,
    HintStrategy,
    NoneStrategy,
    ShardingRule,
    ShardingStrategy,
    StandardStrategy,
    TableRule,
)
from routing.parse import UNKNOWN, Shape, literal_value
from routing.plan import ExecutionUnit, RoutedStatement, RouteUnit, SessionHints, StatementKind
from routing.rewrite import (
    EMPTY_TEMPLATE,
    InListSlot,
    RenderContext,
    Template,
    render,
    render_sql,
    renders_as_text,
)


def hint_values(hints: SessionHints | None, table: str, database: bool) -> tuple[Any, ...]:
    if hints is None:
        return ()
    source = hints.database_values if database else hints.table_values
    return tuple(source.get(table, ()) or source.get("", ()))


def sharding_value(value: Any) -> Any:
    """A SQL value as the sharding algorithms should see it: an integral number is an int.

    ``7.0`` and ``7e0`` equal the INT 7 in MySQL, but an inline expression would render them as
    ``ds_1.0``; exact integral Decimals and floats become ints, everything else is left alone.
    """
    tv = type(value)
    if tv is int or tv is str:
        return value
    if tv is Decimal:
        if value.is_finite() and value == value.to_integral_value():
            return int(value)
    elif tv is float:
        if math.isfinite(value) and value.is_integer():
            return int(value)
    return value


def _computed_target(strategy: StandardStrategy, column: str, value: Any) -> str | None:
    """What the algorithm computed for a value that matched no target (INLINE can tell), for the message."""
    evaluate = getattr(strategy.algorithm, "evaluate", None)
    if evaluate is None:
        return None
    try:
        result = evaluate(column, value)
    except Exception:  # only used to word an error
        return None
    return result if isinstance(result, str) else None


class Answers:
    """What standard strategies' algorithms answered while one statement was routed: per (strategy, targets), the
    target of each value, and the targets of each group's values (`shard_targets`, for the
    next data source with the same tables); `in_list_selection` reads them instead of asking again (issue 35). By type
    and value: 1 and True are asked apart, as routing always asked each value of its groups."""

    __slots__ = ("by_value", "routed")

    def __init__(self) -> None:
        self.by_value: dict[tuple[int, tuple[str, ...]], dict[tuple[type, Any], str | None]] = {}
        self.routed: dict[tuple[int, tuple[str, ...], int], tuple[tuple[Any, ...], list[str]]] = {}

    def of(self, strategy: ShardingStrategy, targets: Sequence[str]) -> dict[tuple[type, Any], str | None]:
        return self.by_value.setdefault((id(strategy), tuple(targets)), {})


def shard_targets(
    strategy: ShardingStrategy,
    targets: Sequence[str],
    group: Group,
    hinted: tuple[Any, ...],
    table: str,
    level: str,
    answers: Answers | None = None,
) -> list[str]:
    """The targets (data sources or tables) one strategy keeps for one DNF group. ``answers``: what a standard
    strategy's algorithm answered for each value among these targets, kept for the rest of
    the statement's routing (the same question for another data source with the same tables, `in_list_selection`)."""
    if isinstance(strategy, NoneStrategy):
        return list(targets)
    try:
        if isinstance(strategy, StandardStrategy):
            con = group.get(strategy.column.lower())
            if con is None:
                return list(targets)
            if con.values is not None:
                out: list[str] = []
                known: dict[tuple[type, Any], str | None] | None = None
                if answers is not None:
                    done = (id(strategy), tuple(targets), id(con.values))
                    routed = answers.routed.get(done)
                    if routed is not None and routed[0] is con.values:
                        return list(routed[1])
                    known = answers.of(strategy, targets)
                for raw in con.values:
                    value = sharding_value(raw)
                    if known is None:
                        target = strategy.algorithm.shard_precise(targets, strategy.column, value)
                    else:
                        key = (type(raw), raw)
                        try:
                            target = known[key]
                        except KeyError:
                            target = known[key] = strategy.algorithm.shard_precise(targets, strategy.column, value)
                        except TypeError:  # unhashable: asked each time
                            target = strategy.algorithm.shard_precise(targets, strategy.column, value)
                    if target is None or target not in targets:
                        computed = target if target is not None else _computed_target(strategy, strategy.column, value)
                        where = (
                            f"routes to {level} {computed!r}, which is not among"
                            if computed is not None
                            else "maps to none of"
                        )
                        raise _NoTarget(
                            f"sharding value {raw!r} of {table}.{strategy.column} {where} the configured "
                            f"{level}s {list(targets)} of table {table} (algorithm {strategy.algorithm_name}); "
                            "check the value or the rule's actualDataNodes"
                        )
                    if target not in out:
                        out.append(target)
                chosen = _in_order(targets, out)
                if answers is not None:
                    answers.routed[done] = (con.values, chosen)
                    return list(chosen)
                return chosen
            chosen = strategy.algorithm.shard_range(targets, strategy.column, con.bound())
            return _in_order(targets, chosen)
        if isinstance(strategy, ComplexStrategy):
            values: dict[str, Sequence[Any]] = {}
            ranges = {}
            for column in strategy.columns:
                con = group.get(column.lower())
                if con is None:
                    continue
                if con.values is not None:
                    values[column] = tuple(sharding_value(v) for v in con.values)
                elif con.has_range:
                    ranges[column] = con.bound()
            if not values and not ranges:
                return list(targets)
            return _in_order(targets, strategy.algorithm.shard(targets, values, ranges))
        if isinstance(strategy, HintStrategy):
            if not hinted:
                return list(targets)
            hinted = tuple(sharding_value(v) for v in hinted)
            return _in_order(targets, strategy.algorithm.shard(targets, hinted))
    except _NoTarget as exc:
        raise RoutingError(exc.message) from None
    except Exception as exc:  # an algorithm refusing a value (e.g. INLINE on a range) must not crash
        name = getattr(strategy, "algorithm_name", "?")
        raise RoutingError(
            f"sharding algorithm {name} of table {table} failed on this statement: {exc}; check the "
            f"values given to the table's sharding columns ({', '.join(_strategy_columns(strategy))})"
        ) from exc
    return list(targets)


class _NoTarget(RoutingError):
    """A precise value that maps to no configured target (worded by `shard_targets`)."""


def _strategy_columns(strategy: ShardingStrategy) -> list[str]:
    if isinstance(strategy, StandardStrategy):
        return [strategy.column]
    if isinstance(strategy, ComplexStrategy):
        return list(strategy.columns)
    return ["hint values"]


def _in_order(targets: Sequence[str], chosen: Sequence[str]) -> list[str]:
    wanted = set(chosen)
    return [t for t in targets if t in wanted]


def route_table(
    rule: TableRule, groups: list[Group] | None, hints: SessionHints | None = None, *, old: bool = False,
    answers: Answers | None = None,
) -> list[DataNode]:
    """Data nodes of ``rule`` that rows matching any group may live on, in data node order. ``old``: where
    the resharding window's old strategies put them (``rule.window``; the new strategies without one)."""
    name = rule.logic_table
    low = name.lower()
    db_hint = hint_values(hints, low, True)
    table_hint = hint_values(hints, low, False)
    db_strategy, table_strategy = rule.database_strategy, rule.table_strategy
    if old and rule.window is not None:
        db_strategy, table_strategy = rule.window.database_strategy, rule.window.table_strategy
    chosen: set[DataNode] = set()
    for group in groups if groups is not None else [{}]:
        if rule.auto:
            tables = shard_targets(
                table_strategy, [n.table for n in rule.data_nodes], group, table_hint, name, "table", answers
            )
            wanted = set(tables)
            chosen.update(n for n in rule.data_nodes if n.table in wanted)
            continue
        for ds in shard_targets(db_strategy, rule.data_sources, group, db_hint, name, "data source", answers):
            for table in shard_targets(table_strategy, rule.tables_in(ds), group, table_hint, name, "table", answers):
                chosen.add(DataNode(ds, table))
    return [n for n in rule.data_nodes if n in chosen]


def range_blind_columns(rule: TableRule) -> frozenset[str] | None:
    """The sharding columns (lower case) of `rule` when each of its strategies answers any range on its
    column, and no condition at all, with every target: no strategy, or a standard one whose algorithm
    says so (`ranges_route_everywhere`); None when some strategy may answer otherwise."""
    strategies = (rule.table_strategy,) if rule.auto else (rule.database_strategy, rule.table_strategy)
    columns: set[str] = set()
    for strategy in strategies:
        if isinstance(strategy, NoneStrategy):
            continue
        if isinstance(strategy, StandardStrategy):
            everywhere = getattr(strategy.algorithm, "ranges_route_everywhere", None)
            if everywhere is not None and everywhere() is True:
                columns.add(strategy.column.lower())
                continue
        return None
    return frozenset(columns)


def _routes_everywhere(groups: list[Group] | None, columns: frozenset[str] | None) -> bool:
    """Would `route_table` give every node of the table for these groups, whatever their bounds? When no
    group pins a `range_blind_columns` column to values (no groups: no condition; an empty list is a
    contradiction, which one node answers)."""
    if columns is None:
        return False
    if groups is None:
        return True
    if not groups:
        return False
    for group in groups:
        for column in columns:
            con = group.get(column)
            if con is not None and con.values is not None:
                return False
    return True


def route_window(rule: TableRule, groups: list[Group] | None, hints: SessionHints | None = None) -> list[DataNode]:
    """SELECT / UPDATE / DELETE during a resharding window: the new nodes and the old ones, in data node
    order (the seed's dual read, dual update and dual delete)."""
    nodes = set(route_table(rule, groups, hints))
    if rule.window is not None:
        nodes.update(route_table(rule, groups, hints, old=True))
    return [n for n in rule.data_nodes if n in nodes]


def precise_group(values: Mapping[str, Any]) -> Group:
    """A DNF group for one INSERT row: column → its single value."""
    return {col: Constraint(values=(value,)) for col, value in values.items()}


@dataclass(frozen=True)
class JoinLayout:
    """What a statement's join conditions prove about where matching rows of its sharded tables live.

    ``pairs`` maps a sorted pair of logic tables to ``NODE`` (binding tables joined on their table sharding
    columns: matching rows sit at the same position, route 1:1) or ``SOURCE`` (joined on equal database
    sharding columns under the same algorithm: matching rows share a data source, route as a cartesian
    product within each data source); a missing pair proves nothing. ``unaligned_self`` lists tables
    that occur several times without their occurrences being equated on every sharding column; ``outer``
    says the statement has an outer join (a cartesian product would then invent unmatched rows).
    """

    pairs: Mapping[tuple[str, str], int] = field(default_factory=dict)
    unaligned_self: tuple[str, ...] = ()
    outer: bool = False

    def level(self, a: str, b: str) -> int:
        return self.pairs.get((a, b) if a <= b else (b, a), 0)


SOURCE = 1
NODE = 2


def build_units(
    sharding: ShardingRule,
    routed: Mapping[str, list[DataNode]],
    order: Sequence[str],
    layout: JoinLayout | None = None,
) -> list[RouteUnit]:
    """Combine the routed sharded tables of one statement into route units.

    ``routed`` maps each logic table (lower case) to its nodes; ``order`` is the tables' first appearance.
    Without a ``layout`` (DDL naming binding tables) binding tables always pair 1:1.
    """
    if layout is not None:
        for table in layout.unaligned_self:
            if len(routed[table]) > 1:
                rule = sharding.tables[table]
                raise RoutingError(
                    f"this statement joins sharded table {rule.logic_table} with itself on a condition that "
                    f"does not equate its sharding columns ({', '.join(sorted(rule.sharding_columns))}), and it "
                    f"routes to {len(routed[table])} data nodes: pairs of rows on different nodes would be "
                    "lost. Equate the sharding columns of both references, or add sharding conditions that "
                    "route the table to one data node"
                )
    entities: list[list[RouteUnit]] = []
    names: list[list[str]] = []
    done: set[str] = set()
    for table in order:
        if table in done:
            continue
        group = sharding.binding_group(table)
        members = [table]
        if group is not None:
            # binding tables pair 1:1 only when the statement joins them on their sharding columns
            pending = [table]
            while pending:
                current = pending.pop()
                for other in order:
                    if other in done or other in members or other not in group:
                        continue
                    if layout is None or layout.level(current, other) == NODE:
                        members.append(other)
                        pending.append(other)
            members = [t for t in dict.fromkeys(order) if t in members]
        done.update(members)
        entities.append(_binding_units(sharding, routed, members))
        names.append(members)
    if len(entities) == 1:
        return entities[0]
    ds_sets = [[u.data_source for u in e] for e in entities]
    first = set(ds_sets[0])
    for other, members in zip(ds_sets[1:], names[1:], strict=True):
        if set(other) != first:
            raise RoutingError(
                f"the join of {', '.join(names[0])} with {', '.join(members)} needs rows from different "
                "data sources (they are not binding tables joined on their sharding columns, and their routes "
                "differ); add sharding conditions that route both to the same data source, join binding tables "
                "on their sharding columns, or declare them as bindingTables"
            )
    if layout is not None and len(first) > 1:
        _check_colocated(sharding, names, layout)
    units: list[RouteUnit] = []
    for ds in dict.fromkeys(u.data_source for u in entities[0]):
        per_entity = [[u for u in e if u.data_source == ds] for e in entities]
        combos = list(product(*per_entity))
        if layout is not None and layout.outer and len(combos) > 1:
            tables = ", ".join(t for members in names for t in members)
            raise RoutingError(
                f"this outer join of sharded tables {tables} would run as a cartesian product of their actual "
                f"tables on {ds}, which invents unmatched rows; join binding tables on their sharding columns, "
                "add sharding conditions that route each table to one data node, or use an inner join"
            )
        for combo in combos:
            table_map: dict[str, str] = {}
            for unit in combo:
                table_map.update(unit.table_map)
            units.append(RouteUnit(ds, table_map))
    return units


def _check_colocated(sharding: ShardingRule, names: list[list[str]], layout: JoinLayout) -> None:
    """Running per data source is right only if joined rows share a data source: the entities must be
    connected by joins on equal database sharding columns."""
    reached = {0}
    pending = [0]
    while pending:
        i = pending.pop()
        for j in range(len(names)):
            if j not in reached and any(layout.level(a, b) >= SOURCE for a in names[i] for b in names[j]):
                reached.add(j)
                pending.append(j)
    if len(reached) == len(names):
        return
    apart = next(j for j in range(len(names)) if j not in reached)
    a, b = names[0][0], names[apart][0]
    raise RoutingError(
        f"the join of {', '.join(names[0])} with {', '.join(names[apart])} runs on several data sources, but "
        f"its conditions do not equate their database sharding columns ({_describe(sharding, a)}; "
        f"{_describe(sharding, b)}), so matching rows may live on different data sources and would be lost; "
        "join them on their database sharding columns, add sharding conditions that route them to one data "
        "source, or declare them as bindingTables"
    )


def _describe(sharding: ShardingRule, table: str) -> str:
    rule = sharding.tables[table]
    strategy = rule.table_strategy if rule.auto else rule.database_strategy
    if isinstance(strategy, StandardStrategy):
        return f"{rule.logic_table} by {strategy.column} ({strategy.algorithm_name})"
    if isinstance(strategy, ComplexStrategy):
        return f"{rule.logic_table} by {', '.join(strategy.columns)} ({strategy.algorithm_name})"
    if isinstance(strategy, HintStrategy):
        return f"{rule.logic_table} by hint ({strategy.algorithm_name})"
    return f"{rule.logic_table} unsharded across data sources"


def _binding_units(sharding: ShardingRule, routed: Mapping[str, list[DataNode]], members: list[str]) -> list[RouteUnit]:
    primary = sharding.tables[members[0]]
    if len(members) == 1:
        return [RouteUnit(n.data_source, {members[0]: n.table}) for n in routed[members[0]]]
    positions: set[int] | None = None
    rules = [sharding.tables[m] for m in members]
    for member, rule in zip(members, rules, strict=True):
        if len(rule.data_nodes) != len(primary.data_nodes):
            raise RoutingError(
                f"binding tables {primary.logic_table} and {rule.logic_table} have different numbers of "
                "data nodes; binding tables must have the same layout"
            )
        index = {node: i for i, node in enumerate(rule.data_nodes)}
        mine = {index[n] for n in routed[member]}
        positions = mine if positions is None else positions & mine
    chosen = sorted(positions or ()) or [0]  # contradictory conditions: any one node answers "no rows"
    units = []
    for i in chosen:
        ds = primary.data_nodes[i].data_source
        units.append(RouteUnit(ds, {m: r.data_nodes[i].table for m, r in zip(members, rules, strict=True)}))
    return units


# --- plans: what a cached statement shape needs to be routed again -----------------------------------


_MISSING: Any = object()


def in_list_selection(rule: TableRule, slot: InListSlot, values: Sequence[Any], units: Sequence[RouteUnit],
                      answers: Answers | None = None) -> dict[tuple[str, str | None], list[int]] | None:
    """Per unit (data source, actual table of ``slot.logic``), the positions of the values of an IN list (``values``,
    the list's own) whose rows that table can hold: those its standard strategies send there, asked as `route_table`
    asks them (`Answers`: routing asked most already). None when that cannot be told (a value unknown or NULL,
    unhashable, or an algorithm failing on a value routing did not ask, TRUE after a 1): every unit gets the whole
    list. (A value equal to an earlier one of another type, asked on its own, may land apart from it: the earlier
    one finds their rows in its own unit.)

    Why a unit may drop the others: ``col IN (...)`` is AND-ed at the top of the WHERE, so every row the unit returns
    or changes has ``col`` equal to one of the values, and a row with value v sits where the strategy sends v."""
    logic = slot.logic
    keys = {(u.data_source, u.table_map.get(logic)) for u in units}
    db = rule.database_strategy if slot.database and not rule.auto else None
    tb = rule.table_strategy if slot.table else None
    if (db is None and tb is None) or not all(isinstance(s, StandardStrategy) for s in (db, tb) if s is not None):
        return None
    store = answers if answers is not None else Answers()
    # the questions each value is asked, as `route_table` asks them: its data source, then its table among the
    # tables of each group of data sources with the same tables
    questions: list[tuple[StandardStrategy, list[str]]] = []
    if isinstance(db, StandardStrategy):
        questions.append((db, rule.data_sources))
    table_groups: list[list[str]] = []
    if isinstance(tb, StandardStrategy):
        sources = sorted({ds for ds, _ in keys})
        if rule.auto:
            questions.append((tb, [n.table for n in rule.data_nodes]))
            table_groups.append(sources)
        else:
            groups: dict[tuple[str, ...], list[str]] = {}
            for ds in sources:
                groups.setdefault(tuple(rule.tables_in(ds)), []).append(ds)
            for tables, members in groups.items():
                questions.append((tb, list(tables)))
                table_groups.append(members)
    asks = [(store.of(strategy, targets), strategy.algorithm.shard_precise, targets, strategy.column)
            for strategy, targets in questions]
    positions: dict[tuple[str | None, ...], list[int]] = {}  # by the answers a value got
    try:
        for i, value in enumerate(values):
            if value is UNKNOWN or value is None:
                return None
            key = (type(value), value)
            answered = []
            for known, shard, targets, column in asks:
                target = known.get(key, _MISSING)
                if target is _MISSING:
                    target = known[key] = shard(targets, column, sharding_value(value))
                answered.append(target)
            signature = tuple(answered)
            found = positions.get(signature)
            if found is None:
                positions[signature] = [i]
            else:
                found.append(i)
    except Exception:  # unhashable, or an algorithm refusing a value the route took: the whole list, as before
        return None
    lists: dict[tuple[str, str | None], list[list[int]]] = {key: [] for key in keys}
    offset = 1 if isinstance(db, StandardStrategy) else 0
    for signature, where in positions.items():
        ds_answer = signature[0] if offset else None
        if not table_groups:
            homes = [key for key in keys if key[0] == ds_answer]
        else:
            homes = []
            for g, members in enumerate(table_groups):
                table = signature[offset + g]
                homes.extend((ds, table) for ds in members
                             if (ds_answer is None or ds == ds_answer) and (ds, table) in keys)
        for home in homes:
            lists[home].append(where)
    return {key: runs[0] if len(runs) == 1 else sorted(chain.from_iterable(runs)) for key, runs in lists.items()}


def statement_values(shape: Shape, params: Sequence[Any] | None) -> list[Any]:
    """Python values of the statement's value tokens (``?`` → its parameter, UNKNOWN when missing)."""
    out: list[Any] = []
    sql = shape.sql
    p = 0
    for start, end, kind in shape.spans:
        if kind == "p":
            out.append(params[p] if params is not None and p < len(params) else UNKNOWN)
            p += 1
        else:
            try:
                out.append(literal_value(sql[start:end], kind))
            except (ValueError, ArithmeticError):
                out.append(UNKNOWN)
    return out


def param_indexes(shape: Shape) -> tuple[int | None, ...]:
    out: list[int | None] = []
    p = 0
    for _, _, kind in shape.spans:
        if kind == "p":
            out.append(p)
            p += 1
        else:
            out.append(None)
    return tuple(out)


@dataclass(frozen=True)
class Plan:
    """Common part of every plan: statement class and the literal values the plan was compiled for.

    ``pins`` are value tokens the plan's structure depends on (``ORDER BY 2``); a statement of the same
    shape with other pinned values is compiled again instead of reusing this plan.
    """

    kind: StatementKind
    write: bool
    param_index: tuple[int | None, ...]
    logic_tables: tuple[str, ...] = ()
    pins: tuple[tuple[int, str], ...] = ()
    into_variables: tuple[str, ...] = ()  # SELECT ... INTO @a, @b: assigned by the proxy (routing.into)
    into_trailing: bool = False
    set_variables: tuple[str, ...] = ()  # SET @v = (SELECT ...): the user variables it assigns

    def accepts(self, shape: Shape) -> bool:
        return all(shape.text(k) == text for k, text in self.pins)

    def execute(self, shape: Shape, params: Sequence[Any] | None, hints: SessionHints | None) -> RoutedStatement:
        raise NotImplementedError

    def _write(self, hints: SessionHints | None) -> bool:
        return self.write or (hints is not None and hints.write_route_only)

    def _ctx(self, shape: Shape, params: Sequence[Any] | None, values: Sequence[Any] | None = None) -> RenderContext:
        return RenderContext(shape, params, values if values is not None else (), self.param_index)


@dataclass(frozen=True)
class FixedPlan(Plan):
    """A route known at compile time (no sharded table): single tables, broadcast tables, no table."""

    units: tuple[RouteUnit, ...] = ()
    template: Template = EMPTY_TEMPLATE
    untouched: bool = True  # template renders the original text: skip rendering
    renames: Mapping[str, str] = field(default_factory=dict)

    def execute(self, shape: Shape, params: Sequence[Any] | None, hints: SessionHints | None) -> RoutedStatement:
        p = tuple(params) if params is not None else None
        if self.untouched:
            execution = tuple(ExecutionUnit(u.data_source, shape.sql, p) for u in self.units)
        else:
            ctx = self._ctx(shape, params)
            execution = tuple(
                ExecutionUnit(u.data_source, *render_sql(self.template, u.table_map, ctx)) for u in self.units
            )
        return RoutedStatement(
            kind=self.kind,
            route_units=self.units,
            execution_units=execution,
            write=self._write(hints),
            logic_tables=self.logic_tables,
            result_table_renames=self.renames,
            into_variables=self.into_variables,
            into_trailing=self.into_trailing,
            set_variables=self.set_variables,
        )


@dataclass(frozen=True)
class SetCheck:
    """UPDATE ... SET <sharding column> = value: allowed only when WHERE pins the column to that value."""

    table: str
    column: str
    assigned: ValueRef | None  # None: an expression the kernel cannot evaluate
    where_value: ValueRef | None


@dataclass(frozen=True)
class ShardedPlan(Plan):
    """SELECT / UPDATE / DELETE / INSERT ... SELECT touching sharded tables: routed per call."""

    sharding: ShardingRule | None = None
    conditions: tuple[tuple[str, Cond], ...] = ()  # one per sharded table occurrence
    order: tuple[str, ...] = ()
    single_data_source: str | None = None
    single_tables: tuple[str, ...] = ()
    single_template: Template = EMPTY_TEMPLATE
    multi_template: Template = EMPTY_TEMPLATE
    merge: Any = None  # rewrite.MergeTemplate | None
    refuse_multi: str | None = None  # why this statement cannot run on several units
    # indexes into `conditions` of nested occurrences not co-located with the outer rows (a subquery that is
    # uncorrelated, or correlated on fewer than all sharding columns): the statement runs on one unit only when
    # each of them routes, by its own conditions, inside that unit (issue 33)
    strict: tuple[int, ...] = ()
    set_checks: tuple[SetCheck, ...] = ()
    layout: JoinLayout | None = None
    stepwise: str | None = None  # routing.stepwise kind: over several nodes the proxy runs it in steps
    stepwise_table: str = ""
    dual_read: Any = None  # routing.dualread.DualReadTemplate of a windowed single-table SELECT
    dual_refusal: str | None = None  # why a windowed SELECT has none
    in_lists: tuple[InListSlot, ...] = ()  # IN lists each unit of a multi-unit route gets its own values of
    # what calls have in common that the rules alone decide: per table, the sharding columns on
    # which any range routes everywhere (`range_blind_columns`), and the units of a call routed to all nodes
    _blind: dict[str, frozenset[str] | None] = field(default_factory=dict, init=False, compare=False, repr=False)
    _all_units: list[tuple[RouteUnit, ...]] = field(default_factory=list, init=False, compare=False, repr=False)
    # Per template (True: the multi-node one), whether those units' SQL is the statement's own text: the
    # statement's parameter count when it is, -1 when not
    _as_text: dict[bool, int] = field(default_factory=dict, init=False, compare=False, repr=False)

    def expands(self, lists: Mapping[int, Any]) -> bool:
        """Can this plan, compiled from a compact text (`routing.lists`), run the statement with these lists: each
        is an `InListSlot` of its, and nothing else of the plan reads the statement's text or every value."""
        if self.kind not in (StatementKind.SELECT, StatementKind.UPDATE, StatementKind.DELETE) or self.stepwise \
                or self.dual_read is not None or self.dual_refusal is not None or self.set_checks:
            return False
        firsts = {slot.first for slot in self.in_lists if slot.last == slot.first + 1}
        pinned = {k for k, _ in self.pins}
        return all(k in firsts and k not in pinned and k + 1 not in pinned for k in lists)

    def execute(self, shape: Shape, params: Sequence[Any] | None, hints: SessionHints | None,
                lists: Mapping[int, ListTokens] | None = None) -> RoutedStatement:
        """``lists``: `shape` is a compact text (`routing.lists`, `expands`) and these are its lists' values, by the
        slot of each one's first value."""
        assert self.sharding is not None
        values = statement_values(shape, params)
        expanded: dict[int, Sequence[Any]] | None = None
        answers = Answers() if self.in_lists else None  # the algorithms' answers, for the lists
        if lists:
            expanded = {}
            for k, tokens in lists.items():
                expanded[k] = tokens.values
                expanded[k + 1] = ()
        routed: dict[str, list[DataNode]] = {}
        dual = self.kind is not StatementKind.INSERT  # INSERT ... SELECT writes by the new strategy only
        everywhere = hints is None  # every table routed to all its nodes without asking
        strict = self.strict
        own: list[tuple[str, list[DataNode]]] = []
        for k, (logic, cond) in enumerate(self.conditions):
            rule = self.sharding.tables[logic]
            groups = evaluate(cond, values, expanded)
            if dual and rule.window is not None:
                nodes = route_window(rule, groups, hints)
                everywhere = False
            elif everywhere and _routes_everywhere(groups, self._range_blind(logic, rule)):
                nodes = list(rule.data_nodes)  # what route_table would answer, for any values
            else:
                nodes = route_table(rule, groups, hints, answers=answers)
                everywhere = False
            if strict and k in strict:
                own.append((logic, nodes))
            previous = routed.get(logic)
            if previous is None:
                routed[logic] = nodes
            else:
                merged = set(previous) | set(nodes)
                routed[logic] = [n for n in rule.data_nodes if n in merged]
        for logic, nodes in routed.items():
            if not nodes:  # contradictory conditions: one node answers "no rows"
                routed[logic] = [self.sharding.tables[logic].data_nodes[0]]
        inner = hints is not None and hints.stepwise_inner and self.stepwise is not None
        units: Sequence[RouteUnit]
        if self.stepwise == "insert_select" and not inner:
            # the steps route on their own (the SELECT, then each row): the units only stand for the
            # written table's nodes
            target = self.stepwise_table
            units = build_units(self.sharding, {target: routed[target]}, (target,), None)
            # the other tables named as on their first node: the units' text is only described (PREPARE)
            others = {logic.lower(): nodes[0].table for logic, nodes in routed.items() if logic != target and nodes}
            units = [replace(u, table_map={**others, **u.table_map}) for u in units]
            stepwise = True
        else:
            units, stepwise = self._units(routed, values, hints, inner, everywhere)
            if own and len(units) == 1 and not inner:
                _check_strict(units[0], own, self.refuse_multi)
        if self.kind is StatementKind.SELECT and len(units) > 1 and (self.dual_read or self.dual_refusal):
            return self._dual_read(shape, params, values, routed, hints)
        ctx = self._ctx(shape, params, values)
        multi = len(units) > 1
        template = self.multi_template if multi else self.single_template
        n = self._units_as_text(multi, template, units, shape) if everywhere and not lists else -1
        if n >= 0 and (params is None or len(params) == n):
            unit_params = None if params is None else tuple(params)  # what render_sql gives them (renders_as_text)
            execution = tuple([ExecutionUnit(u.data_source, shape.sql, unit_params) for u in units])
        elif (multi or lists) and self.in_lists:
            ctx.lists = self._list_choices(values, units, lists, multi, answers)
            rendered = []
            for u in units:
                ctx.unit = (u.data_source, u.table_map)
                rendered.append(ExecutionUnit(u.data_source, *render_sql(template, u.table_map, ctx)))
            ctx.unit = ctx.lists = None
            execution = tuple(rendered)
        else:
            execution = tuple([ExecutionUnit(u.data_source, *render_sql(template, u.table_map, ctx)) for u in units])
        spec = self.merge.spec(values, shape) if multi and self.merge is not None else None
        repair = self._dual_repair(ctx, routed, hints) if multi and (self.dual_read or self.dual_refusal) else None
        return RoutedStatement(
            dual_repair=repair,
            kind=self.kind,
            route_units=units if type(units) is tuple else tuple(units),
            execution_units=execution,
            merge_spec=spec,
            write=self._write(hints),
            logic_tables=self.logic_tables,
            into_variables=self.into_variables,
            into_trailing=self.into_trailing,
            set_variables=self.set_variables,
            stepwise=self._stepwise(shape, params) if stepwise else None,
        )

    def _list_choices(self, values: Sequence[Any], units: Sequence[RouteUnit], lists: Mapping[int, ListTokens] | None,
                      multi: bool, answers: Answers | None
                      ) -> dict[InListSlot, tuple[ListTokens | None, dict[tuple[str, str | None], list[int]] | None]]:
        assert self.sharding is not None
        out: dict[InListSlot, tuple[ListTokens | None, dict[tuple[str, str | None], list[int]] | None]] = {}
        for slot in self.in_lists:
            tokens = lists.get(slot.first) if lists else None
            own = tokens.values if tokens is not None else values[slot.first:slot.last + 1]
            chosen = None
            if multi and slot.logic:
                chosen = in_list_selection(self.sharding.tables[slot.logic], slot, own, units, answers)
            if tokens is not None or chosen is not None:
                out[slot] = (tokens, chosen)
        return out

    def _units_as_text(self, multi: bool, template: Template, units: Sequence[RouteUnit], shape: Shape) -> int:
        """The statement's parameter count when each of the units of a call routed to all nodes (`_all_units`) is
        rendered as the text itself, for every text of this plan's key (`rewrite.renders_as_text`); -1 when not.
        Worked out once per template."""
        known = self._as_text.get(multi)
        if known is None:
            same = all(renders_as_text(template, u.table_map, shape, self.param_index) for u in units)
            known = self._as_text[multi] = sum(1 for span in shape.spans if span[2] == "p") if same else -1
        return known

    def _range_blind(self, logic: str, rule: TableRule) -> frozenset[str] | None:
        blind = self._blind
        if logic not in blind:
            blind[logic] = range_blind_columns(rule)
        return blind[logic]

    def _units(self, routed: dict[str, list[DataNode]], values: Sequence[Any], hints: SessionHints | None,
               inner: bool, everywhere: bool = False) -> tuple[Sequence[RouteUnit], bool]:
        """The statement's route units, and whether the proxy must run it in steps instead. `everywhere`: every
        table is routed to all its nodes, so the units are those of any such call (kept, and handed out as the
        same tuple: RouteUnit is frozen and its table map is never changed once built; what the proxy derives
        from a route's units is kept by that tuple's identity)."""
        assert self.sharding is not None
        try:
            units: Sequence[RouteUnit]
            if everywhere and self._all_units:
                units = self._all_units[0]
            else:
                units = build_units(self.sharding, routed, self.order, self.layout)
                if everywhere:
                    self._all_units[:] = [tuple(units)]
        except RoutingError:
            if self.refuse_multi:  # the statement's own multi-node limit is the clearer reason
                raise RoutingError(self.refuse_multi) from None
            raise
        if self.single_data_source is not None:
            stray = sorted({u.data_source for u in units} - {self.single_data_source})
            if stray:
                raise RoutingError(
                    f"single table(s) {', '.join(self.single_tables)} live on {self.single_data_source} but "
                    f"the sharded tables {', '.join(self.order)} route to {', '.join(stray)} as well; "
                    "add sharding conditions that keep them on one data source"
                )
        if self.kind is StatementKind.SELECT and len(units) > 1 and (self.dual_read or self.dual_refusal):
            return units, False  # a windowed SELECT: its dual read (execute) takes over
        stepwise = False
        if len(units) > 1 and self.refuse_multi and not inner:
            if self.stepwise is None:
                raise RoutingError(self.refuse_multi)
            stepwise = True
        if not inner:
            for check in self.set_checks:
                try:
                    _check_set(check, values)
                except RoutingError:
                    if self.stepwise is None:
                        raise
                    stepwise = True
        return units, stepwise

    def _stepwise(self, shape: Shape, params: Sequence[Any] | None) -> Any:
        from routing.stepwise import StepwiseWrite

        return StepwiseWrite(self.stepwise or "", self.stepwise_table, shape.sql,
                             tuple(params) if params is not None else None, bool(self.set_checks))

    def _dual_repair(self, ctx: RenderContext, routed: Mapping[str, list[DataNode]], hints: SessionHints | None
                     ) -> Any:
        """A windowed UPDATE / DELETE over several nodes: the copies to reconcile first (routing.dualread)."""
        from routing.dualread import window_refusal

        template = self.dual_read
        if template is None:
            table = next(t for t in self.order if self.sharding and self.sharding.tables[t].window is not None)
            raise RoutingError(window_refusal(table, sum(len(n) for n in routed.values()),
                                              self.dual_refusal or "cannot be reconciled", self.kind.name))
        rule = template.rule

        def new_home(row: Mapping[str, Any]) -> DataNode | None:
            homes = route_table(rule, [precise_group(row)], hints)
            return homes[0] if len(homes) == 1 else None

        return template.route(routed[rule.logic_table.lower()], ctx, new_home)

    def _dual_read(self, shape: Shape, params: Sequence[Any] | None, values: Sequence[Any],
                   routed: Mapping[str, list[DataNode]], hints: SessionHints | None) -> RoutedStatement:
        """A windowed SELECT over several nodes: the dual read (routing.dualread), or its refusal."""
        from routing.dualread import window_refusal

        template = self.dual_read
        if template is None:
            table = next(t for t in self.order if self.sharding and self.sharding.tables[t].window is not None)
            raise RoutingError(window_refusal(table, sum(len(n) for n in routed.values()),
                                              self.dual_refusal or "cannot be de-duplicated"))
        rule = template.rule
        nodes = routed[rule.logic_table.lower()]

        def new_home(row: Mapping[str, Any]) -> DataNode | None:
            homes = route_table(rule, [precise_group(row)], hints)
            return homes[0] if len(homes) == 1 else None

        dual = template.route(nodes, self._ctx(shape, params, values), new_home)
        logic = rule.logic_table.lower()
        return RoutedStatement(
            kind=self.kind,
            route_units=tuple(RouteUnit(n.data_source, {logic: n.table}) for n in nodes),
            execution_units=tuple(ExecutionUnit(n.data_source, sql) for n, sql in dual.key_sql),
            write=self._write(hints),
            logic_tables=self.logic_tables,
            dual_read=dual,
        )


def _check_strict(unit: RouteUnit, own: Sequence[tuple[str, list[DataNode]]], refusal: str | None) -> None:
    """A statement with a subquery that is not co-located with its outer rows runs on one route unit only
    when the subquery's table, routed by the subquery's own conditions, needs no node but that unit's: a
    single-node outer route alone is not enough, the inner rows for that correlation may be elsewhere."""
    for logic, nodes in own:
        if any(n.data_source != unit.data_source or unit.table_map.get(logic) != n.table for n in nodes):
            raise RoutingError(refusal or f"the subquery on sharded table {logic} routes to other data nodes than "
                               "the statement around it; add sharding conditions that route both to one data node")


def _check_set(check: SetCheck, values: Sequence[Any]) -> None:
    message = (
        f"UPDATE of {check.table} changes sharding column {check.column}; the row would have to move to "
        "another data node. Delete and re-insert the row instead (setting the column to the value the "
        "WHERE clause pins it to is allowed)"
    )
    if check.assigned is None or check.where_value is None:
        raise RoutingError(message)
    a = resolve_value(check.assigned, values)
    w = resolve_value(check.where_value, values)
    if a is UNKNOWN or w is UNKNOWN or a != w:
        raise RoutingError(message)


@dataclass(frozen=True)
class InsertRow:
    """The values one VALUES tuple gives to each sharding column (None: not a plain value)."""

    sharding_values: tuple[tuple[str, ValueRef | None], ...]
    sets_last_id: bool = False  # calls LAST_INSERT_ID(expr): the session's value is the last such row's


@dataclass(frozen=True)
class InsertPlan(Plan):
    """INSERT / REPLACE into a sharded table: each row routed on its own values, rows split per unit."""

    rule: TableRule | None = None
    rows: tuple[InsertRow, ...] = ()
    head: Template = EMPTY_TEMPLATE
    row_templates: tuple[Template, ...] = ()
    tail: Template = EMPTY_TEMPLATE
    key_column: str | None = None  # generate this column's value per row
    row_separator: str = ", "
    upsert: Any = None  # routing.upsert.UpsertSpec: unique keys without the sharding columns to check
    mode: str | None = None  # "replace" | "update" | "ignore" (RoutedStatement.insert_mode)
    auto: Any = None  # routing.autoinc.AutoIncrement: the rows' values for the AUTO_INCREMENT column, when named

    def execute(self, shape: Shape, params: Sequence[Any] | None, hints: SessionHints | None) -> RoutedStatement:
        rule = self.rule
        assert rule is not None
        values = statement_values(shape, params)
        keys: list[Any] = []
        by_node: dict[DataNode, list[int]] = {}
        homes: list[DataNode | None] = []
        given: list[Mapping[str, Any]] = []
        sharding_columns = rule.sharding_columns
        auto = self.auto
        if auto is not None and auto.generator is not None:  # (then the INSERT names the key: no `key_column`)
            keys = [None] * len(self.rows)  # a row giving NULL or 0 gets the generator's id, else None: as written
        for i, row in enumerate(self.rows):
            row_values: dict[str, Any] = {}
            generated = auto is not None and auto.generates(i, values)
            if generated:
                if auto.generator is None:
                    if auto.sharding:
                        raise auto.refusal(i, values)
                else:
                    keys[i] = auto.generator.generate()
                    if auto.sharding:
                        row_values[auto.column] = keys[i]
            for column, ref in row.sharding_values:
                if generated and column == auto.column:
                    continue
                value = resolve_value(ref, values) if ref is not None else UNKNOWN
                if value is UNKNOWN:
                    raise RoutingError(
                        f"INSERT into {rule.logic_table}: row {i + 1} gives sharding column {column} a value "
                        "the proxy cannot evaluate (an expression or a missing parameter); give a literal "
                        "value or a parameter"
                    )
                row_values[column] = value
            given.append(dict(row_values))
            if auto is not None and not auto.routes and auto.values[i] is not None:
                # (the AUTO_INCREMENT column's value as written: the OK's id when the row gives one, else generated)
                value = resolve_value(auto.values[i], values)
                if value is not UNKNOWN:
                    given[-1][auto.column] = value
            if self.key_column is not None:
                key = rule.key_generate.generator.generate() if rule.key_generate else None
                keys.append(key)
                if self.key_column in sharding_columns:
                    row_values[self.key_column] = key
            nodes = route_table(rule, [precise_group(row_values)], hints)
            homes.append(nodes[0] if nodes else None)
            if len(nodes) != 1:
                raise RoutingError(_unplaced_row(rule.logic_table, i + 1, len(nodes),
                                                 sorted(sharding_columns - set(row_values))))
            by_node.setdefault(nodes[0], []).append(i)
        ctx = self._ctx(shape, params, values)
        units: list[RouteUnit] = []
        execution: list[ExecutionUnit] = []
        logic = rule.logic_table.lower()
        for node in [n for n in rule.data_nodes if n in by_node]:
            units.append(RouteUnit(node.data_source, {logic: node.table}))
            execution.append(self._render(ctx, node, by_node[node], keys))
        upsert = None
        if self.upsert is not None:
            from routing.upsert import UpsertCheck, check_rows

            rows = check_rows(self.upsert, rule, homes, values,  # type: ignore[arg-type]
                              lambda sharding: route_table(rule, [precise_group(sharding)], None))
            if any(self.upsert.keys[kv.key].checked for row in rows for kv in row.keys):
                upsert = UpsertCheck(self.upsert, rows, shape, tuple(params) if params is not None else None,
                                     self.param_index, lambda i, node: self._render(ctx, node, [i], keys))
        return RoutedStatement(
            kind=self.kind,
            route_units=tuple(units),
            execution_units=tuple(execution),
            generated_keys=tuple(keys) if any(k is not None for k in keys) else (),
            row_values=tuple(given),
            last_id_rows=tuple(i for i, row in enumerate(self.rows) if row.sets_last_id),
            write=True,
            logic_tables=self.logic_tables,
            upsert=upsert,
            insert_mode=self.mode,
        )

    def _render(self, ctx: RenderContext, node: DataNode, rows: Sequence[int], keys: Sequence[Any]) -> ExecutionUnit:
        """The statement with these rows (in this order), for one data node."""
        assert self.rule is not None
        table_map = {self.rule.logic_table.lower(): node.table}
        out: list[str] = []
        out_params: list[Any] | None = [] if ctx.params is not None else None
        # INSERT ... SET (one row) has its AUTO_INCREMENT value in the head
        render(self.head, table_map, ctx, out, out_params, keys[rows[0]] if keys and len(self.rows) == 1 else None)
        for j, i in enumerate(rows):
            if j:
                out.append(self.row_separator)
            render(self.row_templates[i], table_map, ctx, out, out_params, keys[i] if keys else None)
        render(self.tail, table_map, ctx, out, out_params)
        return ExecutionUnit(node.data_source, "".join(out), tuple(out_params) if out_params is not None else None,
                             tuple(rows))


@dataclass(frozen=True)
class NodesPlan(Plan):
    """DDL on sharded tables (every data node) and DESCRIBE-like unicasts (first data node)."""

    units: tuple[RouteUnit, ...] = ()
    template: Template = EMPTY_TEMPLATE
    renames: Mapping[str, str] = field(default_factory=dict)

    def execute(self, shape: Shape, params: Sequence[Any] | None, hints: SessionHints | None) -> RoutedStatement:
        ctx = self._ctx(shape, params)
        execution = tuple(
            ExecutionUnit(u.data_source, *render_sql(self.template, u.table_map, ctx)) for u in self.units
        )
        return RoutedStatement(
            kind=self.kind,
            route_units=self.units,
            execution_units=execution,
            write=self._write(hints),
            logic_tables=self.logic_tables,
            result_table_renames=self.renames,
        )


def _unplaced_row(table: str, row: int, nodes: int, missing: list[str]) -> str:
    """Why an INSERT row has no one data node, and what to give it."""
    if missing:
        names = ", ".join(missing)
        column = "column" if len(missing) == 1 else "columns"
        return (f"INSERT into {table}: row {row} has no value for the sharding {column} {names}, so it could go to "
                f"any of {nodes} data nodes; give every row a value for {names}")
    if nodes == 0:
        return (f"INSERT into {table}: the sharding values of row {row} route to no data node; check them against "
                "the table's sharding algorithm and actualDataNodes")
    return (f"INSERT into {table}: the sharding values of row {row} route to {nodes} data nodes; every row must go "
            "to exactly one: check the table's sharding algorithm")
