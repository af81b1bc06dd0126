"""SQL templates: the user's text cut into static pieces and slots, rendered per route unit.

The rewrite never regenerates SQL from a tree. A template is built once per statement shape from text
spans (table identifiers, values, insertion points) and rendered for each unit by joining pieces: table
slots become the unit's actual table names, value slots copy the current statement's literal text (or emit
``?`` and collect the unit's parameter), LIMIT slots carry rewritten pagination. Comments, hints, casing and
quoting of everything else stay exactly as the user wrote them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from routing.errors import RoutingError
from routing.parse import UNKNOWN, Shape, format_literal


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
    """``n`` of ``LIMIT o, n`` on a multi-unit route: every node returns ``o + n`` rows."""

    index: int
    offset_index: int | None


@dataclass(frozen=True, slots=True)
class KeySlot:
    """The generated key of the row being rendered (key generation)."""

    prefix: str = ""  # e.g. ", " before the value
    suffix: str = ""


Piece = str | TableSlot | ValueSlot | LimitOffsetSlot | LimitCountSlot | KeySlot


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
    for k, (vs, ve, _) in enumerate(shape.spans):
        if start <= vs and ve <= end:
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

    __slots__ = ("param_index", "params", "shape", "values")

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
            actual = table_map.get(p.logic)  # type: ignore[union-attr]
            if actual is None:
                out.append(p.original)  # type: ignore[union-attr]
            else:
                q = p.quote  # type: ignore[union-attr]
                out.append(f"{q}{actual}{q}" if q else actual)
        elif tp is ValueSlot:
            k = p.index  # type: ignore[union-attr]
            start, end, kind = shape.spans[k]
            out.append(shape.sql[start:end])
            if kind == "p" and out_params is not None:
                out_params.append(_param(ctx, k))
        elif tp is LimitOffsetSlot:
            _emit_number(ctx, p.index, 0, out, out_params)  # type: ignore[union-attr]
        elif tp is LimitCountSlot:
            count = ctx.values[p.index]  # type: ignore[union-attr]
            offset = ctx.values[p.offset_index] if p.offset_index is not None else 0  # type: ignore[union-attr]
            if count is UNKNOWN or offset is UNKNOWN:
                raise RoutingError("LIMIT parameters must be supplied to route a multi-node query")
            _emit_number(ctx, p.index, int(offset) + int(count), out, out_params)  # type: ignore[union-attr]
        elif tp is KeySlot:
            out.append(p.prefix + format_literal(key) + p.suffix)  # type: ignore[union-attr]


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


def select_rewrite(
    shape: Shape, tokens: Any, ast: Any, edits: Sequence[Edit], metadata: Any, sharded: Any
) -> tuple[Template, Any, tuple[tuple[int, str], ...], str | None]:
    """Multi-unit SELECT rewrite (derived columns, pagination) and its merge spec. Stub."""
    return build_template(shape, 0, len(shape.sql), edits), None, (), None
