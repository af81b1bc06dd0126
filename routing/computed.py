"""Plans an expression over aggregates (``IFNULL(SUM(x), 0)``, ``SUM(a) / COUNT(*)``) for a multi-node SELECT.

Why: such an expression can only be computed after the nodes' partial aggregates are merged. The plan:
each aggregate of the expression becomes a derived column of the node query, merged as the aggregate it is
(AVG as a SUM and a COUNT, divided as MariaDB divides); the expression itself stays in the node query (the
column definition MariaDB gives it is the one the client must get); and the merge computes it from the
merged values (`merge.compute`), from the expression text with each aggregate replaced by ``__c<column>``.
Literals outside the aggregates stay value slots, so one plan serves every statement of the shape.

What cannot be computed exactly is refused here, at plan time, naming the construct.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError

from merge.compute import unsupported
from merge.spec import AggregateItem, AggregateKind
from routing.parse import Token

AGGREGATE_NAMES = frozenset({
    "COUNT", "SUM", "MIN", "MAX", "AVG", "BIT_AND", "BIT_OR", "BIT_XOR", "GROUP_CONCAT", "STD", "STDDEV",
    "STDDEV_POP", "STDDEV_SAMP", "VARIANCE", "VAR_POP", "VAR_SAMP", "JSON_ARRAYAGG", "JSON_OBJECTAGG",
})
_MERGEABLE = {
    exp.Count: AggregateKind.COUNT, exp.Sum: AggregateKind.SUM, exp.Min: AggregateKind.MIN,
    exp.Max: AggregateKind.MAX, exp.BitwiseXorAgg: AggregateKind.BIT_XOR, exp.BitwiseOrAgg: AggregateKind.BIT_OR,
    exp.BitwiseAndAgg: AggregateKind.BIT_AND,
}


class ComputedRefusal(Exception):
    """The expression cannot be computed exactly after the merge; the message names the construct."""


def aggregate_spans(tokens: Sequence[Token], a: int, b: int) -> list[tuple[int, int]]:
    """Token ranges ``[name, close paren]`` (inclusive) of the aggregate calls in tokens[a:b]."""
    spans: list[tuple[int, int]] = []
    i = a
    while i < b:
        t = tokens[i]
        if t.kind == "w" and t.upper in AGGREGATE_NAMES and i + 1 < b and tokens[i + 1].text == "(":
            depth = tokens[i + 1].depth
            close = next((j for j in range(i + 2, b) if tokens[j].text == ")" and tokens[j].depth == depth), None)
            if close is None:
                raise ComputedRefusal(f"the proxy could not read the aggregate call at {t.text}")
            spans.append((i, close))
            i = close + 1
            continue
        i += 1
    return spans


class ComputedPlanner:
    """Adds the derived columns of computed items to a select rewrite and collects their expressions.

    `add_derived(pieces, prefix) -> column index`, `pieces(first, last)` (template pieces of a token range),
    `note(index, node)` and `want_weight(index)` are the select rewriter's."""

    def __init__(self, sql: str, tokens: Sequence[Token], add_derived: Callable[..., int],
                 pieces: Callable[[int, int], tuple[Any, ...]], note: Callable[[int, exp.Expression], None],
                 want_weight: Callable[[int], None], expression_template: Callable[..., Any],
                 distinct_source: Callable[[tuple[Any, ...], exp.Expression, bool], int] | None = None) -> None:
        self.sql = sql
        self.tokens = tokens
        self.add_derived = add_derived
        self.pieces = pieces
        self.note = note
        self.want_weight = want_weight
        self.expression_template = expression_template  # (start, end, edits) -> Template
        self.distinct_source = distinct_source  # (argument pieces, its node, wants a weight) -> its column
        self.computed: list[tuple[int, Any]] = []  # (column index, Template of the expression)
        self.increment_index: int | None = None

    def plan(self, index: int, first: int, last: int, aggregates: list[AggregateItem]) -> None:
        """Column `index` holds the expression of tokens[first:last]; compute it after the merge."""
        tokens = self.tokens
        text = self.sql[tokens[first].start : tokens[last - 1].end]
        if any(tok.upper == "SELECT" for tok in tokens[first:last]):
            raise ComputedRefusal(f"the select item {text} computes with an aggregate and a subquery")
        edits: list[tuple[int, int, str]] = []
        for start, close in aggregate_spans(tokens, first, last):
            if close + 1 < last and tokens[close + 1].upper == "OVER":
                raise ComputedRefusal(f"the window function {text} over several data nodes is not supported")
            call = self.sql[tokens[start].start : tokens[close].end]
            try:
                node = sqlglot.parse_one(call, read="mysql")
            except (ParseError, ValueError) as exc:
                raise ComputedRefusal(f"the proxy could not read the aggregate {call}") from exc
            placeholder = self._aggregate(node, call, start, close, aggregates)
            edits.append((tokens[start].start, tokens[close].end, placeholder))
        template = self.expression_template(tokens[first].start, tokens[last - 1].end, edits)
        check = "".join(p if isinstance(p, str) else "0" if _is_value(p) else "\x00" for p in template.pieces)
        if "\x00" in check:
            raise ComputedRefusal(f"the select item {text} names a table outside its aggregates")
        bad = unsupported(check)
        if bad is None:
            bad = _outside_column(check)
        if bad is not None:
            raise ComputedRefusal(
                f"{bad} in the select item {text} cannot be computed by the proxy after merging the nodes' "
                "aggregates")
        self.increment()
        self.computed.append((index, template))

    def increment(self) -> int:
        """The derived column carrying the session's div_precision_increment (added once)."""
        if self.increment_index is None:
            self.increment_index = self.add_derived(("@@div_precision_increment",), "DIV_PRECISION_DERIVED")
        return self.increment_index

    def _aggregate(self, node: exp.Expression, call: str, start: int, close: int,
                   aggregates: list[AggregateItem]) -> str:
        if isinstance(node.this, exp.Distinct):
            return self._distinct(node, call, start, close, aggregates)
        if isinstance(node, exp.Avg):
            arg = self.pieces(start + 2, close)
            count_i = self.add_derived(("COUNT(", *arg, ")"), "AVG_DERIVED_COUNT")
            sum_i = self.add_derived(("SUM(", *arg, ")"), "AVG_DERIVED_SUM")
            aggregates.append(AggregateItem(AggregateKind.COUNT, count_i))
            aggregates.append(AggregateItem(AggregateKind.SUM, sum_i))
            return f" (__c{sum_i} / __c{count_i}) "
        kind = _MERGEABLE.get(type(node))
        if kind is None:
            raise ComputedRefusal(f"the aggregate {call} inside an expression over several data nodes is not "
                                  "supported")
        index = self.add_derived(self.pieces(start, close + 1), "AGGREGATION_EXPR_DERIVED")
        aggregates.append(AggregateItem(kind, index))
        if kind in (AggregateKind.MIN, AggregateKind.MAX):
            self.note(index, node)
            self.want_weight(index)
        return f" __c{index} "


    _DISTINCT_KINDS = {exp.Count: AggregateKind.COUNT_DISTINCT, exp.Sum: AggregateKind.SUM_DISTINCT,
                       exp.Avg: AggregateKind.AVG_DISTINCT}

    def _distinct(self, node: exp.Expression, call: str, start: int, close: int,
                  aggregates: list[AggregateItem]) -> str:
        """COUNT / SUM / AVG(DISTINCT ...) inside an expression: its arguments join the nodes' GROUP BY, the
        merge unions the values (merge.distinct); MIN / MAX(DISTINCT x) are MIN / MAX(x)."""
        tokens = self.tokens
        kind = self._DISTINCT_KINDS.get(type(node))
        if isinstance(node, exp.Min | exp.Max):
            index = self.add_derived(self.pieces(start, close + 1), "AGGREGATION_EXPR_DERIVED")
            aggregates.append(AggregateItem(_MERGEABLE[type(node)], index))
            self.note(index, node)
            self.want_weight(index)
            return f" __c{index} "
        if kind is None or self.distinct_source is None:
            raise ComputedRefusal(f"{call}: this DISTINCT aggregate inside an expression over several data nodes "
                                  "is not supported; select it as an item of its own")
        open_i = start + 1
        depth = tokens[open_i].depth + 1
        first = open_i + 2  # after DISTINCT
        commas = [i for i in range(first, close) if tokens[i].text == "," and tokens[i].depth == depth]
        bounds = [first - 1, *commas, close]
        spans = [(bounds[j] + 1, bounds[j + 1]) for j in range(len(bounds) - 1)]
        args = node.this.expressions
        if len(spans) != len(args) or any(x >= y for x, y in spans) or (
                kind is not AggregateKind.COUNT_DISTINCT and len(args) != 1):
            raise ComputedRefusal(f"the proxy could not read the arguments of {call}")
        sources = [self.distinct_source(self.pieces(x, y), arg, kind is AggregateKind.COUNT_DISTINCT)
                   for (x, y), arg in zip(spans, args, strict=True)]
        index = self.add_derived(self.pieces(start, close + 1), "AGGREGATION_EXPR_DERIVED")
        aggregates.append(AggregateItem(kind, index, distinct_index=sources[0], distinct_more=tuple(sources[1:])))
        return f" __c{index} "


def _is_value(piece: Any) -> bool:
    return type(piece).__name__ == "ValueSlot"


def _outside_column(check: str) -> str | None:
    tree = sqlglot.parse_one(check, read="mysql")
    for column in tree.find_all(exp.Column):
        if not column.name.startswith("__c"):
            return f"the column {column.sql(dialect='mysql')} outside the aggregates"
    return None
