"""Select items that compute with aggregates, evaluated after the merge over the merged aggregate values.

Why here: ``IFNULL(SUM(x), 0)``, ``ROUND(AVG(x), 2)``, ``SUM(a) / COUNT(*)``, ``MAX(x) - MIN(x)`` can only be
computed once every node's part of a group is merged. The kernel sends the item itself to the nodes (so
the column definition the client gets is the one MariaDB gives the expression: type, length, scale) and
beside it each aggregate of the item as a partial aggregate (a derived column merged by `merge.aggregate`);
`ComputedItem.sql` is the item with each aggregate replaced by the name of its merged column (```__c7```).

Evaluation follows MariaDB, checked against it (tests/merge/test_compute.py, the differential suite):

* exact numbers stay exact: integers are Python ints, DECIMALs `Decimal`s whose exponent is the value's
  scale (``+ - *`` give MariaDB's result scale: the larger one / the sum);
* ``/`` on exact numbers is `decimal_div`: the quotient is computed to whole 9-digit words — scale of
  each operand rounded up to a word, plus what is left of ``div_precision_increment`` — and truncated;
  it is rounded to the column's scale only when printed (so ``(2/3)*3`` is ``2.0000``, not ``2.0001``);
  AVG inside an expression is that division of the merged SUM by the merged COUNT;
* integer ``+ - *`` outside BIGINT's range is error 1690 as on MariaDB; division by zero is NULL;
* anything FLOAT/DOUBLE computes in binary floating point (ROUND as ``rint``, like ``my_double_round``);
* the result is printed with the node column's type and scale (`merge.numfmt`).

Comparisons, logic, IN, BETWEEN, LIKE and string-number conversion are `merge.having`'s.
"""

from __future__ import annotations

import decimal
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError

from merge import coltypes as t
from merge.errors import MergeError
from merge.having import HavingCompiler, Value, _truth, to_number
from merge.keys import Row
from merge.numfmt import DEC_CTX, format_number, gcvt
from merge.spec import ColumnMeta

Evaluator = Callable[[Row], Value]
# HAVING binding names of the derived SUM / COUNT of an AVG (followed by the AVG's normalized SQL)
AVG_SUM = "avg_sum:"
AVG_COUNT = "avg_count:"
_DIG = 9  # decimal digits per word of MariaDB's decimal type
_BIGINT = (-(1 << 63), (1 << 63) - 1)
ER_DATA_OUT_OF_RANGE = 1690

# expression nodes the evaluator computes; anything else in a select item over aggregates is refused
_SUPPORTED: tuple[type[exp.Expression], ...] = (
    exp.Column, exp.Identifier, exp.Literal, exp.Null, exp.Boolean, exp.Paren, exp.Neg,
    exp.Add, exp.Sub, exp.Mul, exp.Div, exp.IntDiv, exp.Mod,
    exp.And, exp.Or, exp.Xor, exp.Not, exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.NullSafeEQ,
    exp.Is, exp.In, exp.Between, exp.Like,
    exp.Coalesce, exp.Nullif, exp.If, exp.Case, exp.Round, exp.Trunc, exp.Abs, exp.Ceil, exp.Floor,
    exp.Greatest, exp.Least, exp.Sign,
)


def unsupported(sql: str) -> str | None:
    """The first construct of the expression `sql` the evaluator cannot compute (None: all of it)."""
    try:
        tree = sqlglot.parse_one(sql, read="mysql")
    except (ParseError, ValueError):
        return sql
    for node in tree.walk():
        if not isinstance(node, _SUPPORTED):
            return node.sql(dialect="mysql")
        if isinstance(node, exp.Round | exp.Trunc) and not _constant_int(node.args.get("decimals")):
            return node.sql(dialect="mysql")
    return None


def _constant_int(node: exp.Expression | None) -> bool:
    if node is None:
        return True
    if isinstance(node, exp.Neg):
        node = node.this
    return isinstance(node, exp.Literal) and not node.is_string and node.this.isdigit()


def frac(v: int | Decimal) -> int:
    """The scale of an exact value (digits after the point it carries)."""
    if isinstance(v, int):
        return 0
    e = v.as_tuple().exponent
    return -e if isinstance(e, int) and e < 0 else 0


def _words(digits: int) -> int:
    return -(-digits // _DIG) * _DIG


def decimal_div(x: int | Decimal, y: int | Decimal, increment: int) -> Decimal | None:
    """MariaDB's quotient of two exact numbers (NULL when dividing by zero; see the module docstring)."""
    if y == 0:
        return None
    f1, f2 = frac(x), frac(y)
    w1, w2 = _words(f1), _words(f2)
    rest = max(0, increment - (w1 - f1) - (w2 - f2))
    digits = _words(w1 + w2 + rest)
    q = DEC_CTX.divide(Decimal(x), Decimal(y))
    return q.quantize(Decimal(1).scaleb(-digits), rounding=decimal.ROUND_DOWN, context=DEC_CTX)


def _check_int(v: int, sql: str) -> int:
    if not _BIGINT[0] <= v <= _BIGINT[1]:
        raise MergeError(f"BIGINT value is out of range in '{sql}'", errno=ER_DATA_OUT_OF_RANGE, sqlstate="22003")
    return v


def _exact_or_float(v: Value) -> int | Decimal | float | None:
    n = to_number(v)
    if isinstance(n, bool):
        return int(n)
    return n


def _round(v: Value, places: int, truncate: bool) -> Value:
    n = _exact_or_float(v)
    if n is None:
        return None
    if isinstance(n, float):
        if math.isinf(n) or math.isnan(n):
            return n
        p = 10.0 ** abs(places)
        if truncate:
            return math.trunc(n * p) / p if places >= 0 else math.trunc(n / p) * p
        return float(round(n * p)) / p if places >= 0 else float(round(n / p)) * p
    mode = decimal.ROUND_DOWN if truncate else decimal.ROUND_HALF_UP
    if isinstance(n, int):
        if places >= 0:
            return n
        q = Decimal(n).quantize(Decimal(1).scaleb(-places), rounding=mode, context=DEC_CTX)
        return int(q)
    if places >= 0:
        if places >= frac(n):
            return n
        return n.quantize(Decimal(1).scaleb(-places), rounding=mode, context=DEC_CTX)
    q = n.quantize(Decimal(1).scaleb(-places), rounding=mode, context=DEC_CTX)
    return Decimal(int(q))


class ExpressionCompiler(HavingCompiler):
    """`HavingCompiler` plus MariaDB's exact arithmetic and the functions of `_SUPPORTED`."""

    def __init__(self, columns: Sequence[ColumnMeta], bindings: Sequence[tuple[str, int]],
                 increment_index: int | None, text_comparisons: Sequence[tuple[str, int, int]] = (),
                 weights: Mapping[int, int] | None = None) -> None:
        super().__init__(columns, bindings, text_comparisons, weights)
        self.increment_index = increment_index

    def _increment(self, row: Row) -> int:
        if self.increment_index is None:
            return 4
        v = row[self.increment_index]
        return 4 if v is None else int(v)

    def _compile(self, node: exp.Expression) -> Evaluator:
        """The evaluator of `node`: arithmetic, conditionals and numeric functions here, the rest (columns,
        literals, comparisons, ...) as HAVING compiles them."""
        sql = node.sql(dialect="mysql")
        compiled = self._compile_arithmetic(node, sql)
        if compiled is None:
            compiled = self._compile_conditional(node)
        if compiled is None:
            compiled = self._compile_numeric(node)
        return compiled if compiled is not None else super()._compile(node)

    def _compile_arithmetic(self, node: exp.Expression, sql: str) -> Evaluator | None:
        """HAVING AVG(x) over its merged parts, + - * and /, as the session computes them (exact decimals,
        BIGINT overflow, the session's div_precision_increment); None: not arithmetic."""
        if isinstance(node, exp.Avg) and f"{AVG_SUM}{sql.lower()}" in self._bound:
            # HAVING AVG(x): the merged SUM divided by the merged COUNT, unrounded, as MariaDB compares it
            total = self._ref(self._bound[f"{AVG_SUM}{sql.lower()}"])
            count = self._ref(self._bound[f"{AVG_COUNT}{sql.lower()}"])

            def avg(row: Row) -> Value:
                s, c = total(row), count(row)
                if s is None or not c:
                    return None
                if isinstance(s, float):
                    return s / float(c)  # type: ignore[arg-type]
                return decimal_div(s, c, self._increment(row))  # type: ignore[arg-type]

            return avg
        if isinstance(node, exp.Add | exp.Sub | exp.Mul):
            left, right = self._compile(node.this), self._compile(node.expression)
            op = type(node)

            def arith(row: Row) -> Value:
                a, b = _exact_or_float(left(row)), _exact_or_float(right(row))
                if a is None or b is None:
                    return None
                if isinstance(a, float) or isinstance(b, float):
                    fa, fb = float(a), float(b)
                    return fa + fb if op is exp.Add else fa - fb if op is exp.Sub else fa * fb
                if isinstance(a, int) and isinstance(b, int):
                    r = a + b if op is exp.Add else a - b if op is exp.Sub else a * b
                    return _check_int(r, sql)
                da, db = Decimal(a), Decimal(b)
                if op is exp.Add:
                    return DEC_CTX.add(da, db)
                if op is exp.Sub:
                    return DEC_CTX.subtract(da, db)
                return DEC_CTX.multiply(da, db)

            return arith
        if isinstance(node, exp.Div):
            left, right = self._compile(node.this), self._compile(node.expression)

            def div(row: Row) -> Value:
                a, b = _exact_or_float(left(row)), _exact_or_float(right(row))
                if a is None or b is None:
                    return None
                if isinstance(a, float) or isinstance(b, float):
                    return None if float(b) == 0 else float(a) / float(b)
                return decimal_div(a, b, self._increment(row))

            return div
        return None

    def _compile_conditional(self, node: exp.Expression) -> Evaluator | None:
        """COALESCE, NULLIF, IF and CASE; None: none of them."""
        if isinstance(node, exp.Coalesce):
            parts = [self._compile(e) for e in (node.this, *node.expressions)]

            def coalesce(row: Row) -> Value:
                for part in parts:
                    v = part(row)
                    if v is not None:
                        return v
                return None

            return coalesce
        if isinstance(node, exp.Nullif):
            left, _right = self._compile(node.this), self._compile(node.expression)  # (both compile, or refuse)
            equal = self._comparison(exp.EQ(this=node.this, expression=node.expression), lambda c: c == 0)

            def nullif(row: Row) -> Value:
                return None if equal(row) else left(row)

            return nullif
        if isinstance(node, exp.If):
            cond = self._compile(node.this)
            yes = self._compile(node.args["true"])
            no_node = node.args.get("false")
            no = self._compile(no_node) if no_node is not None else (lambda row: None)
            return lambda row: yes(row) if _truth(cond(row)) else no(row)
        if isinstance(node, exp.Case):
            return self._case(node)
        return None

    def _compile_numeric(self, node: exp.Expression) -> Evaluator | None:
        """ROUND / TRUNCATE, ABS, SIGN, CEIL / FLOOR, GREATEST / LEAST; None: none of them."""
        if isinstance(node, exp.Round | exp.Trunc):
            inner = self._compile(node.this)
            d = node.args.get("decimals")
            places = 0 if d is None else (-int(d.this.this) if isinstance(d, exp.Neg) else int(d.this))
            truncate = isinstance(node, exp.Trunc)
            return lambda row: _round(inner(row), places, truncate)
        if isinstance(node, exp.Abs):
            inner = self._compile(node.this)

            def abs_(row: Row) -> Value:
                n = _exact_or_float(inner(row))
                return None if n is None else abs(n)

            return abs_
        if isinstance(node, exp.Sign):
            inner = self._compile(node.this)

            def sign(row: Row) -> Value:
                n = _exact_or_float(inner(row))
                return None if n is None else int(n > 0) - int(n < 0)

            return sign
        if isinstance(node, exp.Ceil | exp.Floor):
            inner = self._compile(node.this)
            ceil = isinstance(node, exp.Ceil)

            def ceil_floor(row: Row) -> Value:
                n = _exact_or_float(inner(row))
                if n is None or isinstance(n, int):
                    return n
                if isinstance(n, float):
                    return float(math.ceil(n) if ceil else math.floor(n))
                return int(n.to_integral_value(rounding=decimal.ROUND_CEILING if ceil else decimal.ROUND_FLOOR))

            return ceil_floor
        if isinstance(node, exp.Greatest | exp.Least):
            parts = [self._compile(e) for e in (node.this, *node.expressions)]
            greatest = isinstance(node, exp.Greatest)

            def extreme(row: Row) -> Value:
                values = [_exact_or_float(p(row)) for p in parts]
                if any(v is None for v in values):
                    return None
                if any(isinstance(v, float) for v in values):
                    values = [float(v) for v in values]  # type: ignore[arg-type]
                return max(values) if greatest else min(values)  # type: ignore[type-var]

            return extreme
        return None

    def _case(self, node: exp.Case) -> Evaluator:
        subject = node.args.get("this")
        branches = []
        for branch in node.args.get("ifs") or []:
            cond_node = branch.this
            if subject is not None:
                cond_node = exp.EQ(this=subject.copy(), expression=cond_node.copy())
            branches.append((self._compile(cond_node), self._compile(branch.args["true"])))
        default = node.args.get("default")
        otherwise = self._compile(default) if default is not None else (lambda row: None)

        def case(row: Row) -> Value:
            for cond, value in branches:
                if _truth(cond(row)):
                    return value(row)
            return otherwise(row)

        return case


def format_value(value: Value, col: ColumnMeta) -> bytes | None:
    """A computed value as the text MariaDB sends for the node's column definition of the item."""
    if value is None:
        return None
    if isinstance(value, bytes):
        return value
    if isinstance(value, bool):
        value = int(value)
    if col.type_code in t.NUMERIC_TYPES:
        if col.type_code in t.INTEGER_TYPES and isinstance(value, float):
            return str(round(value)).encode("ascii")
        return format_number(value, col)
    # a text column computed from numbers (IF(COUNT(*) > 1, 'many', 1)): the number as text
    if isinstance(value, float):
        return gcvt(value)
    if isinstance(value, Decimal):
        return format(value, "f").encode("ascii")
    return str(value).encode("ascii")


@dataclass
class ComputeStage:
    """Fills the computed columns of each merged row (a push stage: after grouping, before HAVING)."""

    items: Sequence[tuple[int, Evaluator]]
    columns: Sequence[ColumnMeta]

    def push(self, row: Row) -> Sequence[Row]:
        out = row if isinstance(row, list) else list(row)
        for index, evaluate in self.items:
            out[index] = format_value(evaluate(out), self.columns[index])
        return (out,)

    def finish(self) -> Sequence[Row]:
        return ()


def compute_stage(items: Sequence[tuple[int, str]], columns: Sequence[ColumnMeta],
                  increment_index: int | None) -> ComputeStage:
    """Compile the computed items `(column index, expression over ```__c<N>``` names)`."""
    bindings = [(name, i) for i in range(len(columns)) for name in (f"__c{i}", f"`__c{i}`")]
    compiler = ExpressionCompiler(columns, bindings, increment_index)
    compiled: list[tuple[int, Evaluator]] = []
    for index, sql in items:
        try:
            tree = sqlglot.parse_one(sql, read="mysql")
        except (ParseError, ValueError) as exc:
            raise MergeError(f"cannot parse the computed select item {sql!r}: {exc}") from exc
        compiled.append((index, compiler._compile(tree)))
    return ComputeStage(compiled, columns)
