"""Long IN lists: a statement compiled with each of its long value lists cut to two values (issue 35).

A plan is compiled from a statement's text (sqlglot's parse, the kernel's own tokens, the walks over the tree, the
templates): each step is linear in the text, and together they cost ten times sqlglot's parse of it, for
``WHERE id IN (<50,000 ids>)``. What a list of n values changes in a plan is only the number of value slots in it;
so such a statement is compiled once as its *compact* text, each long list ``v1, v2, ..., vn`` written ``v1, v2``,
and run with the values of its lists (`ListTokens`): conditions evaluate every value of a list
(`routing.conditions.evaluate`), and the list's `rewrite.InListSlot` renders its values (each unit's own, or all).

Only statements whose every such list the compiler makes an `InListSlot` of run that way (`ShardedPlan.expands`):
lists in the WHERE of a SELECT, UPDATE or DELETE itself (not in its subqueries, HAVING or select list) of a plan
that neither runs in steps nor reads a resharding window; any other statement is compiled from its own text, as
before (linear now, at about five times sqlglot's parse).

Why the values need no other care: the plan holds value *slots*; the compact text keeps every other token, in
order, so its slots are the text's with each list's tail taken out, and a list's two slots stand for its values
(`conditions.evaluate`'s ``lists``, `rewrite._emit_list`).
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Sequence
from typing import Any, NamedTuple

from routing.parse import UNKNOWN, Shape, literal_value, scan_shape

LIST_MIN = 64  # values in one list from which it is compiled cut short
# in a shape key: IN ( followed by marks (\x01 a literal, ? a parameter) with only commas between them, then )
_LIST = re.compile(rf"\bIN\s*\(\s*([\x01?](?:\s*,\s*[\x01?]){{{LIST_MIN - 1},}})\s*\)", re.I)
COMPACT_MARK = "\x02"  # begins a compact text's shape key (its plan expects its lists: ShardedPlan.execute)


class ListTokens:
    """The value tokens of one IN list as the statement has them: text spans, kinds, parameters, Python values."""

    __slots__ = ("params", "spans", "sql", "values")

    def __init__(self, sql: str, spans: Sequence[tuple[int, int, str]], params: Sequence[Any],
                 values: Sequence[Any]) -> None:
        self.sql = sql
        self.spans = spans
        self.params = params  # per token: its parameter (a `?`), None for a literal
        self.values = values

    @property
    def text(self) -> str:
        return self.sql[self.spans[0][0]:self.spans[-1][1]]


class Compact(NamedTuple):
    shape: Shape  # the compact text's shape (its key marked with COMPACT_MARK)
    params: list[Any] | None  # the parameters of the `?` it kept
    lists: dict[int, ListTokens]  # by the compact slot of each list's first value


def compact(shape: Shape, params: Sequence[Any] | None) -> Compact | None:
    """The statement with each list of `LIST_MIN` values or more (only commas between them, right after ``IN (``
    and before ``)``) cut to its first two values; None when it has none."""
    spans, sql = shape.spans, shape.sql
    n = len(spans)
    if n < LIST_MIN:
        return None
    runs = _runs(shape)
    if not runs:
        return None
    parts: list[str] = []
    pos = 0
    for k, j in runs:
        parts.append(sql[pos:spans[k + 1][1]])
        pos = spans[j][1]
    parts.append(sql[pos:])
    text = "".join(parts)
    cut = scan_shape(text)
    kept_params: list[Any] | None = [] if params is not None else None
    lists: dict[int, ListTokens] = {}
    p = 0  # parameters before the current token
    slot = 0  # its compact slot
    at = 0  # next token of the full text
    for k, j in runs:
        p, slot = _copy_params(spans, at, k, params, kept_params, p, slot)
        tokens = spans[k:j + 1]
        values: list[Any] = []
        list_params: list[Any] = []
        count = j + 1 - k
        if params is not None and p + count <= len(params) and all(kind == "p" for _, _, kind in tokens):
            # parameters only, all given (a prepared IN list)
            values = list_params = list(params[p:p + count])
            if kept_params is not None:
                kept_params.extend(values[:2])
            p += count
            lists[slot] = ListTokens(sql, tokens, list_params, values)
            slot += 2
            at = j + 1
            continue
        for start, end, kind in tokens:
            if kind == "p":
                given = params is not None and p < len(params)
                value = params[p] if given else UNKNOWN  # type: ignore[index]
                list_params.append(value if given else None)
                if kept_params is not None and given and len(list_params) <= 2:
                    kept_params.append(value)
                p += 1
            else:
                list_params.append(None)
                token = sql[start:end]
                if kind == "n" and token.isdigit():
                    value = int(token)  # what literal_value gives, without its checks
                else:
                    try:
                        value = literal_value(token, kind)
                    except (ValueError, ArithmeticError):
                        value = UNKNOWN
            values.append(value)
        lists[slot] = ListTokens(sql, tokens, list_params, values)
        slot += 2
        at = j + 1
    _copy_params(spans, at, n, params, kept_params, p, slot)
    if len(cut.spans) != slot + (n - at):  # the compact text must hold the same tokens, two per list
        return None
    return Compact(Shape(text, COMPACT_MARK + cut.key, cut.spans), kept_params, lists)


def _runs(shape: Shape) -> list[tuple[int, int]]:
    """(first, last) value token of each list of `LIST_MIN` values or more, found in the shape's key by a regex
    (the key is the text with each value token one mark: a Python loop over the tokens cost half sqlglot's parse)."""
    key, spans = shape.key, shape.spans
    runs: list[tuple[int, int]] = []
    if key.count("\x01") + key.count("?") == len(spans):
        # every mark in the key is a token's: a list's first token is the count of marks before it
        at = 0
        k = 0
        for m in _LIST.finditer(key):
            start, end = m.span(1)
            k += key.count("\x01", at, start) + key.count("?", at, start)
            j = k + key.count("\x01", start, end) + key.count("?", start, end) - 1
            runs.append((k, j))
            k, at = j + 1, end
        return runs
    # a mark character of the text's own (in a comment, an identifier): where each token's mark is in the key, its
    # start in the text less the text of the tokens before it plus one mark for each of them
    marks: list[int] = []
    removed = 0
    for k, (start, end, _) in enumerate(spans):
        marks.append(start - removed + k)
        removed += end - start
    for m in _LIST.finditer(key):
        k = bisect_left(marks, m.start(1))
        if k == len(marks) or marks[k] != m.start(1):
            continue  # not a list of tokens
        j = bisect_left(marks, m.end(1) - 1, k)
        if j == len(marks) or marks[j] != m.end(1) - 1:
            continue
        runs.append((k, j))
    return runs


def _copy_params(spans: Sequence[tuple[int, int, str]], start: int, stop: int, params: Sequence[Any] | None,
                 kept: list[Any] | None, p: int, slot: int) -> tuple[int, int]:
    for i in range(start, stop):
        if spans[i][2] == "p":
            if kept is not None and params is not None and p < len(params):
                kept.append(params[p])
            p += 1
    return p, slot + (stop - start)
