"""The leading values of a text-protocol row, read with byte indexing.

Why: a merge that orders rows by their first column(s) needs only those values; `decode_text_row` builds a
`Reader` and calls it per column, which costs more than the k-way merge step itself (merge.raw,
bench/RESULTS.md). Same values as `decode_text_row(payload, n)`, MalformedPacket for a row that ends early.
"""

from __future__ import annotations

from protocol.wire import MalformedPacket

__all__ = ["text_cut", "text_prefix"]


def text_prefix(payload: bytes, n: int, pos: int = 0, end: int = -1) -> tuple[bytes | None, ...]:
    """The first `n` values of a text row (None for SQL NULL); the row is payload[pos:end] (default: all of
    it), so a merge reads values straight out of a run of frames (`protocol.rowframes`)."""
    out: list[bytes | None] = []
    if end < 0:
        end = len(payload)
    for _ in range(n):
        if pos >= end:
            raise MalformedPacket("text row shorter than its columns")
        first = payload[pos]
        if first < 0xFB:
            start, stop = pos + 1, pos + 1 + first
        elif first == 0xFB:
            out.append(None)
            pos += 1
            continue
        elif first == 0xFC:
            start = pos + 3
            stop = start + int.from_bytes(payload[pos + 1:start], "little")
        elif first == 0xFD:
            start = pos + 4
            stop = start + int.from_bytes(payload[pos + 1:start], "little")
        elif first == 0xFE:
            start = pos + 9
            stop = start + int.from_bytes(payload[pos + 1:start], "little")
        else:
            raise MalformedPacket("0xFF as a length in a text row")
        if stop > end or start > end:
            raise MalformedPacket("text row shorter than its values")
        out.append(payload[start:stop])
        pos = stop
    return tuple(out)


def text_cut(payload: bytes, n: int, pos: int = 0, end: int = -1) -> int:
    """Where the first `n` values of the text row payload[pos:end] end (a merge that drops trailing hidden
    columns sends payload[pos:text_cut(...)])."""
    if end < 0:
        end = len(payload)
    for _ in range(n):
        if pos >= end:
            raise MalformedPacket("text row shorter than its columns")
        first = payload[pos]
        if first < 0xFB:
            pos += 1 + first
        elif first == 0xFB:
            pos += 1
        elif first == 0xFC:
            pos += 3 + int.from_bytes(payload[pos + 1:pos + 3], "little")
        elif first == 0xFD:
            pos += 4 + int.from_bytes(payload[pos + 1:pos + 4], "little")
        elif first == 0xFE:
            pos += 9 + int.from_bytes(payload[pos + 1:pos + 9], "little")
        else:
            raise MalformedPacket("0xFF as a length in a text row")
        if pos > end:
            raise MalformedPacket("text row shorter than its values")
    return pos
