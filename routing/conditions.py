"""Sharding conditions: what WHERE / JOIN ON say about sharding columns, compiled once, evaluated per call.

A compiled condition refers to values by *slot* (the k-th value token of the statement) so one cached plan
serves every statement of the same shape. Evaluation turns the tree into a disjunction of groups (DNF): each
group maps a sharding column to a `Constraint` (exact values and/or a range). Anything the kernel cannot
evaluate becomes `TRUE` (no restriction): routing may widen, it must never narrow wrongly.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from sqlglot import exp

from routing.model import RangeBound
from routing.parse import UNKNOWN, literal_value, node_start

# --- values ------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Const:
    value: Any


@dataclass(frozen=True, slots=True)
class Slot:
    """The value of the statement's k-th value token (literal or ``?``), negated for ``-5``."""

    index: int
    negate: bool = False


@dataclass(frozen=True, slots=True)
class Concat:
    """``CONCAT(a, b, ...)`` of values (``a || b`` under PIPES_AS_CONCAT, `routing.pipes`): MariaDB's string of
    their texts — NULL when one is, so the statement matches nothing, which the proxy does not narrow (UNKNOWN)."""

    parts: tuple[ValueRef, ...]


ValueRef = Const | Slot | Concat

# --- condition tree ----------------------------------------------------------------------------------

ColumnRef = tuple[int, str]  # (occurrence index, lower-case column name)


class ColumnClasses:
    """Columns proved equal by a statement's equalities (a union-find): the correlation check and the
    join layout both ask which columns the conditions tie together."""

    def __init__(self) -> None:
        self._parent: dict[ColumnRef, ColumnRef] = {}

    def find(self, ref: ColumnRef) -> ColumnRef:
        parent = self._parent
        while parent.get(ref, ref) != ref:
            ref = parent[ref]
        return ref

    def union(self, a: ColumnRef, b: ColumnRef) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self._parent[ra] = rb

    def same(self, a: ColumnRef, b: ColumnRef) -> bool:
        return self.find(a) == self.find(b)


@dataclass(frozen=True, slots=True)
class Eq:
    """``col = v`` or ``col IN (v, ...)``."""

    column: ColumnRef
    values: tuple[ValueRef, ...]


@dataclass(frozen=True, slots=True)
class Range:
    column: ColumnRef
    lower: ValueRef | None = None
    lower_inclusive: bool = True
    upper: ValueRef | None = None
    upper_inclusive: bool = True


@dataclass(frozen=True, slots=True)
class ColumnEq:
    """``a.x = b.y``: used to carry conditions across joins, not evaluated itself."""

    left: ColumnRef
    right: ColumnRef


@dataclass(frozen=True, slots=True)
class And:
    children: tuple[Cond, ...]


@dataclass(frozen=True, slots=True)
class Or:
    children: tuple[Cond, ...]


@dataclass(frozen=True, slots=True)
class _True:
    """No restriction (also what anything unevaluable compiles to)."""


TRUE = _True()
Cond = Eq | Range | ColumnEq | And | Or | _True

Resolver = Callable[[exp.Column], list[ColumnRef]]
SlotFinder = Callable[[int], int | None]


def value_ref(node: exp.Expression, slot_at: SlotFinder) -> ValueRef | None:
    """A literal, ``?`` (already turned into a literal by `parse_statement`) or negated literal."""
    negate = False
    while isinstance(node, exp.Paren):
        node = node.this
    if type(node) is exp.Concat:
        parts = [value_ref(part, slot_at) for part in node.expressions]
        if not parts or any(part is None for part in parts):
            return None
        return Concat(tuple(part for part in parts if part is not None))
    if isinstance(node, exp.Neg):
        negate = True
        node = node.this
    if isinstance(node, exp.Literal):
        start = node_start(node)
        slot = slot_at(start) if start is not None else None
        if slot is not None:
            return Slot(slot, negate)
        if node.is_string:
            return None if negate else Const(node.this)
        try:
            value = literal_value(node.this, "n")
        except (ValueError, ArithmeticError):
            return None
        return Const(-value if negate else value)
    return None


def extract(node: exp.Expression | None, resolve: Resolver, slot_at: SlotFinder) -> Cond:
    """Compile a WHERE / ON expression into a condition tree."""
    if node is None:
        return TRUE
    if isinstance(node, exp.Paren):
        return extract(node.this, resolve, slot_at)
    if isinstance(node, exp.And | exp.Or):
        # a chain `a OR b OR c ...` is a left-deep tree as deep as it is long: its operands are gathered without
        # recursion and combined once (combining level by level copied the flattened list at each: O(n^2))
        kind = type(node)
        children = [extract(operand, resolve, slot_at) for operand in chain(node, kind)]
        return make_and(children) if kind is exp.And else make_or(children)
    if isinstance(node, exp.EQ | exp.NullSafeEQ):
        return _comparison(node.left, node.right, "=", resolve, slot_at)
    if isinstance(node, exp.GT | exp.GTE | exp.LT | exp.LTE):
        op = {exp.GT: ">", exp.GTE: ">=", exp.LT: "<", exp.LTE: "<="}[type(node)]
        return _comparison(node.left, node.right, op, resolve, slot_at)
    if isinstance(node, exp.In):
        if node.args.get("query") is not None or node.args.get("unnest") is not None:
            return TRUE
        if not isinstance(node.this, exp.Column):
            return TRUE
        refs = [value_ref(v, slot_at) for v in node.expressions]
        if not refs or any(r is None for r in refs):
            return TRUE
        values = tuple(r for r in refs if r is not None)
        return make_or([Eq(col, values) for col in resolve(node.this)]) if resolve(node.this) else TRUE
    if isinstance(node, exp.Between):
        if not isinstance(node.this, exp.Column):
            return TRUE
        low = value_ref(node.args["low"], slot_at)
        high = value_ref(node.args["high"], slot_at)
        if low is None or high is None:
            return TRUE
        cols = resolve(node.this)
        return make_and([Range(c, low, True, high, True) for c in cols]) if cols else TRUE
    return TRUE  # NOT, functions, LIKE, subqueries, IS NULL ...: unevaluable, widen


def chain(node: exp.Expression, kind: type) -> list[exp.Expression]:
    """The operands of a chain of ``kind`` (And / Or) in text order, parentheses around sub-chains included."""
    out: list[exp.Expression] = []
    stack = [node]
    while stack:
        current = stack.pop()
        while isinstance(current, exp.Paren):
            current = current.this
        if type(current) is kind:
            stack.append(current.right)
            stack.append(current.left)
        else:
            out.append(current)
    return out


_FLIP = {"=": "=", ">": "<", ">=": "<=", "<": ">", "<=": ">="}


def _comparison(left: exp.Expression, right: exp.Expression, op: str, resolve: Resolver, slot_at: SlotFinder) -> Cond:
    if isinstance(left, exp.Column) and isinstance(right, exp.Column):
        if op != "=":
            return TRUE
        lcols, rcols = resolve(left), resolve(right)
        if len(lcols) == 1 and len(rcols) == 1:
            return ColumnEq(lcols[0], rcols[0])
        return TRUE
    if not isinstance(left, exp.Column):
        if not isinstance(right, exp.Column):
            return TRUE
        left, right, op = right, left, _FLIP[op]
    value = value_ref(right, slot_at)
    if value is None:
        return TRUE
    cols = resolve(left)  # type: ignore[arg-type]
    if not cols:
        return TRUE
    leaves: list[Cond] = []
    for col in cols:
        if op == "=":
            leaves.append(Eq(col, (value,)))
        elif op in (">", ">="):
            leaves.append(Range(col, lower=value, lower_inclusive=op == ">="))
        else:
            leaves.append(Range(col, upper=value, upper_inclusive=op == "<="))
    return make_and(leaves)


def make_and(children: Sequence[Cond]) -> Cond:
    flat: list[Cond] = []
    for c in children:
        if c is TRUE:
            continue
        if isinstance(c, And):
            flat.extend(c.children)
        else:
            flat.append(c)
    if not flat:
        return TRUE
    return flat[0] if len(flat) == 1 else And(tuple(flat))


def make_or(children: Sequence[Cond]) -> Cond:
    flat: list[Cond] = []
    for c in children:
        if c is TRUE:
            return TRUE  # one branch without the column: no restriction at all
        if isinstance(c, Or):
            flat.extend(c.children)
        else:
            flat.append(c)
    if not flat:
        return TRUE
    return flat[0] if len(flat) == 1 else Or(tuple(flat))


def conjuncts(cond: Cond) -> tuple[Cond, ...]:
    return cond.children if isinstance(cond, And) else (cond,)


def project(cond: Cond, targets: dict[ColumnRef, str]) -> Cond:
    """Keep only leaves on ``targets`` (column ref → sharding column it stands for), renamed; the rest is TRUE.

    ``targets`` already includes columns equal to a sharding column through join equalities.
    """
    if isinstance(cond, Eq):
        col = targets.get(cond.column)
        return Eq((0, col), cond.values) if col else TRUE
    if isinstance(cond, Range):
        col = targets.get(cond.column)
        if not col:
            return TRUE
        return Range((0, col), cond.lower, cond.lower_inclusive, cond.upper, cond.upper_inclusive)
    if isinstance(cond, And):
        return make_and([project(c, targets) for c in cond.children])
    if isinstance(cond, Or):
        return make_or([project(c, targets) for c in cond.children])
    return TRUE


def equivalent_columns(cond: Cond, start: ColumnRef) -> set[ColumnRef]:
    """Columns equal to ``start`` through ``a = b`` conjuncts (join conditions)."""
    pairs = [c for c in conjuncts(cond) if isinstance(c, ColumnEq)]
    found = {start}
    changed = True
    while changed:
        changed = False
        for pair in pairs:
            if pair.left in found and pair.right not in found:
                found.add(pair.right)
                changed = True
            elif pair.right in found and pair.left not in found:
                found.add(pair.left)
                changed = True
    return found


# --- evaluation --------------------------------------------------------------------------------------


@dataclass(slots=True)
class Constraint:
    """What one DNF group knows about one column: exact values (None = any) and range bounds."""

    values: tuple[Any, ...] | None = None
    lower: Any = None
    lower_inclusive: bool = True
    upper: Any = None
    upper_inclusive: bool = True

    @property
    def has_range(self) -> bool:
        return self.lower is not None or self.upper is not None

    def bound(self) -> RangeBound:
        return RangeBound(self.lower, self.lower_inclusive, self.upper, self.upper_inclusive)

    def copy(self) -> Constraint:
        return Constraint(self.values, self.lower, self.lower_inclusive, self.upper, self.upper_inclusive)

    def admits(self, value: Any) -> bool:
        try:
            if self.lower is not None:
                if value < self.lower or (value == self.lower and not self.lower_inclusive):
                    return False
            if self.upper is not None:
                if value > self.upper or (value == self.upper and not self.upper_inclusive):
                    return False
        except TypeError:
            return True
        return True


class Distinct:
    """Values without repeats, first occurrence kept, in O(1) per value: what ``if v not in values: append`` on a
    list gave (Python equality: 1, 1.0, Decimal('1.0') and True are one value, '1' another), by hash.

    Why by hash and still the same: every value a statement gives (int, float, Decimal, bool, str, bytes, dates and
    times) hashes alike when equal, and a set, like ``in`` on a list, matches by identity first and then by ``==``.
    A value that cannot be hashed is compared with every kept value, as before (issue 35: 50,000 ids in one IN
    list took 11.8 s of list scans)."""

    __slots__ = ("_odd", "_seen", "values")

    def __init__(self, values: Sequence[Any] = ()) -> None:
        self.values: list[Any] = []
        self._seen: set[Any] = set()
        self._odd: list[Any] = []  # the kept values that cannot be hashed
        for v in values:
            self.add(v)

    def contains(self, value: Any) -> bool:
        try:
            if value in self._seen:
                return True
        except TypeError:
            return value in self.values
        return bool(self._odd) and value in self._odd

    def extend(self, values: Sequence[Any]) -> None:
        """`add` each of ``values``; into an empty one, at C speed (`dict.fromkeys` keeps first occurrences)."""
        if not self.values:
            try:
                first = dict.fromkeys(values)
            except TypeError:
                pass
            else:
                self.values = list(first)
                self._seen = set(first)
                return
        for v in values:
            self.add(v)

    def add(self, value: Any) -> bool:
        """Keep ``value`` unless an equal one is kept already; whether it was kept."""
        if self.contains(value):
            return False
        self.values.append(value)
        try:
            self._seen.add(value)
        except TypeError:
            self._odd.append(value)
        return True


Group = dict[str, Constraint]
MAX_GROUPS = 256


def resolve_value(ref: ValueRef, values: Sequence[Any]) -> Any:
    if isinstance(ref, Const):
        return ref.value
    if isinstance(ref, Concat):
        texts = [_concat_text(resolve_value(part, values)) for part in ref.parts]
        return UNKNOWN if any(text is None for text in texts) else "".join(texts)  # type: ignore[arg-type]
    value = values[ref.index]
    if value is UNKNOWN or value is None:
        return UNKNOWN
    if ref.negate:
        try:
            return -value
        except TypeError:
            return UNKNOWN
    return value


def _concat_text(value: Any) -> str | None:
    """The text CONCAT makes of a value: a string as it is, an integer or exact decimal in digits; None for what
    the proxy does not print as MariaDB does (floats, bytes, temporal values) or does not know."""
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, Decimal) and value.is_finite():
        return format(value, "f")
    return None


def evaluate(cond: Cond, values: Sequence[Any], lists: Mapping[int, Sequence[Any]] | None = None
             ) -> list[Group] | None:
    """DNF groups of a projected condition; None means unrestricted (full route). ``lists``: the values a slot stands
    for instead of its own (the first slot of a long IN list compiled cut short, `routing.lists`; its second slot
    stands for none)."""
    groups = _eval(cond, values, lists)
    if groups is None or any(not g for g in groups):
        return None
    return groups


def _eval(cond: Cond, values: Sequence[Any], lists: Mapping[int, Sequence[Any]] | None = None) -> list[Group] | None:
    if isinstance(cond, Eq):
        distinct = Distinct()
        for ref in cond.values:
            if lists is not None and type(ref) is Slot and ref.index in lists:
                listed = lists[ref.index]
                distinct.extend(listed)
                if any(v is UNKNOWN or v is None for v in distinct.values):
                    return None
                continue
            v = resolve_value(ref, values)
            if v is UNKNOWN:
                return None
            distinct.add(v)
        return [{cond.column[1]: Constraint(values=tuple(distinct.values))}]
    if isinstance(cond, Range):
        lower = resolve_value(cond.lower, values) if cond.lower is not None else None
        upper = resolve_value(cond.upper, values) if cond.upper is not None else None
        lower = None if lower is UNKNOWN else lower
        upper = None if upper is UNKNOWN else upper
        if lower is None and upper is None:
            return None
        return [{cond.column[1]: Constraint(None, lower, cond.lower_inclusive, upper, cond.upper_inclusive)}]
    if isinstance(cond, Or):
        out: list[Group] = []
        # `a = 1 OR a = 2 ...`: groups that only list values of one column are one group listing them all (the
        # same rows; a chain of n was n groups, routed everywhere past MAX_GROUPS)
        by_column: dict[str, Distinct] = {}
        for child in cond.children:
            sub = _eval(child, values, lists)
            if sub is None:
                return None
            for group in sub:
                if len(group) == 1:
                    ((column, con),) = group.items()
                    if con.values is not None and not con.has_range:
                        known = by_column.get(column)
                        if known is None:
                            by_column[column] = Distinct(con.values)
                            out.append(group)  # its place: replaced by the merged values at the end
                        else:
                            for v in con.values:
                                known.add(v)
                        continue
                out.append(group)
            if len(out) > MAX_GROUPS:
                return None
        for i, group in enumerate(out):
            if len(group) == 1:
                ((column, con),) = group.items()
                merged = by_column.get(column)
                if merged is not None and con.values is not None and not con.has_range \
                        and len(merged.values) != len(con.values):
                    out[i] = {column: Constraint(values=tuple(merged.values))}
        return out
    if isinstance(cond, And):
        acc: list[Group] = [{}]
        for child in cond.children:
            sub = _eval(child, values, lists)
            if sub is None:
                continue
            acc = [merged for a in acc for b in sub if (merged := _intersect(a, b)) is not None]
            if len(acc) > MAX_GROUPS:
                return None
            if not acc:
                return []
        return acc
    return None


def _intersect(a: Group, b: Group) -> Group | None:
    """Both groups at once; None when they contradict (no row can match)."""
    out = {k: v.copy() for k, v in a.items()}
    for col, con in b.items():
        mine = out.get(col)
        if mine is None:
            out[col] = con.copy()
            continue
        if con.values is not None:
            if mine.values is None:
                mine.values = con.values
            else:
                theirs = Distinct(con.values)
                mine.values = tuple(v for v in mine.values if theirs.contains(v))
        _tighten(mine, con)
        if mine.values is not None:
            mine.values = tuple(v for v in mine.values if mine.admits(v))
            if not mine.values:
                return None
    return out


def _tighten(mine: Constraint, other: Constraint) -> None:
    try:
        if other.lower is not None and (
            mine.lower is None or other.lower > mine.lower or (other.lower == mine.lower and not other.lower_inclusive)
        ):
            mine.lower, mine.lower_inclusive = other.lower, other.lower_inclusive
        if other.upper is not None and (
            mine.upper is None or other.upper < mine.upper or (other.upper == mine.upper and not other.upper_inclusive)
        ):
            mine.upper, mine.upper_inclusive = other.upper, other.upper_inclusive
    except TypeError:
        pass  # incomparable bounds: keep the ones we had (wider, never narrower)
