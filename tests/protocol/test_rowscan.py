"""text_prefix reads the same leading values as decode_text_row (text_cut: where they end), in place inside a
larger buffer too, and both refuse rows that end early; binary_cut keeps a binary row's leading columns as
the server would have sent a row of those columns alone."""

from __future__ import annotations

import pytest

from protocol.binary import text_row_to_binary
from protocol.constants import ColumnFlag
from protocol.constants import ColumnType as T
from protocol.packets import ColumnDefinition41, decode_text_row, encode_text_row
from protocol.rowscan import binary_cut, binary_prefix, lenenc_in_binary, text_cut, text_prefix
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


# one column of every binary value layout: fixed sizes, a length byte (temporals), length-encoded strings
BINARY_COLUMNS = [ColumnDefinition41(f"c{i}", t, flags=f, decimals=d) for i, (t, f, d) in enumerate([
    (T.TINY, 0, 0), (T.SHORT, 0, 0), (T.YEAR, ColumnFlag.UNSIGNED, 0), (T.INT24, 0, 0), (T.LONG, 0, 0),
    (T.FLOAT, 0, 31), (T.LONGLONG, 0, 0), (T.DOUBLE, 0, 31), (T.DATE, 0, 0), (T.DATETIME, 0, 6), (T.TIME, 0, 0),
    (T.TIMESTAMP, 0, 0), (T.NEWDECIMAL, 0, 2), (T.VAR_STRING, 0, 0), (T.BLOB, 0, 0), (T.NULL, 0, 0),
    (T.STRING, 0, 0),
])]
BINARY_VALUES = [b"-5", b"300", b"2024", b"-70000", b"123456", b"1.5", b"-9000000000", b"2.25", b"2024-02-29",
                 b"2024-02-29 10:11:12.131415", b"-838:59:59", b"2001-01-01 00:00:00", b"-12.34", b"x" * 300,
                 b"y" * 70000, None, b""]


@pytest.mark.parametrize("nulls", [(), (0,), (5, 6, 7), tuple(range(0, 17, 2)), tuple(range(17))])
def test_binary_cut_is_the_row_of_the_leading_columns(nulls: tuple[int, ...]) -> None:
    values = [None if i in nulls else v for i, v in enumerate(BINARY_VALUES)]
    payload = text_row_to_binary(values, BINARY_COLUMNS)
    types = [int(c.type) for c in BINARY_COLUMNS]
    framed = b"head" + payload + b"tail"
    for n in range(len(values) + 1):
        expected = text_row_to_binary(values[:n], BINARY_COLUMNS[:n])
        assert binary_cut(payload, types, n) == expected
        assert binary_cut(framed, types, n, 4, 4 + len(payload)) == expected


@pytest.mark.parametrize("payload", [b"", b"\x01\x00", b"\x00\x00\x00\x05ab", b"\x00\x00\x00\xff"])
def test_binary_cut_refuses_short_rows(payload: bytes) -> None:
    with pytest.raises(MalformedPacket):
        binary_cut(payload, [T.VAR_STRING, T.VAR_STRING], 2)


@pytest.mark.parametrize("nulls", [(), (0,), (1, 2), (0, 1, 2, 3)])
def test_binary_prefix_reads_length_encoded_values_as_text(nulls: tuple[int, ...]) -> None:
    columns = [c for c in BINARY_COLUMNS if lenenc_in_binary(c.type)] + BINARY_COLUMNS[:3]
    values = [None if i in nulls else v for i, v in enumerate(
        [b"-12.34", b"x" * 300, b"y" * 70000, b"", b"-5", b"300", b"2024"])]
    payload = text_row_to_binary(values, columns)
    lenenc = sum(lenenc_in_binary(c.type) for c in columns)
    assert lenenc == 4
    for n in range(lenenc + 1):
        assert binary_prefix(payload, len(columns), n) == tuple(values[:n])
        assert binary_prefix(b"hd" + payload, len(columns), n, 2, 2 + len(payload)) == tuple(values[:n])
