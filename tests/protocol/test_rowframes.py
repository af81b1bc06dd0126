"""protocol.rowframes: runs of row frames are scanned, renumbered and cut into payloads exactly like
`FrameDecoder` frames and `encode_packet` frames them, rows of 16 MB and more included."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest

from protocol import rowframes
from protocol.constants import MAX_PAYLOAD
from protocol.framing import FrameDecoder, encode_packet
from protocol.rowframes import frames_of, row_payloads
from tests.c_helpers import c_helper


def _c() -> Any:
    return c_helper("protocol._crowframes")


@pytest.fixture(params=["python", "c"])
def loops(request: pytest.FixtureRequest) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """(scan_rows, renumber): the Python loops, and their C form (protocol._crowframes), which must agree."""
    if request.param == "python":
        return rowframes.scan_rows_py, rowframes.renumber_py
    c = _c()
    return c.scan_rows, c.renumber

EOF5 = b"\xfe\x00\x00\x02\x00"
ERR = b"\xff\x7a\x04#42S02no such table"
ROWS: list[list[bytes]] = [
    [],
    [b"\x011"],
    [b"\x011", b"\x02ab", b"\xfb"],  # NULL
    [b"\xfe" + b"\x00" * 8 + b"x" * 3],  # a row that starts with 0xFE but is 9 bytes or more
    [b"\x00\x00\x05"],  # a binary-protocol row
    [b"\x01a", b"z" * MAX_PAYLOAD, b"y" * (MAX_PAYLOAD + 1), b"\x01b"],  # continuation frames
]


def _framed(payloads: list[bytes], seq: int = 0) -> bytes:
    out = bytearray()
    for p in payloads:
        data, seq = encode_packet(p, seq)
        out += data
    return bytes(out)


@pytest.mark.parametrize("payloads", ROWS, ids=range(len(ROWS)))
@pytest.mark.parametrize("tail", [b"", EOF5, ERR], ids=["nothing", "eof", "err"])
def test_scan_stops_at_the_end_and_at_incomplete_rows(payloads: list[bytes], tail: bytes,
                                                      loops: tuple[Callable[..., Any], Callable[..., Any]]) -> None:
    scan_rows = loops[0]
    data = _framed([*payloads, tail] if tail else payloads)
    rows_len = len(_framed(payloads))
    buf = bytearray(data)
    assert scan_rows(buf, 0) == (rows_len, len(payloads), bool(tail))
    for cut in sorted({1, 3, 4, 5, rows_len - 1, rows_len + 2} - {0}):
        if 0 < cut < len(data):
            stop, rows, ended = scan_rows(bytearray(data[:cut]), 0)
            assert stop <= min(cut, rows_len) and not (ended and cut < len(data))
            assert row_payloads(data[:stop]) == payloads[:rows]


@pytest.mark.parametrize("payloads", ROWS, ids=range(len(ROWS)))
@pytest.mark.parametrize("seq", [0, 7, 255])
def test_renumber_gives_the_frames_encode_packet_gives(payloads: list[bytes], seq: int,
                                                      loops: tuple[Callable[..., Any], Callable[..., Any]]) -> None:
    renumber = loops[1]
    run = frames_of(payloads)
    assert run.rows == len(payloads) and row_payloads(run.data) == payloads
    buf = bytearray(run.data)
    expected = _framed(payloads, seq)
    after = renumber(buf, seq)
    assert bytes(buf) == expected
    dec = FrameDecoder()
    dec.feed(expected)
    frames = len(expected) and sum(1 + len(p) // MAX_PAYLOAD for p in payloads)
    assert after == (seq + frames) & 0xFF
    assert [p for _f, _l, p in dec.packets()] == payloads


def _outcome(fn: Callable[..., Any], *args: Any) -> Any:
    try:
        return ("ok", fn(*args))
    except Exception as e:
        return ("error", type(e).__name__)


def test_the_c_loops_are_the_python_ones() -> None:
    """protocol._crowframes against the Python loops over generated runs: rows, EOF/OK/ERR packets, packets cut off,
    bytes that are no frames, any start position; the same answer, the same bytes renumbered, the same error."""
    c = _c()
    rng = random.Random(17)
    for _ in range(3000):
        parts = []
        for _ in range(rng.randint(0, 6)):
            roll = rng.random()
            if roll < 0.6:
                parts.append(_framed([bytes(rng.randrange(256) for _ in range(rng.choice((0, 1, 5, 8, 9, 60))))]))
            elif roll < 0.7:
                parts.append(_framed([EOF5]))
            elif roll < 0.8:
                parts.append(_framed([ERR]))
            else:
                parts.append(bytes(rng.randrange(256) for _ in range(rng.randint(0, 6))))  # no frame
        data = b"".join(parts)
        if data and rng.random() < 0.3:
            data = data[: rng.randrange(len(data))]
        pos = rng.choice((0, 0, 1, 4, len(data), len(data) + 3))
        assert _outcome(c.scan_rows, bytearray(data), pos) == _outcome(rowframes.scan_rows_py, bytearray(data), pos)
        assert _outcome(c.scan_rows, data, pos) == _outcome(rowframes.scan_rows_py, data, pos)
        seq = rng.randrange(256)
        mine, theirs = bytearray(data), bytearray(data)
        assert _outcome(c.renumber, mine, seq) == _outcome(rowframes.renumber_py, theirs, seq), data
        assert mine == theirs
