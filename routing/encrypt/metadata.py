"""An encrypted table's metadata in its logical shape: what DESCRIBE, SHOW [FULL] COLUMNS, SHOW CREATE TABLE and
information_schema.COLUMNS answer for it, as ShardingSphere-Proxy answers them (its EncryptShowColumnsMergedResult
and EncryptShowCreateTableMergedResult): the cipher column shown under its logical column's name (with the cipher
column's type and definition: the database holds nothing else), the assisted query and LIKE query columns hidden.

The statements run on the physical table as they are, without what selects among the logical names (a LIKE
pattern, a WHERE condition): the proxy turns the physical answer into the logical one with these functions, then
selects. Pure: rows in, rows out (text protocol values, ``bytes`` or None).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from routing.encrypt.rule import EncryptRule, EncryptTable
from routing.like import like_to_regex
from routing.parse import Token, literal_value, tokenize

__all__ = [
    "TableMetadata",
    "like_matches",
    "logical_columns",
    "logical_create_table",
    "logical_schema_columns",
    "logical_schema_select",
    "table_metadata",
]

Row = tuple[bytes | None, ...]

#: what follows DESCRIBE / DESC / EXPLAIN when it explains a statement, not a table
_EXPLAINED = frozenset(
    {"SELECT", "INSERT", "UPDATE", "DELETE", "REPLACE", "WITH", "TABLE", "VALUES", "EXTENDED", "PARTITIONS",
     "FORMAT", "ANALYZE", "FOR"}
)


@dataclass(frozen=True, slots=True)
class TableMetadata:
    """A metadata statement about one encrypted table of the current database.

    ``kind``: ``"columns"`` (DESCRIBE / SHOW [FULL] COLUMNS: one row per column, its name first) or ``"create"``
    (SHOW CREATE TABLE: the table's name and its CREATE TABLE text); ``sql``: the statement to run on the physical
    table (the table as written, unqualified; no LIKE, no WHERE); ``like``: the LIKE pattern the logical names must
    match (DESC t col, DESC t 'pattern', SHOW COLUMNS ... LIKE); ``where``: the WHERE condition the logical rows
    must satisfy (SHOW COLUMNS ... WHERE)."""

    kind: str
    sql: str
    table: EncryptTable
    like: str | None = None
    where: str | None = None


def _ident(token: Token) -> str | None:
    """The name a table / column / database token stands for (None: not a name)."""
    if token.kind == "b":
        return token.text[1:-1].replace("``", "`")
    if token.kind == "w":
        return token.text
    return None


def _table_ref(tokens: list[Token], i: int) -> tuple[str | None, str, int] | None:
    """``[db.]table`` at ``tokens[i]``: (database or None, table, index after it)."""
    if i >= len(tokens) or _ident(tokens[i]) is None:
        return None
    if i + 2 < len(tokens) and tokens[i + 1].text == "." and _ident(tokens[i + 2]) is not None:
        return _ident(tokens[i]), _ident(tokens[i + 2]) or "", i + 3
    return None, _ident(tokens[i]) or "", i + 1


def table_metadata(sql: str, rule: EncryptRule, database: str) -> TableMetadata | None:
    """The statement as a `TableMetadata` when it is DESCRIBE / DESC / EXPLAIN ``t [col | 'pattern']``,
    ``SHOW [FULL] {COLUMNS | FIELDS} {FROM | IN} t [{FROM | IN} db] [LIKE 'pattern' | WHERE expr]`` or ``SHOW CREATE
    TABLE t`` of a table the rule encrypts, in `database` (a table qualified with another database: None, it is
    answered as it is)."""
    if not rule.tables:
        return None
    tokens = tokenize(sql)
    while tokens and tokens[-1].text == ";":
        tokens.pop()
    if len(tokens) < 2 or tokens[0].kind != "w":
        return None
    first = tokens[0].upper
    full = False
    like: str | None = None
    where: str | None = None
    if first in ("DESCRIBE", "DESC", "EXPLAIN"):
        if tokens[1].upper in _EXPLAINED:
            return None
        ref = _table_ref(tokens, 1)
        if ref is None:
            return None
        schema, table, i = ref
        if i < len(tokens):
            if i + 1 != len(tokens):
                return None
            column = tokens[i]
            if column.kind == "s" and column.text[0] == "'":
                like = literal_value(column.text, "s")
            else:
                name = _ident(column)
                if name is None:
                    return None
                like = name  # DESC t col is SHOW COLUMNS FROM t LIKE 'col' (its _ a wildcard too)
        kind = "columns"
    elif first == "SHOW":
        i = 1
        if tokens[i].upper == "CREATE":
            if len(tokens) < 4 or tokens[2].upper != "TABLE":
                return None
            ref = _table_ref(tokens, 3)
            if ref is None or ref[2] != len(tokens):
                return None
            schema, table, i = ref
            kind = "create"
        else:
            if tokens[i].upper == "FULL":
                full, i = True, i + 1
            if i + 1 >= len(tokens) or tokens[i].upper not in ("COLUMNS", "FIELDS") \
                    or tokens[i + 1].upper not in ("FROM", "IN"):
                return None
            ref = _table_ref(tokens, i + 2)
            if ref is None:
                return None
            schema, table, i = ref
            if i + 1 < len(tokens) and tokens[i].upper in ("FROM", "IN"):
                named = _ident(tokens[i + 1])
                if named is None:
                    return None
                schema, i = named, i + 2
            if i < len(tokens):
                word = tokens[i].upper
                if word == "LIKE" and i + 2 == len(tokens) and tokens[i + 1].kind == "s" \
                        and tokens[i + 1].text[0] == "'":
                    like = literal_value(tokens[i + 1].text, "s")
                elif word == "WHERE" and i + 1 < len(tokens):
                    where = sql[tokens[i].end : tokens[-1].end].strip()
                else:
                    return None
            kind = "columns"
    else:
        return None
    if schema is not None and schema.lower() != database.lower():
        return None
    encrypted = rule.table(table)
    if encrypted is None:
        return None
    name = f"`{table.replace('`', '``')}`"
    if kind == "create":
        return TableMetadata("create", f"SHOW CREATE TABLE {name}", encrypted)
    return TableMetadata("columns", f"SHOW {'FULL ' if full else ''}COLUMNS FROM {name}", encrypted, like, where)


def like_matches(pattern: str, name: str) -> bool:
    """Whether a column's name matches a SHOW COLUMNS LIKE pattern (case-insensitive, as MariaDB matches them)."""
    return like_to_regex(pattern).match(name) is not None


def _text(value: bytes | None) -> str:
    return "" if value is None else value.decode("utf-8", "surrogateescape")


def logical_columns(rows: Sequence[Row], table: EncryptTable, like: str | None = None) -> list[Row]:
    """DESCRIBE / SHOW [FULL] COLUMNS rows (the column's name first) of `table`'s physical table in its logical
    shape: the cipher column's row under the logical name, the assisted and LIKE query columns' rows left out;
    with `like`, only the rows whose logical name matches it."""
    rx = None if like is None else like_to_regex(like)
    out: list[Row] = []
    for row in rows:
        name = _text(row[0]).lower()
        if name in table.hidden:
            continue
        col = table.ciphers.get(name)
        if col is not None:
            row = (col.name.encode("utf-8", "surrogateescape"), *row[1:])
        if rx is not None and rx.match(_text(row[0])) is None:
            continue
        out.append(row)
    return out


def logical_schema_columns(
    labels: Sequence[str], rows: Sequence[Row], tables: Mapping[str, EncryptTable], schema: str
) -> list[Row]:
    """information_schema.COLUMNS rows (`labels`: the columns' names) with each table of `schema` that `tables`
    names (lower case -> its rule) in its logical shape: the cipher column's row named by its logical column, the
    assisted and LIKE query columns' rows left out, ORDINAL_POSITION counted without them. `rows` hold every column
    of each such table (the positions of the hidden ones are read from them)."""
    index = {label.upper(): i for i, label in reversed(list(enumerate(labels)))}
    i_schema, i_table, i_column = index.get("TABLE_SCHEMA"), index.get("TABLE_NAME"), index.get("COLUMN_NAME")
    i_position = index.get("ORDINAL_POSITION")
    if i_schema is None or i_table is None or i_column is None or not tables:
        return list(rows)
    want = schema.encode("utf-8", "surrogateescape")

    def encrypted(row: Row) -> EncryptTable | None:
        return tables.get(_text(row[i_table]).lower()) if row[i_schema] == want else None

    hidden_at: dict[str, list[int]] = {}
    if i_position is not None:
        for row in rows:
            table = encrypted(row)
            if table is not None and _text(row[i_column]).lower() in table.hidden and row[i_position] is not None:
                hidden_at.setdefault(table.name.lower(), []).append(int(row[i_position] or 0))
    out: list[Row] = []
    for row in rows:
        table = encrypted(row)
        if table is None:
            out.append(row)
            continue
        name = _text(row[i_column]).lower()
        if name in table.hidden:
            continue
        values = list(row)
        col = table.ciphers.get(name)
        if col is not None:
            values[i_column] = col.name.encode("utf-8", "surrogateescape")
        if i_position is not None and row[i_position] is not None:
            position = int(row[i_position] or 0)
            before = sum(1 for p in hidden_at.get(table.name.lower(), ()) if p < position)
            values[i_position] = str(position - before).encode()
        out.append(tuple(values))
    return out


def _literal(value: str) -> str:
    """A string literal that reads the same under any sql_mode (no quote or backslash to escape)."""
    return "_utf8mb4 X'" + value.encode("utf-8", "surrogateescape").hex() + "'"


def logical_schema_select(
    labels: Sequence[str], rows: Sequence[Row], tables: Mapping[str, EncryptTable], schema: str
) -> tuple[str, str] | None:
    """What stands for information_schema.COLUMNS on a server whose `schema` holds the encrypted tables `tables`
    (physical name, lower case -> its rule), so that a statement over it sees them in their logical shape, computed
    by the server itself: (the select list over information_schema.COLUMNS, in `labels`' order, renaming the cipher
    columns and renumbering ORDINAL_POSITION; the condition of the rows to leave out, the hidden columns'). `rows`:
    every row of those tables (None: none of them there, nothing to change)."""
    index = {label.upper(): i for i, label in reversed(list(enumerate(labels)))}
    i_schema, i_table, i_column = index.get("TABLE_SCHEMA"), index.get("TABLE_NAME"), index.get("COLUMN_NAME")
    i_position = index.get("ORDINAL_POSITION")
    if i_schema is None or i_table is None or i_column is None or i_position is None:
        return None
    want = schema.encode("utf-8", "surrogateescape")
    renames: list[tuple[str, str, str]] = []  # (table, cipher column, logical column), as the server spells them
    hidden: dict[str, list[tuple[str, int]]] = {}  # table -> its hidden columns and their positions
    for row in rows:
        table = tables.get(_text(row[i_table]).lower()) if row[i_schema] == want else None
        if table is None:
            continue
        name = _text(row[i_column])
        if name.lower() in table.hidden:
            hidden.setdefault(_text(row[i_table]), []).append((name, int(row[i_position] or 0)))
        elif (col := table.ciphers.get(name.lower())) is not None:
            renames.append((_text(row[i_table]), name, col.name))
    if not renames and not hidden:
        return None
    in_schema = f"TABLE_SCHEMA = {_literal(schema)}"
    rename = " ".join(
        f"WHEN {in_schema} AND TABLE_NAME = {_literal(t)} AND COLUMN_NAME = {_literal(c)} THEN {_literal(logical)}"
        for t, c, logical in renames
    )
    shift = " ".join(
        f"WHEN {in_schema} AND TABLE_NAME = {_literal(t)} THEN "
        + " + ".join(f"(ORDINAL_POSITION > {p})" for _c, p in sorted(cols, key=lambda c: c[1]))
        for t, cols in hidden.items()
    )
    select: list[str] = []
    for i, label in enumerate(labels):
        quoted = "`" + label.replace("`", "``") + "`"
        if i == i_column and rename:
            select.append(f"CASE {rename} ELSE COLUMN_NAME END AS {quoted}")
        elif i == i_position and shift:
            select.append(f"ORDINAL_POSITION - CASE {shift} ELSE 0 END AS {quoted}")
        else:
            select.append(quoted)
    left_out = " OR ".join(
        f"({in_schema} AND TABLE_NAME = {_literal(t)} AND COLUMN_NAME IN ({', '.join(_literal(c) for c, _p in cols)}))"
        for t, cols in hidden.items()
    )
    return ", ".join(select), left_out or "FALSE"


# --- SHOW CREATE TABLE ---------------------------------------------------------------------------------------------

_KEY_WORDS = frozenset({"PRIMARY", "UNIQUE", "KEY", "INDEX", "FULLTEXT", "SPATIAL", "CONSTRAINT", "FOREIGN", "CHECK",
                        "PERIOD", "VECTOR"})


def _quoted_like(token: Token, name: str) -> str:
    """`name` quoted as `token` was (MariaDB quotes with backquotes, with double quotes under ANSI_QUOTES, or not at
    all with sql_quote_show_create=0)."""
    if token.kind == "b":
        return "`" + name.replace("`", "``") + "`"
    if token.text[:1] == '"':
        return '"' + name.replace('"', '""') + '"'
    return name if re.fullmatch(r"[A-Za-z_$][\w$]*", name) else "`" + name.replace("`", "``") + "`"


def _items(tokens: list[Token], open_at: int) -> tuple[list[tuple[int, int]], int] | None:
    """The definitions inside the parenthesis at ``tokens[open_at]``: (first, last + 1) token index ranges split at
    its top-level commas, and the index of its closing parenthesis."""
    depth = tokens[open_at].depth + 1
    items: list[tuple[int, int]] = []
    start = open_at + 1
    for j in range(open_at + 1, len(tokens)):
        t = tokens[j]
        if t.depth == depth and t.text == ",":
            items.append((start, j))
            start = j + 1
        elif t.text == ")" and t.depth == depth - 1:
            items.append((start, j))
            return items, j
    return None


def logical_create_table(text: str, rule: EncryptRule, table: EncryptTable) -> str:
    """A SHOW CREATE TABLE text of `table`'s physical table in its logical shape, still a CREATE TABLE statement that
    runs: the cipher column's definition under its logical column's name, the assisted and LIKE query columns' left
    out, the cipher columns named by their logical names in keys and constraints, and the keys and constraints over a
    hidden column left out (the logical table has no such column). Another text (a view's) comes back as it is."""
    tokens = tokenize(text)
    words = [t.upper for t in tokens[:6]]
    if "TABLE" not in words or "(" not in (t.text for t in tokens):
        return text
    open_at = next(j for j, t in enumerate(tokens) if t.text == "(")
    found = _items(tokens, open_at)
    if found is None:
        return text
    items, close_at = found
    kept: list[str] = []
    for first, last in items:
        if first >= last:
            return text
        piece = _item(text, tokens, first, last, rule, table)
        if piece is not None:
            kept.append(piece)
    if not kept:
        return text
    # (the text after the last definition: its line break before the closing parenthesis, the table's options)
    return text[: tokens[open_at].end] + ",".join(kept) + text[tokens[close_at - 1].end :]


def _create_name(tokens: list[Token], j: int, expression: bool) -> str | None:
    """The identifier ``tokens[j]`` of a SHOW CREATE TABLE text names, lower case: backquoted, double-quoted (always
    an identifier there: MariaDB writes strings with single quotes, names with double quotes under ANSI_QUOTES), or
    bare (sql_quote_show_create=0) unless, in an `expression`, it is a function called."""
    t = tokens[j]
    if t.kind == "b":
        return t.text[1:-1].replace("``", "`").lower()
    if t.kind == "s" and t.text[0] == '"':
        return t.text[1:-1].replace('""', '"').lower()
    if t.kind == "w" and not (expression and j + 1 < len(tokens) and tokens[j + 1].text == "("):
        return t.text.lower()
    return None


def _item(text: str, tokens: list[Token], first: int, last: int, rule: EncryptRule, table: EncryptTable) -> str | None:
    """One definition of the CREATE TABLE body in the logical shape (with the whitespace before it), or None when
    it is left out."""
    start = tokens[first - 1].end  # (after the comma or the parenthesis: the line break and indent kept)
    end = tokens[last - 1].end
    head = tokens[first]
    base = head.depth
    column = head.upper not in _KEY_WORDS
    # a column's expressions (DEFAULT, AS, CHECK) and a CHECK constraint name functions too; a key lists columns
    expression = column or any(tokens[j].upper == "CHECK" and tokens[j].depth == base for j in range(first, last))
    edits: list[tuple[int, int, str]] = []
    if column:
        name = _create_name(tokens, first, False)
        if name is None:
            return text[start:end]
        if name in table.hidden:
            return None
        col = table.ciphers.get(name)
        if col is not None:
            edits.append((head.start, head.end, _quoted_like(head, col.name)))
    owner: EncryptTable | None = table
    for j in range(first + (1 if column else 0), last):
        t = tokens[j]
        if t.depth == base:
            if t.upper == "REFERENCES":  # FOREIGN KEY (...) REFERENCES [db.]t (...): t's columns
                k = j + 3 if j + 3 < last and tokens[j + 2].text == "." else j + 1
                named = _create_name(tokens, k, False) if k < last else None
                owner = rule.table(named) if named else None
            continue
        name = _create_name(tokens, j, expression)
        if name is None or owner is None:
            continue
        if name in owner.hidden:
            if column:
                continue  # (an expression of the column over a hidden one: kept as it is, see docs/limits.md)
            return None
        col = owner.ciphers.get(name)
        if col is not None:
            edits.append((t.start, t.end, _quoted_like(t, col.name)))
    out: list[str] = []
    pos = start
    for s, e, new in edits:
        out += [text[pos:s], new]
        pos = e
    out.append(text[pos:end])
    return "".join(out)
