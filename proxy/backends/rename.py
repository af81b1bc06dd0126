"""A pass-through logical database whose physical database has another name (`app` -> `app_phys`).

The client knows only the logical name. Sent as is, `INSERT INTO app.t` would write into a database named `app`
on that server (or fail), and MariaDB prints the physical name back in column definitions, errors, CHECK TABLE's
`Table` column, EXPLAIN's notes, `SHOW TABLES`' header, `SHOW CREATE VIEW` ... So:

* `request`: the statement's names qualified with the logical database are qualified with the physical one — the
  user's text, with only those identifiers changed (found with sqlglot's tokenizer, outside strings and comments);
* `error`, `column`, `row`: the physical name, where MariaDB prints it, back to the logical one. Rows are
  rewritten only for the statements whose rows are MariaDB's own messages and names (`rows_for`), never data.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from sqlglot.dialects.mysql import MySQL
from sqlglot.tokens import TokenType

from protocol.packets import ColumnDefinition41, ERRPacket
from protocol.wire import MalformedPacket
from routing.session_functions import _select_items

_TOKENIZER = MySQL().tokenizer_class()
_NAME_TOKENS = {TokenType.VAR, TokenType.IDENTIFIER}
# keywords after which a two-part `x.y` names a table, when `x` is also used unqualified (a table or alias `app`)
_TABLE_CONTEXT = {"FROM", "JOIN", "INTO", "UPDATE", "TABLE", "TABLES", "VIEW", "EXISTS", "STRAIGHT_JOIN"}
# words after which a database name stands alone: SHOW TABLES FROM app, SHOW TABLE STATUS IN app, ...
_SHOW_DATABASE = {"FROM", "IN"}
# statements whose result rows are MariaDB's messages and names (never table data)
_ROWS_RENAMED = re.compile(
    r"^\s*(?:(?:CHECK|ANALYZE|OPTIMIZE|REPAIR|CHECKSUM)\s+(?:NO_WRITE_TO_BINLOG\s+|LOCAL\s+)?TABLES?\b"
    r"|(?:LOAD\s+INDEX|CACHE\s+INDEX)\b"
    # EXPLAIN's `ref` column and JSON name columns `db.table.column`; ANALYZE of a statement prints the same
    r"|(?:EXPLAIN|DESCRIBE|DESC)\s+(?:EXTENDED\s+|PARTITIONS\s+|FORMAT\s*=\s*\w+\s+)?"
    r"(?:SELECT|WITH|INSERT|UPDATE|DELETE|REPLACE|\(|FOR\s+CONNECTION)\b"
    r"|ANALYZE\s+(?:FORMAT\s*=\s*\w+\s+)?(?:SELECT|WITH|INSERT|UPDATE|DELETE|REPLACE|\()"
    # ALTER TABLE ... CHECK / REPAIR / ANALYZE / OPTIMIZE PARTITION answer CHECK TABLE's rows
    r"|ALTER\s+(?:ONLINE\s+|IGNORE\s+)*TABLE\b"
    r"|SHOW\s+(?:WARNINGS|ERRORS|CREATE|TABLE\s+STATUS|TRIGGERS|EVENTS|(?:PROCEDURE|FUNCTION|PACKAGE)\s+STATUS"
    r"|(?:FULL\s+)?TABLES|OPEN\s+TABLES)\b)",
    re.I,
)


@dataclass(frozen=True)
class _Tok:
    token_type: TokenType
    text: str
    start: int
    end: int


def _tokens(sql: str, offset: int = 0) -> list[_Tok]:
    """sqlglot's tokens of `sql`, at their places in it. Its tokenizer takes the rest of some statements after their
    keyword as one string (`RENAME TABLE a.t TO b.t`, its "commands"): that text, unquoted in `sql`, is read too."""
    out: list[_Tok] = []
    for t in _TOKENIZER.tokenize(sql):
        if t.token_type == TokenType.STRING and sql[t.start : t.start + 1] not in ("'", '"'):
            start = sql.find(t.text, out[-1].end + 1 - offset if out else 0)  # (its own start and end are not kept)
            if start >= 0 and t.text:
                out.extend(_tokens(t.text, offset + start))
                continue
        out.append(_Tok(t.token_type, t.text, offset + t.start, offset + t.end))
    return out


# a select-list item that is a column reference: labelled by its column's name, whatever qualifies it
_COLUMN_REFERENCE = re.compile(r"\s*(?:(?:`(?:[^`]|``)+`|[\w$]+)\s*\.\s*){1,2}(?:`(?:[^`]|``)+`|[\w$]+)\s*")


def _labels(sql: str, renamed: list[int]) -> list[tuple[int, int, str]]:
    """Aliases that keep the labels of the select-list items whose text the renaming changes: MariaDB labels an
    unaliased expression by its text as typed (`SELECT app.f()` is headed `app.f()`, not `` `app_phys`.f() ``)."""
    if not sql.lstrip()[:6].upper().startswith("SELECT"):
        return []
    out: list[tuple[int, int, str]] = []
    for start, end in _select_items(sql):
        if any(start <= at < end for at in renamed) and not _COLUMN_REFERENCE.fullmatch(sql, start, end):
            out.append((end, end, " AS `" + sql[start:end].strip().replace("`", "``") + "`"))
    return out


_PREPARE = re.compile(
    r"^\s*PREPARE\s+(?:`(?:[^`]|``)+`|[\w$]+)\s+FROM\s+(?P<text>'[^'\\]*(?:(?:\\.|'')[^'\\]*)*'|\"[^\"\\]*(?:(?:\\.|\"\")[^\"\\]*)*\")\s*;?\s*$",
    re.I | re.S,
)
_EXECUTE = re.compile(r"^\s*EXECUTE\s+(?P<name>`(?:[^`]|``)+`|[\w$]+)", re.I)


def _unquoted(literal: str) -> str:
    """The value of a quoted SQL string (backslash escapes and doubled quotes, as MariaDB reads them by default)."""
    quote, body = literal[0], literal[1:-1]
    return re.sub(r"\\(.)|" + quote * 2, lambda m: _ESCAPES.get(m.group(1), m.group(1)) if m.group(1) else quote, body)


_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", "Z": "\x1a", "b": "\b"}


def _string(value: str) -> str:
    """`value` as a SQL string literal that reads the same with or without NO_BACKSLASH_ESCAPES."""
    if "\\" in value:
        return "CONVERT(X'" + value.encode("utf-8", "surrogateescape").hex() + "' USING utf8mb4)"
    return "'" + value.replace("'", "''") + "'"


def prepared_name(sql: str, kind: str) -> str | None:
    """The statement name of `PREPARE name FROM '...'` (kind `prepare`) or `EXECUTE name` (kind `execute`),
    lower case, or None."""
    m = (_PREPARE if kind == "prepare" else _EXECUTE).match(sql)
    if m is None:
        return None
    name = re.match(r"\s*PREPARE\s+(`(?:[^`]|``)+`|[\w$]+)", sql, re.I) if kind == "prepare" else m
    assert name is not None
    return name.group(1).strip("`").replace("``", "`").lower()


def prepared_text(sql: str) -> str | None:
    """The statement text of `PREPARE name FROM '...'`, or None."""
    m = _PREPARE.match(sql)
    return _unquoted(m.group("text")) if m is not None else None


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


_KEPT_DEFINITIONS = 4096  # column definitions `Renaming.column` keeps rewritten (cleared when full)


@dataclass(frozen=True)
class Renaming:
    logical: str
    physical: str
    _word: re.Pattern[bytes] = field(init=False, repr=False, compare=False)
    # definition -> in logical names (`column`)
    _columns: dict[bytes, bytes] = field(init=False, repr=False, compare=False, default_factory=dict)

    def __post_init__(self) -> None:
        word = re.compile(rb"(?<![\w$])" + re.escape(self.physical.encode()) + rb"(?![\w$])")
        object.__setattr__(self, "_word", word)

    # -- toward the server -----------------------------------------------------------------------------------

    def request(self, sql: str) -> str:
        """`sql` with the logical database, where it qualifies a name (or is named by SHOW ... FROM), replaced by
        the physical one; the text itself when it names no such thing (or cannot be tokenized). The statement text
        of `PREPARE s FROM '...'` is translated too (one in a variable, `FROM @q`, is the server's: not)."""
        if self.logical.lower() not in sql.lower():
            return sql
        prepared = _PREPARE.match(sql)
        if prepared is not None:
            text = _unquoted(prepared.group("text"))
            sent = self.request(text)
            if sent is text:
                return sql
            return sql[: prepared.start("text")] + _string(sent) + sql[prepared.end("text") :]
        try:
            tokens = _tokens(sql)
        except Exception:  # sqlglot's TokenError: the server reports what is wrong with the text
            return sql
        logical = self.logical.lower()
        hits = [i for i, t in enumerate(tokens) if t.token_type in _NAME_TOKENS and t.text.lower() == logical]
        if not hits:
            return sql
        bare = any(not self._qualifies(tokens, i) for i in hits)  # also a table or an alias of that name
        show = tokens[0].text.upper() == "SHOW"
        edits: list[tuple[int, int, str]] = []
        for i in hits:
            if self._is_database(tokens, i, bare, show):
                edits.append((tokens[i].start, tokens[i].end + 1, _quoted(self.physical)))
        if not edits:
            return sql
        edits.extend(_labels(sql, [start for start, _end, _text in edits]))
        edits.sort(key=lambda e: (e[0], e[1]))
        out: list[str] = []
        pos = 0
        for start, end, text in edits:
            out.append(sql[pos:start])
            out.append(text)
            pos = end
        out.append(sql[pos:])
        return "".join(out)

    @staticmethod
    def _qualifies(tokens: list[_Tok], i: int) -> bool:
        """The name at `i` is the first part of a qualified name (`app.t`)."""
        return (
            i + 1 < len(tokens)
            and tokens[i + 1].token_type == TokenType.DOT
            and (i == 0 or tokens[i - 1].token_type != TokenType.DOT)
        )

    def _is_database(self, tokens: list[_Tok], i: int, bare: bool, show: bool) -> bool:
        previous = tokens[i - 1] if i else None
        if (
            show
            and previous is not None
            and previous.text.upper() in _SHOW_DATABASE
            and not (i + 1 < len(tokens) and tokens[i + 1].token_type == TokenType.DOT)
        ):
            return True  # SHOW TABLES FROM app, SHOW COLUMNS FROM t IN app
        if not self._qualifies(tokens, i):
            return False
        three_part = i + 3 < len(tokens) and tokens[i + 3].token_type == TokenType.DOT
        if three_part or not bare:
            return True
        # `app.x` where a table or alias is also called `app`: a database only where a table is named
        return previous is not None and previous.text.upper() in _TABLE_CONTEXT

    # -- toward the client -----------------------------------------------------------------------------------

    def text(self, value: bytes) -> bytes:
        return self._word.sub(self.logical.encode(), value) if self.physical.encode() in value else value

    def error(self, payload: bytes) -> bytes:
        """An ERR packet with the physical name in its message shown as the logical one."""
        if self.physical.encode() not in payload:
            return payload
        try:
            err = ERRPacket.decode(payload)
        except MalformedPacket:
            return payload
        message = self.text(err.message.encode("utf-8", "surrogateescape")).decode("utf-8", "surrogateescape")
        return ERRPacket(err.errno, message, err.sqlstate).encode()

    def column(self, payload: bytes) -> bytes:
        """A column definition whose schema is the physical database (or labelled `Tables_in_<physical>`)."""
        if self.physical.encode() not in payload:
            return payload
        known = self._columns.get(payload)  # a statement's definitions are the same bytes at each execute
        if known is None:
            known = self._column(payload)
            if len(self._columns) >= _KEPT_DEFINITIONS:
                self._columns.clear()
            self._columns[payload] = known
        return known

    def _column(self, payload: bytes) -> bytes:
        try:
            col = ColumnDefinition41.decode(payload)
        except (MalformedPacket, ValueError, IndexError):
            return payload
        renamed = self.definition(col)
        return payload if renamed is col else renamed.encode()

    def definition(self, col: ColumnDefinition41) -> ColumnDefinition41:
        """`column` for a decoded definition (also COM_STMT_PREPARE's answer): the schema, and the label
        `Tables_in_<physical>` of SHOW TABLES; `col` itself when neither names the physical database."""
        physical = self.physical
        schema = self.logical if col.schema == physical else col.schema
        prefix = f"Tables_in_{physical}"
        name = f"Tables_in_{self.logical}{col.name[len(prefix) :]}" if col.name.startswith(prefix) else col.name
        org_name = (
            f"Tables_in_{self.logical}{col.org_name[len(prefix) :]}"
            if col.org_name.startswith(prefix)
            else col.org_name
        )
        if (schema, name, org_name) == (col.schema, col.name, col.org_name):
            return col
        return replace(col, schema=schema, name=name, org_name=org_name)

    def row(self, payload: bytes) -> bytes:
        """A text row of a statement of `rows_for`: each value with the physical name shown as the logical one."""
        if self.physical.encode() not in payload:
            return payload
        out = bytearray()
        pos = 0
        end = len(payload)
        while pos < end:
            first = payload[pos]
            if first == 0xFB:
                out.append(0xFB)
                pos += 1
                continue
            if first < 0xFB:
                size, pos = first, pos + 1
            else:
                width = {0xFC: 2, 0xFD: 3, 0xFE: 8}.get(first)
                if width is None:
                    return payload
                size, pos = int.from_bytes(payload[pos + 1 : pos + 1 + width], "little"), pos + 1 + width
            value = self.text(payload[pos : pos + size])
            out += _lenenc_int(len(value)) + value
            pos += size
        return bytes(out)

    @staticmethod
    def rows_for(sql: str) -> bool:
        """The statement's rows are MariaDB's messages and names, to be shown in logical names."""
        return _ROWS_RENAMED.match(sql) is not None


def _lenenc_int(n: int) -> bytes:
    if n < 0xFB:
        return bytes((n,))
    if n < 1 << 16:
        return b"\xfc" + n.to_bytes(2, "little")
    if n < 1 << 24:
        return b"\xfd" + n.to_bytes(3, "little")
    return b"\xfe" + n.to_bytes(8, "little")


def renaming_of(logical: str, physical: str) -> Renaming | None:
    """The renaming a pass-through database needs, or None when its physical database has its name."""
    return None if physical == logical or not physical else Renaming(logical, physical)


__all__ = ["Renaming", "prepared_name", "prepared_text", "renaming_of"]
