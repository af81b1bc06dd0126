"""The leading values of a text-protocol row, read with byte indexing; a binary row's leading columns.

Why: a merge that orders rows by their first column(s) needs only those values; `decode_text_row` builds a
`Reader` and calls it per column, which costs more than the k-way merge step itself (merge.raw,
bench/RESULTS.md). Same values as `decode_text_row(payload, n)`, MalformedPacket for a row that ends early.
"""

from __future__ import annotations

from protocol.wire import MalformedPacket

__all__ = ["binary_cut", "binary_prefix", "lenenc_in_binary", "text_cut", "text_prefix"]


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


# binary-protocol value sizes by column type (protocol.constants.ColumnType): fixed, or one length byte
# (temporals); NULL (6) has no bytes; every other type is a length-encoded string
_FIXED_SIZES = {1: 1, 2: 2, 13: 2, 3: 4, 9: 4, 4: 4, 8: 8, 5: 8}
_LENGTH_BYTE_TYPES = frozenset({7, 10, 11, 12})


def binary_cut(payload: bytes, types: list[int], n: int, pos: int = 0, end: int = -1) -> bytes:
    """The binary row payload[pos:end] (of len(types) columns) with its first `n` columns only: the NULL
    bitmap cut to n columns (dropped columns' bits cleared) and their values as they were (a merge that drops
    trailing hidden columns of prepared-statement rows relays the rest unchanged)."""
    if end < 0:
        end = len(payload)
    if pos >= end or payload[pos] != 0:
        raise MalformedPacket("a binary row starts with 0x00")
    bitmap = pos + 1
    values = bitmap + (len(types) + 9) // 8
    p = values
    for i in range(n):
        bit = i + 2
        if payload[bitmap + (bit >> 3)] & (1 << (bit & 7)):
            continue
        t = types[i]
        size = _FIXED_SIZES.get(t, -1)
        if size >= 0:
            p += size
        elif t in _LENGTH_BYTE_TYPES:
            if p >= end:
                raise MalformedPacket("binary row shorter than its columns")
            p += 1 + payload[p]
        elif t != 6:
            p = _binary_string(payload, p, end)[1]
        if p > end:
            raise MalformedPacket("binary row shorter than its values")
    size = (n + 9) // 8
    head = bytearray(payload[pos:bitmap + size])
    used = n + 2 - 8 * (size - 1)  # bits of the last bitmap byte that belong to kept columns
    if used < 8:
        head[size] &= (1 << used) - 1
    return bytes(head) + payload[values:p]


def lenenc_in_binary(column_type: int) -> bool:
    """A type the binary protocol sends as a length-encoded string: the same bytes as the text protocol's
    value (strings, DECIMAL, ENUM, SET, BIT, JSON, GEOMETRY)."""
    return column_type not in _FIXED_SIZES and column_type not in _LENGTH_BYTE_TYPES and column_type != 6


def binary_prefix(payload: bytes, columns: int, n: int, pos: int = 0, end: int = -1) -> tuple[bytes | None, ...]:
    """The first `n` values of the binary row payload[pos:end] of `columns` columns, as text values, when
    those `n` columns are all `lenenc_in_binary` (the caller checks): read in place like `text_prefix`."""
    if end < 0:
        end = len(payload)
    if pos >= end or payload[pos] != 0:
        raise MalformedPacket("a binary row starts with 0x00")
    bitmap = pos + 1
    p = bitmap + (columns + 9) // 8
    out: list[bytes | None] = []
    for i in range(n):
        bit = i + 2
        if payload[bitmap + (bit >> 3)] & (1 << (bit & 7)):
            out.append(None)
            continue
        start, p = _binary_string(payload, p, end)
        if p > end:
            raise MalformedPacket("binary row shorter than its values")
        out.append(payload[start:p])
    return tuple(out)


def _binary_string(payload: bytes, p: int, end: int) -> tuple[int, int]:
    """(start, stop) of the length-encoded value of a binary row at payload[p] (no NULL marker there: NULLs
    are in the row's bitmap), shared by `binary_cut` and `binary_prefix`."""
    if p >= end:
        raise MalformedPacket("binary row shorter than its columns")
    first = payload[p]
    if first < 0xFB:
        return p + 1, p + 1 + first
    size = {0xFC: 2, 0xFD: 3, 0xFE: 8}.get(first, 0)
    if not size:
        raise MalformedPacket("bad length in a binary row")
    start = p + 1 + size
    return start, start + int.from_bytes(payload[p + 1:start], "little")
