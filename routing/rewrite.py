"""SQL templates: the user's text cut into static pieces and slots, rendered per route unit.

The rewrite never regenerates SQL from a tree. A template is built once per statement shape from text
spans (table identifiers, values, insertion points) and rendered for each unit by joining pieces: table
slots become the unit's actual table names, value slots copy the current statement's literal text (or emit
``?`` and collect the unit's parameter), LIMIT slots carry rewritten pagination. Comments, hints, casing and
quoting of everything else stay exactly as the user wrote them.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import TYPE_CHECKING, Any

import sqlglot
import sqlglot.errors
from sqlglot import exp

from merge.compute import AVG_COUNT, AVG_SUM
from merge.spec import AggregateItem, AggregateKind, MergeSpec, OrderItem
from merge.weights import profile as weight_profile
from merge.weights import weight_sql_pieces
from protocol.binary import value_to_sql_literal
from routing.computed import ComputedPlanner, ComputedRefusal
from routing.errors import RoutingError
from routing.parse import UNKNOWN, Shape, Token, dialect

if TYPE_CHECKING:
    from routing.lists import ListTokens


@dataclass(frozen=True, slots=True)
class TableSlot:
    """A logic table identifier; rendered as the unit's actual table, keeping backquotes."""

    logic: str  # lower case
    quote: str = ""
    original: str = ""  # text to keep when the unit does not map this table (broadcast/single)


@dataclass(frozen=True, slots=True)
class ValueSlot:
    index: int


@dataclass(frozen=True, slots=True)
class LimitOffsetSlot:
    """``o`` of ``LIMIT o, n`` on a multi-unit route: every node starts at row 0."""

    index: int


@dataclass(frozen=True, slots=True)
class LimitCountSlot:
    """``n`` of ``LIMIT o, n`` (or of ``OFFSET o ROWS FETCH FIRST n ROWS``) on a multi-unit route: every
    node returns ``o + n`` rows. `index` None: the count is implicit (``FETCH FIRST ROW ONLY``), `default`."""

    index: int | None
    offset_index: int | None
    default: int = 1
    minimum: int = 0  # SQL_CALC_FOUND_ROWS: a node's first row carries its row count, so never LIMIT 0


@dataclass(frozen=True, slots=True)
class KeySlot:
    """The generated key of the row being rendered (key generation)."""

    prefix: str = ""  # e.g. ", " before the value
    suffix: str = ""


@dataclass(frozen=True, slots=True)
class AutoSlot:
    """A row's value for the table's AUTO_INCREMENT column (routing.autoinc): the key the proxy generated for the
    row in its place (it gave NULL or 0), else the value as written (`pieces`, rendered as any text is)."""

    pieces: tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class InListSlot:
    """The values ``v, ...`` of a top-level AND-ed ``col IN (v, ...)`` on a column of a standard sharding strategy
    of ``logic`` (value slots ``first..last``, only commas between them): a unit of a multi-unit route gets only the
    values whose rows its actual table can hold (`RenderContext.lists`); the whole list when that is not known
    (issue 35: each of 4 nodes got all 50,000 ids, as ShardingSphere and Vitess do not)."""

    logic: str  # lower case
    column: str  # lower case
    first: int
    last: int
    database: bool  # the column is the database strategy's
    table: bool  # the column is the table strategy's


Piece = str | TableSlot | ValueSlot | LimitOffsetSlot | LimitCountSlot | KeySlot | InListSlot | AutoSlot


@dataclass(frozen=True, slots=True)
class Edit:
    """Replace ``[start, end)`` of the text with ``pieces`` (an insertion when start == end)."""

    start: int
    end: int
    pieces: tuple[Piece, ...]


@dataclass(frozen=True, slots=True)
class Template:
    pieces: tuple[Piece, ...]

    @property
    def is_static(self) -> bool:
        return all(type(p) is str for p in self.pieces)


def build_template(shape: Shape, start: int, end: int, edits: Sequence[Edit]) -> Template:
    """Cut ``shape.sql[start:end]`` into pieces: edits applied, untouched value tokens as slots."""
    sql = shape.sql
    marks: list[tuple[int, int, int, tuple[Piece, ...]]] = []  # (start, order, end, pieces)
    for e in edits:
        if start <= e.start and e.end <= end:
            marks.append((e.start, 0 if e.start == e.end else 1, e.end, e.pieces))
    spans = shape.spans
    # the value tokens inside [start, end): the spans are in text order and do not overlap, so they are found by
    # bisection, not by a pass over all of them (an INSERT of n rows builds n row templates: that was O(n^2))
    for k in range(bisect_left(spans, (start,)), len(spans)):
        vs, ve, _ = spans[k]
        if vs >= end:
            break
        if ve <= end:
            marks.append((vs, 2, ve, (ValueSlot(k),)))
    marks.sort(key=lambda m: (m[0], m[1]))
    pieces: list[Piece] = []
    pos = start
    for mstart, _, mend, mpieces in marks:
        if mstart < pos:
            continue  # inside an edit already applied (a value replaced by a LIMIT slot, say)
        if mstart > pos:
            pieces.append(sql[pos:mstart])
        pieces.extend(mpieces)
        pos = max(pos, mend)
    if pos < end:
        pieces.append(sql[pos:end])
    return Template(_join_static(pieces))


def _join_static(pieces: Sequence[Piece]) -> tuple[Piece, ...]:
    out: list[Piece] = []
    for p in pieces:
        if type(p) is str:
            if not p:
                continue
            if out and type(out[-1]) is str:
                out[-1] = out[-1] + p  # type: ignore[operator]
                continue
        out.append(p)
    return tuple(out)


EMPTY_TEMPLATE = Template(())


class RenderContext:
    """Per-call data a template needs: the statement's value tokens, parameters and resolved values."""

    __slots__ = ("lists", "param_index", "params", "shape", "unit", "values")

    def __init__(
        self,
        shape: Shape,
        params: Sequence[Any] | None,
        values: Sequence[Any],
        param_index: Sequence[int | None],
    ) -> None:
        self.shape = shape
        self.params = params
        self.values = values
        self.param_index = param_index
        # per `InListSlot`: its values when they are not the shape's slots (`routing.lists`: a list compiled cut
        # short), and the positions in the list of the values each unit gets, by (data source, actual table of the
        # slot's logic table); `unit` is the unit being rendered (None: every value)
        self.lists: Mapping[InListSlot, tuple[ListTokens | None, Mapping[tuple[str, str | None], list[int]] | None]] \
            | None = None
        self.unit: tuple[str, Mapping[str, str]] | None = None


def render(
    template: Template,
    table_map: Mapping[str, str],
    ctx: RenderContext,
    out: list[str],
    out_params: list[Any] | None,
    key: Any = None,
) -> None:
    """Append the rendered text to ``out`` and the unit's parameters (in text order) to ``out_params``."""
    shape = ctx.shape
    for p in template.pieces:
        tp = type(p)
        if tp is str:
            out.append(p)  # type: ignore[arg-type]
        elif tp is TableSlot:
            out.append(_table_text(p, table_map))  # type: ignore[arg-type]
        elif tp is ValueSlot:
            k = p.index  # type: ignore[union-attr]
            start, end, kind = shape.spans[k]
            out.append(shape.sql[start:end])
            if kind == "p" and out_params is not None:
                out_params.append(_param(ctx, k))
        elif tp is LimitOffsetSlot:
            _emit_number(ctx, p.index, 0, out, out_params)  # type: ignore[union-attr]
        elif tp is LimitCountSlot:
            index = p.index  # type: ignore[union-attr]
            count = ctx.values[index] if index is not None else p.default  # type: ignore[union-attr]
            offset = ctx.values[p.offset_index] if p.offset_index is not None else 0  # type: ignore[union-attr]
            if count is UNKNOWN or offset is UNKNOWN:
                raise RoutingError("LIMIT parameters must be supplied to route a multi-node query")
            # LIMIT o, 18446744073709551615 (MySQL's "to the end"): o + n must stay a valid LIMIT
            rows = max(min(int(offset) + int(count), _LIMIT_MAX), p.minimum)  # type: ignore[union-attr]
            if index is None:
                out.append(str(rows))
            else:
                _emit_number(ctx, index, rows, out, out_params)
        elif tp is KeySlot:
            out.append(p.prefix + value_to_sql_literal(key) + p.suffix)  # type: ignore[union-attr]
        elif tp is InListSlot:
            _emit_list(p, ctx, out, out_params)  # type: ignore[arg-type]
        elif tp is AutoSlot:
            if key is not None:
                out.append(value_to_sql_literal(key))
            else:
                render(Template(p.pieces), table_map, ctx, out, out_params)  # type: ignore[union-attr]


def _emit_list(slot: InListSlot, ctx: RenderContext, out: list[str], out_params: list[Any] | None) -> None:
    """The unit's own values of an IN list (`InListSlot`), or all of them as the text has them."""
    tokens: ListTokens | None = None
    kept: Sequence[int] | None = None
    if ctx.lists is not None:
        entry = ctx.lists.get(slot)
        if entry is not None:
            tokens, chosen = entry
            if chosen is not None and ctx.unit is not None:
                ds, table_map = ctx.unit
                kept = chosen.get((ds, table_map.get(slot.logic)))
    if tokens is None:
        shape = ctx.shape
        spans = shape.spans
        sql = shape.sql
        if not kept:  # no selection, or none of the values (a unit the list does not route to): the list as written
            out.append(sql[spans[slot.first][0]:spans[slot.last][1]])
            kept = range(slot.last - slot.first + 1)
        else:
            out.append(", ".join([sql[spans[slot.first + i][0]:spans[slot.first + i][1]] for i in kept]))
        if out_params is not None:
            out_params.extend([_param(ctx, slot.first + i) for i in kept if spans[slot.first + i][2] == "p"])
        return
    spans, sql = tokens.spans, tokens.sql
    if not kept:
        out.append(tokens.text)
        kept = range(len(spans))
    else:
        out.append(", ".join([sql[spans[i][0]:spans[i][1]] for i in kept]))
    if out_params is not None:
        params = tokens.params
        out_params.extend([params[i] for i in kept if spans[i][2] == "p"])


def _table_text(slot: TableSlot, table_map: Mapping[str, str]) -> str:
    """A table slot as a unit's SQL names it: its actual table, quoted as the text quoted the logic one, or the text's
    own name when the unit maps no table to it (`render` and `renders_as_text` alike)."""
    actual = table_map.get(slot.logic)
    if actual is None:
        return slot.original
    q = slot.quote
    return f"{q}{actual}{q}" if q else actual


_LIMIT_MAX = (1 << 64) - 1  # the largest row count MySQL accepts in LIMIT


def _param(ctx: RenderContext, k: int) -> Any:
    idx = ctx.param_index[k]
    params = ctx.params
    if params is None or idx is None or idx >= len(params):
        return None
    return params[idx]


def _emit_number(ctx: RenderContext, k: int, value: int, out: list[str], out_params: list[Any] | None) -> None:
    if ctx.shape.spans[k][2] == "p":
        out.append("?")
        if out_params is not None:
            out_params.append(value)
    else:
        out.append(str(value))


def render_sql(
    template: Template, table_map: Mapping[str, str], ctx: RenderContext
) -> tuple[str, tuple[Any, ...] | None]:
    out: list[str] = []
    out_params: list[Any] | None = [] if ctx.params is not None else None
    render(template, table_map, ctx, out, out_params)
    return "".join(out), (tuple(out_params) if out_params is not None else None)


def renders_as_text(template: Template, table_map: Mapping[str, str], shape: Shape,
                    param_index: Sequence[int | None]) -> bool:
    """Does `render_sql(template, table_map, ctx)` give every text of `shape`'s key back as it is, with the
    statement's parameters in their order (then units of tables named as the text names them, as sysbench's
    layout has them, need no rendering piece by piece at every call)?

    Why a property of the key: the template's value holes must be the text's value tokens, each once and in order,
    and the text between two holes (tables rendered as this unit names them) the text between those tokens here;
    every text of the key has the same text between its value tokens (the key is that text with the tokens
    marked), and its parameters are the `?` tokens in order."""
    sql, spans = shape.sql, shape.spans
    if "\x01" in sql:  # (the key's mark itself in the text: keys would not tell the texts apart)
        return False
    segment: list[str] = []
    at = prev_end = 0
    for p in template.pieces:
        tp = type(p)
        if tp is str:
            segment.append(p)  # type: ignore[arg-type]
        elif tp is TableSlot:
            segment.append(_table_text(p, table_map))  # type: ignore[arg-type]
        elif tp is ValueSlot:
            if p.index != at or at >= len(spans) or "".join(segment) != sql[prev_end:spans[at][0]]:  # type: ignore[union-attr]
                return False
            prev_end = spans[at][1]
            at += 1
            segment = []
        else:  # LIMIT and key slots render values of their own
            return False
    if at != len(spans) or "".join(segment) != sql[prev_end:]:
        return False
    marks = [param_index[k] if k < len(param_index) else None for k, span in enumerate(spans) if span[2] == "p"]
    return marks == list(range(len(marks)))


# --- multi-unit SELECT: derived columns, pagination and the merge spec ------------------------------


@dataclass(frozen=True)
class MergeTemplate:
    """A `MergeSpec` whose statement-dependent parts come from the statement's value slots.

    A plan serves every statement of its shape, so nothing taken from a literal may be frozen here:
    pagination, the HAVING text and GROUP_CONCAT separators are rendered per execution.
    """

    visible_columns: int
    order_by: tuple[OrderItem, ...] = ()
    group_by: tuple[int, ...] = ()
    aggregates: tuple[AggregateItem, ...] = ()
    distinct: bool = False
    having: Template | None = None  # the HAVING expression (no keyword), values slotted
    groups_sorted: bool = False
    offset_slot: int | None = None
    limit_slot: int | None = None
    limit_default: int | None = None  # FETCH FIRST ROW ONLY: a count without a slot
    with_ties: bool = False
    found_rows: str | None = None  # SQL_CALC_FOUND_ROWS: "count" (the merge counts) or "window" (the nodes)
    found_rows_index: int | None = None
    separator_slots: tuple[tuple[int, int], ...] = ()  # (index in aggregates, value slot of SEPARATOR '...')
    weights: tuple[tuple[int, int], ...] = ()
    having_bindings: tuple[tuple[str, int], ...] = ()  # HAVING name (normalized SQL) -> the column it means
    having_weights: tuple[tuple[str, int, int], ...] = ()
    computed: tuple[tuple[int, Template], ...] = ()  # (column, the expression over __c<N>) (routing.computed)
    increment_index: int | None = None
    rollup: bool = False
    # what bounds each node's rows (MergeSpec.node_rows): "one" (aggregates, no GROUP BY on the nodes), "page"
    # (the nodes keep the pagination, from row 0 to offset + count), None (nothing)
    node_bound: str | None = None
    # the spec, when no part of it comes from the statement's values (a MergeSpec is immutable: one serves all)
    _constant: list[MergeSpec] = field(default_factory=list, init=False, compare=False, repr=False)

    def spec(self, values: Sequence[Any], shape: Shape | None = None) -> MergeSpec:
        constant = self._constant
        if constant:  # nothing of it comes from the statement's values: made once
            return constant[0]
        spec = self._spec(values, shape)
        if self.offset_slot is None and self.limit_slot is None and not self.separator_slots \
                and self.having is None and not self.computed:
            constant.append(spec)
        return spec

    def _spec(self, values: Sequence[Any], shape: Shape | None) -> MergeSpec:
        offset = values[self.offset_slot] if self.offset_slot is not None else 0
        limit = values[self.limit_slot] if self.limit_slot is not None else self.limit_default
        if offset is UNKNOWN or limit is UNKNOWN:
            raise RoutingError("LIMIT parameters must be supplied to route a multi-node query")
        aggregates = self.aggregates
        if self.separator_slots:
            items = list(aggregates)
            for position, slot in self.separator_slots:
                items[position] = replace(items[position], separator=_text_value(values[slot], "SEPARATOR"))
            aggregates = tuple(items)
        node_rows: int | None = None
        if self.node_bound == "one":
            node_rows = 1
        elif self.node_bound == "page" and limit is not None:
            node_rows = max(int(offset) + int(limit), 1)  # LimitCountSlot: never below its minimum (0 or 1)
        having_sql = None
        if self.having is not None:
            assert shape is not None, "a HAVING template needs the statement's shape"
            having_sql = render_having(self.having, shape, values)
        return MergeSpec(
            visible_columns=self.visible_columns,
            order_by=self.order_by,
            group_by=self.group_by,
            aggregates=aggregates,
            distinct=self.distinct,
            offset=int(offset),
            limit=int(limit) if limit is not None else None,
            having_sql=having_sql,
            groups_sorted=self.groups_sorted,
            weights=self.weights,
            with_ties=self.with_ties,
            having_bindings=self.having_bindings,
            having_weights=self.having_weights,
            found_rows=self.found_rows,
            found_rows_index=self.found_rows_index,
            computed=tuple((i, render_having(tpl, shape, values)) for i, tpl in self.computed)
            if shape is not None else (),
            increment_index=self.increment_index,
            rollup=self.rollup,
            node_rows=node_rows,
        )


def _text_value(value: Any, what: str) -> str:
    if value is UNKNOWN or value is None:
        raise RoutingError(f"the {what} parameter must be supplied to route a multi-node query")
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", "surrogateescape")  # the bytes, back as they were (protocol.text)
    return str(value)


def render_having(template: Template, shape: Shape, values: Sequence[Any]) -> str:
    """The HAVING text with the current statement's literals; a ``?`` becomes its parameter as a literal."""
    out: list[str] = []
    for p in template.pieces:
        if type(p) is str:
            out.append(p)  # type: ignore[arg-type]
        elif type(p) is ValueSlot:
            k = p.index  # type: ignore[union-attr]
            start, end, kind = shape.spans[k]
            if kind != "p":
                out.append(shape.sql[start:end])
                continue
            value = values[k]
            if value is UNKNOWN:
                raise RoutingError("the HAVING parameters must be supplied to route a multi-node query")
            out.append(value_to_sql_literal(value, no_backslash_escapes=True))  # read by merge.having, not MySQL
    return "".join(out)


_AGGREGATES: dict[type, AggregateKind] = {
    exp.Count: AggregateKind.COUNT,
    exp.Sum: AggregateKind.SUM,
    exp.Min: AggregateKind.MIN,
    exp.Max: AggregateKind.MAX,
    exp.Avg: AggregateKind.AVG,
    exp.GroupConcat: AggregateKind.GROUP_CONCAT,
    exp.BitwiseXorAgg: AggregateKind.BIT_XOR,
    exp.BitwiseOrAgg: AggregateKind.BIT_OR,
    exp.BitwiseAndAgg: AggregateKind.BIT_AND,
}
_DISTINCT_KINDS = {AggregateKind.COUNT: AggregateKind.COUNT_DISTINCT, AggregateKind.SUM: AggregateKind.SUM_DISTINCT,
                   AggregateKind.AVG: AggregateKind.AVG_DISTINCT}
_CLAUSES = {
    "GROUP": "BY", "HAVING": None, "ORDER": "BY", "LIMIT": None, "OFFSET": None, "FETCH": None, "FOR": None,
    "LOCK": None, "WINDOW": None,
}
_SELECT_MODIFIERS = {
    "ALL",
    "DISTINCT",
    "DISTINCTROW",
    "HIGH_PRIORITY",
    "STRAIGHT_JOIN",
    "SQL_SMALL_RESULT",
    "SQL_BIG_RESULT",
    "SQL_BUFFER_RESULT",
    "SQL_NO_CACHE",
    "SQL_CACHE",
    "SQL_CALC_FOUND_ROWS",
}


class _Refuse(Exception):
    pass


class _Ambiguous:
    """find_item_in_list's verdict for a name two different select items answer to."""


AMBIGUOUS = _Ambiguous()

# Select-list expressions that are certainly not text: their merge keys need no weight column.
_NOT_TEXT = (
    exp.Count, exp.Sum, exp.Avg, exp.BitwiseXorAgg, exp.BitwiseOrAgg, exp.BitwiseAndAgg, exp.Add, exp.Sub,
    exp.Mul, exp.Div, exp.IntDiv, exp.Mod, exp.Neg, exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE,
    exp.NullSafeEQ, exp.And, exp.Or, exp.Not, exp.Is, exp.In, exp.Between, exp.Like, exp.Boolean, exp.Null,
    exp.Length, exp.Abs, exp.Round, exp.Floor, exp.Ceil, exp.Year, exp.Month, exp.Day, exp.DayOfWeek,
    exp.DayOfMonth, exp.DayOfYear, exp.DateDiff, exp.TsOrDsToDate, exp.Date, exp.CurrentDate,
    exp.CurrentTimestamp, exp.StrToDate, exp.UnixToTime, exp.TimeToUnix,
)
_NOT_TEXT_TYPES = ("INT", "DECIMAL", "DOUBLE", "FLOAT", "DATE", "TIME", "YEAR", "BIT", "BOOL", "SIGNED", "UNSIGNED")
_TEXT_TYPES = frozenset({"char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum", "set", "json"})
# Expressions whose value differs between evaluations: a weight computed beside them would not be theirs.
# (A subquery too: evaluated again for each of the weight column's uses of the expression.)
_VOLATILE = re.compile(r"\b(?:RAND|UUID|UUID_SHORT|SYSDATE|RANDOM_BYTES|NEXTVAL|NEXT\s+VALUE|LASTVAL|SLEEP|"
                       r"BENCHMARK|GET_LOCK|RELEASE_LOCK|LAST_INSERT_ID|ROW_COUNT|FOUND_ROWS|SELECT)\b|@|:=", re.I)


def _maybe_text(node: exp.Expression) -> bool:
    """False when `node` certainly does not have a string type (numbers, dates, truth values)."""
    if isinstance(node, exp.Literal):
        return bool(node.is_string)
    if isinstance(node, _NOT_TEXT):
        return False
    if isinstance(node, exp.Cast | exp.TryCast):
        to = node.args.get("to")
        text = to.sql(dialect="mysql").upper() if to is not None else ""
        return not text.startswith(_NOT_TEXT_TYPES)
    if isinstance(node, exp.Paren):
        return _maybe_text(node.this)
    return True


def _group_concat_limit(values: Sequence[Piece], separator: Sequence[Piece]) -> tuple[Piece, ...]:
    """The derived column telling the merge where MariaDB cuts this GROUP_CONCAT: the session's
    group_concat_max_len, the result's character set (the limit counts bytes of it: CONCAT of the same
    values and separator aggregates charsets as GROUP_CONCAT does) and the length the node's part has
    uncut (so the merge knows which parts and which merged values were cut). Aggregates of their own: a
    second GROUP_CONCAT on the nodes would warn about its cuts again."""
    concat = ("CONCAT(", *values, ", ", *separator, ")")
    return ("CONCAT(@@group_concat_max_len, ':', CHARSET(MIN(", *concat, ")), ':', SUM(LENGTH(", *concat,
            ")) - LENGTH(", *separator, "))")


def _volatile(pieces: Sequence[Piece]) -> bool:
    text = "".join(p for p in pieces if type(p) is str)  # type: ignore[misc]
    return _VOLATILE.search(text) is not None


def _same_column(a: exp.Expression | None, b: exp.Expression) -> bool:
    return (isinstance(a, exp.Column) and isinstance(b, exp.Column) and a.name.lower() == b.name.lower()
            and a.table.lower() == b.table.lower())


def _norm(node: exp.Expression) -> str:
    return node.sql(dialect="mysql").lower()


def _masked(node: exp.Expression) -> str:
    """The normalized SQL of ``node`` with every literal replaced by a marker."""
    copy = node.copy()
    for lit in list(copy.find_all(exp.Literal)):
        if lit is copy:
            return "?"
        lit.replace(exp.Placeholder())
    return _norm(copy)


def _split_items(tokens: Sequence[Token], start: int, stop: int) -> list[tuple[int, int]]:
    """Token index ranges of the comma-separated items in tokens[start:stop] (depth 0 commas)."""
    items: list[tuple[int, int]] = []
    first = start
    for i in range(start, stop):
        if tokens[i].text == "," and tokens[i].depth == 0:
            items.append((first, i))
            first = i + 1
    if first < stop:
        items.append((first, stop))
    return items


@dataclass(slots=True, eq=False)
class _SelectState:
    """What the passes of `_SelectRewriter.run` share, in the order they fill it: the statement's clauses
    (`read`), then each pass's findings, each field written by one pass (named beside it) and read by later
    ones. Fields without a default are unset until their pass runs: a pass reading one too early fails loudly.
    (The rewriter itself keeps what its helpers and the computed-item planner share: the derived columns, the
    edits, the pins, the columns' facts.)"""

    order: exp.Expression | None
    group: exp.Expression | None
    having: exp.Expression | None
    distinct: bool
    has_limit: bool
    items: list[exp.Expression]
    aggregates_present: bool
    rollup: bool
    # read_select_list
    from_i: int = field(init=False)
    calc_found_rows: bool = field(init=False)
    spans: list[tuple[int, int]] = field(init=False)  # token ranges of the select items
    select_end: int = field(init=False)  # where derived columns go
    # number_columns
    item_index: list[int] = field(init=False)  # column index of each select item
    star_columns: list[tuple[str, str, int]] = field(init=False)  # (column name, owner ref or "", index)
    item_names: list[str] = field(init=False)  # each item's name as MariaDB names it
    shadowed: set[int] = field(init=False)  # ids of GROUP BY columns an alias shadows (resolve_group_by)
    # split_aggregates (resolve_order_by and having_aggregates add to it)
    aggregates: list[AggregateItem] = field(init=False)
    distinct_group: tuple[Piece, ...] | None = field(init=False)  # what DISTINCT arguments add to GROUP BY
    # resolve_group_by
    group_i: int | None = field(init=False)
    group_by: list[int] = field(init=False)
    group_texts: list[tuple[Piece, ...]] = field(init=False)
    group_nodes: list[exp.Expression] = field(init=False)
    # split_having
    having_i: int | None = field(init=False)
    having_template: Template | None = field(init=False)  # what the merge evaluates
    having_bindings: dict[str, int] = field(init=False)
    having_end: int = field(init=False)
    node_having: tuple[Piece, ...] = field(init=False)  # the nodes' HAVING text
    # resolve_order_by, sort_groups
    order_by: list[OrderItem] = field(init=False)
    groups_sorted: bool = field(init=False)
    # paginate
    offset_slot: int | None = field(init=False)
    limit_slot: int | None = field(init=False)
    limit_default: int | None = field(init=False)
    with_ties: bool = field(init=False)
    found_rows: str | None = field(init=False)
    found_rows_index: int | None = field(init=False)
    node_bound: str | None = field(init=False)
    # append_derived, assemble_merge
    weights: tuple[tuple[int, int], ...] = field(init=False)
    template: Template = field(init=False)
    merge: MergeTemplate = field(init=False)

    @classmethod
    def read(cls, ast: exp.Select) -> _SelectState:
        group = ast.args.get("group")
        items = list(ast.expressions)
        return cls(
            order=ast.args.get("order"),
            group=group,
            having=ast.args.get("having"),
            distinct=ast.args.get("distinct") is not None,
            has_limit=ast.args.get("limit") is not None or ast.args.get("offset") is not None,
            items=items,
            aggregates_present=any(isinstance(i.unalias(), exp.AggFunc) for i in items) or any(
                True for i in items for _ in _own_aggregates(i)),
            rollup=group is not None and bool(group.args.get("rollup")),
        )

    @property
    def needs_merge(self) -> bool:
        """Anything for the merge to do? Else every node's rows are the answer, concatenated."""
        return bool(self.order or self.group or self.having or self.distinct or self.has_limit
                    or self.aggregates_present)


class _SelectRewriter:
    def __init__(
        self, shape: Shape, tokens: Sequence[Token], ast: exp.Select, edits: Sequence[Edit], metadata: Any, tables: Any,
        all_tables: Any = None,
    ) -> None:
        self.shape = shape
        self.sql = shape.sql
        self.tokens = tokens
        self.ast = ast
        self.edits = list(edits)
        self.metadata = metadata
        self.tables = [t for t in tables if not t.nested]
        self.slots = {start: k for k, (start, _, _) in enumerate(shape.spans)}
        self.pins: list[tuple[int, str]] = []
        self.separator_slots: list[tuple[int, int]] = []
        self.derived: list[Piece] = []
        self.derived_count = 0
        self.extra: list[Edit] = []
        # the FROM clause's tables (sharded, broadcast, single), for name resolution against their columns
        self.from_tables = [t for t in (all_tables if all_tables is not None else tables) if not t.nested]
        self.column_pieces: dict[int, tuple[Piece, ...] | None] = {}  # column index -> its expression
        self.maybe_text: dict[int, bool] = {}  # False: the column is certainly not text
        self.weight_requests: dict[int, tuple[Piece, ...]] = {}
        self.ordinals: set[int] = set()  # ENUM / SET columns: ORDER BY sorts them by their number
        self.one_level: set[int] = set()  # text columns of a one-level collation (the short weight column)
        self.merged_having: list[exp.Expression] | None = None  # HAVING conjuncts the merge evaluates
        self.having_weights: list[tuple[str, int, int]] = []  # (comparison, value column, literal weight)
        self.computed_planner: ComputedPlanner | None = None  # select items computed after the merge
        self.distinct_sources: dict[tuple[Piece, ...], int] = {}
        self.distinct_bodies: list[tuple[Piece, ...]] = []

    # literal helpers: a plan serves every statement of its shape, so a decision taken by comparing SQL
    # text that contains literals (ORDER BY a + 1 is the select item a + 1) must pin those literals

    def slot_of(self, node: exp.Expression) -> int | None:
        start = node.meta.get("start") if node.meta else None
        return self.slots.get(start) if isinstance(start, int) else None

    def literal_slots(self, node: exp.Expression) -> list[int]:
        return [k for lit in node.find_all(exp.Literal) if (k := self.slot_of(lit)) is not None]

    def pin_matches(self, node: exp.Expression, candidates: Sequence[exp.Expression], force: bool = False) -> None:
        """Pin the literals of ``node`` and of every candidate that differs from it only by literals."""
        mine = self.literal_slots(node)
        if not mine and not force:
            return
        masked = _masked(node)
        slots = list(mine)
        for other in candidates:
            theirs = self.literal_slots(other)
            if theirs and _masked(other) == masked:
                slots.extend(theirs)
        for k in dict.fromkeys(slots):
            self.pins.append((k, self.shape.text(k)))

    # token helpers
    def clause(self, word: str, after: int) -> int | None:
        follow = _CLAUSES.get(word)
        for i in range(after, len(self.tokens)):
            t = self.tokens[i]
            if t.depth == 0 and t.upper == word:
                if follow is None or (i + 1 < len(self.tokens) and self.tokens[i + 1].upper == follow):
                    return i
        return None

    def pieces(self, first: int, last: int) -> tuple[Piece, ...]:
        """The template pieces of tokens[first:last] (table names and values still slotted)."""
        start, end = self.tokens[first].start, self.tokens[last - 1].end
        return build_template(self.shape, start, end, self.edits).pieces

    def add_derived(self, body: Sequence[Piece], prefix: str) -> int:
        index = self.visible + self.derived_count
        self.derived.extend([", ", *body, f" AS {prefix}_{self.derived_count}"])
        self.derived_count += 1
        self.column_pieces[index] = tuple(body)
        return index

    def run(self) -> tuple[Template, MergeTemplate | None, tuple[tuple[int, str], ...], str | None]:
        """Run the passes (`SELECT_PASSES`) in order over one `_SelectState`; a statement with nothing to merge
        (no ORDER BY, GROUP BY, HAVING, DISTINCT, LIMIT or aggregate) keeps its text, with no merge at all."""
        st = _SelectState.read(self.ast)
        if not st.needs_merge:
            return build_template(self.shape, 0, len(self.sql), self.edits), None, (), None
        for rewrite_pass in SELECT_PASSES:
            rewrite_pass(self, st)
        return st.template, st.merge, tuple(self.pins), None

    # --- the passes, in the order SELECT_PASSES runs them ------------------------------------------------

    def read_select_list(self, st: _SelectState) -> None:
        """Where the select list is in the tokens and its items' token ranges (every later pass cuts the text
        by them), SQL_CALC_FOUND_ROWS among the modifiers; refuses ORDER BY with ROLLUP and unreadable lists."""
        tokens = self.tokens
        if st.rollup and st.order is not None:
            raise _Refuse("ORDER BY with GROUP BY ... WITH ROLLUP is not supported (MariaDB refuses it too)")
        select_i = next(i for i, t in enumerate(tokens) if t.depth == 0 and t.upper == "SELECT")
        from_i = self.clause("FROM", select_i)
        if from_i is None:
            raise _Refuse("the proxy could not find the FROM clause")
        first_item = select_i + 1
        calc_found_rows = False
        while first_item < from_i and tokens[first_item].upper in _SELECT_MODIFIERS:
            calc_found_rows = calc_found_rows or tokens[first_item].upper == "SQL_CALC_FOUND_ROWS"
            first_item += 1
        spans = _split_items(tokens, first_item, from_i)
        if len(spans) != len(st.items):
            raise _Refuse("the proxy could not split the select list")
        st.from_i = from_i
        st.calc_found_rows = calc_found_rows
        st.spans = spans
        st.select_end = tokens[from_i - 1].end

    def number_columns(self, st: _SelectState) -> None:
        """The column index of each select item (a star expanded to its table's columns, which the metadata
        must know), what each column is (its expression, text or not, ENUM / SET, one-level collation) and
        each item's name as MariaDB names it: the merge addresses rows by these indexes."""
        self.visible = 0
        known = True
        item_index: list[int] = []
        star_columns: list[tuple[str, str, int]] = []  # (column name, owner ref or "", index)
        for item, (a, b) in zip(st.items, st.spans, strict=True):
            inner = item.unalias()
            if isinstance(inner, exp.Star) or (isinstance(inner, exp.Column) and isinstance(inner.this, exp.Star)):
                qualifier = inner.table.lower() if isinstance(inner, exp.Column) else ""
                owners = [t for t in self.tables if not qualifier or t.ref == qualifier]
                columns = self.metadata.columns(owners[0].name) if len(owners) == 1 else None
                if not columns:
                    known = False
                    item_index.append(self.visible)
                    continue
                owner = owners[0]
                # qualified as the star is: by the alias, or by the table (its actual name on each node)
                prefix: tuple[Piece, ...] = ()
                if owner.alias:
                    prefix = ("`" + owner.alias.replace("`", "``") + "`.",)
                elif qualifier:
                    prefix = (TableSlot(owner.name, "`", f"`{owner.name}`"), ".")
                for j, name in enumerate(columns):
                    star_columns.append((name.lower(), owner.ref, self.visible + j))
                    quoted = "`" + name.replace("`", "``") + "`"
                    self.column_pieces[self.visible + j] = (*prefix, quoted)
                    lookup = getattr(self.metadata, "column_type", None)
                    data_type = lookup(owner.name, name) if lookup is not None else None
                    self.maybe_text[self.visible + j] = data_type is None or data_type in _TEXT_TYPES
                    if data_type in ("enum", "set"):
                        self.ordinals.add(self.visible + j)
                    elif self._one_level(owner.name, name):
                        self.one_level.add(self.visible + j)
                item_index.append(self.visible)
                self.visible += len(columns)
            else:
                item_index.append(self.visible)
                self.column_pieces[self.visible] = self._item_expression(item, a, b)
                self.note(self.visible, inner)
                self.visible += 1

        if not known:
            raise _Refuse(
                "SELECT * over several data nodes with ORDER BY / GROUP BY / aggregates / LIMIT needs the "
                "table's columns, which the proxy does not know; list the columns explicitly"
            )
        st.item_index = item_index
        st.star_columns = star_columns
        # how MariaDB names an unaliased select item: its text as written (SELECT COUNT(*) -> `COUNT(*)`)
        st.item_names = [
            item.alias.lower() if isinstance(item, exp.Alias)
            else item.name.lower() if isinstance(item, exp.Column)
            else self.sql[self.tokens[a].start : self.tokens[b - 1].end].lower()
            for item, (a, b) in zip(st.items, st.spans, strict=True)
        ]
        st.shadowed = set()

    def split_aggregates(self, st: _SelectState) -> None:
        """The select list's aggregates as the nodes compute their parts (AVG as SUM and COUNT, GROUP_CONCAT
        with its length limit, DISTINCT arguments joining the nodes' GROUP BY) and items computed over
        aggregates after the merge: the merge combines the parts into one value per group."""
        tokens = self.tokens
        st.aggregates = []
        st.distinct_group = None
        for item, index, (a, b) in zip(st.items, st.item_index, st.spans, strict=True):
            inner = item.unalias()
            kind = _AGGREGATES.get(type(inner))
            if kind is None:
                if any(True for _ in _own_aggregates(inner)):  # computed after the merge (routing.computed)
                    self._computed_item(item, index, a, b, st.aggregates)
                continue
            open_i = next(i for i in range(a, b) if tokens[i].text == "(")
            close_i = max(i for i in range(a, b) if tokens[i].text == ")" and tokens[i].depth == tokens[open_i].depth)
            arg = self.pieces(open_i + 1, close_i) if close_i > open_i + 1 else ()
            is_distinct = isinstance(inner.this, exp.Distinct)
            if kind is AggregateKind.AVG and not is_distinct:
                count_i = self.add_derived(("COUNT(", *arg, ")"), "AVG_DERIVED_COUNT")
                sum_i = self.add_derived(("SUM(", *arg, ")"), "AVG_DERIVED_SUM")
                st.aggregates.append(AggregateItem(kind, index, sum_index=sum_i, count_index=count_i))
            elif kind is AggregateKind.GROUP_CONCAT:
                self._group_concat_item(st, inner, index, open_i, close_i)
            elif is_distinct and kind in (AggregateKind.COUNT, AggregateKind.SUM, AggregateKind.AVG):
                self._distinct_aggregate_item(st, inner, kind, index, open_i, close_i)
            else:
                # MIN/MAX(DISTINCT x) == MIN/MAX(x)
                st.aggregates.append(AggregateItem(kind, index))
                if kind in (AggregateKind.MIN, AggregateKind.MAX):
                    self.want_weight(index)

    def resolve_group_by(self, st: _SelectState) -> None:
        """The column each GROUP BY key is (a select item, else a derived column); WITH ROLLUP comes off the
        nodes' text (the merge adds the super-aggregate rows, merge.rollup)."""
        tokens = self.tokens
        group = st.group
        st.group_by = []
        st.group_texts = []
        st.group_nodes = []
        st.group_i = group_i = self.clause("GROUP", st.from_i)
        if group is None or group_i is None:
            return
        stop = self._group_stop(group_i)
        g_spans = _split_items(tokens, group_i + 2, stop)
        if len(g_spans) != len(group.expressions):
            raise _Refuse("the proxy could not split the GROUP BY list")
        if st.rollup:  # the nodes group without it; the merge adds the super-aggregate rows (merge.rollup)
            last_a, last_b = g_spans[-1]
            if last_b - last_a < 3 or [t.upper for t in tokens[last_b - 2 : last_b]] != ["WITH", "ROLLUP"]:
                raise _Refuse("the proxy could not read GROUP BY ... WITH ROLLUP")
            if any(t.upper in ("ASC", "DESC") and t.depth == 0 for t in tokens[group_i + 2 : last_b - 2]):
                raise _Refuse("GROUP BY ... ASC / DESC WITH ROLLUP over several data nodes is not supported")
            self.extra.append(Edit(tokens[last_b - 3].end, tokens[last_b - 1].end, ()))
            g_spans[-1] = (last_a, last_b - 2)
        for node, (a, b) in zip(group.expressions, g_spans, strict=True):
            text = self.pieces(a, b)
            index = self._resolve_group(st, node)
            if index is None:
                index = self.add_derived(text, "GROUP_BY_DERIVED")
                self.note(index, node)
            st.group_by.append(index)
            st.group_texts.append(text)
            st.group_nodes.append(node)
            self.want_weight(index)

    def split_having(self, st: _SelectState) -> None:
        """HAVING: which conjuncts stay on the nodes (on the group keys alone) and which the merge evaluates
        (`having_template`), with the columns its names are bound to."""
        tokens = self.tokens
        having = st.having
        st.having_template = None
        st.having_bindings = {}
        st.having_i = having_i = self.clause("HAVING", st.from_i)
        if having is None or having_i is None:
            return
        stop_i = min(
            (i for w in ("ORDER", "LIMIT", "OFFSET", "FETCH", "FOR", "LOCK", "WINDOW")
             if (i := self.clause(w, having_i)) is not None),
            default=None,
        )
        end = tokens[stop_i].start if stop_i is not None else self._end()
        body = self.sql[tokens[having_i].end : end]
        lead = len(body) - len(body.lstrip())
        h_start, h_end = tokens[having_i].end + lead, tokens[having_i].end + len(body.rstrip())
        bound_columns: dict[int, int | None] = {}
        for column in having.this.find_all(exp.Column):
            if isinstance(column.this, exp.Star) or column.find_ancestor(exp.AggFunc) is not None:
                continue
            bound = self._having_reference(column, partial(self._find_select, st), st.group_by, st.group_nodes,
                                           st.items, st.item_index)
            bound_columns[id(column)] = bound
            if bound is not None:
                st.having_bindings[_norm(column)] = bound
        # Conditions on the group keys alone stay on the nodes (a group's key is the same on every node
        # that holds part of it, so each node keeps or drops it alike) and are compared there, by the
        # collation; the rest is evaluated after merging.
        local, merged = self._split_having(having.this, having_i, stop_i, set(st.group_by), bound_columns)
        if st.rollup:
            local = []  # it also filters the super-aggregate rows, whose keys are NULL: all after the merge
            self._rollup_having_nulls(having.this, bound_columns, set(st.group_by))
        node_having: tuple[Piece, ...] = ()
        if merged is None or not local:
            st.having_template = build_template(self.shape, h_start, h_end, ())
        else:
            if merged:
                merged_pieces: list[Piece] = []
                for j, (a, b) in enumerate(merged):
                    merged_pieces += [" AND (" if j else "(",
                                      *build_template(self.shape, tokens[a].start, tokens[b - 1].end, ()).pieces,
                                      ")"]
                st.having_template = Template(_join_static(merged_pieces))
            node_parts: list[Piece] = []
            for j, (a, b) in enumerate(local):
                node_parts += [") AND (" if j else "HAVING (", *self.pieces(a, b)]
            node_having = (*node_parts, ")")
        st.having_end = h_end
        st.node_having = node_having

    def having_aggregates(self, st: _SelectState) -> None:
        """The aggregates of a merged HAVING: bound to a select item that is the same aggregate, else computed
        by the nodes as derived columns; then the nodes' HAVING text is what `split_having` left them."""
        having, having_i = st.having, st.having_i
        if having is None or having_i is None:
            return
        bindings = st.having_bindings
        for agg in (having.this.find_all(exp.AggFunc) if st.having_template is not None else ()):
            kind = _AGGREGATES.get(type(agg))
            if kind is None or isinstance(agg.this, exp.Distinct):
                raise _Refuse("this HAVING aggregate cannot be merged over several data nodes")
            if any(self.shape.spans[k][2] == "p" for k in self.literal_slots(agg)):
                raise _Refuse("a parameter inside a HAVING aggregate is not supported over several data nodes")
            self.pin_matches(agg, [i for i in st.items if not isinstance(i, exp.Alias)], force=True)
            text = agg.sql(dialect="mysql")
            if kind is AggregateKind.AVG:  # the merged SUM / COUNT, divided unrounded (merge.compute)
                self._having_avg(agg, text, st.aggregates, bindings)
                continue
            same = next((index for i, index in zip(st.items, st.item_index, strict=True)
                         if not isinstance(i, exp.Alias) and _norm(i) == text.lower()), None)
            if same is not None:
                bindings[text.lower()] = same  # its name on the nodes has the actual table's
                continue
            if agg.find(exp.Column) is not None and any(c.table for c in agg.find_all(exp.Column)):
                raise _Refuse("qualified columns in HAVING aggregates are not supported over several data nodes")
            index = self.add_derived((text,), "HAVING_DERIVED")
            self.derived[-1] = f" AS `{text.replace('`', '``')}`"
            bindings[text.lower()] = index
            limit_i = None
            if kind is AggregateKind.GROUP_CONCAT:
                sep = agg.args.get("separator")
                values = agg.this.expressions if isinstance(agg.this, exp.Concat) else [agg.this]
                limit_i = self.add_derived(_group_concat_limit(
                    (", ".join(v.sql(dialect=dialect()) for v in values),),
                    (sep.sql(dialect=dialect()) if sep is not None else "','",)), "GROUP_CONCAT_LIMIT")
            st.aggregates.append(AggregateItem(kind, index, limit_index=limit_i))
            self.column_pieces[index] = (text,)
            if kind in (AggregateKind.MIN, AggregateKind.MAX):
                self.maybe_text[index] = self._maybe_text(agg.this)
                self.want_weight(index)
        if st.having_template is not None:
            self._having_text_comparisons(bindings)
            if having.this.find(exp.Div, exp.Avg) is not None:
                self._planner().increment()  # a division in HAVING divides as the session does
        # the clause ends at its last token: clauses the rewrite inserts after it (ORDER BY) go there
        start = self.tokens[having_i].start if st.node_having else self.tokens[having_i - 1].end
        self.extra.append(Edit(start, st.having_end, st.node_having))

    def resolve_order_by(self, st: _SelectState) -> None:
        """The column each ORDER BY key is (a select item, else a derived column, an aggregate one merged or
        computed like the select list's); the merge sorts the nodes' sorted rows by them."""
        tokens = self.tokens
        order = st.order
        st.order_by = []
        order_i = self.clause("ORDER", st.from_i)
        if order is None or order_i is None:
            return
        stop = min(
            (i for w in ("LIMIT", "OFFSET", "FETCH", "FOR", "LOCK") if (i := self.clause(w, order_i)) is not None),
            default=len(tokens),
        )
        o_spans = _split_items(tokens, order_i + 2, stop)
        if len(o_spans) != len(order.expressions):
            raise _Refuse("the proxy could not split the ORDER BY list")
        aggregates = st.aggregates
        for ordered, (a, b) in zip(order.expressions, o_spans, strict=True):
            node = ordered.this
            if tokens[b - 1].upper in ("ASC", "DESC"):
                b -= 1
            index = self._resolve_order(st, node)
            if index is not None and any(g.index == index and g.kind is AggregateKind.GROUP_CONCAT
                                         for g in aggregates):
                # the nodes' weights are of their own parts; the merged string's weight is no node's
                raise _Refuse("ORDER BY a GROUP_CONCAT item over several data nodes is not supported")
            if index is None:
                index = self.add_derived(self.pieces(a, b), "ORDER_BY_DERIVED")
                self.note(index, node)
                kind = _AGGREGATES.get(type(node))
                if (kind is AggregateKind.AVG and not isinstance(node.this, exp.Distinct)) or (
                        kind is None and any(True for _ in _own_aggregates(node))):
                    self._computed_item(node, index, a, b, aggregates)  # hidden: computed after the merge
                elif kind is not None and kind not in (AggregateKind.AVG, AggregateKind.GROUP_CONCAT):
                    if isinstance(node.this, exp.Distinct):
                        raise _Refuse("ORDER BY a DISTINCT aggregate over several data nodes is not supported")
                    aggregates.append(AggregateItem(kind, index))
                elif kind is not None:
                    raise _Refuse(
                        "ORDER BY AVG/GROUP_CONCAT not in the select list is not supported over several data nodes"
                    )
            st.order_by.append(OrderItem(index, bool(ordered.args.get("desc"))))
            self.want_weight(index)

    def group_distinct_values(self, st: _SelectState) -> None:
        """DISTINCT aggregate arguments (of the select list, computed items, ORDER BY) join the nodes' GROUP
        BY, or make one: one node row per (group, distinct value), which the merge then counts once."""
        if self.distinct_bodies:  # (computed items and ORDER BY may have added some)
            st.distinct_group = tuple(p for j, b in enumerate(self.distinct_bodies)
                                      for p in ((", ",) if j else ()) + b)
        distinct_group = st.distinct_group
        if distinct_group is None:
            return
        tokens = self.tokens
        # one node row per (group, distinct value)
        if st.group_i is not None:
            last = max(i for i in range(st.group_i, len(tokens)) if i < (self._group_stop(st.group_i)))
            self.extra.append(Edit(tokens[last].end, tokens[last].end, (", ", *distinct_group)))
        else:
            pos = self._clause_insert_point(
                st.from_i, ("HAVING", "ORDER", "LIMIT", "OFFSET", "FETCH", "FOR", "LOCK", "WINDOW"))
            self.extra.append(Edit(pos, pos, (" GROUP BY ", *distinct_group)))

    def sort_groups(self, st: _SelectState) -> None:
        """Groups without ORDER BY come from the nodes sorted by their keys (an ORDER BY the rewrite adds), so
        the merge combines them in one pass (`groups_sorted`); SELECT DISTINCT compares every column."""
        st.groups_sorted = False
        if st.group_by and not st.order_by:
            pos = self._clause_insert_point(st.from_i, ("LIMIT", "OFFSET", "FETCH", "FOR", "LOCK"))
            joined: list[Piece] = [" ORDER BY "]
            for j, (text, node, index) in enumerate(zip(st.group_texts, st.group_nodes, st.group_by, strict=True)):
                if j:
                    joined.append(", ")
                # a GROUP BY column an alias shadows is named by its position (ORDER BY prefers aliases)
                joined.extend((str(index + 1),) if id(node) in st.shadowed else text)
            self.extra.append(Edit(pos, pos, tuple(joined)))
            st.groups_sorted = True
        elif st.group_by and [o.index for o in st.order_by] == st.group_by:
            st.groups_sorted = True
        if st.distinct:
            for index in range(self.visible):
                self.want_weight(index)

    def paginate(self, st: _SelectState) -> None:
        """LIMIT / OFFSET ... FETCH: every node returns offset + count rows from row 0, or all its rows when
        groups are only complete after merging; SQL_CALC_FOUND_ROWS counted by the nodes or by the merge;
        how many rows a node can return (`node_bound`)."""
        grouped = bool(st.group_by or st.aggregates)
        # Groups are only complete after merging: a node's LIMIT may cut a group that another node
        # also holds, or a group HAVING would drop. Nodes keep LIMIT only when they return groups in
        # the order of the merge (ORDER BY = GROUP BY, nothing filtered or split after merging): then
        # every global top-n group is among each node's top-n groups, complete.
        keep = not grouped or (st.groups_sorted and st.having_template is None and st.distinct_group is None
                               and not st.rollup)
        # SQL_CALC_FOUND_ROWS with pagination: FOUND_ROWS() is the number of rows without it. Merged rows
        # (groups, DISTINCT) are counted by the merge, which then needs every node row; plain rows are
        # counted by each node (COUNT(*) OVER () beside its first offset + count rows).
        found_rows: str | None = None
        if st.calc_found_rows and st.has_limit:
            found_rows = "count" if grouped or st.distinct or st.having_template is not None else "window"
            if found_rows == "count":
                keep = False
        pagination = self._pagination(st.from_i, keep, at_least_one=found_rows == "window") if st.has_limit else None
        offset_slot, limit_slot, limit_default, with_ties = pagination or (None, None, None, False)
        # how many rows a node can return (MergeSpec.node_rows): an aggregate without GROUP BY on the nodes is one
        # row; kept pagination without WITH TIES (whose ties may be any number) is offset + count from row 0
        node_bound: str | None = None
        if st.aggregates_present and st.group is None and st.distinct_group is None:
            node_bound = "one"
        elif pagination is not None and keep and not with_ties:
            node_bound = "page"
        if with_ties and not st.order_by:
            with_ties = False  # MariaDB refuses FETCH ... WITH TIES without ORDER BY; the nodes will say so
        found_rows_index = None
        if found_rows == "window":
            if limit_slot is None and limit_default is None:
                found_rows = "count"  # OFFSET alone: every row comes to the merge anyway
            else:
                found_rows_index = self.add_derived(("COUNT(*) OVER ()",), "FOUND_ROWS_DERIVED")
        st.offset_slot, st.limit_slot = offset_slot, limit_slot
        st.limit_default, st.with_ties = limit_default, with_ties
        st.found_rows, st.found_rows_index, st.node_bound = found_rows, found_rows_index, node_bound

    def append_derived(self, st: _SelectState) -> None:
        """The weight columns (last: they may be of any derived column) and every derived column go after
        the select list; then the nodes' template, with all the edits of the passes."""
        if self.derived or self.weight_requests:
            st.weights = self._weight_columns()
            self.extra.append(Edit(st.select_end, st.select_end, tuple(self.derived)))
        else:
            st.weights = ()
        st.template = build_template(self.shape, 0, len(self.sql), [*self.edits, *self.extra])

    def assemble_merge(self, st: _SelectState) -> None:
        """The merge template: what the passes decided, in the form a plan keeps (`MergeTemplate`)."""
        st.merge = MergeTemplate(
            visible_columns=self.visible,
            order_by=tuple(st.order_by),
            group_by=tuple(st.group_by),
            aggregates=tuple(st.aggregates),
            distinct=st.distinct,
            having=st.having_template,
            groups_sorted=st.groups_sorted,
            offset_slot=st.offset_slot,
            limit_slot=st.limit_slot,
            limit_default=st.limit_default,
            with_ties=st.with_ties,
            found_rows=st.found_rows,
            found_rows_index=st.found_rows_index,
            separator_slots=tuple(self.separator_slots),
            weights=st.weights,
            having_bindings=tuple(st.having_bindings.items()),
            having_weights=tuple(self.having_weights),
            computed=tuple(self.computed_planner.computed) if self.computed_planner else (),
            increment_index=self.computed_planner.increment_index if self.computed_planner else None,
            rollup=st.rollup,
            node_bound=st.node_bound,
        )

    # --- the passes' helpers: select-list aggregates --------------------------------------------------

    def _group_concat_item(self, st: _SelectState, inner: exp.Expression, index: int, open_i: int,
                           close_i: int) -> None:
        """GROUP_CONCAT in the select list: joined by the merge from the nodes' strings (its SEPARATOR a
        slot), or finished in the proxy when DISTINCT or ordered (merge.concat)."""
        tokens = self.tokens
        kind = AggregateKind.GROUP_CONCAT
        sep = inner.args.get("separator")
        separator = sep.this if isinstance(sep, exp.Literal) else ","
        sep_slot = self.slot_of(sep) if isinstance(sep, exp.Literal) else None
        if sep_slot is not None:
            self.separator_slots.append((len(st.aggregates), sep_slot))
        if inner.args.get("limit") is not None:
            raise _Refuse("GROUP_CONCAT with LIMIT over several data nodes is not supported")
        depth = tokens[open_i].depth + 1
        sep_i = next((i for i in range(open_i + 1, close_i)
                      if tokens[i].upper == "SEPARATOR" and tokens[i].depth == depth), close_i)
        values = self.pieces(open_i + 1, sep_i) if sep_i > open_i + 1 else ("''",)
        sep_pieces = self.pieces(sep_i + 1, close_i) if sep_i + 1 < close_i else ("','",)
        is_distinct = tokens[open_i + 1].upper in ("DISTINCT", "DISTINCTROW")
        if is_distinct or inner.find(exp.Order) is not None:  # finished in the proxy (merge.concat)
            item_ = self._ordered_group_concat(open_i, sep_i, index, separator, is_distinct,
                                               self.distinct_sources, self.distinct_bodies)
            st.aggregates.append(item_)
            st.distinct_group = tuple(p for j, b in enumerate(self.distinct_bodies)
                                      for p in ((", ",) if j else ()) + b)
            return
        limit_i = self.add_derived(_group_concat_limit(values, sep_pieces), "GROUP_CONCAT_LIMIT")
        st.aggregates.append(AggregateItem(kind, index, separator=separator, limit_index=limit_i))

    def _distinct_aggregate_item(self, st: _SelectState, inner: exp.Expression, kind: AggregateKind, index: int,
                                 open_i: int, close_i: int) -> None:
        """COUNT / SUM / AVG(DISTINCT ...): one node row per (group, distinct values): every DISTINCT argument
        joins the nodes' GROUP BY."""
        tokens = self.tokens
        distinct_sources = self.distinct_sources  # DISTINCT argument -> its derived column
        distinct_bodies = self.distinct_bodies  # the columns the nodes' GROUP BY gains (one row per value)
        inner_args = inner.this.expressions
        first_arg = open_i + 1
        if tokens[first_arg].upper not in ("DISTINCT", "DISTINCTROW"):
            raise _Refuse("the proxy could not read the DISTINCT aggregate")
        depth = tokens[open_i].depth + 1
        commas = [i for i in range(first_arg + 1, close_i)
                  if tokens[i].text == "," and tokens[i].depth == depth]
        bounds = [first_arg, *commas, close_i]
        arg_spans = [(bounds[j] + 1, bounds[j + 1]) for j in range(len(bounds) - 1)]
        if len(arg_spans) != len(inner_args) or (kind is not AggregateKind.COUNT and len(inner_args) != 1):
            raise _Refuse("the proxy could not read the DISTINCT aggregate's arguments")
        sources: list[int] = []
        for node_arg, (x, y) in zip(inner_args, arg_spans, strict=True):
            body = self.pieces(x, y)
            source = distinct_sources.get(body)
            if source is None:
                source = self.add_derived(body, "AGGREGATION_DISTINCT_DERIVED")
                self.maybe_text[source] = self._maybe_text(node_arg)
                distinct_sources[body] = source
                distinct_bodies.append(body)
            sources.append(source)
        dkind = _DISTINCT_KINDS[kind]
        if dkind is AggregateKind.COUNT_DISTINCT:
            for source in sources:
                self.want_weight(source)
        st.aggregates.append(AggregateItem(dkind, index, distinct_index=sources[0],
                                           distinct_more=tuple(sources[1:])))
        st.distinct_group = tuple(p for j, b in enumerate(distinct_bodies) for p in ((", ",) if j else ()) + b)

    # --- the passes' helpers: MariaDB's name resolution in ORDER BY / GROUP BY / HAVING ---------------

    def _position(self, node: exp.Literal) -> int:
        start = node.meta.get("start") if node.meta else None
        k = self.slots.get(start) if isinstance(start, int) else None
        if k is not None:
            self.pins.append((k, self.shape.text(k)))
        position = int(node.this)
        if not 1 <= position <= self.visible:
            raise _Refuse(f"ORDER BY / GROUP BY position {position} is not in the select list")
        return position - 1

    def _find_select(self, st: _SelectState, name: str, qualifier: str) -> int | _Ambiguous | None:
        """MariaDB's find_item_in_list for an identifier: aliases and unaliased columns of the select
        list (a qualified name ignores aliases); an alias of an expression wins at once, two different
        columns under one name are ambiguous, a column hidden behind an alias is the last resort."""
        found: int | None = None
        found_item: exp.Expression | None = None
        unaliased: int | None = None
        unaliased_item: exp.Expression | None = None
        unaliased_twice = False
        for item, index, item_name in zip(st.items, st.item_index, st.item_names, strict=True):
            inner = item.unalias()
            if isinstance(inner, exp.Star) or (isinstance(inner, exp.Column) and isinstance(inner.this, exp.Star)):
                continue
            if _is_field(item):
                field = inner.name.lower()
                table = inner.table.lower()
                if qualifier:
                    if field == name and (not table or table == qualifier):
                        if unaliased is not None and not _same_column(unaliased_item, inner):
                            return AMBIGUOUS
                        unaliased, unaliased_item = index, inner
                    continue
                if item_name == name:
                    if found is not None and not (found_item is not None and _same_column(found_item, inner)):
                        return AMBIGUOUS
                    found, found_item = index, inner
                elif field == name:
                    if unaliased is not None and not _same_column(unaliased_item, inner):
                        unaliased_twice = True
                    unaliased, unaliased_item = index, inner
            elif not qualifier and item_name == name:
                return index
        if found is not None:
            return found
        if unaliased_twice:
            return AMBIGUOUS
        if unaliased is not None:
            return unaliased
        for column, owner, index in st.star_columns:
            if column == name and (not qualifier or owner == qualifier):
                return index
        return None

    def _same_field(self, st: _SelectState, index: int, name: str, qualifier: str) -> bool:
        """Is select column `index` the table column `name` itself (not an expression or an alias of
        another column)?"""
        for column, owner, i in st.star_columns:
            if i == index:
                return column == name and (not qualifier or owner == qualifier)
        for item, i in zip(st.items, st.item_index, strict=True):
            if i == index:
                inner = item.unalias()
                return (_is_field(item) and inner.name.lower() == name
                        and (not qualifier or not inner.table or inner.table.lower() == qualifier))
        return False

    def _match_expression(self, st: _SelectState, node: exp.Expression) -> int | None:
        text = _norm(node)
        self.pin_matches(node, [item.unalias() for item in st.items])
        for item, index in zip(st.items, st.item_index, strict=True):
            if _norm(item.unalias()) == text:
                return index
        return None

    def _resolve_order(self, st: _SelectState, node: exp.Expression) -> int | None:
        """ORDER BY: a position, else the select list first (an alias wins over a table column)."""
        if isinstance(node, exp.Literal) and not node.is_string:
            return self._position(node)
        if isinstance(node, exp.Column) and not isinstance(node.this, exp.Star):
            found = self._find_select(st, node.name.lower(), node.table.lower())
            return None if found is AMBIGUOUS else found  # type: ignore[return-value]
        return self._match_expression(st, node)

    def _resolve_group(self, st: _SelectState, node: exp.Expression) -> int | None:
        """GROUP BY: like ORDER BY, except that a name that is also a column of the FROM tables means
        that column (MariaDB warns 'Column ... in GROUP BY is ambiguous' and groups by the column)."""
        if isinstance(node, exp.Literal) and not node.is_string:
            return self._position(node)
        if isinstance(node, exp.Column) and not isinstance(node.this, exp.Star):
            name, qualifier = node.name.lower(), node.table.lower()
            found = self._find_select(st, name, qualifier)
            if found is AMBIGUOUS or found is None:
                return None
            assert isinstance(found, int)
            if self._same_field(st, found, name, qualifier):
                return found
            exists = self.from_has_column(name, qualifier)
            if exists is None:
                raise _Refuse(
                    f"GROUP BY {node.sql(dialect='mysql')} names a select-list alias that may also be a "
                    "column of a table whose columns the proxy does not know; name the column or the "
                    "expression instead of the alias"
                )
            if exists:
                st.shadowed.add(id(node))  # as ORDER BY, the name would mean the alias
                return None
            return found
        return self._match_expression(st, node)

    def _having_text_comparisons(self, bindings: dict[str, int]) -> None:
        """Comparisons of a merged HAVING between a text value (MIN/MAX, a select item) and a string
        literal compare by weights: the value's weight column, and the literal's weight under the value's
        collation (CONCAT(LEFT(value, 0), literal) has it), both from the nodes."""
        conjuncts = self.merged_having or []
        for conjunct in conjuncts:
            for node in conjunct.find_all(exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.NullSafeEQ):
                sides = (node.this, node.expression)
                literal = next((x for x in sides if isinstance(x, exp.Literal) and x.is_string), None)
                value = next((x for x in sides if isinstance(x, exp.Column | exp.Min | exp.Max)), None)
                if literal is None or value is None or (k := self.slot_of(literal)) is None:
                    continue
                index = bindings.get(value.sql(dialect="mysql").lower())
                if index is None or not self.maybe_text.get(index, True):
                    continue
                pieces = self.column_pieces.get(index)
                if pieces is None or _volatile(pieces):
                    continue
                self.want_weight(index)
                if index not in self.weight_requests:
                    continue
                literal_weight = self.add_derived(
                    weight_sql_pieces(("CONCAT(LEFT(", *pieces, ", 0), ", ValueSlot(k), ")")),  # type: ignore[arg-type]
                    "HAVING_LITERAL_WEIGHT")
                self.having_weights.append((node.sql(dialect="mysql").lower(), index, literal_weight))

    def _split_having(
        self, condition: exp.Expression, having_i: int, stop_i: int | None, group_keys: set[int],
        bound: dict[int, int | None],
    ) -> tuple[list[tuple[int, int]], list[tuple[int, int]] | None]:
        """The HAVING conjuncts (token ranges) the nodes can evaluate — no aggregate, no subquery, every
        name a GROUP BY key — and the others; (.., None) when the text cannot be cut into conjuncts."""
        tokens = self.tokens
        stop = stop_i if stop_i is not None else len([t for t in tokens if t.text != ";"])
        spans: list[tuple[int, int]] = []
        first, between = having_i + 1, False
        for i in range(having_i + 1, stop):
            t = tokens[i]
            if t.depth != 0:
                continue
            if t.upper == "BETWEEN":
                between = True
            elif t.upper in ("AND", "&&"):
                if between:
                    between = False
                    continue
                spans.append((first, i))
                first = i + 1
        spans.append((first, stop))
        conjuncts: list[exp.Expression] = []
        stack = [condition]
        while stack:
            node = stack.pop()
            if isinstance(node, exp.And):
                stack.extend((node.expression, node.this))
            else:
                conjuncts.append(node)
        if len(conjuncts) != len(spans) or any(a >= b for a, b in spans):
            return [], None
        local: list[tuple[int, int]] = []
        merged: list[tuple[int, int]] = []
        self.merged_having = []
        for node, span in zip(conjuncts, spans, strict=True):
            columns = [c for c in node.find_all(exp.Column) if not isinstance(c.this, exp.Star)]
            on_keys = (columns and node.find(exp.AggFunc) is None and node.find(exp.Select) is None
                       and all(bound.get(id(c)) in group_keys for c in columns))
            (local if on_keys else merged).append(span)
            if not on_keys:
                self.merged_having.append(node)
        return local, merged

    def _pagination(
        self, from_i: int, keep: bool, *, at_least_one: bool = False
    ) -> tuple[int | None, int | None, int | None, bool] | None:
        """Find LIMIT [o,] n / LIMIT n OFFSET o / OFFSET o ROWS [FETCH FIRST|NEXT [n] ROW|ROWS ONLY|WITH TIES]
        and rewrite it for the nodes: removed when groups are merged (`keep` false), else from row 0 to
        o + n (`at_least_one`: never 0 rows: a node's first row carries its COUNT(*) OVER ()). Returns
        (offset slot, count slot, implicit count, with ties)."""
        minimum = 1 if at_least_one else 0
        tokens = self.tokens
        limit_i = self.clause("LIMIT", from_i)
        if limit_i is not None:
            values = [t for t in tokens[limit_i + 1 : limit_i + 4]]
            first = values[0] if values else None
            k1 = self.slots.get(first.start) if first is not None else None
            if k1 is None:
                raise _Refuse("LIMIT must use numbers or ? over several data nodes")
            if len(values) >= 3 and values[1].text == "," and (k2 := self.slots.get(values[2].start)) is not None:
                offset_slot, limit_slot = k1, k2
                offset_token, count_token = values[0], values[2]
            elif (
                len(values) >= 3 and values[1].upper == "OFFSET" and (k2 := self.slots.get(values[2].start)) is not None
            ):
                offset_slot, limit_slot = k2, k1
                offset_token, count_token = values[2], values[0]
            else:
                offset_slot, limit_slot, offset_token, count_token = None, k1, None, None
            if not keep:
                last = values[2] if offset_token is not None else values[0]
                self.extra.append(Edit(tokens[limit_i].start, last.end, ()))
            elif offset_token is not None and count_token is not None and offset_slot is not None:
                self.extra.append(Edit(offset_token.start, offset_token.end, (LimitOffsetSlot(offset_slot),)))
                self.extra.append(Edit(count_token.start, count_token.end,
                                       (LimitCountSlot(limit_slot, offset_slot, minimum=minimum),)))
            elif minimum:
                token = values[0]
                self.extra.append(Edit(token.start, token.end, (LimitCountSlot(limit_slot, None, minimum=minimum),)))
            return offset_slot, limit_slot, None, False
        offset_i = self.clause("OFFSET", from_i)
        fetch_i = self.clause("FETCH", from_i)
        if offset_i is None and fetch_i is None:
            return None
        offset_slot = None
        if offset_i is not None:
            token = tokens[offset_i + 1] if offset_i + 1 < len(tokens) else None
            offset_slot = self.slots.get(token.start) if token is not None else None
            if offset_slot is None:
                raise _Refuse("OFFSET must be a number over several data nodes")
        count_slot: int | None = None
        default: int | None = None
        with_ties = False
        end_i = (offset_i + 2 if offset_i is not None else from_i)  # the last token of the clause, so far
        if offset_i is not None and end_i < len(tokens) and tokens[end_i].upper in ("ROW", "ROWS"):
            pass
        else:
            end_i -= 1
        if fetch_i is not None:
            j = fetch_i + 1
            if j < len(tokens) and tokens[j].upper in ("FIRST", "NEXT"):
                j += 1
            if j < len(tokens) and (k := self.slots.get(tokens[j].start)) is not None:
                count_slot = k
                count_token: Token | None = tokens[j]
                j += 1
            else:
                count_token, default = None, 1
            if j < len(tokens) and tokens[j].upper in ("ROW", "ROWS"):
                j += 1
            if j + 1 < len(tokens) and tokens[j].upper == "WITH" and tokens[j + 1].upper == "TIES":
                with_ties, end_i = True, j + 1
            elif j < len(tokens) and tokens[j].upper == "ONLY":
                end_i = j
            else:
                raise _Refuse("the proxy could not read the FETCH clause")
        else:
            count_token = None
        start_i = offset_i if offset_i is not None else fetch_i
        assert start_i is not None
        if not keep:
            self.extra.append(Edit(tokens[start_i].start, tokens[end_i].end, ()))
            return offset_slot, count_slot, default, with_ties
        if offset_slot is not None:
            token = tokens[offset_i + 1]  # type: ignore[operator]
            self.extra.append(Edit(token.start, token.end, (LimitOffsetSlot(offset_slot),)))
            if count_token is not None:
                self.extra.append(Edit(count_token.start, count_token.end,
                                       (LimitCountSlot(count_slot, offset_slot, minimum=minimum),)))
            elif fetch_i is not None:
                at = tokens[fetch_i + 1].end  # after FIRST / NEXT
                self.extra.append(Edit(at, at, (" ", LimitCountSlot(None, offset_slot, default or 1, minimum))))
        elif count_token is not None and minimum:
            self.extra.append(Edit(count_token.start, count_token.end,
                                   (LimitCountSlot(count_slot, None, minimum=minimum),)))
        return offset_slot, count_slot, default, with_ties

    def _ordered_group_concat(self, open_i: int, sep_i: int, index: int, separator: str, is_distinct: bool,
                              sources: dict[tuple[Piece, ...], int], bodies: list[tuple[Piece, ...]]
                              ) -> AggregateItem:
        """GROUP_CONCAT([DISTINCT] v, ... [ORDER BY o [ASC|DESC], ...] [SEPARATOR s]): the value and the order
        keys join the nodes' GROUP BY (with COUNT(*), the rows of each), the merge sorts and joins them."""
        tokens = self.tokens
        depth = tokens[open_i].depth + 1
        first = open_i + 2 if is_distinct else open_i + 1
        order_i = next((i for i in range(first, sep_i) if tokens[i].upper == "ORDER" and tokens[i].depth == depth
                        and i + 1 < sep_i and tokens[i + 1].upper == "BY"), sep_i)

        def split(a: int, b: int) -> list[tuple[int, int]]:
            commas = [i for i in range(a, b) if tokens[i].text == "," and tokens[i].depth == depth]
            bounds = [a - 1, *commas, b]
            return [(bounds[j] + 1, bounds[j + 1]) for j in range(len(bounds) - 1)]

        args = split(first, order_i)
        if not args or any(x >= y for x, y in args):
            raise _Refuse("the proxy could not read the GROUP_CONCAT arguments")
        arg_pieces = [self.pieces(x, y) for x, y in args]
        value: tuple[Piece, ...] = arg_pieces[0] if len(args) == 1 else (
            "CONCAT(", *[p for j, a in enumerate(arg_pieces) for p in ((", ",) if j else ()) + a], ")")

        def source(body: tuple[Piece, ...], node: exp.Expression | None) -> int:
            found = sources.get(body)
            if found is None:
                found = self.add_derived(body, "GROUP_CONCAT_DERIVED")
                self.maybe_text[found] = True if node is None else self._maybe_text(node)
                sources[body] = found
                bodies.append(body)
            return found

        value_i = source(value, None if len(args) > 1 else sqlglot_parse(self.sql, tokens, *args[0]))
        self.want_weight(value_i)
        order: list[OrderItem] = []
        if order_i < sep_i:
            for x, y in split(order_i + 2, sep_i):
                desc = tokens[y - 1].upper == "DESC"
                if tokens[y - 1].upper in ("ASC", "DESC"):
                    y -= 1
                if x >= y or (y - x == 1 and tokens[x].kind == "n"):
                    raise _Refuse("GROUP_CONCAT ... ORDER BY <position> over several data nodes is not supported")
                key_i = source(self.pieces(x, y), sqlglot_parse(self.sql, tokens, x, y))
                self.want_weight(key_i)
                order.append(OrderItem(key_i, desc))
        count_i = self.add_derived(("COUNT(*)",), "GROUP_CONCAT_COUNT")
        values = tuple(p for j, a in enumerate(arg_pieces) for p in ((", ",) if j else ()) + a)
        close_i = next(i for i in range(sep_i, len(tokens)) if tokens[i].text == ")" and tokens[i].depth == depth - 1)
        separator_pieces = self.pieces(sep_i + 1, close_i) if sep_i + 1 < close_i else ("','",)
        limit_i = self.add_derived(_group_concat_limit(values, separator_pieces), "GROUP_CONCAT_LIMIT")
        return AggregateItem(AggregateKind.GROUP_CONCAT, index, separator=separator, limit_index=limit_i,
                             distinct_index=value_i, count_index=count_i, concat_order=tuple(order),
                             concat_distinct=is_distinct)

    @staticmethod
    def _rollup_having_nulls(condition: exp.Expression, bound: dict[int, int | None], keys: set[int]) -> None:
        """MariaDB folds ``<NOT NULL column> IS NULL`` (and the like) to FALSE before ROLLUP makes the column
        NULL in the super-aggregate rows; the merge would keep those rows. Refused rather than guessed."""
        for node in condition.find_all(exp.Is, exp.NullSafeEQ, exp.Coalesce, exp.Anonymous, exp.If, exp.Case):
            if any(bound.get(id(c)) in keys for c in node.find_all(exp.Column)):
                raise _Refuse(f"HAVING {node.sql(dialect='mysql')} tests a GROUP BY column for NULL with WITH "
                              "ROLLUP, which MariaDB may fold before the super-aggregate rows exist; test an "
                              "aggregate instead")

    def _distinct_source(self, body: tuple[Piece, ...], node: exp.Expression, weight: bool) -> int:
        """The derived column carrying a DISTINCT argument (added to the nodes' GROUP BY once)."""
        found = self.distinct_sources.get(body)
        if found is None:
            found = self.add_derived(body, "AGGREGATION_DISTINCT_DERIVED")
            self.maybe_text[found] = self._maybe_text(node)
            self.distinct_sources[body] = found
            self.distinct_bodies.append(body)
        if weight:
            self.want_weight(found)
        return found

    def _planner(self) -> ComputedPlanner:
        if self.computed_planner is None:
            self.computed_planner = ComputedPlanner(
                self.sql, self.tokens, self.add_derived, self.pieces, self.note, self.want_weight,
                lambda start, end, edits: build_template(
                    self.shape, start, end, [Edit(s, e, (text,)) for s, e, text in edits]),
                self._distinct_source)
        return self.computed_planner

    def _having_avg(self, agg: exp.Expression, text: str, aggregates: list[AggregateItem],
                    bindings: dict[str, int]) -> None:
        """HAVING AVG(x): derived SUM(x) and COUNT(x), bound for merge.compute's AVG."""
        if any(c.table for c in agg.find_all(exp.Column)):
            raise _Refuse("qualified columns in HAVING aggregates are not supported over several data nodes")
        if f"{AVG_SUM}{text.lower()}" in bindings:
            return
        arg = agg.this.sql(dialect="mysql")
        count_i = self.add_derived((f"COUNT({arg})",), "HAVING_AVG_COUNT")
        sum_i = self.add_derived((f"SUM({arg})",), "HAVING_AVG_SUM")
        aggregates += [AggregateItem(AggregateKind.COUNT, count_i), AggregateItem(AggregateKind.SUM, sum_i)]
        bindings[f"{AVG_SUM}{text.lower()}"] = sum_i
        bindings[f"{AVG_COUNT}{text.lower()}"] = count_i

    def _computed_item(self, item: exp.Expression, index: int, a: int, b: int,
                       aggregates: list[AggregateItem]) -> None:
        """Select item `index` computes with aggregates: merged partial aggregates, then computed."""
        stop = b
        if isinstance(item, exp.Alias):
            stop -= 1
            if stop - 1 > a and self.tokens[stop - 1].upper == "AS":
                stop -= 1
        try:
            self._planner().plan(index, a, stop, aggregates)
        except ComputedRefusal as refusal:
            raise _Refuse(str(refusal)) from refusal
        self.maybe_text[index] = False  # a node's weight would be of its partial value, not of the result

    def _item_expression(self, item: exp.Expression, a: int, b: int) -> tuple[Piece, ...] | None:
        """The pieces of a select item's expression without its alias (None when they cannot be cut)."""
        tokens = self.tokens
        if not isinstance(item, exp.Alias):
            return self.pieces(a, b)
        last = tokens[b - 1]
        alias = last.text[1:-1].replace("``", "`") if last.kind == "b" else (
            last.text[1:-1] if last.kind == "s" else last.text)
        if alias.lower() != item.alias.lower():
            return None
        stop = b - 1
        if stop - 1 >= a and tokens[stop - 1].upper == "AS":
            stop -= 1
        return self.pieces(a, stop) if stop > a else None

    def _maybe_text(self, node: exp.Expression) -> bool:
        """False when `node` certainly is not text (by its form, or a column whose type the metadata
        knows); MIN/MAX take their argument's type."""
        if isinstance(node, exp.Min | exp.Max):
            return self._maybe_text(node.this)
        if isinstance(node, exp.Column) and not isinstance(node.this, exp.Star):
            data_type = self.column_type(node)
            return data_type is None or data_type in _TEXT_TYPES
        return _maybe_text(node)

    def column_type(self, column: exp.Column) -> str | None:
        lookup = getattr(self.metadata, "column_type", None)
        return None if lookup is None else self._column_fact(column, lookup)

    def _column_fact(self, column: exp.Column, lookup: Any) -> Any:
        """lookup(logic table, column name) of the one FROM table `column` belongs to; None when unknown."""
        name, qualifier = column.name.lower(), column.table.lower()
        found: set[Any] = set()
        for occ in self.from_tables:
            if qualifier and occ.ref != qualifier:
                continue
            names = self.metadata.columns(occ.name)
            if names is None:
                return None
            if any(c.lower() == name for c in names):
                found.add(lookup(occ.name, name))
        return found.pop() if len(found) == 1 else None

    def _one_level(self, table: str | None, column: exp.Column | str) -> bool:
        """Is this a column of a text collation with one weight level (the schema says so)? Its weights
        are then asked for in the short form (`merge.weights.weight_sql_pieces(one_level=True)`)."""
        info = getattr(self.metadata, "column_info", None)
        if info is None:
            return False

        def collation(logic_table: str, name: str) -> str | None:
            return getattr(info(logic_table, name), "collation", None)

        name = collation(table, column) if isinstance(column, str) and table else (
            self._column_fact(column, collation) if isinstance(column, exp.Column) else None)
        return bool(name) and name.lower() != "binary" and not weight_profile(name).multi_level

    def note(self, index: int, node: exp.Expression) -> None:
        """What column `index` (the value of `node`) is: maybe text? an ENUM / SET column? of a one-level
        collation?"""
        self.maybe_text[index] = self._maybe_text(node)
        if isinstance(node, exp.Column) and not isinstance(node.this, exp.Star):
            if self.column_type(node) in ("enum", "set"):
                self.ordinals.add(index)
            elif self._one_level(None, node):
                self.one_level.add(index)

    def want_weight(self, index: int) -> None:
        """Compare column `index` by the nodes' own weights if it may be text (see merge.weights). An ENUM
        or SET column orders by its number (MariaDB sorts it so; MIN/MAX compare the text): its 'weight'
        is the number, zero-padded, as binary."""
        if index in self.weight_requests or not self.maybe_text.get(index, True):
            return
        pieces = self.column_pieces.get(index)
        if pieces is None or _volatile(pieces):
            return
        if index in self.ordinals:
            self.weight_requests[index] = ("CONCAT('binary:0:0:0:', LPAD((", *pieces, ") + 0, 20, '0'))")
            return
        self.weight_requests[index] = weight_sql_pieces(  # type: ignore[assignment]
            pieces, one_level=index in self.one_level)

    def _weight_columns(self) -> tuple[tuple[int, int], ...]:
        """Append the weight columns after every other derived column; (value index, weight index)."""
        out: list[tuple[int, int]] = []
        for index, pieces in self.weight_requests.items():
            weight_index = self.add_derived(pieces, "WEIGHT_DERIVED")
            out.append((index, weight_index))
        return tuple(out)

    def from_has_column(self, name: str, qualifier: str) -> bool | None:
        """Is `name` a column of a table of the FROM clause (of the one `qualifier` names)? None: unknown."""
        unknown = False
        for occ in self.from_tables:
            if qualifier and occ.ref != qualifier:
                continue
            columns = self.metadata.columns(occ.name)
            if columns is None:
                unknown = True
                continue
            if any(c.lower() == name for c in columns):
                return True
        return None if unknown else False

    def _having_reference(
        self, column: exp.Column, find_select: Any, group_by: Sequence[int], group_nodes: Sequence[exp.Expression],
        items: Sequence[exp.Expression], item_index: Sequence[int],
    ) -> int | None:
        """MariaDB's resolve_ref_in_select_and_group for a name in HAVING outside aggregates: the select
        list, unless a GROUP BY column of that name is another one (then that, with a warning)."""
        name, qualifier = column.name.lower(), column.table.lower()
        found = find_select(name, qualifier)
        if found is AMBIGUOUS:
            raise _Refuse(f"HAVING {column.sql(dialect='mysql')} is ambiguous (several select items of that name)")
        in_group: int | None = None
        by_index = dict(zip(item_index, items, strict=True))
        for index, node in zip(group_by, group_nodes, strict=True):
            item = by_index.get(index)
            match = False
            if item is not None and index < self.visible:
                inner = item.unalias()
                if not qualifier and isinstance(item, exp.Alias) and item.alias.lower() == name:
                    match = True
                elif isinstance(inner, exp.Column) and inner.name.lower() == name and (
                        not qualifier or not inner.table or inner.table.lower() == qualifier):
                    match = True
            elif isinstance(node, exp.Column) and node.name.lower() == name and (
                    not qualifier or not node.table or node.table.lower() == qualifier):
                match = True
            if match:
                in_group = index
                break
        if found is not None and in_group is not None and found != in_group:
            return in_group
        return found if found is not None else in_group

    def _end(self) -> int:
        toks = [t for t in self.tokens if t.text != ";"]
        return toks[-1].end if toks else len(self.sql)

    def _group_stop(self, group_i: int) -> int:
        return min(
            (
                i
                for w in ("HAVING", "ORDER", "LIMIT", "OFFSET", "FETCH", "FOR", "LOCK", "WINDOW")
                if (i := self.clause(w, group_i)) is not None
            ),
            default=len(self.tokens),
        )

    def _clause_insert_point(self, from_i: int, words: Sequence[str]) -> int:
        found = [i for w in words if (i := self.clause(w, from_i)) is not None]
        if found:
            return self.tokens[min(found) - 1].end
        return self._end()



# The passes of a multi-unit SELECT's rewrite, in order (as sqlglot's optimizer runs its RULES): each reads the
# statement and what earlier passes left in the `_SelectState`, and adds its part.
SELECT_PASSES: tuple[Callable[[_SelectRewriter, _SelectState], None], ...] = (
    _SelectRewriter.read_select_list,
    _SelectRewriter.number_columns,
    _SelectRewriter.split_aggregates,
    _SelectRewriter.resolve_group_by,
    _SelectRewriter.split_having,
    _SelectRewriter.having_aggregates,
    _SelectRewriter.resolve_order_by,
    _SelectRewriter.group_distinct_values,
    _SelectRewriter.sort_groups,
    _SelectRewriter.paginate,
    _SelectRewriter.append_derived,
    _SelectRewriter.assemble_merge,
)


def _is_field(item: exp.Expression) -> bool:
    """Is the select item (under its alias) a plain column, not a star?"""
    inner = item.unalias()
    return isinstance(inner, exp.Column) and not isinstance(inner.this, exp.Star)


def sqlglot_parse(sql: str, tokens: Sequence[Token], a: int, b: int) -> exp.Expression | None:
    """The expression of tokens[a:b] (None when sqlglot cannot read it alone)."""
    try:
        return sqlglot.parse_one(sql[tokens[a].start : tokens[b - 1].end], read=dialect())
    except (sqlglot.errors.ParseError, ValueError):
        return None


def _own_aggregates(node: exp.Expression) -> list[exp.Expression]:
    """The aggregates of ``node`` itself, not those of subqueries inside it (a correlated subquery's
    COUNT(*) is computed by the node that runs it, for one outer row)."""
    out: list[exp.Expression] = []
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, exp.AggFunc):
            out.append(current)
        for child in current.iter_expressions():
            if not isinstance(child, exp.Subquery | exp.Select | exp.Exists):
                stack.append(child)
    return out


def _strip_distinct(arg: Sequence[Piece]) -> tuple[Piece, ...]:
    """``DISTINCT x`` pieces → ``x`` pieces."""
    out = list(arg)
    if out and type(out[0]) is str:
        head = out[0].lstrip()  # type: ignore[union-attr]
        if head[:8].upper() == "DISTINCT":
            out[0] = head[8:].lstrip()
    return tuple(p for p in out if p != "")


def select_rewrite(
    shape: Shape, tokens: Sequence[Token], ast: exp.Select, edits: Sequence[Edit], metadata: Any, tables: Any,
    all_tables: Any = None,
) -> tuple[Template, MergeTemplate | None, tuple[tuple[int, str], ...], str | None]:
    """The multi-unit template and merge template of a SELECT, or the reason it cannot run on several units.

    `tables`: the sharded table occurrences; `all_tables`: every table occurrence (name resolution looks
    at the columns of all the FROM clause's tables)."""
    try:
        return _SelectRewriter(shape, tokens, ast, edits, metadata, tables, all_tables).run()
    except _Refuse as refusal:
        full = build_template(shape, 0, len(shape.sql), edits)
        names = ", ".join(dict.fromkeys(t.name for t in tables))
        return full, None, (), f"{refusal} (query on sharded table(s) {names} routes to several data nodes)"
