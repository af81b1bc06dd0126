"""Functions whose answer belongs to the proxy's session, not to a backend connection: DATABASE() is
the logical database, CONNECTION_ID() the proxy's id (the one KILL takes), USER() the proxy user, and on
sharded databases LAST_INSERT_ID(), ROW_COUNT() and FOUND_ROWS() of the session's last statement.

They are replaced by literals in the user's text (outside strings and comments); a bare select-list
item keeps its column name with an alias, as `SELECT DATABASE()` names its column `DATABASE()`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from routing.computed import AGGREGATE_NAMES
from routing.parse import tokenize
from routing.split import _TOKEN

_NAMES = "database|schema|connection_id|current_user|session_user|system_user|user|last_insert_id|row_count|found_rows"
CALL = re.compile(rf"\b({_NAMES})\s*\(\s*\)", re.I)
# `CALL.search` scans every position of the text with its alternation (~120 ms for a 1.5 MB IN list); a call
# always ends in empty parentheses, which a literal-led pattern finds at C speed: the names are checked before them
_EMPTY_PARENS = re.compile(r"\(\s*\)")
_NAME_BEFORE = re.compile(rf"\b(?:{_NAMES})\s*$", re.I)


def has_call(sql: str) -> bool:
    """`CALL.search(sql) is not None`, in time linear in the text with a small constant."""
    for parens in _EMPTY_PARENS.finditer(sql):
        end = parens.start()
        start = end
        while start > 0 and sql[start - 1].isspace():
            start -= 1
        if _NAME_BEFORE.search(sql, max(0, start - 16), end):
            return True
    return False


_WITH_ARGUMENT = re.compile(r"\bLAST_INSERT_ID\s*\(\s*[^)\s]", re.I)


def sets_last_insert_id(sql: str) -> bool:
    """Does the text call LAST_INSERT_ID(expr)? It sets the session's value, which only the node that ran it
    knows: it is never substituted, and the proxy asks that node afterwards."""
    return "(" in sql and _WITH_ARGUMENT.search(sql) is not None


_BEFORE_ITEM = re.compile(r"(?:\bSELECT|\bDISTINCT|,)\s*$", re.I)
_AFTER_ITEM = re.compile(r"\s*(?:,|\bFROM\b|\bLIMIT\b|\bINTO\b|\bUNION\b|;|$)", re.I)


_PARENS = re.compile(r"[()]")
_SUBQUERY = re.compile(r"\s*(?:SELECT|WITH)\b", re.I)


def substitute_session_functions(
    sql: str, values: Mapping[str, str], select_values: Mapping[str, str] | None = None
) -> str | None:
    """`values`: lower-case function name -> SQL literal. None when nothing was replaced. A call that is a whole
    select-list item keeps its column name with an alias; one inside parentheses that are no subquery's (a function's
    arguments, a VALUES row) is an expression there, where an alias would not be valid SQL: the top-level select-list
    item holding it, when it has no alias, gets one with its own text (`@a - connection_id()` stays its label).
    CONNECTION_ID() and LAST_INSERT_ID() are BIGINT UNSIGNED on the server, and so is their literal here.
    `select_values`: the literals for a call in the statement's own select list, where no value routes anything
    (there a sharded database's literal may be typed as the function: `IF(0, USER(), 'u@h')`); `values` elsewhere."""
    if "(" not in sql or not has_call(sql):
        return None
    text = sql
    edits: list[tuple[int, int, str]] = []  # (start, end, replacement) in the text, in order
    labelled: set[int] = set()  # the select-list items given an alias (by their start)
    items = _select_items(text)
    # the select list's items where a typed literal may stand (none holding an aggregate: the merge computes such
    # an expression itself from its text, which must hold no function it does not evaluate)
    typed = [] if select_values is None else [(a, b) for a, b in _item_spans(text)
                                              if _AGGREGATE_CALL.search(text, a, b) is None]
    opened: list[bool] = []  # the parentheses open at this point of the text: True for a subquery's

    def walk(start: int, end: int) -> None:
        for paren in _PARENS.finditer(text, start, end):
            if paren.group() == "(":
                opened.append(_SUBQUERY.match(text, paren.end()) is not None)
            elif opened:
                opened.pop()

    for seg in _TOKEN.finditer(text):
        piece = seg.group()
        if piece[:1] in ("'", '"', "`") or piece.startswith(("/*", "--", "#")):
            continue
        walked = seg.start()
        for call in CALL.finditer(piece):
            start = seg.start() + call.start()
            end = seg.start() + call.end()
            walk(walked, start)
            walked = end  # (the call's own parentheses close where they open)
            name = call.group(1).lower()
            in_list = any(a <= start < b for a, b in typed)
            literal = (select_values if in_list and select_values is not None else values).get(name)
            if literal is None:
                continue
            if name in _UNSIGNED and literal.isdigit():
                literal = f"CAST({literal} AS UNSIGNED)"
            before = text[:start]
            after = text[end:]
            if (not opened or opened[-1]) and _BEFORE_ITEM.search(before) and _AFTER_ITEM.match(after):
                alias = call.group().replace("`", "``")
                if literal == "NULL":  # DATABASE() without a database: a column of the function's type, no value
                    literal = f"IF(0, {call.group(1)}(), NULL)"
                edits.append((start, end, f"{literal} AS `{alias}`"))
                continue
            edits.append((start, end, literal))
            item = next((i for i in items if i[0] <= start < i[1]), None)
            if item is not None and item[0] not in labelled:
                labelled.add(item[0])
                label = text[item[0] : item[1]].strip().replace("`", "``")
                edits.append((item[1], item[1], f" AS `{label}`"))
        walk(walked, seg.end())
    if not edits:
        return None
    edits.sort(key=lambda e: (e[0], e[1]))
    result: list[str] = []
    pos = 0
    for start, end, replacement in edits:
        result.append(text[pos:start])
        result.append(replacement)
        pos = end
    result.append(text[pos:])
    return "".join(result)


def printed_back(message: str, sql: str, values: Mapping[str, str],
                 select_values: Mapping[str, str] | None = None) -> str:
    """An error `message` of the substituted text of `sql` (`substitute_session_functions(sql, values,
    select_values)`), with the server's printing of each substituted call's literal (`cast(4 as unsigned)`, `'app'`,
    `-1`) written as it prints the call (`last_insert_id()`, `database()`, `row_count()`), as one server's message
    says it. A literal that two called functions share, or that the user's own text holds too, is left as it is: it
    cannot be told which it was."""
    if select_values is not None:  # the select list's typed literals first: each holds the plain one's printing
        message = printed_back(message, sql, select_values)
    called = {m.group(1).lower() for m in CALL.finditer(sql)}
    printed: dict[tuple[str, str], set[str]] = {}  # (the server's printing, the literal) -> the calls
    for name in called:
        value = values.get(name)
        form = _printed(name, value) if value is not None else None
        if form is not None and value is not None:
            printed.setdefault((form, value), set()).add(_PRINTED_NAME.get(name, name))
    own = CALL.sub(" ", sql)  # the user's text without its calls: where a literal of its own would be
    for (form, literal), names in printed.items():
        if len(names) != 1 or form.lower() not in message.lower():
            continue
        pattern = _occurrence(form)
        if pattern.search(own) is not None or (form[0] == "'" and _occurrence(literal).search(own) is not None):
            continue  # the user's text holds the same literal: which one the message prints is not known
        message = pattern.sub(lambda _m, call=f"{next(iter(names))}()": call, message)
    return message


# how the server prints a call (synonyms as the function they name)
_PRINTED_NAME = {"schema": "database", "session_user": "user", "system_user": "user"}


_TYPED = re.compile(r"IF\(0, (\w+)\(\), (.*)\)", re.S)


def _printed(name: str, literal: str) -> str | None:
    """How the server prints the literal substituted for `name` in an expression of a message (also when typed
    as the function: `IF(0, CONNECTION_ID(), CAST(4 AS UNSIGNED))`, printed
    `if(0,connection_id(),cast(4 as unsigned))`)."""
    typed = _TYPED.fullmatch(literal)
    if typed is not None:
        inner = typed.group(2)
        m = re.fullmatch(r"CAST\((\d+) AS UNSIGNED\)", inner)
        printed = f"cast({m.group(1)} as unsigned)" if m is not None else _printed(name, inner)
        return None if printed is None else f"if(0,{typed.group(1).lower()}(),{printed})"
    if name in _UNSIGNED and literal.isdigit():
        return f"cast({literal} as unsigned)"
    if literal.upper() == "NULL":
        return None  # (NULL is any NULL's printing)
    if literal.startswith("'") and literal.endswith("'") and len(literal) >= 2:
        value = literal[1:-1].replace("''", "'").replace("\\\\", "\\")
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    if re.fullmatch(r"-?\d+", literal):
        return literal
    return None


def _occurrence(form: str) -> re.Pattern[str]:
    """`form` where the message has it as a whole (a number not inside another, a quoted text as it is)."""
    return re.compile(r"(?<![\w.])" + re.escape(form) + r"(?![\w.])" if form[-1].isdigit() else re.escape(form),
                      re.I)


def label_placeholders(sql: str) -> str:
    """`sql` (a SQL-level prepared statement's text) with each unaliased item of its select list that holds a `?`
    given its own text as alias. EXECUTE ... USING runs the text with the values written in, where MariaDB labels
    the column by the statement's text: `?` (also `(?)`), `? + 1`, `CONCAT(?, 'x')`."""
    if "?" not in sql:
        return sql
    edits: list[tuple[int, str]] = []
    for start, end in _select_items(sql):
        item = sql[start:end].strip()
        if not any(t.kind == "p" for t in tokenize(item)):
            continue
        label = "?" if item.replace("(", "").replace(")", "").strip() == "?" else item
        edits.append((end, f" AS `{label.replace('`', '``')}`"))
    for at, alias in reversed(edits):
        sql = sql[:at] + alias + sql[at:]
    return sql


_UNSIGNED = frozenset({"connection_id", "last_insert_id"})
_AGGREGATE_CALL = re.compile(r"\b(?:" + "|".join(sorted(AGGREGATE_NAMES)) + r")\s*\(", re.I)
_SELECT_HEAD = re.compile(
    r"\s*SELECT\b(?:\s+(?:ALL|DISTINCT|DISTINCTROW|HIGH_PRIORITY|STRAIGHT_JOIN|SQL_SMALL_RESULT|SQL_BIG_RESULT|"
    r"SQL_BUFFER_RESULT|SQL_CACHE|SQL_NO_CACHE|SQL_CALC_FOUND_ROWS)\b)*",
    re.I,
)
_ITEM_END = re.compile(r"\b(?:FROM|INTO|WHERE|GROUP|HAVING|ORDER|LIMIT|UNION|EXCEPT|INTERSECT|FOR|LOCK|WINDOW)\b", re.I)
# an item that names its column: `expr AS name`, `expr name` (a name after a closing parenthesis, a quote, a digit)
_ALIASED = re.compile(
    r"(?:\bAS\s+(?:`[^`]*(?:``[^`]*)*`|'[^'\\]*(?:\\.[^'\\]*)*'|\"[^\"\\]*(?:\\.[^\"\\]*)*\"|[\w$]+)"
    r"|[)'\"`\d?]\s+[A-Za-z_$][\w$]*)\s*$",
    re.I,
)


def _select_items(text: str) -> list[tuple[int, int]]:
    """The spans of the unaliased items of the statement's own select list (a text starting with SELECT)."""
    spans = _item_spans(text)
    return _unaliased(text, spans) if spans else []


def _item_spans(text: str) -> list[tuple[int, int]]:
    """The spans of the items of the statement's own select list (none when the text does not start with SELECT)."""
    head = _SELECT_HEAD.match(text)
    if head is None:
        return []
    spans: list[tuple[int, int]] = []
    depth = 0
    start = head.end()
    for seg in _TOKEN.finditer(text, head.end()):
        piece = seg.group()
        if piece[:1] in ("'", '"', "`") or piece.startswith(("/*", "--", "#")):
            continue
        for m in re.finditer(r"[(),;]|" + _ITEM_END.pattern, piece, re.I):
            at = seg.start() + m.start()
            token = m.group()
            if token == "(":
                depth += 1
            elif token == ")":
                depth -= 1
            elif depth == 0:
                spans.append((start, at))
                if token != ",":
                    return spans
                start = at + 1
    spans.append((start, len(text)))
    return spans


def _unaliased(text: str, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The spans without an alias, each ending where its text does (before the spaces that follow it)."""
    trimmed = [(start, start + len(text[start:end].rstrip())) for start, end in spans]
    return [(start, end) for start, end in trimmed if not _ALIASED.search(text, start, end)]
