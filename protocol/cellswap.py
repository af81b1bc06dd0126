"""One cell of each row replaced by a function of it, over a run of whole row frames and the packet that ends them.

Why: an answer relayed with one column changed (proxy.execution.encrypted decrypts a cipher column as the rows pass)
needs only that cell of each row found and replaced; the rest of the row, and every frame's sequence id, stay as they
came. Finding it costs nothing per row where the cells before it have fixed widths (binary rows with no NULL) and a
few length bytes otherwise (text rows), far less than decoding each row. `swap_cells` is the definition and the
fallback; protocol._crowframes has the same loop in C (tests/protocol/test_cellswap.py runs both).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from protocol.cext import load_c

__all__ = ["swap_cells"]

C: Any = load_c("protocol._crowframes")


def swap_cells(
    buf: bytes,
    pos: int,
    fixed: int,
    nulls: int,
    index: int,
    convert: Callable[[bytes], bytes],
    c: Any = C,
) -> bytes | None:
    """`buf[pos:]` — row frames, then the frame that ends them (EOF, OK or ERR), then anything after it — with the
    cell of each row changed to `convert(cell)` (written as a length-encoded string). The cell is found:

    * `fixed >= 0`: at `fixed` bytes into a binary row's payload, when its `nulls`-byte NULL bitmap is all zero;
    * `fixed < 0`: after the `index` values before it in a text row.

    None when this does not apply, and the caller walks the answer itself: the end frame is not in `buf`, a frame
    runs past it or is 16 MB, a NULL where the cell or the ones before it are, a cell of 64 KB or more, or `convert`
    raised."""
    if c is not None:
        return c.swap_cells(buf, pos, fixed, nulls, index, convert)  # type: ignore[no-any-return]
    parts: list[bytes] = []
    end = len(buf)
    while end - pos > 4:
        length = buf[pos] | (buf[pos + 1] << 8) | (buf[pos + 2] << 16)
        first = buf[pos + 4]
        stop = pos + 4 + length
        if stop > end or length == 0xFFFFFF or length == 0:
            return None
        if first == 0xFF or (first == 0xFE and length < 9):  # the end, and what follows, as they are
            parts.append(buf[pos:])
            return b"".join(parts)
        if fixed >= 0:  # a binary row: at a fixed place when no cell is NULL
            if pos + 5 + nulls > stop or any(buf[pos + 5 : pos + 5 + nulls]):
                return None
            at = pos + 4 + fixed
        else:  # a text row: after the values before it (length-encoded strings or 0xFB, NULL)
            at = pos + 4
            for _ in range(index):
                if at >= stop:
                    return None
                b = buf[at]
                if b < 0xFB:
                    at += 1 + b
                elif b == 0xFB:
                    at += 1
                elif b == 0xFC and at + 2 < stop:
                    at += 3 + (buf[at + 1] | (buf[at + 2] << 8))
                else:
                    return None
        b = buf[at] if at < stop else 0xFB
        if b < 0xFB:
            start, size = at + 1, b
        elif b == 0xFC and at + 2 < stop:
            start, size = at + 3, buf[at + 1] | (buf[at + 2] << 8)
        else:  # NULL, or a longer length
            return None
        if start + size > stop:
            return None
        try:
            new = convert(buf[start : start + size])
        except Exception:
            return None
        n = len(new)
        cell = (bytes((n,)) if n < 0xFB else b"\xfc" + n.to_bytes(2, "little") if n < 0x10000
                else b"\xfd" + n.to_bytes(3, "little") if n < 0x1000000 else b"\xfe" + n.to_bytes(8, "little"))
        n = length - (start + size - at) + len(cell) + n
        if n >= 0xFFFFFF:
            return None
        parts += (
            bytes((n & 0xFF, (n >> 8) & 0xFF, n >> 16, buf[pos + 3])),
            buf[pos + 4 : at],
            cell,
            new,
            buf[start + size : stop],
        )
        pos = stop
    return None
