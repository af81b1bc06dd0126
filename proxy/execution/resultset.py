"""Building result sets the proxy answers itself (SHOW DATABASES, PREVIEW, admin statements).

A result built here answers a COM_QUERY in text rows, or, while `BINARY_ROWS` is set (a prepared metadata
statement executed with COM_STMT_EXECUTE), in binary rows as the binary protocol requires.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from contextvars import ContextVar

from protocol import text
from protocol.binary import text_row_to_binary
from protocol.constants import Capability, ColumnType, ServerStatus
from protocol.packets import ColumnDefinition41, EOFPacket, column_count_payload, encode_text_row, end_of_result

BINARY_ROWS: ContextVar[bool] = ContextVar("shardproxy_binary_rows", default=False)


def text_value(v: object) -> bytes | None:
    if v is None:
        return None
    if isinstance(v, bytes):
        return v
    if isinstance(v, bool):
        return b"1" if v else b"0"
    return text.encode(str(v))  # client text (a processlist Info) goes back as the bytes it came as


def result_packets(
    columns: Sequence[str | ColumnDefinition41],
    rows: Iterable[Sequence[object]],
    *,
    capabilities: Capability,
    status: int,
    warnings: int = 0,
) -> list[bytes]:
    """Every payload of a text result set, in the client's EOF framing."""
    defs = [c if isinstance(c, ColumnDefinition41) else ColumnDefinition41(c, ColumnType.VAR_STRING) for c in columns]
    out = [column_count_payload(len(defs))]
    out.extend(d.encode() for d in defs)
    if not capabilities & Capability.DEPRECATE_EOF:
        out.append(EOFPacket(0, ServerStatus(status)).encode())
    if BINARY_ROWS.get():
        out.extend(text_row_to_binary([text_value(v) for v in row], defs) for row in rows)
    else:
        out.extend(encode_text_row([text_value(v) for v in row]) for row in rows)
    out.append(end_of_result(ServerStatus(status), warnings, capabilities))
    return out
