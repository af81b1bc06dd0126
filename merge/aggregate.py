"""Per-group merging of aggregate values that each node computed over its own rows.

Each aggregator turns the node's partial value(s) in a row into a running state (`start`/`add`) and
finally into the text MySQL would have printed (`result`). States are plain Python values so a group
is a small list; `empty_result` answers an aggregate query that matched no rows on any node.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import ROUND_DOWN, Decimal
from typing import Any

from merge import coltypes as t
from merge.collations import _CODECS, collation
from merge.errors import MergeError, RowBudget
from merge.keys import Row, Weights, value_key, weight_index, weighted_value_key
from merge.numfmt import DEC_CTX, format_decimal, format_double, format_int, format_number
from merge.spec import AggregateItem, AggregateKind, ColumnMeta
from protocol.constants import ColumnType

_UINT64_MAX = (1 << 64) - 1


def parse_exact(v: bytes) -> int | Decimal:
    """A node's integer/DECIMAL partial as an exact number (int when it has no fraction)."""
    try:
        return int(v)
    except ValueError:
        return Decimal(v.decode("ascii"))


def _add(a: int | Decimal | float, b: int | Decimal | float) -> int | Decimal | float:
    if isinstance(a, int) and isinstance(b, int):
        return a + b
    if isinstance(a, float) or isinstance(b, float):
        return float(a) + float(b)
    return DEC_CTX.add(Decimal(a), Decimal(b))


class Aggregator:
    """Merges one aggregate output column across the rows of a group."""

    def __init__(self, item: AggregateItem, columns: Sequence[ColumnMeta]) -> None:
        self.item = item
        self.index = item.index
        self.column = columns[item.index]

    def start(self, row: Row) -> Any:
        return self.add(self.initial(), row)

    def initial(self) -> Any:
        return None

    def add(self, state: Any, row: Row) -> Any:
        raise NotImplementedError

    def result(self, state: Any) -> bytes | None:
        raise NotImplementedError

    def empty_result(self) -> bytes | None:
        return self.result(self.initial())

    def finish_row(self, state: Any, out: list[bytes | None]) -> None:
        """Write the merged value (and anything that goes with it) into the group's output row."""
        out[self.index] = self.result(state)


class CountAggregator(Aggregator):
    """COUNT: the sum of the nodes' counts."""

    def initial(self) -> int:
        return 0

    def add(self, state: int, row: Row) -> int:
        v = row[self.index]
        return state if v is None else state + int(v)

    def result(self, state: int) -> bytes:
        return format_int(state)


class SumAggregator(Aggregator):
    """SUM: exact (int/Decimal) unless the result column is FLOAT/DOUBLE; NULL when every partial is."""

    def __init__(self, item: AggregateItem, columns: Sequence[ColumnMeta], index: int | None = None) -> None:
        super().__init__(item, columns)
        self.source = item.index if index is None else index
        self.floating = columns[self.source].type_code in t.FLOAT_TYPES

    def add(self, state: Any, row: Row) -> Any:
        v = row[self.source]
        if v is None:
            return state
        value: int | Decimal | float = float(v) if self.floating else parse_exact(v)
        return value if state is None else _add(state, value)

    def result(self, state: Any) -> bytes | None:
        return None if state is None else format_number(state, self.column)


class MinMaxAggregator(Aggregator):
    """MIN/MAX: compared with the column's key (numeric or collation); the node's bytes pass through.

    A text column with a weight column compares by the nodes' weights (whole values: max_sort_length
    does not apply), and the winner's weight goes with it into the output row (an ORDER BY MIN(x) sorts
    by it)."""

    def __init__(self, item: AggregateItem, columns: Sequence[ColumnMeta], weights: Weights | None = None) -> None:
        super().__init__(item, columns)
        self.key = value_key(self.column)
        self.is_max = item.kind is AggregateKind.MAX
        self.weight_index = weight_index(item.index, columns, weights)
        self.row_key = (
            weighted_value_key(item.index, self.weight_index, order=True)
            if self.weight_index is not None else None
        )

    def add(self, state: tuple[Any, ...] | None, row: Row) -> tuple[Any, ...] | None:
        v = row[self.index]
        if v is None:
            return state
        if self.row_key is not None:
            k = self.row_key(row)
            if state is None or (k > state[0] if self.is_max else k < state[0]):
                return (k, v, row[self.weight_index])  # type: ignore[index]
            return state
        k = self.key(v)
        if state is None or (k > state[0] if self.is_max else k < state[0]):
            return (k, v)
        return state

    def result(self, state: tuple[Any, ...] | None) -> bytes | None:
        return None if state is None else state[1]

    def finish_row(self, state: tuple[Any, ...] | None, out: list[bytes | None]) -> None:
        out[self.index] = self.result(state)
        if self.weight_index is not None:
            out[self.weight_index] = None if state is None else state[2]


class AvgAggregator(Aggregator):
    """AVG = ΣSUM / ΣCOUNT from the derived columns, printed with the AVG column's type and scale."""

    def __init__(self, item: AggregateItem, columns: Sequence[ColumnMeta]) -> None:
        super().__init__(item, columns)
        if item.sum_index is None or item.count_index is None:
            raise MergeError(f"AVG at column {item.index} needs derived SUM and COUNT columns")
        self.sum = SumAggregator(item, columns, item.sum_index)
        self.count_index = item.count_index

    def initial(self) -> list[Any]:
        return [None, 0]

    def add(self, state: list[Any], row: Row) -> list[Any]:
        state[0] = self.sum.add(state[0], row)
        c = row[self.count_index]
        if c is not None:
            state[1] += int(c)
        return state

    def result(self, state: list[Any]) -> bytes | None:
        return avg_text(state[0], state[1], self.column)


def avg_text(total: int | Decimal | float | None, count: int, col: ColumnMeta) -> bytes | None:
    """AVG = total / count as MariaDB prints it for the AVG column `col` (type, scale)."""
    if total is None or count == 0:
        return None
    if col.type_code in t.FLOAT_TYPES:
        return format_double(float(total) / count, col.decimals, is_float=col.type_code == ColumnType.FLOAT)
    if isinstance(total, float):
        total = Decimal(repr(total))
    quotient = DEC_CTX.divide(Decimal(total), Decimal(count))
    if col.type_code in t.DECIMAL_TYPES:
        if col.decimals % 9 == 0:
            # MariaDB divides DECIMALs to whole 9-digit words of scale + div_precision_increment digits,
            # dropping the rest, and rounds to the column's scale only when printing: a scale that is a
            # multiple of 9 (div_precision_increment 0 on integers, 9, ...) shows the truncated quotient
            quotient = quotient.quantize(Decimal(1).scaleb(-col.decimals), rounding=ROUND_DOWN, context=DEC_CTX)
        return format_decimal(quotient, col.decimals)
    return format_number(quotient, col)


class DistinctAggregator(Aggregator):
    """COUNT(DISTINCT x) / SUM(DISTINCT x): the union of the distinct values the nodes report.

    The kernel sends one node row per (group, distinct value) with the value in `distinct_index`;
    values are identified by the column's equality key (collation-aware), so 'a' and 'A' count once
    under a _ci collation. Every stored value is charged to the merge's row budget.
    """

    def __init__(
        self, item: AggregateItem, columns: Sequence[ColumnMeta], budget: RowBudget, weights: Weights | None = None
    ) -> None:
        super().__init__(item, columns)
        if item.distinct_index is None:
            raise MergeError(f"{item.kind.value} at column {item.index} needs distinct_index")
        self.source = item.distinct_index
        self.key = value_key(columns[self.source])
        wi = weight_index(self.source, columns, weights) if item.kind is AggregateKind.COUNT_DISTINCT else None
        self.row_key = weighted_value_key(self.source, wi, order=False) if wi is not None else None
        self.floating = columns[self.source].type_code in t.FLOAT_TYPES
        self.is_sum = item.kind is AggregateKind.SUM_DISTINCT
        self.budget = budget

    def initial(self) -> dict[Any, bytes]:
        return {}

    def add(self, state: dict[Any, bytes], row: Row) -> dict[Any, bytes]:
        v = row[self.source]
        if v is not None:
            k = self.key(v) if self.row_key is None else self.row_key(row)
            if k not in state:
                self.budget.charge_item("distinct aggregate values", v)
                state[k] = v
        return state

    def result(self, state: dict[Any, bytes]) -> bytes | None:
        self.budget.release(len(state))  # the group is finished: its values no longer count
        if not self.is_sum:
            return format_int(len(state))
        if not state:
            return None
        total: int | Decimal | float = 0.0 if self.floating else 0
        for v in state.values():
            total = _add(total, float(v) if self.floating else parse_exact(v))
        return format_number(total, self.column)


class MergeStats:
    """What a merge tells the session besides its rows.

    Warnings it causes, and node warnings it makes disappear: MariaDB cuts a GROUP_CONCAT longer than
    group_concat_max_len once (warning 1260), the nodes cut their own parts (and warned) — the merged
    result's warning count is the nodes' plus `adjustment`. `found_rows`: SQL_CALC_FOUND_ROWS's count."""

    __slots__ = ("cut", "found_rows", "node_cut")

    def __init__(self) -> None:
        self.cut = 0  # merged values cut here
        self.node_cut = 0  # node parts the nodes cut (their warnings are not the client's)
        self.found_rows: int | None = None

    @property
    def adjustment(self) -> int:
        return self.cut - self.node_cut


_UTF8 = frozenset({"utf8", "utf8mb3", "utf8mb4"})


class GroupConcatAggregator(Aggregator):
    """GROUP_CONCAT: node strings joined with the separator in merge order (node-internal ORDER BY and
    DISTINCT are not re-applied across nodes), cut like MariaDB at group_concat_max_len bytes of the
    result's character set, at a character boundary. `limit_index` carries, per node part,
    ``<group_concat_max_len>:<charset>:<uncut length>``. The nodes cut their parts at the same limit, so a
    cut part is a prefix of that node's whole part, and the merged value cut at the limit is what one
    server would return; it is cut (and warned about) when the uncut parts and separators exceed it."""

    def __init__(self, item: AggregateItem, columns: Sequence[ColumnMeta], warnings: MergeStats | None = None
                 ) -> None:
        super().__init__(item, columns)
        cid = self.column.charset
        self.codec = "utf_8" if cid == t.BINARY_COLLATION else (collation(cid).codec or "utf_8")
        self.separator = item.separator.encode(self.codec, "surrogateescape")
        self.limit_index = item.limit_index
        self.warnings = warnings

    def initial(self) -> list[Any]:
        return [None, None, 0]  # [(max_len, charset) or None, node parts, their uncut lengths]

    def add(self, state: list[Any], row: Row) -> list[Any]:
        v = row[self.index]
        if v is None:
            return state
        if state[1] is None:
            state[1] = [v]
        else:
            state[1].append(v)
        if self.limit_index is not None:
            limit = _parse_limit(row[self.limit_index])
            if limit is not None:
                max_len, charset, full = limit
                state[0] = (max_len, charset)
                state[2] += full
                if full > max_len and self.warnings is not None:
                    self.warnings.node_cut += 1
        return state

    def result(self, state: list[Any]) -> bytes | None:
        limit, parts, full = state
        if parts is None:
            return None
        joined = self.separator.join(parts)
        if limit is None:
            return joined
        max_len, charset = limit
        full += (len(parts) - 1) * len(self._encoded(self.separator, charset))
        if full <= max_len:
            return joined
        if self.warnings is not None:
            self.warnings.cut += 1
        return self._cut(joined, max_len, charset)

    def _encoded(self, value: bytes, charset: str) -> bytes:
        if charset == "binary" or (charset in _UTF8 and self.codec == "utf_8"):
            return value
        return value.decode(self.codec, "surrogateescape").encode(_CODECS.get(charset, "utf_8"), "replace")

    def _cut(self, joined: bytes, max_len: int, charset: str) -> bytes:
        """The longest prefix of `joined` that fits in max_len bytes of `charset`."""
        if charset == "binary" or (charset in _UTF8 and self.codec == "utf_8"):
            cut = joined[:max_len]
            if charset != "binary":
                j = len(cut) - 1
                while j >= 0 and cut[j] & 0xC0 == 0x80:
                    j -= 1
                if j >= 0:
                    lead = cut[j]
                    need = 1 if lead < 0x80 else 2 if lead < 0xE0 else 3 if lead < 0xF0 else 4
                    if j + need > len(cut):
                        cut = cut[:j]
            return cut
        codec = _CODECS.get(charset, "utf_8")
        text = joined.decode(self.codec, "surrogateescape")
        total = 0
        for k, ch in enumerate(text):
            total += len(ch.encode(codec, "replace"))
            if total > max_len:
                return text[:k].encode(self.codec, "surrogateescape")
        return joined

    def empty_result(self) -> bytes | None:
        return None


def _parse_limit(value: bytes | None) -> tuple[int, str, int] | None:
    if value is None:
        return None
    head, _, rest = value.partition(b":")
    charset, _, full = rest.partition(b":")
    try:
        return int(head), charset.decode("ascii", "replace").lower(), int(full or b"0")
    except ValueError:
        return None


class BitAggregator(Aggregator):
    """BIT_AND / BIT_OR / BIT_XOR over unsigned 64-bit partials (identity values for empty sets)."""

    def initial(self) -> int:
        return _UINT64_MAX if self.item.kind is AggregateKind.BIT_AND else 0

    def add(self, state: int, row: Row) -> int:
        v = row[self.index]
        if v is None:
            return state
        n = int(v) & _UINT64_MAX
        kind = self.item.kind
        if kind is AggregateKind.BIT_AND:
            return state & n
        if kind is AggregateKind.BIT_OR:
            return state | n
        return state ^ n

    def result(self, state: int) -> bytes:
        return format_int(state)


class GroupAccumulator:
    """Folds the rows of one group into one output row: the first row's values, with every aggregate
    column replaced by its merged value (other columns keep the first row's value, as MySQL would
    return some row's value for a non-aggregated column)."""

    __slots__ = ("aggregators",)

    def __init__(self, aggregators: Sequence[Aggregator]) -> None:
        self.aggregators = tuple(aggregators)

    def start(self, row: Row) -> list[Any]:
        return [list(row), *(agg.start(row) for agg in self.aggregators)]

    def add(self, group: list[Any], row: Row) -> None:
        for i, agg in enumerate(self.aggregators, 1):
            group[i] = agg.add(group[i], row)

    def finish(self, group: list[Any]) -> list[bytes | None]:
        out: list[bytes | None] = group[0]
        for i, agg in enumerate(self.aggregators, 1):
            agg.finish_row(group[i], out)
        return out

    def empty_row(self, width: int) -> list[bytes | None]:
        """The single row of an aggregate query without GROUP BY when no node returned a row."""
        out: list[bytes | None] = [None] * width
        for agg in self.aggregators:
            out[agg.index] = agg.empty_result()
        return out
