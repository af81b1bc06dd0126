"""Whether a statement is shadow traffic, and its route moved onto the shadow data sources when it is.

ShardingSphere 5.5's `ShadowSQLRouter` decides, in this order:

1. INSERT / UPDATE / DELETE / SELECT naming no shadow table: shadow when a `defaultShadowAlgorithmName` (an
   SQL_HINT algorithm) is set and the statement carries `/* SHARDINGSPHERE_HINT: SHADOW=true */`: every shadow
   data source then. Naming shadow tables: the first of them with an SQL_HINT algorithm, when the hint is there;
   otherwise the first whose column algorithm of the statement's operation matches: an INSERT's values of that
   column (every row's must match), or a WHERE predicate (`=`, `IN`, another comparison: its right side, as
   ShardingSphere takes it) on that column, all of whose values match. That table's shadow data sources then.
2. Any other statement (DDL, ...): shadow when the rule has an SQL_HINT algorithm and the hint is there.

Where ShardingSphere takes any single-column predicate for the shadow column's (whatever column it names), this
module takes only predicates on the shadow column itself: `WHERE order_id = 0` does not make a `user_id = 0`
algorithm match.

The route's units on a shadow data source go to its shadow data source when the statement is shadow; otherwise
they stay on the logical name, which stands for the production data source.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.dialects import Dialect

from routing.errors import RoutingError
from routing.plan import RoutedStatement
from routing.shadow.config import ShadowRule

_HINT = re.compile(r"/\*\s*SHARDINGSPHERE_HINT\s*:(.*?)\*/", re.I | re.S)
_MARK = "__shp_{}__"
_MARK_RE = re.compile(r"^__shp_(\d+)__$")

# a value in the text: ("lit", its text), ("param", its index), or None (an expression: no value)
Value = tuple[str, Any] | None


@dataclass(frozen=True)
class Predicate:
    table: str | None  # lower case; None: unqualified in a statement over several tables
    column: str
    values: tuple[Value, ...]


@dataclass(frozen=True)
class Facts:
    """What of a statement's text the decision reads (kept per text: the values of parameters come later)."""

    operation: str | None  # select / insert / update / delete; None for any other statement
    tables: tuple[str, ...]  # lower case, in order, each once
    hint: bool  # SHADOW=true
    insert_columns: tuple[str, ...] | None = None  # None: no column list
    insert_rows: tuple[tuple[Value, ...], ...] = ()
    insert_values: bool = True  # the INSERT has a VALUES list (not INSERT ... SELECT / SET)
    predicates: tuple[Predicate, ...] = ()


def shadow_hint(sql: str) -> bool:
    """`SHADOW=true` in the statement's first `/* SHARDINGSPHERE_HINT: ... */` comment (ShardingSphere reads one)."""
    if "/*" not in sql:
        return False
    m = _HINT.search(sql)
    if m is None:
        return False
    for item in m.group(1).split(","):
        key, eq, value = item.partition("=")
        if eq and key.strip().upper() == "SHADOW":
            return value.strip().lower() == "true"
    return False


def _marked(sql: str) -> str:
    """The text with its `?` placeholders as identifiers naming their index (sqlglot keeps no position)."""
    if "?" not in sql:
        return sql
    out, last, index = [], 0, 0
    for token in Dialect.get_or_raise("mysql").tokenize(sql):
        if token.token_type.name == "PLACEHOLDER":
            out.append(sql[last : token.start])
            out.append(_MARK.format(index))
            last = token.end + 1
            index += 1
    out.append(sql[last:])
    return "".join(out)


def _value(node: exp.Expression) -> Value:
    if isinstance(node, exp.Paren):
        return _value(node.this)
    if isinstance(node, exp.Column) and not node.table:
        m = _MARK_RE.match(node.name)
        if m is not None:
            return ("param", int(m.group(1)))
    if isinstance(node, exp.Literal):
        return ("lit", node.this)
    if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal) and not node.this.is_string:
        return ("lit", "-" + node.this.this)
    if isinstance(node, exp.Boolean):
        return ("lit", "true" if node.this else "false")
    return None


_COMPARISONS = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.NullSafeEQ, exp.Like)


def _predicates(tree: exp.Expression, aliases: Mapping[str, str], single: str | None) -> tuple[Predicate, ...]:
    out: list[Predicate] = []
    for where in tree.find_all(exp.Where):
        for node in where.find_all(*_COMPARISONS, exp.In):
            column = node.this
            if not isinstance(column, exp.Column) or _MARK_RE.match(column.name):
                continue
            if len(list(node.find_all(exp.Column))) - _marks(node) != 1:
                continue  # (a predicate over one column only, as ShardingSphere takes them)
            qualifier = column.table.lower()
            table = aliases.get(qualifier) if qualifier else single
            if qualifier and table is None:
                continue
            if isinstance(node, exp.In):
                values = tuple(v for v in (_value(e) for e in node.expressions) if v is not None)
            else:
                value = _value(node.expression)
                values = () if value is None else (value,)
            if values:
                out.append(Predicate(table, column.name.lower(), values))
    return tuple(out)


def _marks(node: exp.Expression) -> int:
    return sum(1 for c in node.find_all(exp.Column) if not c.table and _MARK_RE.match(c.name))


@lru_cache(maxsize=1024)
def facts_of(sql: str) -> Facts:
    """The statement's `Facts` (a text sqlglot cannot read is no DML: only the hint decides)."""
    hint = shadow_hint(sql)
    try:
        tree = sqlglot.parse_one(_marked(sql), read="mysql")
    except (sqlglot.errors.ParseError, sqlglot.errors.TokenError, ValueError):
        return Facts(None, (), hint)
    if tree is None:
        return Facts(None, (), hint)
    tables: dict[str, None] = {}
    aliases: dict[str, str] = {}
    for table in tree.find_all(exp.Table):
        if not table.name:
            continue
        name = table.name.lower()
        tables[name] = None
        aliases[table.alias_or_name.lower()] = name
        aliases.setdefault(name, name)
    names = tuple(tables)
    single = names[0] if len(names) == 1 else None
    if isinstance(tree, exp.Insert):
        target = tree.this.this if isinstance(tree.this, exp.Schema) else tree.this
        name = target.name.lower() if isinstance(target, exp.Table) else (names[0] if names else "")
        ordered = (name, *(t for t in names if t != name))
        columns = tuple(c.name.lower() for c in tree.this.expressions) if isinstance(tree.this, exp.Schema) else None
        source = tree.expression
        if isinstance(source, exp.Values):
            rows = tuple(
                tuple(_value(v) for v in (row.expressions if isinstance(row, exp.Tuple) else [row]))
                for row in source.expressions
            )
            return Facts("insert", ordered, hint, columns, rows)
        return Facts("insert", ordered, hint, columns, (), insert_values=False)
    if isinstance(tree, exp.Update | exp.Delete):
        operation = "update" if isinstance(tree, exp.Update) else "delete"
        return Facts(operation, names, hint, predicates=_predicates(tree, aliases, single))
    if isinstance(tree, exp.Select | exp.Union):
        return Facts("select", names, hint, predicates=_predicates(tree, aliases, single))
    return Facts(None, names, hint)


def _text(value: Value, params: Sequence[object] | None) -> tuple[bool, object]:
    """(known, the value) of a value in the text."""
    if value is None:
        return False, None
    kind, what = value
    if kind == "lit":
        return True, what
    if params is None or what >= len(params):
        return False, None
    return True, params[what]


def shadow_mappings(
    rule: ShadowRule, sql: str, params: Sequence[object] | None, columns_of: Callable[[str], list[str] | None]
) -> dict[str, str]:
    """Production -> shadow data source for this statement ({}: it runs on production)."""
    facts = facts_of(sql)
    if facts.operation is None:
        hinted = facts.hint and any(a.is_hint for a in rule.algorithms.values())
        return rule.all_mappings() if hinted else {}
    shadow_tables = [t for t in facts.tables if t in rule.tables]
    if not shadow_tables:
        return rule.all_mappings() if rule.default_algorithm is not None and facts.hint else {}
    if facts.hint:
        for t in shadow_tables:
            if any(a.is_hint for a in rule.tables[t].algorithms):
                return rule.mappings_of(t)
    for t in shadow_tables:
        algorithms = [a for a in rule.tables[t].algorithms if not a.is_hint and a.operation == facts.operation]
        for column in dict.fromkeys(a.column for a in algorithms):
            matching = [a for a in algorithms if a.column == column]
            for values in _conditions(facts, t, column, params, columns_of):
                if any(all(a.matches(v) for v in values) for a in matching):
                    return rule.mappings_of(t)
    return {}


def _conditions(
    facts: Facts,
    table: str,
    column: str,
    params: Sequence[object] | None,
    columns_of: Callable[[str], list[str] | None],
) -> list[list[object]]:
    """The value lists the statement gives `table`.`column`: an INSERT's column over its rows, each predicate's."""
    if facts.operation == "insert":
        if not facts.tables or facts.tables[0] != table:
            return []
        names = facts.insert_columns
        if names is None:
            names = tuple(c.lower() for c in columns_of(table) or ())
        if column not in names:
            return []
        if not facts.insert_values:
            raise RoutingError(
                f"shadow column {table}.{column}: an INSERT without VALUES cannot be decided shadow or "
                f"not; give the rows as VALUES"
            )
        index = names.index(column)
        values: list[object] = []
        for row in facts.insert_rows:
            known, value = _text(row[index] if index < len(row) else None, params)
            if not known:
                raise RoutingError(
                    f"shadow column {table}.{column}: its value in an INSERT must be a literal or a "
                    f"parameter (ShardingSphere refuses an expression there too)"
                )
            values.append(value)
        return [values] if values else []
    out: list[list[object]] = []
    for p in facts.predicates:
        if p.column != column:
            continue
        owner = p.table
        if owner is None:
            owners = [t for t in facts.tables if column in {c.lower() for c in columns_of(t) or ()}]
            owner = owners[0] if len(owners) == 1 else None
        if owner != table:
            continue
        found = [v for known, v in (_text(v, params) for v in p.values) if known]
        if found:
            out.append(found)
    return out


_REFUSED_SHAPES = ("stepwise", "upsert", "dual_read", "dual_repair")


def shadowed(
    rule: ShadowRule,
    routed: RoutedStatement,
    sql: str,
    params: Sequence[object] | None,
    columns_of: Callable[[str], list[str] | None],
) -> RoutedStatement:
    """`routed` with its units moved onto the shadow data sources when the statement is shadow (the same object
    when nothing moves)."""
    if not any(u.data_source in rule.data_sources or u.data_source in rule.groups for u in routed.execution_units):
        return routed
    mappings = shadow_mappings(rule, sql, params, columns_of)
    if not mappings:
        return routed
    moved = {
        logical: shadow
        for logical, (production, _s) in rule.data_sources.items()
        if (shadow := mappings.get(production)) is not None
    }
    for group, logical in rule.groups.items():  # the group's shadow twin: the shadow unit as its primary, same
        if logical in moved:  # replicas (proxy.backends.readwrite.open_data_sources routes it by that name)
            moved[group] = moved[logical]
    if not any(u.data_source in moved for u in routed.execution_units):
        return routed
    for shape in _REFUSED_SHAPES:
        if getattr(routed, shape) is not None:
            raise RoutingError(
                f"a shadow statement that runs in several steps ({shape.replace('_', ' ')}) is not "
                f"supported; write it so it routes directly (tables: {', '.join(routed.logic_tables)})"
            )
    return replace(
        routed,
        execution_units=tuple(
            replace(u, data_source=moved[u.data_source]) if u.data_source in moved else u
            for u in routed.execution_units
        ),
        route_units=tuple(
            replace(u, data_source=moved[u.data_source]) if u.data_source in moved else u for u in routed.route_units
        ),
        reused=False,
    )


__all__ = ["Facts", "facts_of", "shadow_hint", "shadow_mappings", "shadowed"]
