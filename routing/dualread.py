"""Dual read: a SELECT on a table inside its resharding window, answered as if every row lived once.

During the window (``routing.model.DualRouting``) a logical row may have two copies: on the node the old
strategies chose and on the node the new ones choose (copied there, or re-inserted by the application).
The seed de-duplicated in the application; the proxy does it so that applications stay unchanged, and
computes everything the statement asks for (ORDER BY, GROUP BY, aggregates, DISTINCT, LIMIT, window
functions) *after* de-duplication, exactly as MariaDB would, by letting MariaDB compute it:

1. every node of the old and the new route returns the keys of its rows matching the statement's FROM and
   WHERE (``key_sql``);
2. every node returns all its copies of those keys (``copy_sql``): the winning copy of a logical row that
   matches WHERE is among them even when a losing copy would not match, or the other way round;
3. per key the winner is picked (``pick_winners``): the highest ``versionColumn``, on a tie (or without a
   version column) the copy on the row's new node;
4. the winners go into a temporary table shaped ``LIKE`` the node's table on one connection, and the
   user's statement runs there unchanged but for the table name (``final``).

The number of keys is bounded by ``proxy-merge-memory-rows`` (the proxy refuses beyond it). This module is
pure: it builds the SQL and picks winners; ``proxy.dualread`` runs it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from protocol.binary import value_to_sql_literal
from routing.model import DataNode, TableRule
from routing.plan import ExecutionUnit
from routing.rewrite import RenderContext, TableSlot, Template, ValueSlot, render_sql

__all__ = ["DualRead", "DualReadTemplate", "pick_winners", "typed_value"]

#: tokens that end a SELECT's FROM ... WHERE part at parenthesis depth 0
CLAUSE_ENDS = frozenset({"GROUP", "ORDER", "LIMIT", "HAVING", "WINDOW", "FOR", "LOCK", "PROCEDURE", "INTO",
                         "UNION", "EXCEPT", "INTERSECT", "FETCH", "OFFSET", ";"})
_INTEGERS = frozenset({"tinyint", "smallint", "mediumint", "int", "integer", "bigint", "year", "bit"})
_DECIMALS = frozenset({"decimal", "numeric", "float", "double", "real"})
#: keys per `copy_sql` statement
COPY_BATCH = 500


def quote_ident(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def typed_value(raw: bytes | None, data_type: str | None) -> Any:
    """A text-protocol value as Python, for comparing versions and for routing a row by its values."""
    if raw is None:
        return None
    text = raw.decode("utf-8", errors="surrogateescape")
    kind = (data_type or "").lower()
    try:
        if kind in _INTEGERS:
            return int(text)
        if kind in _DECIMALS:
            return Decimal(text)
    except (ValueError, InvalidOperation):
        return text
    return text


def render_inline(template: Template, table_map: Mapping[str, str], ctx: RenderContext) -> str:
    """The template's text with every parameter written as a literal (the fetches run as text queries)."""
    out: list[str] = []
    shape = ctx.shape
    for p in template.pieces:
        if type(p) is str:
            out.append(p)  # type: ignore[arg-type]
        elif isinstance(p, TableSlot):
            actual = table_map.get(p.logic)
            out.append(p.original if actual is None else quote_ident(actual))
        elif isinstance(p, ValueSlot):
            start, end, kind = shape.spans[p.index]
            if kind == "p":
                idx = ctx.param_index[p.index]
                params = ctx.params
                value = params[idx] if params is not None and idx is not None and idx < len(params) else None
                out.append(value_to_sql_literal(value))
            else:
                out.append(shape.sql[start:end])
        else:  # LIMIT slots never occur in a FROM ... WHERE part
            raise AssertionError(f"unexpected template piece {p!r}")
    return "".join(out)


@dataclass(frozen=True)
class DualReadTemplate:
    """What a windowed single-table SELECT compiles to (``routing.kernel``); routed per call by `route`."""

    rule: TableRule
    key_column: str
    version_column: str | None
    column_types: Mapping[str, str | None]  # lower-case column -> information_schema DATA_TYPE
    columns: tuple[str, ...]  # the table's columns in table order (copied into the temporary table)
    where_template: Template  # `FROM <table> [alias] [WHERE ...]` of the user's statement
    final_template: Template  # the user's statement, its table slot renamed to the temporary table

    def route(
        self,
        nodes: Sequence[DataNode],
        ctx: RenderContext,
        new_home: Callable[[Mapping[str, Any]], DataNode | None],
    ) -> DualRead:
        logic = self.rule.logic_table.lower()
        key_sql = tuple(
            (node, f"SELECT {quote_ident(self.key_column)} "
                   + render_inline(self.where_template, {logic: node.table}, ctx))
            for node in nodes
        )
        home = nodes[0]
        own_names = {n.table.lower() for n in self.rule.data_nodes if n.data_source == home.data_source}
        temp = self.rule.logic_table if self.rule.logic_table.lower() not in own_names else f"{logic}__dual_read"
        sql, params = render_sql(self.final_template, {logic: temp}, ctx)
        return DualRead(
            rule=self.rule,
            key_column=self.key_column,
            version_column=self.version_column,
            column_types=self.column_types,
            columns=self.columns,
            key_sql=key_sql,
            temp_node=DataNode(home.data_source, home.table),
            temp_table=temp,
            final=ExecutionUnit(home.data_source, sql, params),
            new_home=new_home,
        )


@dataclass(frozen=True)
class DualRead:
    """One windowed SELECT's dual read, ready to run (see the module docstring for the steps)."""

    rule: TableRule
    key_column: str
    version_column: str | None
    column_types: Mapping[str, str | None]
    columns: tuple[str, ...]
    key_sql: tuple[tuple[DataNode, str], ...]  # step 1, per node of the old and new routes
    temp_node: DataNode  # the temporary table is created LIKE this node's table, on its data source
    temp_table: str
    final: ExecutionUnit  # step 4: the user's statement on the temporary table
    new_home: Callable[[Mapping[str, Any]], DataNode | None]

    @property
    def nodes(self) -> tuple[DataNode, ...]:
        return tuple(node for node, _ in self.key_sql)

    def copy_sql(self, node: DataNode, keys: Sequence[bytes]) -> list[str]:
        """Step 2: every copy of these keys on this node, all columns, in batches of `COPY_BATCH` keys."""
        out = []
        cols = ", ".join(quote_ident(c) for c in self.columns)
        for i in range(0, len(keys), COPY_BATCH):
            chunk = ", ".join(value_to_sql_literal(k) for k in keys[i : i + COPY_BATCH])
            where = f"{quote_ident(self.key_column)} IN ({chunk})"
            out.append(f"SELECT {cols} FROM {quote_ident(node.table)} WHERE {where}")
        return out

    def create_sql(self) -> str:
        return f"CREATE TEMPORARY TABLE {quote_ident(self.temp_table)} LIKE {quote_ident(self.temp_node.table)}"

    def drop_sql(self) -> str:
        return f"DROP TEMPORARY TABLE IF EXISTS {quote_ident(self.temp_table)}"

    def insert_sql(self, rows: Sequence[Sequence[bytes | None]]) -> str:
        cols = ", ".join(quote_ident(c) for c in self.columns)
        values = ", ".join("(" + ", ".join(value_to_sql_literal(v) for v in row) + ")" for row in rows)
        return f"INSERT INTO {quote_ident(self.temp_table)} ({cols}) VALUES {values}"

    def pick(self, copies: Iterable[tuple[DataNode, Sequence[bytes | None]]]) -> list[Sequence[bytes | None]]:
        return pick_winners(self.rule, self.key_column, self.version_column, self.column_types, self.columns,
                            copies, self.new_home)

    def repair_sql(self, copies: Iterable[tuple[DataNode, Sequence[bytes | None]]]) -> list[tuple[DataNode, str]]:
        """Before a dual UPDATE / DELETE: every copy that differs from its row's winner is overwritten with
        the winner, so that the statement changes (or removes) all copies alike and the winner stays the
        winner: an UPDATE ``SET n = n + 1`` or a WHERE matching only the stale copy cannot diverge them."""
        out: list[tuple[DataNode, str]] = []
        groups = resolve_copies(self.rule, self.key_column, self.version_column, self.column_types, self.columns,
                                copies, self.new_home)
        k = [c.lower() for c in self.columns].index(self.key_column.lower())
        for winner, losers in groups:
            for node, row in losers:
                out.append((node, f"DELETE FROM {quote_ident(node.table)} WHERE {quote_ident(self.key_column)} = "
                                  f"{value_to_sql_literal(row[k])}"))
                cols = ", ".join(quote_ident(c) for c in self.columns)
                values = ", ".join(value_to_sql_literal(x) for x in winner)
                out.append((node, f"INSERT INTO {quote_ident(node.table)} ({cols}) VALUES ({values})"))
        return out


def pick_winners(
    rule: TableRule,
    key_column: str,
    version_column: str | None,
    column_types: Mapping[str, str | None],
    columns: Sequence[str],
    copies: Iterable[tuple[DataNode, Sequence[bytes | None]]],
    new_home: Callable[[Mapping[str, Any]], DataNode | None],
) -> list[Sequence[bytes | None]]:
    """One row per key: the copy with the highest version (NULL lowest); on a tie the copy on the row's new
    node (as the new strategy routes the row's sharding values); otherwise the first copy seen."""
    groups = resolve_copies(rule, key_column, version_column, column_types, columns, copies, new_home)
    return [winner for winner, _ in groups]


def resolve_copies(
    rule: TableRule,
    key_column: str,
    version_column: str | None,
    column_types: Mapping[str, str | None],
    columns: Sequence[str],
    copies: Iterable[tuple[DataNode, Sequence[bytes | None]]],
    new_home: Callable[[Mapping[str, Any]], DataNode | None],
) -> list[tuple[Sequence[bytes | None], list[tuple[DataNode, Sequence[bytes | None]]]]]:
    """Per key, in first-seen order: the winning row (see `pick_winners`) and the losing copies that differ
    from it (a dual write first makes them equal to the winner, so that it changes every copy alike)."""
    index = {c.lower(): i for i, c in enumerate(columns)}
    k = index.get(key_column.lower())
    if k is None:
        raise KeyError(f"column {key_column} is not among the columns of {rule.logic_table}")
    v = index.get(version_column.lower()) if version_column is not None else None
    if version_column is not None and v is None:
        raise KeyError(f"column {version_column} is not among the columns of {rule.logic_table}")
    vtype = column_types.get(version_column.lower()) if version_column is not None else None
    sharding = [c for c in rule.sharding_columns if c in index]
    best: dict[Any, tuple[Any, bool, Sequence[bytes | None]]] = {}
    seen: dict[Any, list[tuple[DataNode, Sequence[bytes | None]]]] = {}
    for node, row in copies:
        key = typed_value(row[k], column_types.get(key_column.lower()))
        if isinstance(key, str):
            key = key.casefold()  # the key's collation is case-insensitive by default; a copy is the same row
        version = typed_value(row[v], vtype) if v is not None else None
        at_home = new_home({c: typed_value(row[index[c]], column_types.get(c)) for c in sharding}) == node
        seen.setdefault(key, []).append((node, row))
        current = best.get(key)
        if current is None or _beats(version, at_home, current[0], current[1]):
            best[key] = (version, at_home, row)
    out = []
    for key, entries in seen.items():
        winner = best[key][2]
        out.append((winner, [(node, row) for node, row in entries if tuple(row) != tuple(winner)]))
    return out


def _beats(version: Any, at_home: bool, other_version: Any, other_home: bool) -> bool:
    if version != other_version:
        if version is None:
            return False
        if other_version is None:
            return True
        try:
            return bool(version > other_version)
        except TypeError:
            return str(version) > str(other_version)
    return at_home and not other_home


# --- compile time ---------------------------------------------------------------------------------------


def window_refusal(table: str, nodes: int, why: str, statement: str = "SELECT") -> str:
    return (
        f"{statement} on sharded table {table} during its resharding window (oldDatabaseStrategy/oldTableStrategy) "
        f"routes to {nodes} data nodes, where a row may have two copies; the proxy reconciles them only for "
        f"a {statement} that reads {table} alone, and this one {why}. Add sharding conditions that route it to one "
        "data node, select from the table alone and combine the results in the client, or finish the "
        "migration (COMMIT MIGRATION) to end the window"
    )


def compile_dual_read(
    shape: Any,
    tokens: Sequence[Any],
    ast: Any,
    occurrences: Sequence[Any],
    edits: Sequence[Any],
    rule: TableRule,
    metadata: Any,
    *,
    has_into: bool,
) -> DualReadTemplate | str:
    """The dual read of a windowed SELECT, or why it has none (worded as the statement's refusal)."""
    from sqlglot import exp

    from routing.rewrite import build_template

    assert rule.window is not None
    if isinstance(ast, exp.Update | exp.Delete):
        return _compile_write(shape, tokens, ast, occurrences, edits, rule, metadata)
    if not isinstance(ast, exp.Select):
        return "is a UNION / INTERSECT / EXCEPT"
    if len(occurrences) != 1 or occurrences[0].nested:
        return "joins or nests other table references"
    if has_into:
        return "has an INTO clause"
    if ast.find(exp.Lock) is not None:
        return "has a locking clause (FOR UPDATE / LOCK IN SHARE MODE)"
    if ast.find(exp.CTE) is not None:
        return "has a WITH clause"
    if ast.args.get("joins"):
        return "joins or nests other table references"
    start = end = None
    for t in tokens:
        if t.depth != 0:
            continue
        word = t.text.upper() if t.kind == "w" else t.text
        if start is None:
            if t.kind == "w" and word == "FROM":
                start = t.start
        elif word in CLAUSE_ENDS:
            end = t.start
            break
    if start is None:
        return "has no FROM clause the proxy can find"
    if end is None:
        end = len(shape.sql)
    return _template(rule, metadata, build_template(shape, start, end, edits),
                     build_template(shape, 0, len(shape.sql), edits))


def _compile_write(shape: Any, tokens: Sequence[Any], ast: Any, occurrences: Sequence[Any], edits: Sequence[Any],
                   rule: TableRule, metadata: Any) -> DualReadTemplate | str:
    """UPDATE / DELETE of one windowed table: the key lookup of its copies' repair (`DualRead.repair_sql`)."""
    from sqlglot import exp

    from routing.rewrite import build_template

    if len(occurrences) != 1 or occurrences[0].nested or ast.args.get("joins"):
        return "joins or nests other table references"
    top = [t for t in tokens if t.depth == 0]
    words = [t.text.upper() if t.kind == "w" else t.text for t in top]
    if isinstance(ast, exp.Delete):
        if "FROM" not in words:
            return "has no FROM clause the proxy can find"
        first = top[words.index("FROM")].start
        stop = next((t.start for t, w in zip(top, words, strict=True) if t.start > first and w in CLAUSE_ENDS),
                    len(shape.sql))
        region = build_template(shape, first, stop, edits)
    else:
        if "SET" not in words or words[0] != "UPDATE":
            return "has no SET clause the proxy can find"
        set_at = words.index("SET")
        skip = 1
        while skip < set_at and words[skip] in ("LOW_PRIORITY", "IGNORE"):
            skip += 1
        table_part = build_template(shape, top[skip].start, top[set_at].start, edits)
        where = next((i for i, w in enumerate(words) if i > set_at and w == "WHERE"), None)
        pieces: list[Any] = ["FROM ", *table_part.pieces]
        if where is not None:
            stop = next((t.start for t, w in zip(top[where:], words[where:], strict=True) if w in CLAUSE_ENDS),
                        len(shape.sql))
            pieces += [" ", *build_template(shape, top[where].start, stop, edits).pieces]
        region = Template(tuple(pieces))
    return _template(rule, metadata, region, Template(()))


def _template(rule: TableRule, metadata: Any, where: Template, final: Template) -> DualReadTemplate | str:
    window = rule.window
    assert window is not None
    table = rule.logic_table
    key_column = window.key_column
    if key_column is None:
        keys = getattr(metadata, "unique_keys", None)
        primary = next(iter(keys(rule.logic_table.lower()) or ()), None) if keys is not None else None
        if primary is None or primary.name.upper() != "PRIMARY" or len(primary.columns) != 1:
            return (f"cannot be de-duplicated: {table} has no single-column primary key (set "
                    "dualRouting.keyColumn)")
        key_column = primary.columns[0]
    columns = metadata.columns(rule.logic_table.lower())
    if not columns:
        return f"cannot be de-duplicated: the proxy does not know the columns of {table}"
    info = getattr(metadata, "column_info", None)
    wanted = {key_column.lower(), *(c for c in rule.sharding_columns)}
    if window.version_column is not None:
        wanted.add(window.version_column.lower())
    types: dict[str, str | None] = {}
    for column in wanted:
        ci = info(rule.logic_table.lower(), column) if info is not None else None
        types[column] = ci.data_type if ci is not None else None
    return DualReadTemplate(
        rule=rule,
        key_column=key_column,
        version_column=window.version_column,
        column_types=types,
        columns=tuple(columns),
        where_template=where,
        final_template=final,
    )
