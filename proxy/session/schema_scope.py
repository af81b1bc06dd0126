"""information_schema of a logical database: which rows each data source answers for, and the column
definitions MariaDB would send for them.

A data source's information_schema lists every database on its server. The statement is sent with each
information_schema table that lists schema objects replaced by a derived table of the rows that belong to
the logical database (its physical schema and the system schemas); of a sharded database each object shows
once, from the data source that holds the node the logical view shows. A derived table changes the column
definitions (names as declared, the derived table's alias as the original table): `restore_names` puts back
what MariaDB sends for the statement as written.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace

import sqlglot
from sqlglot import exp

from protocol.packets import ColumnDefinition41
from proxy.session.processlist import _NOT_ALIAS, _QUALIFIER, _masked

_SYSTEM_SCHEMAS = ("information_schema", "mysql", "performance_schema", "sys")


def _quote(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "''") + "'"


# information_schema tables whose rows belong to a schema, and the column naming it
_SCHEMA_COLUMNS = {
    "TABLES": "TABLE_SCHEMA",
    "COLUMNS": "TABLE_SCHEMA",
    "STATISTICS": "TABLE_SCHEMA",
    "KEY_COLUMN_USAGE": "TABLE_SCHEMA",
    "TABLE_CONSTRAINTS": "TABLE_SCHEMA",
    "VIEWS": "TABLE_SCHEMA",
    "PARTITIONS": "TABLE_SCHEMA",
    "SCHEMA_PRIVILEGES": "TABLE_SCHEMA",
    "TABLE_PRIVILEGES": "TABLE_SCHEMA",
    "COLUMN_PRIVILEGES": "TABLE_SCHEMA",
    "COLUMNS_EXTENSIONS": "TABLE_SCHEMA",
    "TABLES_EXTENSIONS": "TABLE_SCHEMA",
    "TABLE_STATISTICS": "TABLE_SCHEMA",
    "INDEX_STATISTICS": "TABLE_SCHEMA",
    "ST_GEOMETRY_COLUMNS": "TABLE_SCHEMA",
    "REFERENTIAL_CONSTRAINTS": "CONSTRAINT_SCHEMA",
    "CHECK_CONSTRAINTS": "CONSTRAINT_SCHEMA",
    "TRIGGERS": "TRIGGER_SCHEMA",
    "ROUTINES": "ROUTINE_SCHEMA",
    "PARAMETERS": "SPECIFIC_SCHEMA",
    "EVENTS": "EVENT_SCHEMA",
    "SCHEMATA": "SCHEMA_NAME",
    "VIEW_TABLE_USAGE": "VIEW_SCHEMA",
    "VIEW_ROUTINE_USAGE": "VIEW_SCHEMA",
}
# ... and the column naming the table, for those whose rows belong to a table
_TABLE_COLUMNS = {
    "TABLES": "TABLE_NAME",
    "COLUMNS": "TABLE_NAME",
    "STATISTICS": "TABLE_NAME",
    "KEY_COLUMN_USAGE": "TABLE_NAME",
    "TABLE_CONSTRAINTS": "TABLE_NAME",
    "VIEWS": "TABLE_NAME",
    "PARTITIONS": "TABLE_NAME",
    "TABLE_PRIVILEGES": "TABLE_NAME",
    "COLUMN_PRIVILEGES": "TABLE_NAME",
    "TABLE_STATISTICS": "TABLE_NAME",
    "INDEX_STATISTICS": "TABLE_NAME",
    "REFERENTIAL_CONSTRAINTS": "TABLE_NAME",
    "CHECK_CONSTRAINTS": "TABLE_NAME",
    "TRIGGERS": "EVENT_OBJECT_TABLE",
}
_SCHEMA_TABLE = re.compile(
    r"(?<![\w$`.])`?information_schema`?\s*\.\s*`?(" + "|".join(_SCHEMA_COLUMNS) + r")`?(?![\w$`])", re.I
)


@dataclass(frozen=True)
class Scope:
    """What one data source answers for in a logical database's information_schema: `first`, the server-wide
    rows (system schemas, status, variables: every server has them, one answers); `hidden`, its physical
    tables the logical view does not show (the later nodes of a sharded table, copies of a broadcast one)."""

    first: bool = True
    hidden: tuple[str, ...] = ()
    # information_schema.COLUMNS with encrypted tables in their logical shape (routing.encrypt.metadata's
    # logical_schema_select: the select list over it, the condition of the rows left out)
    columns: tuple[str, str] | None = None


def scope_to_schema(sql: str, physical: str, scope: Scope = Scope()) -> str | None:
    """`sql` with every information_schema table that lists schema objects replaced by its rows of the
    data source's physical database (and of the system schemas) only: the other databases on the same
    server — other logical databases, ones the user may not use, databases of no logical database — must
    not show, even through a column that does not name the schema (`SELECT table_name FROM ...TABLES`) or
    an aggregate (`COUNT(*)`). Of a sharded database each object shows once, from the data source that holds
    the node the logical view shows; None when this data source has nothing to answer (not the first, and
    the statement reads only server-wide tables)."""
    masked = _masked(sql)
    matches = list(_SCHEMA_TABLE.finditer(masked))
    if not matches:
        return sql if scope.first else None
    out: list[str] = []
    pos = 0
    for m in matches:
        out.append(sql[pos : m.start()])
        table = m.group(1).upper()
        if _QUALIFIER.match(masked, m.end()):
            out.append(table)  # information_schema.TABLES.TABLE_NAME: a column of the derived table
        else:
            cond = _scope_condition(table, physical, scope)
            if table == "COLUMNS" and scope.columns is not None:
                select, left_out = scope.columns
                out.append(f"(SELECT {select} FROM information_schema.COLUMNS WHERE {cond} AND NOT ({left_out}))")
            else:
                out.append(f"(SELECT * FROM information_schema.{table} WHERE {cond})")
            if _NOT_ALIAS.match(masked, m.end()):
                out.append(f" AS `{m.group(1)}`")  # the name as typed: MariaDB shows it as the column's table
        pos = m.end()
    out.append(sql[pos:])
    return "".join(out)


def _scope_condition(table: str, physical: str, scope: Scope) -> str:
    schema, name = _SCHEMA_COLUMNS[table], _TABLE_COLUMNS.get(table)
    if scope.first:
        cond = f"{schema} IN ({', '.join(_quote(n) for n in (physical, *sorted(_SYSTEM_SCHEMAS)))})"
    elif name is not None:
        cond = f"{schema} = {_quote(physical)}"
    else:
        return "FALSE"  # a schema's own row (SCHEMATA, ROUTINES, ...): the first data source's stands for it
    if name is not None and scope.hidden:
        cond += f" AND NOT ({schema} = {_quote(physical)} AND {name} IN ({', '.join(map(_quote, scope.hidden))}))"
    return cond


_ALIAS = re.compile(r"\s+(?:AS\s+)?(`[^`]+`|\w+)", re.I)


def restore_names(sql: str, columns: tuple[ColumnDefinition41, ...]) -> tuple[ColumnDefinition41, ...]:
    """`columns` as MariaDB names them for `sql` itself: a column selected by name is labelled as typed
    (`table_name`, not the derived table's `TABLE_NAME`), and `org_table` is the information_schema table,
    not the alias of the derived table standing for it."""
    aliases = _aliases(sql)
    out = list(columns)
    for i, col in enumerate(out):
        if col.schema.lower() == "information_schema" and col.org_table.lower() in aliases:
            out[i] = replace(col, org_table=aliases[col.org_table.lower()])
    typed = _typed_labels(sql)
    if typed is not None and len(typed) == len(out):
        for i, (label, column) in enumerate(typed):
            col = out[i]
            if column is None or col.schema.lower() != "information_schema":
                continue
            if label is None and column.lower() == col.name.lower():
                out[i] = replace(col, name=column)
            elif label is not None and col.org_name == label and column.lower() != label.lower():
                # grouped through a temporary table, a derived table's column takes its label as org_name
                out[i] = replace(col, org_name=column.upper())
    return tuple(out)


def restore_reshaped(
    sql: str, columns: tuple[ColumnDefinition41, ...], originals: Mapping[str, ColumnDefinition41]
) -> tuple[ColumnDefinition41, ...]:
    """`columns` (after `restore_names`) with the columns a `Scope.columns` select list computes (their
    information_schema.COLUMNS name upper case -> its definition, in `originals`) defined as information_schema
    defines them: the server describes an expression (no schema, other lengths and flags)."""
    aliases = _aliases(sql)
    out = list(columns)
    for i, col in enumerate(out):
        original = originals.get(col.org_name.upper())
        if original is not None and not col.schema and aliases.get(col.org_table.lower()) == "COLUMNS":
            out[i] = replace(original, name=col.name, table=col.table, org_table=col.org_table)
    return tuple(out)


def _aliases(sql: str) -> dict[str, str]:
    """alias (lower case) -> the information_schema table it names, for the tables `scope_to_schema` replaces."""
    masked = _masked(sql)
    out: dict[str, str] = {}
    for m in _SCHEMA_TABLE.finditer(masked):
        if _QUALIFIER.match(masked, m.end()):
            continue
        alias = m.group(1)
        if not _NOT_ALIAS.match(masked, m.end()):
            found = _ALIAS.match(masked, m.end())
            if found is not None:
                alias = found.group(1).strip("`")
        out[alias.lower()] = m.group(1).upper()
    return out


def _typed_labels(sql: str) -> list[tuple[str | None, str | None]] | None:
    """For each label of the outer SELECT: (its alias or None, the column it names as typed or None), or None
    when the statement cannot be read or selects `*`."""
    try:
        tree = sqlglot.parse_one(sql, read="mysql")
    except Exception:  # the labels stay as the server sent them
        return None
    if not isinstance(tree, exp.Select):
        return None
    out: list[tuple[str | None, str | None]] = []
    for e in tree.expressions:
        if isinstance(e, exp.Star) or (isinstance(e, exp.Column) and isinstance(e.this, exp.Star)):
            return None
        label = e.alias if isinstance(e, exp.Alias) else None
        target = e.this if isinstance(e, exp.Alias) else e
        column = (
            target.this.name if isinstance(target, exp.Column) and isinstance(target.this, exp.Identifier) else None
        )
        out.append((label, column))
    return out


__all__ = ["Scope", "restore_names", "restore_reshaped", "scope_to_schema"]
