"""Running SQL that holds client text on a backend connection, byte for byte.

`BackendConnection.execute(sql)` encodes strictly, so a SET value or a WHERE clause with bytes that are not
UTF-8 (kept as lone surrogates by protocol.text) would raise there. `execute` here is the same call with
the text encoded as the bytes it came as. (Once proxy.backend encodes with protocol.text itself, this
module can go.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from protocol import text
from protocol.packets import ComQuery, ERRPacket, OKPacket, decode_text_row
from protocol.results import ResultHeader

if TYPE_CHECKING:
    from proxy.backend import BackendConnection


async def execute(conn: BackendConnection, sql: str) -> OKPacket | ERRPacket | list[tuple[bytes | None, ...]]:
    """What `conn.execute(sql)` answers: rows as raw text values, or the OK / ERR."""
    if text.is_valid(sql):
        return await conn.execute(sql)
    rows: list[tuple[bytes | None, ...]] = []
    result: OKPacket | ERRPacket | None = None
    ncols = 0
    async for ev in conn.events(ComQuery(text.encode(sql)).encode()):
        if isinstance(ev, ResultHeader):
            ncols = len(ev.columns)
        elif isinstance(ev, bytes):
            rows.append(decode_text_row(ev, ncols))
        elif isinstance(ev, OKPacket | ERRPacket):
            result = ev
    if isinstance(result, ERRPacket):
        return result
    return rows if ncols else (result or OKPacket())


__all__ = ["execute"]
