"""text_prefix reads the same leading values as decode_text_row (text_cut: where they end), in place inside a
larger buffer too, and both refuse rows that end early."""

from __future__ import annotations

import pytest

from protocol.packets import decode_text_row, encode_text_row
from protocol.rowscan import text_cut, text_prefix
from protocol.wire import MalformedPacket

ROWS: list[list[bytes | None]] = [
    [b"1", b"abc", None], [None, None], [b"", b"x"], [b"y" * 250, b"z"], [b"y" * 251, b"1"], [b"q" * 70000, None],
    [b"w" * (1 << 24), b"2"], [b"\xff\xfe", b"\x00"],
]


@pytest.mark.parametrize("values", ROWS, ids=range(len(ROWS)))
def test_text_prefix_matches_decode_text_row(values: list[bytes | None]) -> None:
    payload = encode_text_row(values)
    framed = b"head" + payload + b"tail"  # the row inside a run of frames
    for n in range(len(values) + 1):
        assert text_prefix(payload, n) == decode_text_row(payload, n)
        assert text_prefix(framed, n, 4, 4 + len(payload)) == decode_text_row(payload, n)
        assert text_cut(framed, n, 4, 4 + len(payload)) - 4 == len(encode_text_row(values[:n]))


@pytest.mark.parametrize("payload", [b"", b"\x05abc", b"\xfc\x10", b"\xff", b"\x01a"])
def test_text_prefix_refuses_short_rows(payload: bytes) -> None:
    with pytest.raises(MalformedPacket):
        text_prefix(payload, 2)
    with pytest.raises(MalformedPacket):
        text_cut(payload, 2)
