"""`protocol.binary` on real MariaDB 10.11 bytes (``fixtures/binary``, recorded by its ``capture.py``).

The strongest checks are against the server itself: the same SELECT answered through the text protocol
gives the expected `binary_row_to_text` output; ``SELECT ? AS a, ? AS b`` echoes the parameters a
COM_STMT_EXECUTE carried, so its answer row must decode to the values the request decodes to; and the
row mysql-connector-python's INSERT stored is what the server read from the request.
"""

from __future__ import annotations

import datetime
from decimal import Decimal
from typing import Any

import pytest

from protocol.binary import (
    CURSOR_TYPE_READ_ONLY,
    LAST_STATEMENT_ID,
    ZERO_DATE,
    ComStmtClose,
    ComStmtExecute,
    ComStmtFetch,
    ComStmtPrepare,
    ComStmtReset,
    ComStmtSendLongData,
    ParamType,
    PrepareResponse,
    RawDateTime,
    StmtPrepareOK,
    binary_cell_spans,
    binary_cell_widths,
    binary_null_bitmap_size,
    binary_row_cells,
    binary_row_to_text,
    decode_binary_row,
    encode_binary_row,
    text_row_to_binary,
    value_to_sql_literal,
)
from protocol.constants import ColumnFlag, ColumnType, ServerStatus
from protocol.framing import FrameDecoder
from protocol.packets import ColumnDefinition41, decode_text_row
from protocol.results import ResultEnd, ResultHeader, ResultParser, ResultRelay
from protocol.wire import MalformedPacket
from tests.protocol.fixtures.binary import Exchange, exchange
from tests.protocol.fixtures.binary.capture import CONNECTOR_PARAMS

T = ColumnType
FRAMINGS = ["eof", "deof"]
NCOLS = 28
D = datetime.date
DT = datetime.datetime
TD = datetime.timedelta


# --- the all-types table ---------------------------------------------------------------------------------


def _result(ex: Exchange, deof: bool) -> tuple[list[ColumnDefinition41], list[bytes]]:
    """Columns and row payloads of a one-result-set answer."""
    n = ex.answer[0][0]
    cols = [ColumnDefinition41.decode(p) for p in ex.answer[1 : 1 + n]]
    first_row = 1 + n + (0 if deof else 1)
    return cols, ex.answer[first_row:-1]


def _table(framing: str) -> tuple[list[ColumnDefinition41], list[tuple[bytes | None, ...]], list[bytes]]:
    deof = framing == "deof"
    cols, text_payloads = _result(exchange(f"types_{framing}", "COM_QUERY"), deof)
    bcols, binary_rows = _result(exchange(f"types_{framing}", "COM_STMT_EXECUTE"), deof)
    assert bcols == cols
    return cols, [decode_text_row(p, NCOLS) for p in text_payloads], binary_rows


COLUMN_NAMES = [c.name for c in _table("deof")[0]]
ROW_IDS = list(range(1, 8))

# (row id, column, decoded Python value): one line per interesting cell
CELLS: list[tuple[int, str, object]] = [
    (1, "ti", -128), (2, "ti", 127), (1, "uti", 0), (2, "uti", 255),
    (1, "si", -32768), (2, "usi", 65535), (1, "mi", -8388608), (2, "umi", 16777215),
    (1, "i", -2147483648), (2, "ui", 4294967295),
    (1, "bi", -(2**63)), (2, "bi", 2**63 - 1), (2, "ubi", 2**64 - 1), (4, "bi", -1),
    (1, "dc", Decimal("-12345678901234.123456")), (2, "dc", Decimal("99999999999999.999999")),
    (4, "dc", Decimal("0.000001")),
    (1, "f", 1.5), (2, "f", 3.1415927410125732), (4, "f", 1.000000013351432e-10),
    (1, "d", 2.25e-300), (2, "d", 1e300), (7, "d", -1.2345678901234568e-05),
    (1, "d2", 1.5), (1, "zf", 42),
    (1, "dt", D(2024, 2, 29)), (2, "dt", ZERO_DATE), (4, "dt", RawDateTime(2024, 0, 15)), (5, "dt", D(1, 1, 1)),
    (1, "dtm", DT(2024, 2, 29, 23, 59, 58, 123456)), (2, "dtm", ZERO_DATE),
    (5, "dtm", DT(9999, 12, 31, 23, 59, 59, 999999)), (6, "dtm", DT(2024, 1, 1, 0, 0, 0, 1)),
    (1, "dtm0", DT(2024, 2, 29)), (4, "dtm0", DT(1999, 12, 31, 23, 59, 59)),
    (1, "ts", DT(2024, 2, 29, 12, 0, 0, 500000)), (2, "ts", None),
    (1, "tm", -TD(hours=1, minutes=2, seconds=3, milliseconds=456)), (2, "tm", -TD(hours=838, minutes=59, seconds=59)),
    (4, "tm", TD(hours=25, milliseconds=1)), (5, "tm", TD(0)), (7, "tm", -TD(milliseconds=1)),
    (1, "yr", 2024), (2, "yr", 0),
    (1, "vc", "日本語 ☃ 😀".encode()), (2, "vc", b""), (1, "bl", bytes(range(256))),
    (1, "js", '{"k": [1, "ü"]}'.encode()), (1, "en", b"b"), (1, "st", b"a,c"), (1, "bt", b"\x0a\x5f"),
    (3, "ti", None), (3, "js", None),
]

# (row id, column, server text, our text): where binary_row_to_text knowingly differs from the server
TEXT_DIFFERENCES = [
    (2, "f", b"3.14159", b"3.1415927"),  # FLOAT: the server prints 6 digits, which do not read back
]


@pytest.mark.parametrize("framing", FRAMINGS)
@pytest.mark.parametrize(("row_id", "column", "expected"), CELLS)
def test_binary_row_cells(framing: str, row_id: int, column: str, expected: object) -> None:
    cols, _, rows = _table(framing)
    value = decode_binary_row(rows[row_id - 1], cols)[COLUMN_NAMES.index(column)]
    assert value == expected and type(value) is type(expected)


@pytest.mark.parametrize("framing", FRAMINGS)
@pytest.mark.parametrize("row_id", ROW_IDS)
def test_binary_row_round_trips(framing: str, row_id: int) -> None:
    cols, _, rows = _table(framing)
    row = rows[row_id - 1]
    assert encode_binary_row(decode_binary_row(row, cols), cols) == row
    assert text_row_to_binary(binary_row_to_text(row, cols), cols) == row


@pytest.mark.parametrize("framing", FRAMINGS)
@pytest.mark.parametrize("row_id", ROW_IDS)
def test_binary_row_to_text_is_the_servers_text(framing: str, row_id: int) -> None:
    cols, text_rows, rows = _table(framing)
    got = list(binary_row_to_text(rows[row_id - 1], cols))
    server = list(text_rows[row_id - 1])
    for rid, column, server_text, ours in TEXT_DIFFERENCES:
        if rid == row_id:
            i = COLUMN_NAMES.index(column)
            assert (server[i], got[i]) == (server_text, ours)
            server[i] = ours
    assert got == server


@pytest.mark.parametrize("framing", FRAMINGS)
@pytest.mark.parametrize("row_id", ROW_IDS)
def test_text_row_to_binary_is_the_servers_binary_row(framing: str, row_id: int) -> None:
    cols, text_rows, rows = _table(framing)
    text = list(text_rows[row_id - 1])
    if any(rid == row_id for rid, *_ in TEXT_DIFFERENCES):
        assert text_row_to_binary(text, cols) != rows[row_id - 1]  # 3.14159 is another float
        text = list(binary_row_to_text(rows[row_id - 1], cols))
    assert text_row_to_binary(text, cols) == rows[row_id - 1]


@pytest.mark.parametrize("row_id", ROW_IDS)
def test_truncated_or_padded_rows_are_malformed(row_id: int) -> None:
    cols, _, rows = _table("deof")
    row = rows[row_id - 1]
    for end in range(len(row)):
        with pytest.raises(MalformedPacket):
            decode_binary_row(row[:end], cols)
        with pytest.raises(MalformedPacket):
            binary_row_to_text(row[:end], cols)
    for fn in (decode_binary_row, binary_row_to_text):
        with pytest.raises(MalformedPacket):
            fn(row + b"\x00", cols)


@pytest.mark.parametrize(
    ("ctype", "flags", "decimals", "text", "note"),
    [
        (T.DOUBLE, 0, 31, b"1e15", "my_gcvt: e notation from the 16th digit"),
        (T.DOUBLE, 0, 31, b"100000000000000", "1e14 still in f notation"),
        (T.DOUBLE, 0, 31, b"0.000000000000001", "1e-15 still in f notation"),
        (T.DOUBLE, 0, 31, b"1e-16", "1e-16 in e notation"),
        (T.DOUBLE, 0, 31, b"-1.5e20", "no '+' in the exponent"),
        (T.DOUBLE, 0, 31, b"-0", "negative zero"),
        (T.FLOAT, 0, 31, b"0.1", "shortest text for the float nearest 0.1"),
        (T.FLOAT, 0, 31, b"16777217", "not a float: reads back as 16777216"),
        (T.DOUBLE, 0, 2, b"2.50", "fixed decimals"),
        (T.DATETIME, 0, 3, b"2024-01-02 03:04:05.060", "DATETIME(3)"),
        (T.DATETIME, 0, 0, b"0000-00-00 00:00:00", "zero datetime"),
        (T.TIME, 0, 0, b"-838:59:59", "TIME minimum"),
        (T.TIME, 0, 6, b"100:00:00.000001", "TIME over 24 hours"),
        (T.LONG, int(ColumnFlag.ZEROFILL), 0, b"00000000042", "ZEROFILL pads to the display width"),
        (T.NEWDECIMAL, 0, 10, b"0.0000001000", "DECIMAL digits kept as sent"),
    ],
)
def test_text_binary_text(ctype: ColumnType, flags: int, decimals: int, text: bytes, note: str) -> None:
    col = ColumnDefinition41("c", ctype, flags=flags, decimals=decimals, column_length=11)
    row = text_row_to_binary([text], [col])
    back = binary_row_to_text(row, [col])[0]
    if text == b"16777217":
        assert back == b"16777216", note
    else:
        assert back == text, note
    assert text_row_to_binary([back], [col]) == row


def test_null_bitmap_offset() -> None:
    cols = [ColumnDefinition41(f"c{i}", T.LONG) for i in range(7)]
    assert binary_null_bitmap_size(6) == 1 and binary_null_bitmap_size(7) == 2
    row = encode_binary_row([None, 1, None, None, None, None, None], cols)
    assert row == b"\x00\xf4\x01" + b"\x01\x00\x00\x00"  # bits 2 and 4..8: offset 2
    assert decode_binary_row(row, cols) == (None, 1, None, None, None, None, None)


# --- COM_STMT_PREPARE ------------------------------------------------------------------------------------


@pytest.mark.parametrize("framing", FRAMINGS)
@pytest.mark.parametrize(
    ("name", "comment", "num_columns", "num_params"),
    [
        ("types", "COM_STMT_PREPARE", NCOLS, 1),
        ("stmt_corners", "COM_STMT_PREPARE with two", 2, 2),
        ("stmt_corners", "COM_STMT_PREPARE of a statement without", 0, 0),
    ],
)
def test_prepare_answer(framing: str, name: str, comment: str, num_columns: int, num_params: int) -> None:
    deof = framing == "deof"
    ex = exchange(f"{name}_{framing}", comment)
    assert ComStmtPrepare.decode(ex.sent[0]).encode() == ex.sent[0]
    ok = StmtPrepareOK.decode(ex.answer[0])
    assert (ok.num_columns, ok.num_params, ok.warnings) == (num_columns, num_params, 0)
    assert ok.encode() == ex.answer[0]
    assert ok.following_packets(deof) == len(ex.answer) - 1
    resp = PrepareResponse.decode(ex.answer, deof)
    assert (len(resp.columns), len(resp.params)) == (num_columns, num_params)
    status = int(ServerStatus.AUTOCOMMIT)
    assert resp.encode(deof, status) == ex.answer
    other = PrepareResponse.decode(exchange(f"{name}_{'eof' if deof else 'deof'}", comment).answer, not deof)
    assert other.encode(deof, status)[1:] == ex.answer[1:]  # re-framed for the other kind of client
    for end in range(len(ex.answer[0])):
        with pytest.raises(MalformedPacket):
            StmtPrepareOK.decode(ex.answer[0][:end])
    if len(ex.answer) > 1:
        with pytest.raises(MalformedPacket):
            PrepareResponse.decode(ex.answer[:-1], deof)


def test_prepare_error_is_not_prepare_ok() -> None:
    with pytest.raises(MalformedPacket):
        StmtPrepareOK.decode(exchange("stmt_corners_deof", "COM_STMT_PREPARE of bad SQL").answer[0])


# --- COM_STMT_EXECUTE ------------------------------------------------------------------------------------

VS, LL = ParamType(T.VAR_STRING), ParamType(T.LONGLONG)
ULL = ParamType(T.LONGLONG, True)

# (comment, num params, previous types, long data, statement id, flags, values, types, new params bound)
EXECUTES: list[Any] = [
    pytest.param("execute: VAR_STRING", 2, None, None, None, 0, (b"x", 7), (VS, ULL), True, id="bound"),
    pytest.param("execute: no new types", 2, (VS, ULL), None, None, 0, (b"yz", 8), (VS, ULL), False,
                 id="previous-types"),
    pytest.param("execute statement 0xFFFFFFFF", 2, None, None, LAST_STATEMENT_ID, 0, (None, -1),
                 (ParamType(T.NULL), ParamType(T.TINY)), True, id="last-statement"),
    pytest.param("execute: param 0 from long data", 2, None, {0: b"longdata"}, None, 0, (b"longdata", 2.5),
                 (ParamType(T.BLOB), ParamType(T.DOUBLE)), True, id="long-data"),
    pytest.param("execute with CURSOR_TYPE_READ_ONLY", 1, None, None, None, CURSOR_TYPE_READ_ONLY, (4,),
                 (ParamType(T.LONG),), True, id="cursor"),
]


@pytest.mark.parametrize("framing", FRAMINGS)
@pytest.mark.parametrize(("comment", "n", "previous", "long_data", "stmt", "flags", "values", "types", "bound"),
                         EXECUTES)
def test_execute_decode(framing: str, comment: str, n: int, previous: tuple[ParamType, ...] | None,
                        long_data: dict[int, bytes] | None, stmt: int | None, flags: int,
                        values: tuple[object, ...], types: tuple[ParamType, ...], bound: bool) -> None:
    ex = exchange(f"stmt_corners_{framing}", comment)
    payload = ex.sent[0]
    cmd = ComStmtExecute.decode(payload, n, previous, long_data)
    assert (cmd.flags, cmd.iteration_count, cmd.values, cmd.types, cmd.new_params_bound) == (
        flags, 1, values, types, bound)
    if stmt is not None:
        assert cmd.statement_id == stmt
    if bound and not long_data:
        assert cmd.encode() == payload  # canonical: the same bytes back
    if n == 2:  # SELECT ? AS a, ? AS b: the server echoes what it read
        cols, rows = _result(ex, framing == "deof")
        assert decode_binary_row(rows[0], cols) == values
    # what encode() sends (types bound, long data inline) means the same
    again = ComStmtExecute.decode(cmd.encode(), n, None)
    assert (again.values, again.types) == (values, types)
    for end in range(len(payload)):
        with pytest.raises(MalformedPacket):
            ComStmtExecute.decode(payload[:end], n, previous, long_data)
    with pytest.raises(MalformedPacket):
        ComStmtExecute.decode(payload + b"\x00", n, previous, long_data)


def test_execute_without_types_needs_previous_ones() -> None:
    payload = exchange("stmt_corners_deof", "execute: no new types").sent[0]
    with pytest.raises(MalformedPacket):
        ComStmtExecute.decode(payload, 2, None)
    with pytest.raises(MalformedPacket):
        ComStmtExecute.decode(payload, 2, (VS,))


def test_execute_long_data_of_a_non_string_type_becomes_a_string() -> None:
    cmd = ComStmtExecute(1, 0, 1, (5,), (ParamType(T.LONG),), True)
    got = ComStmtExecute.decode(cmd.encode()[:-4], 1, None, {0: b"12"})
    assert (got.values, got.types) == ((b"12",), (ParamType(T.STRING),))


def _connector_frame(command: int) -> bytes:
    return next(p for p in exchange("connector_insert", "mysql-connector-python").sent if p[0] == command)


def test_connector_execute_with_every_type() -> None:
    prepare, long_data, execute = (_connector_frame(c) for c in (0x16, 0x18, 0x17))
    assert ComStmtPrepare.decode(prepare).sql.startswith(b"INSERT INTO t_params")
    ld = ComStmtSendLongData.decode(long_data)
    assert (ld.param_id, ld.data) == (11, b"streamed " * 3)
    assert ld.encode() == long_data
    cmd = ComStmtExecute.decode(execute, 13, None, {ld.param_id: ld.data})
    expected = list(CONNECTOR_PARAMS)
    expected[5] = bytes(range(256))
    expected[6] = "ü☃".encode()
    # the connector writes a negative timedelta's day count and its positive remainder: the server reads
    # -(2 days 01:02:03.000005) and stored -49:02:03.000005, and so does the decoder
    expected[9] = -TD(hours=49, minutes=2, seconds=3, microseconds=5)
    expected[11] = b"streamed " * 3
    assert cmd.values == tuple(expected)
    assert [t.type for t in cmd.types] == [T.NULL, T.TINY, T.LONGLONG, T.DOUBLE, T.DECIMAL, T.STRING, T.STRING,
                                          T.DATE, T.DATETIME, T.TIME, T.TIME, T.BLOB, T.SHORT]
    assert [t.unsigned for t in cmd.types][:3] == [False, False, True]
    again = ComStmtExecute.decode(cmd.encode(), 13, None)
    assert again.values == cmd.values


@pytest.mark.parametrize(
    ("value", "ptype"),
    [
        (None, ParamType(T.NULL)),
        (-(2**63), LL), (2**63 - 1, LL), (2**63, ULL), (2**64 - 1, ULL),
        (2**64, ParamType(T.NEWDECIMAL)), (-(2**63) - 1, ParamType(T.NEWDECIMAL)),
        (1.5, ParamType(T.DOUBLE)), (Decimal("-0.000000100"), ParamType(T.NEWDECIMAL)),
        (b"\x00\xff", VS), ("ü", VS),
        (D(2024, 2, 29), ParamType(T.DATE)), (DT(2024, 2, 29, 1, 2, 3, 4), ParamType(T.DATETIME)),
        (ZERO_DATE, ParamType(T.DATE)), (RawDateTime(0, 0, 0, 1), ParamType(T.DATETIME)),
        (TD(days=-40, microseconds=1), ParamType(T.TIME)), (datetime.time(1, 2, 3), ParamType(T.TIME)),
    ],
)
def test_inferred_parameter_types_round_trip(value: object, ptype: ParamType) -> None:
    assert ParamType.of(value) == ptype
    cmd = ComStmtExecute(7, 0, 1, (value, 1), (), True)
    got = ComStmtExecute.decode(cmd.encode(), 2, None)
    expected: object = value
    if isinstance(value, int) and ptype.type == T.NEWDECIMAL:
        expected = Decimal(value)
    elif isinstance(value, str):
        expected = value.encode()
    elif isinstance(value, datetime.time):
        expected = TD(hours=1, minutes=2, seconds=3)
    assert got.values == (expected, 1)
    assert got.types == (ptype, LL)


def test_execute_encode_rejects_values_that_do_not_fit_their_type() -> None:
    with pytest.raises(ValueError):
        ComStmtExecute(1, 0, 1, (256,), (ParamType(T.TINY, True),), True).encode()
    with pytest.raises(TypeError):
        ComStmtExecute(1, 0, 1, (b"x",), (ParamType(T.LONG),), True).encode()


@pytest.mark.parametrize(
    ("cls", "comment"),
    [
        (ComStmtReset, "COM_STMT_RESET"),
        (ComStmtClose, "COM_STMT_CLOSE"),
        (ComStmtFetch, "COM_STMT_FETCH 2"),
        (ComStmtSendLongData, "COM_STMT_SEND_LONG_DATA param 0 'long'"),
    ],
)
def test_small_commands(cls: Any, comment: str) -> None:
    payload = exchange("stmt_corners_deof", comment).sent[0]
    cmd = cls.decode(payload)
    assert cmd.encode() == payload
    for end in range(min(len(payload), 7)):
        with pytest.raises(MalformedPacket):
            cls.decode(payload[:end])
    with pytest.raises(MalformedPacket):
        cls.decode(b"\x03" + payload[1:])  # another command


def test_fetch_and_long_data_fields() -> None:
    assert ComStmtFetch.decode(exchange("stmt_corners_deof", "COM_STMT_FETCH 5").sent[0]).num_rows == 5
    ld = ComStmtSendLongData.decode(exchange("stmt_corners_deof", "COM_STMT_SEND_LONG_DATA param 0 'data'").sent[0])
    assert (ld.param_id, ld.data) == (0, b"data")


# --- binary results through ResultRelay / ResultParser ------------------------------------------------


def _stream(ex: Exchange) -> bytes:
    return b"".join(ex.answer_frames)


def _payloads(data: bytes) -> list[bytes]:
    dec = FrameDecoder()
    dec.feed(data)
    return [p for _first, _last, p in dec.packets()]


@pytest.mark.parametrize("backend", FRAMINGS)
@pytest.mark.parametrize("client", FRAMINGS)
def test_relay_passes_binary_rows_starting_with_0x00(backend: str, client: str) -> None:
    """In the ROWS phase only 0xFE (short) and 0xFF are special, so a binary row's 0x00 is not an OK."""
    src = exchange(f"types_{backend}", "COM_STMT_EXECUTE")
    relay = ResultRelay(backend_deprecate_eof=backend == "deof", client_deprecate_eof=client == "deof")
    out = relay.feed(_stream(src))
    assert relay.done and relay.rows == 7 and relay.summary.result_sets == 1
    assert _payloads(out) == exchange(f"types_{client}", "COM_STMT_EXECUTE").answer


@pytest.mark.parametrize("framing", FRAMINGS)
def test_parser_yields_binary_rows(framing: str) -> None:
    ex = exchange(f"types_{framing}", "COM_STMT_EXECUTE")
    events = list(ResultParser(backend_deprecate_eof=framing == "deof").feed(_stream(ex)))
    assert isinstance(events[0], ResultHeader) and isinstance(events[-1], ResultEnd)
    rows = events[1:-1]
    assert [r[:1] for r in rows] == [b"\x00"] * 7  # type: ignore[index]
    assert [decode_binary_row(r, events[0].columns)[0] for r in rows] == ROW_IDS  # type: ignore[arg-type]


def test_relay_ends_a_cursor_open_answer_under_deprecate_eof() -> None:
    ex = exchange("stmt_corners_deof", "execute with CURSOR_TYPE_READ_ONLY")
    relay = ResultRelay(backend_deprecate_eof=True, client_deprecate_eof=True)
    assert relay.feed(_stream(ex)) == _stream(ex)
    assert relay.done and relay.rows == 0 and relay.summary.status & ServerStatus.CURSOR_EXISTS


@pytest.mark.parametrize("client", FRAMINGS)
def test_relay_ends_a_cursor_open_answer_with_classic_eof(client: str) -> None:
    """The column EOF carrying CURSOR_EXISTS ends the answer; a DEPRECATE_EOF client gets it as the
    OK-with-0xFE that MariaDB itself sends there."""
    ex = exchange("stmt_corners_eof", "execute with CURSOR_TYPE_READ_ONLY")
    relay = ResultRelay(backend_deprecate_eof=False, client_deprecate_eof=client == "deof", cursor=True)
    out = relay.feed(_stream(ex))
    assert relay.done and relay.rows == 0 and relay.summary.status & ServerStatus.CURSOR_EXISTS
    expected = exchange(f"stmt_corners_{client}", "execute with CURSOR_TYPE_READ_ONLY").answer
    assert [p[:1] for p in _payloads(out)] == [p[:1] for p in expected]


@pytest.mark.parametrize(("backend", "client"), [(b, c) for b in FRAMINGS for c in FRAMINGS])
def test_relay_of_a_fetch_answer(backend: str, client: str) -> None:
    src = exchange(f"stmt_corners_{backend}", "COM_STMT_FETCH 5")
    relay = ResultRelay(backend_deprecate_eof=backend == "deof", client_deprecate_eof=client == "deof",
                        rows_only=True)
    out = relay.feed(_stream(src))
    assert relay.done and relay.summary.status & ServerStatus.LAST_ROW_SENT
    assert _payloads(out)[:-1] == src.answer[:-1]


@pytest.mark.parametrize("framing", FRAMINGS)
def test_fetch_answers_are_rows_and_an_end(framing: str) -> None:
    """A COM_STMT_FETCH answer has no column count: ResultRelay/ResultParser (which start by expecting
    OK | ERR | column count) cannot read it; the rows decode with the cursor's columns."""
    cols, _ = _result(exchange(f"stmt_corners_{framing}", "execute with CURSOR_TYPE_READ_ONLY"), framing == "deof")
    first = exchange(f"stmt_corners_{framing}", "COM_STMT_FETCH 2").answer
    last = exchange(f"stmt_corners_{framing}", "COM_STMT_FETCH 5").answer
    assert [decode_binary_row(p, cols)[0] for p in first[:-1] + last[:-1]] == [4, 5, 6, 7]
    # EOF: 0xFE, warnings, status; OK with 0xFE header: 0xFE, 0 affected, 0 insert id, status
    status = int.from_bytes(last[-1][3:5], "little")
    assert status & ServerStatus.LAST_ROW_SENT


# --- SQL literals ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "literal"),
    [
        (None, "NULL"), (-5, "-5"), (2**64 - 1, "18446744073709551615"), (True, "1"),
        (1.5, "1.5"), (1e300, "1e300"), (2.5e-300, "2.5e-300"), (Decimal("1E-7"), "0.0000001"),
        ("it's", "'it\\'s'"), (b"a\\b\x00\n\r\x1a\"", "'a\\\\b\\0\\n\\r\\Z\\\"'"), ("日本", "'日本'"),
        (b"\xff\x00", "X'FF00'"),
        (D(2024, 2, 29), "'2024-02-29'"), (DT(2024, 2, 29, 1, 2, 3), "'2024-02-29 01:02:03'"),
        (DT(2024, 2, 29, 1, 2, 3, 50), "'2024-02-29 01:02:03.000050'"),
        (ZERO_DATE, "'0000-00-00'"), (RawDateTime(2024, 0, 1, 5), "'2024-00-01 05:00:00'"),
        (-TD(hours=30, microseconds=1), "'-30:00:00.000001'"),
    ],
)
def test_sql_literal(value: object, literal: str) -> None:
    assert value_to_sql_literal(value) == literal


def test_sql_literal_without_backslash_escapes() -> None:
    assert value_to_sql_literal("a\\'b", no_backslash_escapes=True) == "'a\\''b'"
    with pytest.raises(ValueError):
        value_to_sql_literal(float("nan"))


def test_sql_literals_read_back_by_mariadb(mariadb: Any) -> None:
    values: list[object] = [b"a\\b'\x00\n\r\x1a\"%_", bytes(range(256)), "日本 ☃", b"\xff\x00"]
    for value in values:
        raw = value.encode() if isinstance(value, str) else value
        assert isinstance(raw, bytes)
        got = mariadb.execute(f"SELECT HEX({value_to_sql_literal(value)})")
        assert got[0][0] == raw.hex().upper()
        mode = "SET SESSION sql_mode = 'NO_BACKSLASH_ESCAPES'"
        conn = mariadb.connect()
        with conn.cursor() as cur:
            cur.execute(mode)
            cur.execute(f"SELECT HEX({value_to_sql_literal(value, no_backslash_escapes=True)})")
            assert cur.fetchone()[0] == raw.hex().upper()
        conn.close()


@pytest.mark.parametrize("framing", FRAMINGS)
@pytest.mark.parametrize("row_id", ROW_IDS)
def test_binary_cell_spans_are_the_cells(framing: str, row_id: int) -> None:
    """The cells found by type widths alone (a relay's in-place decryption) are the cells a full decode reads."""
    cols, _, rows = _table(framing)
    row = rows[row_id - 1]
    spans = binary_cell_spans(row, binary_cell_widths(cols))
    assert [None if s is None else row[s[0] : s[1]] for s in spans] == binary_row_cells(row, cols)


# (row bytes, widths): rows that do not hold exactly their cells
MALFORMED_SPANS = [
    (b"", (4,)),
    (b"\x01\x00", (4,)),
    (b"\x00\x00\x01\x02\x03", (4,)),  # a fixed cell cut short
    (b"\x00\x00\x01\x02\x03\x04\x05", (4,)),  # a byte after the last cell
    (b"\x00\x00\x05ab", (-2,)),  # a string shorter than its length
    (b"\x00\x00", (-2,)),  # no cell where one is due
    (b"\x00\x00\xff", (-2,)),  # not a length
    (b"\x00\x00\x04\x01", (-1,)),  # a date shorter than its length byte
]


@pytest.mark.parametrize(("row", "widths"), MALFORMED_SPANS)
def test_binary_cell_spans_refuse_a_malformed_row(row: bytes, widths: tuple[int, ...]) -> None:
    with pytest.raises(MalformedPacket):
        binary_cell_spans(row, widths)
