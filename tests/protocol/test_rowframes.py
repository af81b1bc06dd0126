"""protocol.rowframes: runs of row frames are scanned, renumbered and cut into payloads exactly like
`FrameDecoder` frames and `encode_packet` frames them, rows of 16 MB and more included."""

from __future__ import annotations

import pytest

from protocol.constants import MAX_PAYLOAD
from protocol.framing import FrameDecoder, encode_packet
from protocol.rowframes import frames_of, renumber, row_payloads, scan_rows

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
def test_scan_stops_at_the_end_and_at_incomplete_rows(payloads: list[bytes], tail: bytes) -> None:
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
def test_renumber_gives_the_frames_encode_packet_gives(payloads: list[bytes], seq: int) -> None:
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
