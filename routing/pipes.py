"""`||` under sql_mode PIPES_AS_CONCAT: the text the kernel routes, with each `a || b || c` written `CONCAT(a, b, c)`.

Why a rewrite: sqlglot's MySQL parser reads `||` as OR only (and cannot be extended: it is compiled), and a value
concatenated, routed as OR, could be looked for on the wrong node. `||` then binds tighter than every binary
operator (MariaDB: between the unary operators and `^`), so its operands are the shortest primaries around it:
a literal (with its introducer, adjacent strings), a name, a variable, a `?`, a call, a parenthesis, `CASE ... END`,
each with its unary prefixes and a `COLLATE` suffix. CONCAT has the same meaning (NULL when one operand is NULL,
numbers as their text), so the rewritten text is what the units carry; a select item that loses its `||` is
labelled with its own text, as MariaDB labels it. What cannot be delimited so is refused (`RoutingError`).
"""

from __future__ import annotations

from routing.errors import RoutingError
from routing.parse import Token, tokenize

_PREFIX = {"-", "+", "~", "!"}
_INTRODUCED = {"x", "b", "n", "date", "time", "timestamp"}
# words that end or join expressions: never a function name before `(`, never an operand
_KEYWORDS = {
    "and",
    "or",
    "xor",
    "not",
    "in",
    "is",
    "like",
    "rlike",
    "regexp",
    "between",
    "select",
    "where",
    "on",
    "by",
    "when",
    "then",
    "else",
    "as",
    "values",
    "value",
    "set",
    "having",
    "exists",
    "any",
    "all",
    "some",
    "return",
    "using",
    "div",
    "mod",
    "escape",
    "sounds",
    "case",
    "end",
    "distinct",
    "from",
    "limit",
    "into",
    "interval",
    "union",
    "except",
    "intersect",
    "with",
    "over",
    "partition",
    "order",
    "group",
    "duplicate",
    "update",
    "key",
}
_ITEM_END = {
    "from",
    "into",
    "where",
    "group",
    "having",
    "order",
    "limit",
    "union",
    "except",
    "intersect",
    "for",
    "window",
    "procedure",
    "lock",
}
_MODIFIERS = {
    "all",
    "distinct",
    "distinctrow",
    "high_priority",
    "straight_join",
    "sql_small_result",
    "sql_big_result",
    "sql_buffer_result",
    "sql_cache",
    "sql_no_cache",
    "sql_calc_found_rows",
}


def _refuse(sql: str, why: str) -> RoutingError:
    return RoutingError(
        f"under sql_mode PIPES_AS_CONCAT the proxy cannot read `||` here ({why}): write "
        f"CONCAT(a, b) instead — {sql[:120]}"
    )


def _word(t: Token) -> str:
    return t.text.lower() if t.kind == "w" else ""


def _matching(tokens: list[Token], i: int, step: int) -> int:
    """The index of the parenthesis that closes (step 1) or opens (step -1) the one at `i`."""
    depth = 0
    open_, close = ("(", ")") if step == 1 else (")", "(")
    while 0 <= i < len(tokens):
        if tokens[i].text == open_:
            depth += 1
        elif tokens[i].text == close:
            depth -= 1
            if depth == 0:
                return i
        i += step
    return -1


def _case_end(tokens: list[Token], i: int, step: int) -> int:
    """The END that closes the CASE at `i` (step 1), or the CASE that opens the END at `i` (step -1)."""
    depth = 0
    first, last = ("case", "end") if step == 1 else ("end", "case")
    while 0 <= i < len(tokens):
        w = _word(tokens[i])
        if w == first:
            depth += 1
        elif w == last:
            depth -= 1
            if depth == 0:
                return i
        i += step
    return -1


def _right(tokens: list[Token], i: int) -> int:
    """The last token of the operand that starts at `i` (-1: none)."""
    while i < len(tokens) and (tokens[i].text in _PREFIX or _word(tokens[i]) == "binary"):
        i += 1
    if i >= len(tokens):
        return -1
    t = tokens[i]
    w = _word(t)
    if t.text == "(":
        end = _matching(tokens, i, 1)
    elif w == "case":
        end = _case_end(tokens, i, 1)
    elif t.kind in ("s", "n", "p") or (t.kind in ("w", "b") and w not in _KEYWORDS):
        end = i
        if t.kind == "w" and i + 1 < len(tokens) and tokens[i + 1].text == "(":
            end = _matching(tokens, i + 1, 1)
        while end + 1 < len(tokens) and tokens[end + 1].kind == "s" and tokens[end].kind in ("s", "w"):
            end += 1  # adjacent strings, an introducer's string
        while end + 2 < len(tokens) and tokens[end + 1].text == "." and tokens[end + 2].kind in ("w", "b"):
            end += 2
    elif t.text == "@":
        end = i + 1 if i + 1 < len(tokens) and tokens[i + 1].text == "@" else i
        if end + 1 >= len(tokens) or tokens[end + 1].kind not in ("w", "b", "s"):
            return -1
        end += 1
        while end + 2 < len(tokens) and tokens[end + 1].text == "." and tokens[end + 2].kind in ("w", "b"):
            end += 2
    else:
        return -1
    if end < 0:
        return -1
    if end + 2 < len(tokens) and _word(tokens[end + 1]) == "collate":
        end += 2
    return end


def _left(tokens: list[Token], i: int) -> int:
    """The first token of the operand that ends at `i` (-1: none)."""
    if i >= 2 and _word(tokens[i - 1]) == "collate":
        i -= 2
    if i < 0:
        return -1
    t = tokens[i]
    w = _word(t)
    if t.text == ")":
        start = _matching(tokens, i, -1)
        if start > 0 and tokens[start - 1].kind == "w" and _word(tokens[start - 1]) not in _KEYWORDS:
            start -= 1  # a call
    elif w == "end":
        start = _case_end(tokens, i, -1)
    elif t.kind in ("s", "n", "p") or (t.kind in ("w", "b") and w not in _KEYWORDS):
        start = i
        while start >= 2 and tokens[start - 1].text == "." and tokens[start - 2].kind in ("w", "b"):
            start -= 2
        while (
            start >= 1
            and tokens[start].kind == "s"
            and (
                tokens[start - 1].kind == "s"
                or (
                    tokens[start - 1].kind == "w"
                    and (tokens[start - 1].text.startswith("_") or _word(tokens[start - 1]) in _INTRODUCED)
                )
            )
        ):
            start -= 1
        while start >= 1 and tokens[start - 1].text == "@":
            start -= 1
    else:
        return -1
    if start < 0:
        return -1
    while start >= 1 and (tokens[start - 1].text in _PREFIX or _word(tokens[start - 1]) == "binary"):
        before = tokens[start - 2] if start >= 2 else None
        operand_end = before is not None and (
            before.kind in ("s", "n", "p", "b")
            or before.text == ")"
            or (before.kind == "w" and _word(before) not in _KEYWORDS)
        )
        if tokens[start - 1].text in ("-", "+") and operand_end:
            break  # a binary minus / plus, below `||`
        start -= 1
    return start


def _select_items(tokens: list[Token]) -> list[tuple[int, int]]:
    """The top-level select list's items (first, last token index) of a SELECT statement."""
    i = 0
    while i < len(tokens) and tokens[i].text == "(":
        i += 1
    if i >= len(tokens) or _word(tokens[i]) != "select":
        return []
    i += 1
    depth0 = tokens[i].depth if i < len(tokens) else 0
    while i < len(tokens) and _word(tokens[i]) in _MODIFIERS:
        i += 1
    items: list[tuple[int, int]] = []
    start = i
    while i < len(tokens):
        t = tokens[i]
        if (t.text == ")" and t.depth < depth0) or (
            t.depth == depth0 and (t.text in (",", ";") or _word(t) in _ITEM_END)
        ):
            items.append((start, i - 1))
            if t.text != ",":
                break
            start = i + 1
        i += 1
    else:
        items.append((start, len(tokens) - 1))
    return [(a, b) for a, b in items if a <= b]


def _has_alias(tokens: list[Token], first: int, last: int) -> bool:
    if last - first >= 1 and _word(tokens[last - 1]) == "as":
        return True
    end = tokens[last]
    if last > first and end.kind in ("w", "b", "s") and _word(end) not in _KEYWORDS:
        before = tokens[last - 1]
        if _word(before) == "collate" or before.text in (".", "@") or (end.kind == "s" and before.kind in ("s", "w")):
            return False
        return (before.kind in ("w", "b", "s", "n", "p") and _word(before) not in _KEYWORDS) or before.text == ")"
    return False


def _labelled(sql: str, tokens: list[Token]) -> str:
    """`sql` with each top-level select item that holds `||` and no alias given its own text as alias."""
    out = sql
    for first, last in reversed(_select_items(tokens)):
        if not any(t.text == "||" for t in tokens[first : last + 1]) or _has_alias(tokens, first, last):
            continue
        label = sql[tokens[first].start : tokens[last].end]
        end = tokens[last].end
        out = out[:end] + " AS `" + label.replace("`", "``") + "`" + out[end:]
    return out


def pipes_as_concat(sql: str) -> str:
    """`sql` (read under PIPES_AS_CONCAT) with every `||` written as CONCAT; raises RoutingError when an operand
    of `||` cannot be delimited."""
    tokens = tokenize(sql)
    if not any(t.text == "||" for t in tokens):
        return sql
    sql = _labelled(sql, tokens)
    for _ in range(sql.count("||") + 1):
        tokens = tokenize(sql)
        at = next((k for k, t in enumerate(tokens) if t.text == "||"), None)
        if at is None:
            return sql
        first = _left(tokens, at - 1)
        if first < 0:
            raise _refuse(sql, "its left operand")
        operands = [(first, at - 1)]
        k = at
        while k < len(tokens) and tokens[k].text == "||" and tokens[k].depth == tokens[at].depth:
            end = _right(tokens, k + 1)
            if end < 0:
                raise _refuse(sql, "its right operand")
            operands.append((k + 1, end))
            k = end + 1
        texts = [sql[tokens[a].start : tokens[b].end] for a, b in operands]
        sql = sql[: tokens[first].start] + "CONCAT(" + ", ".join(texts) + ")" + sql[tokens[k - 1].end :]
    return sql


__all__ = ["pipes_as_concat"]
