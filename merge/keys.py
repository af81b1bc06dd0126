"""Sort and equality keys for raw text-protocol values, computed once per row.

MySQL compares numbers numerically (``'10' > '9'``), strings by collation and NULL below every value;
the node rows carry only text, so each column gets a key function chosen from its type once, and every
row gets its key tuple once — the heap merge then compares plain Python tuples.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from decimal import Decimal
from typing import Any

from merge import coltypes as t
from merge.collations import Collation, collation, string_key
from merge.spec import ColumnMeta, OrderItem
from merge.weights import WeightDecoder
from protocol.constants import ColumnType

Value = bytes | None
Row = Sequence[Value]
ValueKey = Callable[[bytes], Any]
RowKey = Callable[[Row], Any]  # a comparable (order) or hashable (equality) key: a tuple, or one object

NULL_KEY: tuple[int] = (0,)  # sorts before every (1, value) key: NULLs first ASC, last DESC


def _decimal_key(v: bytes) -> Decimal:
    return Decimal(v.decode("ascii"))


def _bit_key(v: bytes) -> int:
    return int.from_bytes(v, "big")


def time_key(v: bytes) -> int:
    """TIME text ('-838:59:59.5') as signed microseconds: its text does not sort (sign, >99 hours)."""
    text = v.decode("ascii").strip()
    negative = text.startswith("-")
    if negative:
        text = text[1:]
    days = 0
    if " " in text:  # 'D hh:mm:ss' is accepted on input; servers print hours, but be lenient
        day_text, text = text.split(" ", 1)
        days = int(day_text)
    whole, _, frac = text.partition(".")
    parts = [int(p) for p in whole.split(":")]
    while len(parts) < 3:
        parts.insert(0, 0)
    hours, minutes, seconds = parts[-3], parts[-2], parts[-1]
    micros = int((frac + "000000")[:6]) if frac else 0
    total = (((days * 24 + hours) * 60 + minutes) * 60 + seconds) * 1_000_000 + micros
    return -total if negative else total


def column_collation(col: ColumnMeta) -> Collation:
    """The collation to compare a text column with.

    A column definition carries the *result* character set's default collation (character_set_results,
    e.g. 45 for a utf8mb4 connection on MariaDB, 255 on MySQL 8), not the column's own collation; the
    column's ``_bin``-ness shows only as BINARY_FLAG. So: charset 63 -> binary; BINARY_FLAG -> the
    ``_bin`` collation of that charset; otherwise the id as given (a caller that knows the real
    collation id from the schema may put it in `ColumnMeta.charset` for a closer match).
    """
    coll = collation(col.charset)
    if col.flags & t.BINARY_FLAG and coll.sensitivity not in ("bin", "binary"):
        return replace(coll, sensitivity="bin", accent_insensitive=False)
    return coll


def value_key(col: ColumnMeta) -> ValueKey:
    """The key function for non-NULL values of `col` (see module docstring)."""
    code = col.type_code
    if code in t.INTEGER_TYPES:
        return int
    if code in t.DECIMAL_TYPES:
        return _decimal_key
    if code in t.FLOAT_TYPES:
        return float
    if code == ColumnType.BIT:
        return _bit_key
    if code in t.TIME_TYPES:
        return time_key
    if code in t.TEXT_ORDERED_TEMPORAL_TYPES:
        return bytes
    if code in t.STRING_TYPES:
        return string_key(column_collation(col))
    return bytes  # JSON, GEOMETRY, NULL: byte order (JSON's own ordering is not modelled)


class Desc:
    """Inverts the order of a key component, for DESC items whose values cannot simply be negated."""

    __slots__ = ("k",)

    def __init__(self, k: Any) -> None:
        self.k = k

    def __lt__(self, other: Desc) -> bool:
        return bool(other.k < self.k)

    def __gt__(self, other: Desc) -> bool:
        return bool(other.k > self.k)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Desc) and bool(self.k == other.k)

    def __hash__(self) -> int:
        return hash(self.k)

    def __repr__(self) -> str:
        return f"Desc({self.k!r})"


_NUMERIC_KEY_TYPES = t.NUMERIC_TYPES | t.TIME_TYPES | {ColumnType.BIT}
_NULL_LAST_KEY: tuple[int] = (2,)  # after every (1, -value): NULLs last for a negated DESC item

Weights = Mapping[int, int]  # value column -> its hidden WEIGHT_STRING column (see merge.weights)


def _negated(vk: ValueKey) -> ValueKey:
    return lambda v: -vk(v)


def weight_index(index: int, columns: Sequence[ColumnMeta], weights: Weights | None) -> int | None:
    """The weight column that orders/equates column `index`, when it has one and is text."""
    if not weights:
        return None
    wi = weights.get(index)
    if wi is None or columns[index].type_code not in t.STRING_TYPES:
        return None
    return wi


def weighted_value_key(index: int, wi: int, *, order: bool, truncate: bool = False) -> Callable[[Row], Any]:
    """Row -> key of column `index` from its weight column `wi`: (1, bytes), NULL_KEY for NULL.

    `order`: comparable keys (padded comparison, see `merge.weights`), else equality keys; `truncate`:
    cut at max_sort_length like MariaDB's ORDER BY. A NULL weight means a binary string: its bytes."""
    decoder = WeightDecoder(truncate)
    convert = decoder.order if order else decoder.equal

    def key(row: Row) -> Any:
        v = row[index]
        if v is None:
            return NULL_KEY
        w = row[wi]
        return (1, v if w is None else convert(w))

    return key


def _single_weighted_key(index: int, wi: int, truncate: bool) -> RowKey:
    """``ORDER BY <one text column> ASC`` by its weights, as one bytes object per row instead of
    ``((1, weights),)``: NULL is b"" and a value b":" + its key, which order the same way (the tag is the
    short weight form's last ':', so `merge.frames` keys a row with one slice: `WeightDecoder.order_at`)."""
    order = WeightDecoder(truncate).order

    def key(row: Row) -> Any:
        v = row[index]
        if v is None:
            return b""
        w = row[wi]
        return b":" + (v if w is None else order(w))

    return key


def order_key(
    items: Sequence[OrderItem], columns: Sequence[ColumnMeta], weights: Weights | None = None,
    *, truncate: bool = True,
) -> RowKey:
    """Row -> key tuple ordering rows like ``ORDER BY items`` (NULLs first ASC, last DESC).

    DESC numeric items are negated (cheap); other DESC items are wrapped in `Desc`. Text items with a
    weight column compare by the node's weights (cut at max_sort_length unless `truncate` is off: MIN /
    MAX compare whole values).
    """
    parts: list[tuple[int, ValueKey, Any, bool]] = []  # (index, value key, NULL key, wrap in Desc)
    weighted: list[tuple[Callable[[Row], Any], bool] | None] = []
    for item in items:
        column = columns[item.index]
        wi = weight_index(item.index, columns, weights)
        if wi is not None:
            weighted.append((weighted_value_key(item.index, wi, order=True, truncate=truncate), item.descending))
            parts.append((item.index, bytes, NULL_KEY, item.descending))
            continue
        weighted.append(None)
        vk = value_key(column)
        if not item.descending:
            parts.append((item.index, vk, NULL_KEY, False))
        elif column.type_code in _NUMERIC_KEY_TYPES:
            parts.append((item.index, _negated(vk), _NULL_LAST_KEY, False))
        else:
            parts.append((item.index, vk, NULL_KEY, True))
    if len(items) == 1 and not items[0].descending \
            and (wi := weight_index(items[0].index, columns, weights)) is not None:
        return _single_weighted_key(items[0].index, wi, truncate)
    if any(w is not None for w in weighted):
        getters: list[tuple[Callable[[Row], Any], bool]] = []
        for part, w in zip(parts, weighted, strict=True):
            if w is not None:
                getters.append(w)
            else:
                index, vk, null_key, wrap = part

                def plain(row: Row, index: int = index, vk: ValueKey = vk, null_key: Any = null_key) -> Any:
                    v = row[index]
                    return null_key if v is None else (1, vk(v))

                getters.append((plain, wrap))

        def weighted_key(row: Row) -> tuple[Any, ...]:
            return tuple(Desc(g(row)) if wrap else g(row) for g, wrap in getters)

        return weighted_key
    if len(parts) == 1 and not parts[0][3]:
        index, vk, null_key, _ = parts[0]

        def single(row: Row) -> tuple[Any, ...]:
            v = row[index]
            return (null_key if v is None else (1, vk(v)),)

        return single

    def multi(row: Row) -> tuple[Any, ...]:
        out: list[Any] = []
        for index, vk, null_key, wrap in parts:
            v = row[index]
            k = null_key if v is None else (1, vk(v))
            out.append(Desc(k) if wrap else k)
        return tuple(out)

    return multi


def _single_weighted_equality(index: int, wi: int) -> RowKey:
    """The equality key of one text column by its weights as one object per row (None for NULL,
    else the weights' equality form, or the value itself for a binary string) instead of ``((1, w),)``."""
    equal = WeightDecoder(False).equal

    def key(row: Row) -> Any:
        v = row[index]
        if v is None:
            return None
        w = row[wi]
        return v if w is None else equal(w)

    return key


def equality_key(indexes: Sequence[int], columns: Sequence[ColumnMeta], weights: Weights | None = None) -> RowKey:
    """Row -> hashable key equal for rows MySQL puts in the same group / treats as DISTINCT duplicates."""
    if len(indexes) == 1 and (wi := weight_index(indexes[0], columns, weights)) is not None:
        return _single_weighted_equality(indexes[0], wi)
    getters: list[Callable[[Row], Any]] = []
    parts: list[tuple[int, ValueKey]] = []
    for index in indexes:
        wi = weight_index(index, columns, weights)
        if wi is not None:
            getters.append(weighted_value_key(index, wi, order=False))
        else:
            parts.append((index, value_key(columns[index])))
    if getters:
        for index, vk in parts:

            def plain(row: Row, index: int = index, vk: ValueKey = vk) -> Any:
                v = row[index]
                return None if v is None else vk(v)

            getters.append(plain)

        def weighted_key(row: Row) -> tuple[Any, ...]:
            return tuple(g(row) for g in getters)

        return weighted_key

    def key(row: Row) -> tuple[Any, ...]:
        out: list[Any] = []
        for index, vk in parts:
            v = row[index]
            out.append(None if v is None else vk(v))
        return tuple(out)

    return key
