"""HAVING evaluated over merged rows.

Why here: a group's aggregate is only final after merging, so a node cannot filter groups whose rows are
spread over several shards. The kernel sends the query to the nodes without HAVING and fills
`MergeSpec.having_sql` with the HAVING expression (MySQL syntax, no ``HAVING`` keyword) in which every
column or aggregate is an output column: either referenced by its name/alias (``cnt > 2``), or written
exactly as an output column's name (MySQL names an unaliased ``COUNT(*)`` column ``COUNT(*)``; matching
is by normalized SQL text, case-insensitive). Aggregates that appear only in HAVING must be added as
derived columns (with an `AggregateItem`) whose name is their SQL text or an alias used in having_sql.

The expression is parsed once with sqlglot and compiled to closures. Supported: comparisons (incl.
``<=>``), AND/OR/XOR/NOT, IS [NOT] NULL/TRUE/FALSE, IN, BETWEEN, LIKE, + - * / DIV MOD, unary minus,
parentheses, number/string/NULL/TRUE/FALSE literals. Semantics follow MySQL: three-valued logic, NULL
arithmetic, division by zero is NULL, number-vs-string compares numerically, string-vs-string uses the
column's collation (approximated as in `merge.collations`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal, InvalidOperation
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError

from merge import coltypes as t
from merge.errors import MergeError
from merge.keys import Row, column_collation, value_key, weight_index
from merge.numfmt import DEC_CTX
from merge.spec import ColumnMeta
from merge.stages import NOTHING
from merge.weights import WeightDecoder

Value = int | Decimal | float | bytes | None
Evaluator = Callable[[Row], Any]
_NUMERIC_PREFIX = re.compile(rb"^\s*[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")


def _normalize(sql: str) -> str:
    try:
        return sqlglot.parse_one(sql, read="mysql").sql(dialect="mysql").lower()
    except (ParseError, ValueError):
        return sql.strip().lower()


def to_number(v: Value) -> int | Decimal | float | None:
    """MySQL's string-to-number conversion: the longest numeric prefix, 0 when there is none."""
    if v is None or isinstance(v, int | Decimal | float):
        return v
    m = _NUMERIC_PREFIX.match(v)
    if not m:
        return 0
    text = m.group(0).strip().decode("ascii")
    if m.group(2):
        return float(text)
    try:
        return int(text)
    except ValueError:
        return Decimal(text)


def _truth(v: Value) -> bool | None:
    n = to_number(v)
    return None if n is None else n != 0


def _arith(op: str, a: Value, b: Value) -> Value:
    x, y = to_number(a), to_number(b)
    if x is None or y is None:
        return None
    if isinstance(x, float) or isinstance(y, float):
        fx, fy = float(x), float(y)
        if op in ("/", "div", "%") and fy == 0:
            return None
        if op == "+":
            return fx + fy
        if op == "-":
            return fx - fy
        if op == "*":
            return fx * fy
        if op == "/":
            return fx / fy
        if op == "div":
            return int(fx / fy)
        return math.fmod(fx, fy)
    if op == "+":
        return x + y if isinstance(x, int) and isinstance(y, int) else DEC_CTX.add(Decimal(x), Decimal(y))
    if op == "-":
        return x - y if isinstance(x, int) and isinstance(y, int) else DEC_CTX.subtract(Decimal(x), Decimal(y))
    if op == "*":
        return x * y if isinstance(x, int) and isinstance(y, int) else DEC_CTX.multiply(Decimal(x), Decimal(y))
    if y == 0:
        return None
    if op == "/":
        return DEC_CTX.divide(Decimal(x), Decimal(y))
    if op == "div":
        return int(DEC_CTX.divide_int(Decimal(x), Decimal(y)))
    return DEC_CTX.remainder(Decimal(x), Decimal(y))  # sign of the dividend, like MySQL


_TEMPORAL = re.compile(
    rb"\s*(\d{1,4})-(\d{1,2})-(\d{1,2})(?:[ T](\d{1,2})(?::(\d{1,2})(?::(\d{1,2})(?:\.(\d{1,6}))?)?)?)?\s*$"
)


def _temporal_key(v: bytes) -> tuple[int, ...] | None:
    """A DATE / DATETIME text as (y, m, d, h, mi, s, us), missing parts 0 (MariaDB's conversion of a string
    compared with a temporal column); None when it is no date."""
    m = _TEMPORAL.match(v)
    if m is None:
        return None
    y, mo, d, h, mi, sec, frac = m.groups()
    micros = int(frac.ljust(6, b"0")) if frac else 0
    return (int(y), int(mo), int(d), int(h or 0), int(mi or 0), int(sec or 0), micros)


def _compare(a: Value, b: Value, key: Callable[[bytes], Any] | None) -> int | None:
    if a is None or b is None:
        return None
    if isinstance(a, bytes) and isinstance(b, bytes):
        ka, kb = (key(a), key(b)) if key is not None else (a, b)
        if ka is None or kb is None:
            return None
    else:
        ka, kb = to_number(a), to_number(b)
    return int(ka > kb) - int(ka < kb)


def _like_regex(pattern: bytes, ci: bool) -> re.Pattern[bytes]:
    out = bytearray()
    i = 0
    while i < len(pattern):
        c = pattern[i : i + 1]
        if c == b"\\" and i + 1 < len(pattern):
            out += re.escape(pattern[i + 1 : i + 2])
            i += 2
            continue
        out += b".*" if c == b"%" else b"." if c == b"_" else re.escape(c)
        i += 1
    return re.compile(bytes(out) + b"\\Z", re.DOTALL | (re.IGNORECASE if ci else 0))


_COMPARISONS: dict[type[exp.Expression], Callable[[int], bool]] = {
    exp.EQ: lambda c: c == 0,
    exp.NEQ: lambda c: c != 0,
    exp.GT: lambda c: c > 0,
    exp.GTE: lambda c: c >= 0,
    exp.LT: lambda c: c < 0,
    exp.LTE: lambda c: c <= 0,
}
_ARITHMETIC: dict[type[exp.Expression], str] = {
    exp.Add: "+",
    exp.Sub: "-",
    exp.Mul: "*",
    exp.Div: "/",
    exp.IntDiv: "div",
    exp.Mod: "%",
}


class HavingCompiler:
    """Compiles a HAVING expression against the output columns of a merge."""

    def __init__(
        self, columns: Sequence[ColumnMeta], bindings: Sequence[tuple[str, int]] = (),
        text_comparisons: Sequence[tuple[str, int, int]] = (), weights: Mapping[int, int] | None = None,
    ) -> None:
        self.columns = columns
        # comparison -> (value column, its weight column, the literal's weight column): by the nodes' weights
        self._weighted: dict[str, tuple[int, int, int]] = {}
        for text, value, literal in text_comparisons:
            wi = weight_index(value, columns, weights)
            if wi is not None and 0 <= literal < len(columns):
                self._weighted[text] = (value, wi, literal)
        self._by_text: dict[str, int] = {}
        self._by_name: dict[str, int] = {}
        # names the kernel resolved as MariaDB does (select alias vs GROUP BY column): they win
        self._bound = {name: index for name, index in bindings if 0 <= index < len(columns)}
        for i, col in enumerate(columns):
            self._by_name.setdefault(col.name.lower(), i)
            self._by_text.setdefault(_normalize(col.name), i)

    def compile(self, sql: str) -> Evaluator:
        try:
            tree = sqlglot.parse_one(sql, read="mysql")
        except (ParseError, ValueError) as exc:
            raise MergeError(f"cannot parse HAVING expression {sql!r}: {exc}") from exc
        if not isinstance(tree, exp.Expression):
            raise MergeError(f"cannot parse HAVING expression {sql!r}")
        return self._compile(tree)

    def _column_index(self, node: exp.Expression) -> int | None:
        if isinstance(node, exp.Column | exp.AggFunc) and self._bound:
            bound = self._bound.get(node.sql(dialect="mysql").lower())
            if bound is not None:
                return bound
        index = self._by_text.get(node.sql(dialect="mysql").lower())
        if index is None and isinstance(node, exp.Column):
            index = self._by_name.get(node.name.lower())
        return index

    def _string_key(self, node: exp.Expression) -> Callable[[bytes], Any] | None:
        """How two texts compare when `node` is a column: its collation, or as dates / datetimes for a
        temporal column (``created > '2024-01-03 10:00'`` compares DATETIMEs, not strings)."""
        index = self._column_index(node) if isinstance(node, exp.Column | exp.AggFunc) else None
        if index is None:
            return None
        col = self.columns[index]
        if col.type_code in t.TEXT_ORDERED_TEMPORAL_TYPES:
            return _temporal_key
        return value_key(col) if col.type_code in t.STRING_TYPES else None

    def _ref(self, index: int) -> Evaluator:
        col = self.columns[index]
        code = col.type_code
        if code in t.INTEGER_TYPES:
            return lambda row: None if row[index] is None else int(row[index])  # type: ignore[arg-type]
        if code in t.DECIMAL_TYPES:
            return lambda row: None if row[index] is None else Decimal(row[index].decode())  # type: ignore[union-attr]
        if code in t.FLOAT_TYPES:
            return lambda row: None if row[index] is None else float(row[index])  # type: ignore[arg-type]
        return lambda row: row[index]

    def _compile(self, node: exp.Expression) -> Evaluator:
        if isinstance(node, exp.Paren):
            return self._compile(node.this)
        if not isinstance(node, exp.Literal | exp.Null | exp.Boolean):
            index = self._column_index(node)
            if index is not None:
                return self._ref(index)
        if isinstance(node, exp.Literal):
            return self._literal(node)
        if isinstance(node, exp.Null):
            return lambda row: None
        if isinstance(node, exp.Boolean):
            value = 1 if node.this else 0
            return lambda row: value
        if isinstance(node, exp.Column | exp.AggFunc):
            raise MergeError(
                f"HAVING references {node.sql(dialect='mysql')}, which is not an output column; "
                "it must be selected (or added as a derived column) to be evaluated after merging"
            )
        if isinstance(node, exp.And | exp.Or | exp.Xor):
            return self._logical(node)
        if isinstance(node, exp.Not):
            inner = self._compile(node.this)

            def not_(row: Row) -> bool | None:
                v = _truth(inner(row))
                return None if v is None else not v

            return not_
        if type(node) in _COMPARISONS:
            return self._comparison(node, _COMPARISONS[type(node)])
        if isinstance(node, exp.NullSafeEQ):
            left, right = self._compile(node.this), self._compile(node.expression)
            key = self._string_key(node.this) or self._string_key(node.expression)
            weighted = self._weighted_compare(node)
            if weighted is not None:
                return lambda row: (left(row) is None) if weighted(row) is None else weighted(row) == 0

            def null_safe_eq(row: Row) -> bool:
                a, b = left(row), right(row)
                if a is None or b is None:
                    return a is None and b is None
                return _compare(a, b, key) == 0

            return null_safe_eq
        if type(node) in _ARITHMETIC:
            op = _ARITHMETIC[type(node)]
            left, right = self._compile(node.this), self._compile(node.expression)
            return lambda row: _arith(op, left(row), right(row))
        if isinstance(node, exp.Neg):
            inner = self._compile(node.this)
            return lambda row: _arith("-", 0, inner(row))
        if isinstance(node, exp.Is):
            return self._is(node)
        if isinstance(node, exp.In):
            return self._in(node)
        if isinstance(node, exp.Between):
            return self._between(node)
        if isinstance(node, exp.Like):
            return self._like(node)
        raise MergeError(f"HAVING expression {node.sql(dialect='mysql')!r} is not supported by the merge")

    @staticmethod
    def _literal(node: exp.Literal) -> Evaluator:
        text: str = node.this
        value: Value
        if node.is_string:
            value = text.encode("utf-8")
        elif "e" in text.lower():
            value = float(text)
        else:
            try:
                value = int(text)
            except ValueError:
                try:
                    value = Decimal(text)
                except InvalidOperation as exc:
                    raise MergeError(f"unsupported literal {text!r} in HAVING") from exc
        return lambda row: value

    def _logical(self, node: exp.Expression) -> Evaluator:
        left, right = self._compile(node.this), self._compile(node.expression)
        if isinstance(node, exp.And):

            def and_(row: Row) -> bool | None:
                a = _truth(left(row))
                if a is False:
                    return False
                b = _truth(right(row))
                if b is False:
                    return False
                return None if a is None or b is None else True

            return and_
        if isinstance(node, exp.Or):

            def or_(row: Row) -> bool | None:
                a = _truth(left(row))
                if a is True:
                    return True
                b = _truth(right(row))
                if b is True:
                    return True
                return None if a is None or b is None else False

            return or_

        def xor(row: Row) -> bool | None:
            a, b = _truth(left(row)), _truth(right(row))
            return None if a is None or b is None else a != b

        return xor

    def _weighted_compare(self, node: exp.Expression) -> Callable[[Row], int | None] | None:
        """cmp(left, right) by weights, when the kernel provided them for this comparison."""
        found = self._weighted.get(node.sql(dialect="mysql").lower()) if self._weighted else None
        if found is None:
            return None
        value, wi, literal = found
        value_key = WeightDecoder(False).order
        literal_key = WeightDecoder(False).order
        fallback_key = self._string_key(node.this) or self._string_key(node.expression)
        value_left = not isinstance(node.this, exp.Literal)
        left, right = self._compile(node.this), self._compile(node.expression)

        def compare(row: Row) -> int | None:
            v, vw, lw = row[value], row[wi], row[literal]
            if v is None:
                return None
            if vw is None or lw is None:  # a binary string: its bytes (no weights)
                return _compare(left(row), right(row), fallback_key)
            a, b = value_key(vw), literal_key(lw)
            c = int(a > b) - int(a < b)
            return c if value_left else -c

        return compare

    def _comparison(self, node: exp.Expression, test: Callable[[int], bool]) -> Evaluator:
        weighted = self._weighted_compare(node)
        if weighted is not None:

            def by_weights(row: Row) -> bool | None:
                c = weighted(row)
                return None if c is None else test(c)

            return by_weights
        left, right = self._compile(node.this), self._compile(node.expression)
        key = self._string_key(node.this) or self._string_key(node.expression)

        def compare(row: Row) -> bool | None:
            c = _compare(left(row), right(row), key)
            return None if c is None else test(c)

        return compare

    def _is(self, node: exp.Is) -> Evaluator:
        inner = self._compile(node.this)
        target = node.expression
        if isinstance(target, exp.Null):
            return lambda row: inner(row) is None
        if isinstance(target, exp.Boolean):
            wanted = bool(target.this)
            return lambda row: _truth(inner(row)) is wanted
        raise MergeError(f"HAVING expression {node.sql(dialect='mysql')!r} is not supported by the merge")

    def _in(self, node: exp.In) -> Evaluator:
        if not node.expressions:
            raise MergeError(f"HAVING expression {node.sql(dialect='mysql')!r} is not supported by the merge")
        inner = self._compile(node.this)
        options = [self._compile(e) for e in node.expressions]
        key = self._string_key(node.this)

        def in_(row: Row) -> bool | None:
            v = inner(row)
            if v is None:
                return None
            unknown = False
            for option in options:
                c = _compare(v, option(row), key)
                if c == 0:
                    return True
                unknown = unknown or c is None
            return None if unknown else False

        return in_

    def _between(self, node: exp.Between) -> Evaluator:
        inner, low, high = (self._compile(node.this), self._compile(node.args["low"]),
                            self._compile(node.args["high"]))
        key = self._string_key(node.this)

        def between(row: Row) -> bool | None:
            v = inner(row)
            lo, hi = _compare(v, low(row), key), _compare(v, high(row), key)
            if (lo is not None and lo < 0) or (hi is not None and hi > 0):
                return False
            return None if lo is None or hi is None else True

        return between

    def _like(self, node: exp.Like) -> Evaluator:
        inner, pattern = self._compile(node.this), self._compile(node.expression)
        ci = False
        index = self._column_index(node.this)
        if index is not None:
            col = self.columns[index]
            ci = col.type_code in t.STRING_TYPES and column_collation(col).sensitivity == "ci"
        cache: dict[bytes, re.Pattern[bytes]] = {}

        def like(row: Row) -> bool | None:
            v, p = inner(row), pattern(row)
            if v is None or p is None:
                return None
            vb = v if isinstance(v, bytes) else str(v).encode()
            pb = p if isinstance(p, bytes) else str(p).encode()
            rx = cache.get(pb)
            if rx is None:
                rx = cache[pb] = _like_regex(pb, ci)
            return rx.match(vb) is not None

        return like


class HavingFilter:
    """Keeps the merged rows for which the HAVING expression is TRUE (not FALSE, not NULL)."""

    def __init__(
        self, having_sql: str, columns: Sequence[ColumnMeta], bindings: Sequence[tuple[str, int]] = (),
        text_comparisons: Sequence[tuple[str, int, int]] = (), weights: Mapping[int, int] | None = None,
        compiler: HavingCompiler | None = None,  # merge.compute's, with MariaDB's arithmetic and functions
    ) -> None:
        if compiler is None:
            compiler = HavingCompiler(columns, bindings, text_comparisons, weights)
        self.predicate = compiler.compile(having_sql)

    def push(self, row: Row) -> Sequence[Row]:
        return (row,) if _truth(self.predicate(row)) else NOTHING

    def finish(self) -> Sequence[Row]:
        return NOTHING
