"""The text a sharded query is described with at COM_STMT_PREPARE (issue 34 item 4).

MariaDB's own column definitions are the exact answer: the statement's text, its `?` kept, is prepared on one
data source where every logic table it names resolves to one of its actual tables (a COM_STMT_PREPARE does not run
the statement, so which node does not matter for metadata). The text is the user's, with each logic table reference
replaced by that actual table: subqueries, CTEs (recursive ones anchored on `?` too), derived tables, UNIONs, and the
statements federation answers are described as MariaDB describes them, parameters' columns included.

Pure: the caller prepares the text and renames the answer's actual tables back to logic names.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from sqlglot import exp

from routing.logical_names import LogicalNames
from routing.parse import node_span, parse_statement, scan_shape


@dataclass(frozen=True)
class Described:
    """`sql` prepared on `data_source` describes the statement; `renames`: actual table (lower case) -> logic."""

    data_source: str
    sql: str
    renames: Mapping[str, str]


def describing_text(sql: str, db_name: str, names: LogicalNames, tables_by_source: Mapping[str, Sequence[str]],
                    held: Collection[str] = ()) -> Described | None:
    """The text to prepare for `sql`'s columns and where, or None when `sql` is no query this describes (not a
    SELECT / WITH / UNION, SELECT ... INTO, another database's table, or no data source holds all its tables).
    `held`: data sources the session holds a connection of, tried first (describing takes no other one)."""
    ast = parse_statement(scan_shape(sql))
    if not isinstance(ast, exp.Query) or ast.find(exp.Into) is not None:
        return None
    ctes = {c.alias_or_name.lower() for c in ast.find_all(exp.CTE)}
    refs: list[tuple[int, int, str]] = []  # (start, end, logic name lower case) of each table reference
    for table in ast.find_all(exp.Table):
        if not isinstance(table.this, exp.Identifier):
            return None  # a table function or an unusual reference
        name = table.name.lower()
        db = table.args.get("db")
        if table.args.get("catalog") is not None:
            return None
        if db is None and (name in ctes or name == "dual"):
            continue
        span = node_span(table.this)
        if span is None:
            return None
        if db is not None:
            if not isinstance(db, exp.Identifier) or db.name.lower() != db_name.lower():
                return None  # another database's table: not this database's to describe
            db_span = node_span(db)
            if db_span is None:
                return None
            span = (db_span[0], span[1])  # `sharding_db.t_order`: the backend knows its own database only
        refs.append((span[0], span[1], name))
    sources = names.rules.data_sources
    for ds in [*(d for d in sources if d in held), *(d for d in sources if d not in held)]:
        present = {t.lower(): t for t in tables_by_source.get(ds, ())}
        actual: dict[str, str] = {}
        for _s, _e, name in refs:
            if name in actual:
                continue
            found = names.actual(ds, name) if _configured(names, name) else present.get(name)
            if found is None:
                break
            actual[name] = found
        else:
            pieces: list[str] = []
            pos = 0
            for start, end, name in sorted(refs):
                # quoted as the text quoted the logic name (the kernel's units do the same: one text per node)
                name_text = actual[name] if sql[start] != "`" else f"`{actual[name].replace('`', '``')}`"
                pieces += [sql[pos:start], name_text]
                pos = end
            pieces.append(sql[pos:])
            renames = {a.lower(): _logic_name(names, logic) for logic, a in actual.items()}
            return Described(ds, "".join(pieces), renames)
    return None


def _configured(names: LogicalNames, name: str) -> bool:
    """A sharded or broadcast table (a rule says where it lives), as opposed to a single table found on a node."""
    sharding = names.rules.sharding
    return (sharding is not None and sharding.table(name) is not None) or name in names.rules.broadcast


def _logic_name(names: LogicalNames, name: str) -> str:
    sharding = names.rules.sharding
    rule = sharding.table(name) if sharding is not None else None
    return rule.logic_table if rule is not None else name
