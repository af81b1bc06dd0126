"""Building result sets the proxy answers itself (SHOW DATABASES, PREVIEW, admin statements)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from protocol.constants import Capability, ColumnType, ServerStatus
from protocol.packets import ColumnDefinition41, EOFPacket, column_count_payload, encode_text_row, end_of_result


def text_value(v: object) -> bytes | None:
    if v is None:
        return None
    if isinstance(v, bytes):
        return v
    if isinstance(v, bool):
        return b"1" if v else b"0"
    return str(v).encode("utf-8")


def result_packets(
    columns: Sequence[str | ColumnDefinition41],
    rows: Iterable[Sequence[object]],
    *,
    capabilities: Capability,
    status: int,
) -> list[bytes]:
    """Every payload of a text result set, in the client's EOF framing."""
    defs = [c if isinstance(c, ColumnDefinition41) else ColumnDefinition41(c, ColumnType.VAR_STRING) for c in columns]
    out = [column_count_payload(len(defs))]
    out.extend(d.encode() for d in defs)
    if not capabilities & Capability.DEPRECATE_EOF:
        out.append(EOFPacket(0, ServerStatus(status)).encode())
    out.extend(encode_text_row([text_value(v) for v in row]) for row in rows)
    out.append(end_of_result(ServerStatus(status), 0, capabilities))
    return out
