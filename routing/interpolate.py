"""Parameters written into a statement as literals: for statements the proxy runs as text although the
client prepared them (SQL-level EXECUTE, federation's reads, stepwise writes)."""

from __future__ import annotations

from collections.abc import Sequence

from protocol.binary import value_to_sql_literal
from protocol.constants import ErrorCode
from routing.errors import RoutingError
from routing.parse import NO_BACKSLASH_ESCAPES, reading, scan_shape


def interpolate(sql: str, params: Sequence[object], mode: int = 0) -> str:
    """The unit's SQL with its `?` placeholders replaced by literals (text protocol), read and written under the
    session's sql_mode `mode` (its NO_BACKSLASH_ESCAPES bit: a backslash in a string is itself, a value's quotes
    are only doubled)."""
    with reading(mode):
        spans = [(s, e) for s, e, kind in scan_shape(sql).spans if kind == "p"]
    if len(spans) != len(params):
        raise RoutingError(f"statement has {len(spans)} parameters but {len(params)} values were given",
                           errno=ErrorCode.WRONG_ARGUMENTS, sqlstate="HY000")
    out: list[str] = []
    pos = 0
    for (start, end), value in zip(spans, params, strict=True):
        out.append(sql[pos:start])
        out.append(value_to_sql_literal(value, no_backslash_escapes=bool(mode & NO_BACKSLASH_ESCAPES)))
        pos = end
    out.append(sql[pos:])
    return "".join(out)


__all__ = ["interpolate"]
