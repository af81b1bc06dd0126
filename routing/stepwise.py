"""Writes that cannot be sent to the data nodes as they are, split into steps the proxy runs in order.

Three kinds of statement touch rows on several data nodes in a way one statement per node cannot do
exactly:

* ``UPDATE / DELETE ... ORDER BY ... LIMIT n`` over several nodes: each node would apply its own LIMIT;
* ``UPDATE`` that assigns a sharding column: a row whose new value routes elsewhere must move;
* ``INSERT ... SELECT`` into a sharded table: every selected row goes where its own values route it.

The kernel marks such a statement (``StepwiseWrite`` on the routed statement) instead of refusing it;
the proxy (``proxy.stepwise``) runs the steps this module writes, each one an ordinary logic statement
routed by the kernel again, inside one transaction:

1. a locking ``SELECT`` of the rows the statement acts on (the key columns and sharding columns, in the
   statement's ORDER BY, with its LIMIT, ``FOR UPDATE``), merged over the nodes as any SELECT is; or, for
   ``INSERT ... SELECT``, the SELECT part itself;
2. the write of exactly those rows: the user's statement with its WHERE replaced by
   ``(<key columns>) IN ((...), ...)`` and its LIMIT removed (spliced by token spans, the rest of the text
   as the user wrote it); for ``INSERT ... SELECT``, ``INSERT INTO t (cols) VALUES ...`` batches that the
   kernel routes row by row (generating keys as for a plain INSERT).

Everything here is text in, text out: no I/O, no values but the literals the proxy hands in.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from routing.errors import RoutingError
from routing.parse import Token, tokenize

ROWS = "rows"  # UPDATE / DELETE of selected rows (ORDER BY ... LIMIT, or a sharding column assigned)
INSERT_SELECT = "insert_select"

_CLAUSE_WORDS = ("WHERE", "ORDER", "LIMIT", "RETURNING")


@dataclass(frozen=True)
class StepwiseWrite:
    """Carried by a routed statement the proxy must run in steps (see the module docstring)."""

    kind: str  # ROWS or INSERT_SELECT
    table: str  # the logic table written
    sql: str  # the user's statement text (with ``?`` placeholders when prepared)
    params: tuple[Any, ...] | None
    assigns_sharding: bool = False  # UPDATE ... SET <sharding column>: rows may have to move


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _top(tokens: Sequence[Token], start: int, word: str) -> int | None:
    for i in range(start, len(tokens)):
        t = tokens[i]
        if t.depth == 0 and t.kind == "w" and t.upper == word:
            return i
    return None


_LIMIT_ZERO = re.compile(r"\s*LIMIT\s+0+\s*$", re.I)


@dataclass(frozen=True)
class RowsWrite:
    """An UPDATE or DELETE of one table split at its clauses (offsets into ``sql``)."""

    sql: str
    update: bool
    table_ref: str  # the table reference as written (with its alias)
    qualifier: str  # how to name the table's columns (alias or table name)
    where: tuple[int, int] | None  # the WHERE keyword's start .. the condition's end
    where_cond: tuple[int, int] | None  # the condition itself
    order: tuple[int, int] | None  # ORDER BY ... (up to LIMIT / RETURNING / end)
    limit: tuple[int, int] | None  # LIMIT ... (up to RETURNING / end)
    end: int  # end of the statement text (a trailing ``;`` excluded)
    returning: bool
    lead: str = ""  # comments before the statement (hints): every step carries them

    @property
    def limit_zero(self) -> bool:
        """`LIMIT 0`: MariaDB answers at once, with no rows matched and no info text."""
        return self.limit is not None and _LIMIT_ZERO.match(self.sql[self.limit[0] : self.limit[1]]) is not None

    def select_sql(self, columns: Sequence[str]) -> str:
        """Step 1: the rows the statement acts on, locked, in its order and within its LIMIT."""
        cols = ", ".join(f"{self.qualifier}.{_quote(c)}" for c in columns)
        parts = [f"{self.lead}SELECT {cols} FROM {self.table_ref}"]
        for span in (self.where, self.order, self.limit):
            if span is not None:
                parts.append(self.sql[span[0] : span[1]].strip())
        parts.append("FOR UPDATE")
        return " ".join(parts)

    def write_sql(self, columns: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
        """Step 2: the statement itself for exactly these rows (values as SQL literals). Its ORDER BY stays
        for an UPDATE (MariaDB applies the rows in that order on each node: key shifts like
        ``SET id = id + 1 ORDER BY id DESC`` still work); the LIMIT goes."""
        if len(columns) == 1:
            name = f"{self.qualifier}.{_quote(columns[0])}"
            values = [r[0] for r in rows if r[0] != "NULL"]
            parts = ([f"{name} IN ({', '.join(values)})"] if values else []) + \
                ([f"{name} IS NULL"] if len(values) < len(rows) else [])
            cond = parts[0] if len(parts) == 1 else "(" + " OR ".join(parts) + ")"
        else:  # OR of ANDs, not a row IN: the kernel routes each row's sharding values to its own node
            names = [f"{self.qualifier}.{_quote(c)}" for c in columns]
            cond = " OR ".join("(" + " AND ".join(f"{n} IS NULL" if v == "NULL" else f"{n} = {v}"
                                                  for n, v in zip(names, r, strict=True)) + ")" for r in rows)
            cond = f"({cond})" if len(rows) > 1 else cond
        sql = self.sql
        cuts: list[tuple[int, int, str]] = []
        if self.where_cond is not None:
            cuts.append((self.where_cond[0], self.where_cond[1], cond + " "))
        else:
            at = next((s[0] for s in (self.order, self.limit) if s is not None), self.end)
            space = "" if at and sql[at - 1].isspace() else " "
            cuts.append((at, at, f"{space}WHERE {cond} "))
        if self.limit is not None:
            cuts.append((self.limit[0], self.limit[1], " "))
        if self.order is not None and not self.update:
            cuts.append((self.order[0], self.order[1], " "))
        out, pos = [], 0
        for start, end, text in sorted(cuts):
            out.append(sql[pos:start])
            out.append(text)
            pos = end
        out.append(sql[pos : self.end])
        return "".join(out).strip()


def split_rows_write(sql: str) -> RowsWrite:
    """Find the clauses of a single-table UPDATE / DELETE (top level only: subqueries are left alone)."""
    tokens = tokenize(sql)
    while tokens and tokens[-1].text == ";":
        tokens = tokens[:-1]
    if not tokens:
        raise RoutingError("empty statement")
    end = tokens[-1].end
    update = tokens[0].upper == "UPDATE"
    if update:
        i = 1
        while i < len(tokens) and tokens[i].upper in ("LOW_PRIORITY", "IGNORE"):
            i += 1
        ref_start = i
        ref_end = _top(tokens, i, "SET")
        if ref_end is None:
            raise RoutingError("UPDATE without SET")
        after = ref_end + 1
    else:
        found = _top(tokens, 1, "FROM")
        if found is None:
            raise RoutingError("DELETE without FROM")
        ref_start = found + 1
        after = ref_start
        ref_end = next((k for k in range(after, len(tokens)) if tokens[k].depth == 0 and tokens[k].kind == "w"
                        and tokens[k].upper in _CLAUSE_WORDS), len(tokens))
    positions: dict[str, int] = {}
    for k in range(after, len(tokens)):
        t = tokens[k]
        if t.depth == 0 and t.kind == "w" and t.upper in _CLAUSE_WORDS and t.upper not in positions:
            if t.upper == "ORDER" and (k + 1 >= len(tokens) or tokens[k + 1].upper != "BY"):
                continue
            positions[t.upper] = k
    bounds = sorted(positions.values())

    def span(word: str) -> tuple[int, int] | None:
        k = positions.get(word)
        if k is None:
            return None
        nxt = next((b for b in bounds if b > k), None)
        return tokens[k].start, tokens[nxt].start if nxt is not None else end

    where = span("WHERE")
    where_cond = None
    if where is not None:
        where_cond = (tokens[positions["WHERE"] + 1].start, where[1])
    ref_tokens = tokens[ref_start:ref_end]
    if not ref_tokens:
        raise RoutingError("no table")
    table_ref = sql[ref_tokens[0].start : ref_tokens[-1].end]
    qualifier_token = ref_tokens[-1]  # `t`, `db.t`, `t a`, `t AS a`: the last name qualifies
    qualifier = qualifier_token.text if qualifier_token.kind == "b" else _quote(qualifier_token.text)
    return RowsWrite(sql, update, table_ref, qualifier, where, where_cond, span("ORDER"), span("LIMIT"), end,
                     "RETURNING" in positions, sql[: tokens[0].start])


@dataclass(frozen=True)
class InsertSelect:
    """``INSERT [IGNORE] INTO t [(cols)] <query>`` split into its head and its query."""

    verb: str  # the text before the table name: ``INSERT IGNORE INTO``
    table_text: str
    columns: tuple[str, ...] | None  # as written, None: no column list
    query: str
    ignore: bool
    lead: str = ""  # comments before the statement (hints): every step carries them

    def values_sql(self, columns: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
        """Step 2: one batch of the selected rows as a plain INSERT the kernel routes row by row."""
        cols = ", ".join(_quote(c) for c in columns)
        values = ", ".join("(" + ", ".join(r) + ")" for r in rows)
        return f"{self.lead}{self.verb} {self.table_text} ({cols}) VALUES {values}"


def split_insert_select(sql: str) -> InsertSelect:
    tokens = tokenize(sql)
    while tokens and tokens[-1].text == ";":
        tokens = tokens[:-1]
    into = _top(tokens, 0, "INTO")
    if into is None or into + 1 >= len(tokens):
        raise RoutingError("INSERT ... SELECT without INTO")
    for k in range(into, len(tokens)):
        if tokens[k].depth == 0 and tokens[k].upper == "DUPLICATE" and tokens[k - 1].upper == "ON":
            raise RoutingError(
                "INSERT ... SELECT ... ON DUPLICATE KEY UPDATE into a sharded table routes to several data "
                "nodes; the proxy runs INSERT ... SELECT there row by row without ON DUPLICATE KEY UPDATE "
                "only: select the rows and send INSERT ... VALUES ... ON DUPLICATE KEY UPDATE instead"
            )
    i = into + 1
    name_end = i
    while name_end + 2 < len(tokens) and tokens[name_end + 1].text == ".":
        name_end += 2
    table_text = sql[tokens[i].start : tokens[name_end].end]
    k = name_end + 1
    columns: tuple[str, ...] | None = None
    if k < len(tokens) and tokens[k].text == "(" and k + 1 < len(tokens) and \
            tokens[k + 1].upper not in ("SELECT", "WITH", "(", "VALUES", "TABLE"):
        close = next(j for j in range(k + 1, len(tokens)) if tokens[j].text == ")" and tokens[j].depth == 0)
        columns = tuple(t.name for t in tokens[k + 1 : close] if t.kind in ("w", "b"))
        k = close + 1
    if k >= len(tokens):
        raise RoutingError("INSERT ... SELECT without a query")
    verb = sql[tokens[0].start : tokens[into].end]
    ignore = any(t.upper == "IGNORE" for t in tokens[:into])
    lead = sql[: tokens[0].start]
    return InsertSelect(verb, table_text, columns, lead + sql[tokens[k].start : tokens[-1].end], ignore, lead)


class _Computed:
    """An assigned value only MariaDB can compute (an expression, a column)."""


COMPUTED = _Computed()


def assignments(sql: str) -> dict[str, Any]:
    """What an UPDATE's SET assigns: column (lower case, unqualified) -> the Python value of a plain
    literal (as for routing an INSERT's values), or COMPUTED."""
    import sqlglot
    from sqlglot import exp

    from routing.parse import dialect, literal_value

    try:
        ast = sqlglot.parse_one(sql, read=dialect())
    except Exception as exc:  # sqlglot raises several kinds on odd input
        raise RoutingError(f"cannot parse the UPDATE's SET clause: {exc}") from None
    out: dict[str, Any] = {}
    for a in ast.expressions:
        if not isinstance(a, exp.EQ) or not isinstance(a.this, exp.Column):
            continue
        value: Any = COMPUTED
        e = a.expression
        negative = isinstance(e, exp.Neg)
        if negative:
            e = e.this
        if isinstance(e, exp.Literal):
            if e.is_string and not negative:
                value = e.this
            elif not e.is_string:
                value = literal_value(("-" if negative else "") + e.this, "n")
        out[a.this.name.lower()] = value
    return out
