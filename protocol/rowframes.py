"""Runs of result-set row packets kept in their wire framing, for relays and merges that do not change rows.

Why: a scatter read that only concatenates or interleaves rows used to cut every row out of the read buffer
into a payload object (`FrameDecoder`), look at it as an event (`ResultParser`), and frame it again for the
client: three Python-level steps per row, the bulk of such a read's cost. Here the
rows of a read stay one byte run (`RowFrames`) with the backend's frame headers; whoever sends them rewrites
the sequence ids in place (`renumber`) and writes the run with one call. Packets of 16 MB or more (a row split
over continuation frames) stay whole inside one run, so a run always holds complete rows.

Pure functions over bytes and native ints: this module is one of those mypyc compiles (see pyproject.toml).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from protocol.cext import load_c

__all__ = ["RowFrames", "frame_end", "frames_of", "payload_at", "renumber", "row_payloads", "scan_rows"]

MAX: Final = 0xFFFFFF  # protocol.constants.MAX_PAYLOAD: a frame this long continues in the next one


class RowFrames:
    """Complete row packets as the backend framed them (`data`; its sequence ids are the backend's, to be
    renumbered by whoever sends it) and how many rows they are (`rows`; frames may be more, for rows of 16 MB
    or more)."""

    __slots__ = ("data", "rows")

    def __init__(self, data: bytes | bytearray, rows: int) -> None:
        self.data = data
        self.rows = rows

    def __repr__(self) -> str:
        return f"RowFrames({self.rows} rows, {len(self.data)} bytes)"

    def payloads(self) -> list[bytes]:
        """The rows' payloads (continuation frames joined), for consumers that decode rows."""
        return row_payloads(self.data)


def scan_rows_py(buf: bytearray, pos: int) -> tuple[int, int, bool]:
    """Walk the complete row packets of `buf` from `pos`: (where they stop, how many rows, whether what
    follows is a complete packet that is not a row: the result's EOF/OK or an ERR).

    A row is any packet that is not an EOF/OK (0xFE, shorter than 9 bytes) or ERR (0xFF); a packet of 16 MB
    or more counts only once all its continuation frames are there."""
    end = len(buf)
    rows = 0
    while end - pos >= 4:
        length = buf[pos] | (buf[pos + 1] << 8) | (buf[pos + 2] << 16)
        nxt = pos + 4 + length
        if nxt > end:
            return pos, rows, False
        if length:
            first = buf[pos + 4]
            if first >= 0xFE and (first == 0xFF or length < 9):
                return pos, rows, True
        if length == MAX:
            # continuation frames follow until one shorter than MAX; their first bytes are data
            while True:
                if end - nxt < 4:
                    return pos, rows, False
                part = buf[nxt] | (buf[nxt + 1] << 8) | (buf[nxt + 2] << 16)
                nxt += 4 + part
                if nxt > end:
                    return pos, rows, False
                if part != MAX:
                    break
        pos = nxt
        rows += 1
    return pos, rows, False


def renumber_py(data: bytearray, seq: int) -> int:
    """Give every frame of `data` (complete frames only) the next sequence id from `seq`, in place; returns
    the sequence id after the last frame."""
    pos = 0
    end = len(data)
    while pos < end:
        data[pos + 3] = seq
        seq = (seq + 1) & 0xFF
        pos += 4 + (data[pos] | (data[pos + 1] << 8) | (data[pos + 2] << 16))
    return seq


C: Any = load_c("protocol._crowframes")  # the per-row steps below in C, when built (protocol.cext)
scan_rows: Callable[[bytearray, int], tuple[int, int, bool]] = scan_rows_py if C is None else C.scan_rows
renumber: Callable[[bytearray, int], int] = renumber_py if C is None else C.renumber


def frame_end(data: bytes | bytearray, pos: int) -> int:
    """Where the packet whose first frame starts at `pos` ends (after its continuation frames)."""
    while True:
        length = data[pos] | (data[pos + 1] << 8) | (data[pos + 2] << 16)
        pos += 4 + length
        if length != MAX:
            return pos


def payload_at(data: bytes | bytearray, pos: int, stop: int) -> bytes:
    """The payload of the packet framed in data[pos:stop] (continuation frames joined)."""
    length = data[pos] | (data[pos + 1] << 8) | (data[pos + 2] << 16)
    if length != MAX:
        return bytes(data[pos + 4:stop])
    parts: list[bytes] = []
    while pos < stop:
        length = data[pos] | (data[pos + 1] << 8) | (data[pos + 2] << 16)
        parts.append(bytes(data[pos + 4:pos + 4 + length]))
        pos += 4 + length
    return b"".join(parts)


def row_payloads(data: bytes | bytearray) -> list[bytes]:
    """Every packet's payload in `data`."""
    out: list[bytes] = []
    pos = 0
    end = len(data)
    while pos < end:
        length = data[pos] | (data[pos + 1] << 8) | (data[pos + 2] << 16)
        if length == MAX:
            stop = frame_end(data, pos)
            out.append(payload_at(data, pos, stop))
            pos = stop
        else:
            out.append(bytes(data[pos + 4:pos + 4 + length]))
            pos += 4 + length
    return out


def frames_of(payloads: list[bytes]) -> RowFrames:
    """Row payloads framed (sequence ids from 0; whoever sends them renumbers): rows read into memory, tests."""
    out = bytearray()
    seq = 0
    for p in payloads:
        n = len(p)
        pos = 0
        while True:
            chunk = n - pos if n - pos < MAX else MAX
            out += bytes((chunk & 0xFF, (chunk >> 8) & 0xFF, chunk >> 16, seq))
            out += p[pos:pos + chunk]
            seq = (seq + 1) & 0xFF
            pos += chunk
            if chunk < MAX:
                break
    return RowFrames(out, len(payloads))
