"""Lexing and parsing of one statement, kept apart from routing so both can be cached.

Two lexers live here, on purpose:

* `scan_shape` is the hot path. It finds only the value tokens (literals and ``?``) with one sparse regex
  and builds the statement's *shape* (the text with every value replaced by a marker), which is the plan
  cache key. It must stay cheap: it runs for every statement.
* `tokenize` produces every token with its character span. It runs only when a plan is compiled, to find
  clause boundaries (select list end, ORDER BY items, LIMIT) and to check raw identifiers of statements
  sqlglot cannot parse.

`parse_statement` hands sqlglot a text of *identical length* (``?`` → ``0``, ``REPLACE`` → ``INSERT ``) so
that the ``start``/``end`` offsets sqlglot records on identifiers and literals point into the user's text.
The AST is only ever used to classify and find things; SQL sent to the backends is always spliced from the
original text (see `routing.rewrite`).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, NamedTuple

import sqlglot
from sqlglot import exp
from sqlglot.dialects.mysql import MySQL
from sqlglot.helper import seq_get

# sqlglot logs a warning each time it falls back to exp.Command (CALL, LOCK TABLES...); those statements
# are expected here and handled, so the warning is noise for the proxy's log.
logging.getLogger("sqlglot").setLevel(logging.ERROR)


def _atan2(args: list[exp.Expression]) -> exp.Expression:
    """MySQL's ATAN2(x) is ATAN(x); sqlglot's MySQL parser knows ATAN2 with two arguments only and fails
    the whole statement on one (the user's text, not sqlglot's, is what runs)."""
    if len(args) == 1:
        return exp.Atan(this=args[0])
    return exp.Atan2(this=seq_get(args, 0), expression=seq_get(args, 1))


_MYSQL = sqlglot.Dialect.get_or_raise("mysql")
_MYSQL.parser_class.FUNCTIONS = {**_MYSQL.parser_class.FUNCTIONS, "ATAN2": _atan2}


# --- how the session's sql_mode reads text (issue 34) ----------------------------------------------------
#
# The bits are the server status flags MySQL reports for these sql_mode flags (protocol.constants.ServerStatus),
# so the proxy passes its session's status bits as they are. The kernel reads a text in the mode it is given:
# ANSI_QUOTES texts are first rewritten with their double-quoted identifiers backquoted (`ansi_backquoted`: the
# backends read backquotes in every mode, so every unit spliced from that text stays valid), NO_BACKSLASH_ESCAPES
# texts are read with `reading(mode)` around the kernel's work: the scanners, `literal_value` and sqlglot (`dialect`)
# then take a backslash in a string as the character it is. Under PIPES_AS_CONCAT a text with `||` is routed with
# each `a || b` written CONCAT(a, b) (routing.pipes: sqlglot's MySQL parser reads `||` as OR only, and routed as
# OR a value concatenated could be looked for on the wrong node); every other text reads the same.

NO_BACKSLASH_ESCAPES = 512
ANSI_QUOTES = 32768
# no status flag says this one: the proxy learns it from @@sql_mode (a bit above the 16 status flags)
PIPES_AS_CONCAT = 1 << 16
# changes no text, only what a 0 given to an AUTO_INCREMENT column means (routing.autoinc): not in TEXT_MODES
NO_AUTO_VALUE_ON_ZERO = 1 << 17
TEXT_MODES = NO_BACKSLASH_ESCAPES | ANSI_QUOTES | PIPES_AS_CONCAT

_READING: ContextVar[int] = ContextVar("routing_text_mode", default=0)


@contextmanager
def reading(mode: int) -> Iterator[None]:
    """Read texts under `mode` (its NO_BACKSLASH_ESCAPES bit) in this context."""
    token = _READING.set(mode & NO_BACKSLASH_ESCAPES)
    try:
        yield
    finally:
        _READING.reset(token)


class _MySQLNoBackslashEscapes(MySQL):
    """MySQL under sql_mode NO_BACKSLASH_ESCAPES: a backslash in a string is itself (read and written so)."""

    class Tokenizer(MySQL.Tokenizer):
        STRING_ESCAPES = ["'", '"']


def dialect() -> Any:
    """The sqlglot dialect texts are read (and strings written) in, in this context."""
    return _MySQLNoBackslashEscapes if _READING.get() else "mysql"


_ANSI_SKIP = r"""/\*.*?\*/|--(?=[ \t\r\n]|$)[^\n]*|\#[^\n]*|`[^`]*(?:``[^`]*)*`|"""  # comments, backquoted names
_ANSI_SCAN = {  # ... strings (by the mode) and the double-quoted names to backquote
    0: re.compile(_ANSI_SKIP + r"""'[^'\\]*(?:(?:\\.|'')[^'\\]*)*'|(?P<q>"[^"]*(?:""[^"]*)*")""", re.S),
    NO_BACKSLASH_ESCAPES: re.compile(_ANSI_SKIP + r"""'[^']*(?:''[^']*)*'|(?P<q>"[^"]*(?:""[^"]*)*")""", re.S),
}


def ansi_backquoted(sql: str, mode: int) -> str:
    """`sql` as read under ANSI_QUOTES, its double-quoted identifiers written with backquotes (``"a""b"`` ->
    `` `a"b` ``), so that a reader of MySQL's default quoting reads the same names."""
    if '"' not in sql:
        return sql
    out: list[str] = []
    pos = 0
    for m in _ANSI_SCAN[mode & NO_BACKSLASH_ESCAPES].finditer(sql):
        if m.group("q") is None:
            continue
        name = m.group("q")[1:-1].replace('""', '"').replace("`", "``")
        out.append(sql[pos : m.start()])
        out.append(f"`{name}`")
        pos = m.end()
    if not out:
        return sql
    out.append(sql[pos:])
    return "".join(out)


class _Unknown:
    """The value of a ``?`` whose parameter was not supplied: routing widens on it."""

    _instance: _Unknown | None = None

    def __new__(cls) -> _Unknown:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN: Any = _Unknown()

LITERAL_MARK = "\x01"  # stands for a literal in a shape key ("?" stays "?")

_VALUE_RE = re.compile(
    r"""
    (?P<c>/\*.*?\*/|--(?=[ \t\r\n]|$)[^\n]*|\#[^\n]*)
    |(?P<b>`[^`]*(?:``[^`]*)*`)
    |(?P<s>'[^'\\]*(?:(?:\\.|'')[^'\\]*)*'|"[^"\\]*(?:(?:\\.|"")[^"\\]*)*")
    |(?P<n>(?<![\w$.])(?:\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)(?![\w$]))
    |(?P<p>\?)
    """,
    re.S | re.X,
)
_VALUE_RE_NBE = re.compile(_VALUE_RE.pattern.replace(
    r"""(?P<s>'[^'\\]*(?:(?:\\.|'')[^'\\]*)*'|"[^"\\]*(?:(?:\\.|"")[^"\\]*)*")""",
    r"""(?P<s>'[^']*(?:''[^']*)*'|"[^"]*(?:""[^"]*)*")"""), re.S | re.X)
assert _VALUE_RE_NBE.pattern != _VALUE_RE.pattern


class Shape(NamedTuple):
    """The statement text split around its value tokens.

    ``key`` is the cache key; ``spans`` holds ``(start, end, kind)`` per value token in text order
    (kind ``n`` number, ``s`` string, ``p`` parameter; ``end`` exclusive). A named tuple: one is made for every
    text statement routed, at half a frozen dataclass's cost.
    """

    sql: str
    key: str
    spans: tuple[tuple[int, int, str], ...]

    def text(self, k: int) -> str:
        start, end, _ = self.spans[k]
        return self.sql[start:end]


def scan_shape(sql: str) -> Shape:
    """Split ``sql`` into its shape key and value tokens (one regex pass, no sqlglot)."""
    parts: list[str] = []
    spans: list[tuple[int, int, str]] = []
    pos = 0
    for m in (_VALUE_RE_NBE if _READING.get() else _VALUE_RE).finditer(sql):
        kind = m.lastgroup
        if kind == "c" or kind == "b":
            continue
        start, end = m.span()
        parts.append(sql[pos:start])
        parts.append("?" if kind == "p" else LITERAL_MARK)
        spans.append((start, end, kind))  # type: ignore[arg-type]
        pos = end
    if not spans:
        return Shape(sql, sql, ())
    parts.append(sql[pos:])
    return Shape(sql, "".join(parts), tuple(spans))


_RUNS = re.compile(r"([0-9]+)")


class _Skeleton:
    """What `scan_shape` found in a text, said in terms of the text's digit runs (`TextShapes`)."""

    __slots__ = ("fixed", "key", "spans")

    def __init__(self, key: str, fixed: tuple[tuple[int, str], ...],
                 spans: tuple[tuple[int, int, int, str], ...]) -> None:
        self.key = key
        self.fixed = fixed  # (run, its digits): runs that are not a whole number token must be the same
        # per value token: (run, -1, -1, "n") when it is exactly that run; else (the last run before it, or -1
        # for the text's start; its start and end counted from that run's end; its kind)
        self.spans = spans


class TextShapes:
    r"""Shapes of text statements that differ from one seen before only in their integer literals (``... WHERE
    id=123``, ``... BETWEEN 5 AND 104 ORDER BY c``), found without the regex (`scan_shape` would otherwise run
    for every text statement, repeated shapes included).

    Two ways, both exact:

    * a text whose last token is its trailing digits: the text before them is looked up and the literal's span
      appended (the cheapest: a text point select);
    * any text, by its *skeleton*: the text split around its runs of ASCII digits. A text with the same text
      between its runs as one seen before gets that one's shape, its spans moved by the lengths of the runs,
      when each run that was not exactly a number token there is the same here (digits inside identifiers
      such as ``sbtest1``, strings, comments, ``1.5``, ``0x1F``).

    Why the runs that were exactly a number token may hold any digits: `_VALUE_RE` decides at such a run by
    the characters around it (the same text here) and by character classes every digit is in alike (``\d``,
    ``\w``, ``.`` in comments and strings); the number alternative matched exactly the run, so its neighbours
    are neither ``.``, ``$`` nor word characters, and any other non-empty digits match it exactly too. A
    skeleton is remembered only from what `scan_shape` found."""

    __slots__ = ("_by_prefix", "_skeletons", "limit")

    def __init__(self, limit: int = 1024) -> None:
        self._by_prefix: dict[str, tuple[str, tuple[tuple[int, int, str], ...]]] = {}
        self._skeletons: dict[tuple[str, ...], _Skeleton] = {}
        self.limit = limit

    def shape(self, sql: str) -> Shape:
        prefix = sql.rstrip("0123456789")
        n, end = len(prefix), len(sql)
        if n != end:
            known = self._by_prefix.get(prefix)
            if known is not None:
                return Shape(sql, known[0], (*known[1], (n, end, "n")))
        parts = _RUNS.split(sql)
        if len(parts) == 1:
            return scan_shape(sql)
        segments = tuple(parts[0::2])
        skeleton = self._skeletons.get(segments)
        if skeleton is not None:
            shape = _from_skeleton(sql, parts, skeleton)
            if shape is not None:
                return shape
        shape = scan_shape(sql)
        if n != end and shape.spans and shape.spans[-1] == (n, end, "n"):
            if len(self._by_prefix) >= self.limit:
                self._by_prefix.clear()
            self._by_prefix[prefix] = (shape.key, shape.spans[:-1])
        if skeleton is None:
            if len(self._skeletons) >= self.limit:
                self._skeletons.clear()
            self._skeletons[segments] = _skeleton(parts, shape)
        return shape


def _run_bounds(parts: list[str]) -> list[tuple[int, int]]:
    """(start, end) of each digit run of a text split by `_RUNS` (segments and runs alternating)."""
    bounds = []
    pos = len(parts[0])
    for i in range(1, len(parts), 2):
        run_end = pos + len(parts[i])
        bounds.append((pos, run_end))
        pos = run_end + len(parts[i + 1])
    return bounds


def _skeleton(parts: list[str], shape: Shape) -> _Skeleton:
    bounds = _run_bounds(parts)
    whole = {b: i for i, b in enumerate(bounds)}
    spans: list[tuple[int, int, int, str]] = []
    numbers: set[int] = set()
    k = 0  # runs ending at or before the current span
    for start, end, kind in shape.spans:
        run = whole.get((start, end)) if kind == "n" else None
        if run is not None:
            numbers.add(run)
            spans.append((run, -1, -1, "n"))
            continue
        while k < len(bounds) and bounds[k][1] <= start:
            k += 1
        base = bounds[k - 1][1] if k else 0
        spans.append((k - 1, start - base, end - base, kind))
    fixed = tuple((i, parts[2 * i + 1]) for i in range(len(bounds)) if i not in numbers)
    return _Skeleton(shape.key, fixed, tuple(spans))


def _from_skeleton(sql: str, parts: list[str], skeleton: _Skeleton) -> Shape | None:
    for i, digits in skeleton.fixed:
        if parts[2 * i + 1] != digits:
            return None
    bounds = _run_bounds(parts)
    spans = []
    for run, start, end, kind in skeleton.spans:
        if start < 0:
            spans.append((*bounds[run], "n"))
        else:
            base = bounds[run][1] if run >= 0 else 0
            spans.append((base + start, base + end, kind))
    return Shape(sql, skeleton.key, tuple(spans))


_ESCAPES = {"0": "\0", "b": "\b", "n": "\n", "r": "\r", "t": "\t", "Z": "\x1a"}


def literal_value(text: str, kind: str) -> Any:
    """The Python value of a literal token as MySQL reads it (ints stay exact, decimals are Decimal)."""
    if kind == "n":
        if "e" in text or "E" in text:
            return float(text)
        if "." in text:
            return Decimal(text)
        return int(text)
    quote = text[0]
    body = text[1:-1]
    if "\\" not in body and quote * 2 not in body:
        return body
    out: list[str] = []
    escapes = not _READING.get()
    i = 0
    while i < len(body):
        ch = body[i]
        if ch == "\\" and escapes and i + 1 < len(body):
            nxt = body[i + 1]
            # (\% and \_ keep their backslash: MySQL reads them so outside LIKE too, and LIKE reads them as % and _)
            out.append("\\" + nxt if nxt in "%_" else _ESCAPES.get(nxt, nxt))
            i += 2
        elif ch == quote and i + 1 < len(body) and body[i + 1] == quote:
            out.append(quote)
            i += 2
        else:
            out.append(ch)
            i += 1
    return "".join(out)


# --- full tokenizer (compile time only) --------------------------------------------------------------

_TOKEN_RE = re.compile(
    r"""
    (?P<ws>\s+)
    |(?P<c>/\*.*?\*/|--(?=[ \t\r\n]|$)[^\n]*|\#[^\n]*)
    |(?P<b>`[^`]*(?:``[^`]*)*`)
    |(?P<s>'[^'\\]*(?:(?:\\.|'')[^'\\]*)*'|"[^"\\]*(?:(?:\\.|"")[^"\\]*)*")
    |(?P<n>(?<![\w$.])(?:\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)(?![\w$]))
    |(?P<w>[\w$]+)
    |(?P<p>\?)
    |(?P<o><=>|<=|>=|<>|!=|:=|\|\||&&|<<|>>|.)
    """,
    re.S | re.X,
)
_TOKEN_RE_NBE = re.compile(_TOKEN_RE.pattern.replace(
    r"""(?P<s>'[^'\\]*(?:(?:\\.|'')[^'\\]*)*'|"[^"\\]*(?:(?:\\.|"")[^"\\]*)*")""",
    r"""(?P<s>'[^']*(?:''[^']*)*'|"[^"]*(?:""[^"]*)*")"""), re.S | re.X)
assert _TOKEN_RE_NBE.pattern != _TOKEN_RE.pattern


@dataclass(frozen=True, slots=True)
class Token:
    """One token: kind is ``w`` word, ``b`` backquoted identifier, ``s``/``n``/``p`` values, ``o`` other."""

    kind: str
    text: str
    start: int
    end: int  # exclusive
    depth: int  # parenthesis depth before the token

    @property
    def upper(self) -> str:
        return self.text.upper() if self.kind == "w" else self.text

    @property
    def name(self) -> str:
        """Identifier text without backquotes, lower case (for comparing with logic table names)."""
        if self.kind == "b":
            return self.text[1:-1].replace("``", "`").lower()
        return self.text.lower()


def tokenize(sql: str) -> list[Token]:
    """Every token except whitespace and comments, with spans and parenthesis depth."""
    tokens: list[Token] = []
    depth = 0
    for m in (_TOKEN_RE_NBE if _READING.get() else _TOKEN_RE).finditer(sql):
        kind = m.lastgroup or "o"
        if kind in ("ws", "c"):
            continue
        text = m.group()
        if text == ")":
            depth = max(0, depth - 1)
        tokens.append(Token(kind, text, m.start(), m.end(), depth))
        if text == "(":
            depth += 1
    return tokens


# --- sqlglot -----------------------------------------------------------------------------------------

#: a leading REPLACE, after any comments (MariaDB's `-- ` needs a space or control character after it)
_REPLACE_RE = re.compile(r"\A((?:\s+|/\*.*?\*/|(?:--(?=[\x00-\x20])|\#)[^\n]*(?:\n|\Z))*)(REPLACE)\b", re.I | re.S)


def is_replace(sql: str) -> bool:
    return _REPLACE_RE.match(sql) is not None


def parse_statement(shape: Shape) -> exp.Expression | None:
    """Parse ``shape.sql`` with sqlglot (MySQL), offsets preserved; None when sqlglot cannot parse it.

    ``?`` becomes ``0`` and a leading ``REPLACE`` becomes ``INSERT `` (same lengths), so every literal in
    the tree carries ``meta['start']`` pointing at the user's value token.
    """
    sql = shape.sql
    if any(kind == "p" for _, _, kind in shape.spans):
        chars = list(sql)
        for start, _, kind in shape.spans:
            if kind == "p":
                chars[start] = "0"
        sql = "".join(chars)
    m = _REPLACE_RE.match(sql)
    if m:
        sql = sql[: m.start(2)] + "INSERT " + sql[m.end(2) :]
    try:
        statements = sqlglot.parse(sql, read=dialect())
    except Exception:  # sqlglot raises ParseError/TokenError and sometimes others on odd input
        return None
    statements = [s for s in statements if s is not None]
    if len(statements) != 1:
        return None
    return statements[0]


def node_start(node: exp.Expression) -> int | None:
    """The text offset sqlglot recorded for an identifier or literal."""
    start = node.meta.get("start") if node.meta else None
    return start if isinstance(start, int) else None


def node_span(node: exp.Expression) -> tuple[int, int] | None:
    """``(start, end_exclusive)`` of an identifier or literal in the original text."""
    meta = node.meta
    if not meta or "start" not in meta:
        return None
    return meta["start"], meta["end"] + 1
