"""`ResultRelay` and `ResultParser` on real MariaDB responses.

MariaDB answered each query twice, once to a client without CLIENT_DEPRECATE_EOF and once to a client with
it, so the expected output of every relay conversion is the server's own answer in the client's framing.
The relay's classic-framing output is also decoded by a real client library (PyMySQL's own reader, fed
from memory), which checks sequence ids and packet grammar as a client would.
"""

from __future__ import annotations

import contextlib
import io
from typing import Any

import pytest
from pymysql.connections import Connection, MySQLResult

from protocol.constants import MAX_PAYLOAD, ServerStatus
from protocol.framing import FrameDecoder, encode_packet
from protocol.packets import ERRPacket, OKPacket, encode_text_row, lenenc_str
from protocol.results import ResultEnd, ResultHeader, ResultParser, ResultRelay
from protocol.rowframes import RowFrames
from protocol.wire import MalformedPacket
from tests.protocol.fixtures import server_frames, server_stream

# (response, rows relayed, result sets, warnings, errno, affected rows, info)
RESPONSES: list[Any] = [
    pytest.param("ok_update", 0, 0, 0, None, 0, b"Rows matched: 2  Changed: 0  Warnings: 0", id="ok"),
    pytest.param("err_unknown_table", 0, 0, 0, 1146, 0, b"", id="err"),
    pytest.param("rs_types", 2, 1, 0, None, 0, b"", id="all-types"),
    pytest.param("rs_empty", 0, 1, 0, None, 0, b"", id="empty"),
    pytest.param("rs_warning", 1, 1, 1, None, 0, b"", id="warning"),
    pytest.param("multi", 2, 2, 0, None, 0, b"Rows matched: 1  Changed: 0  Warnings: 0", id="multi"),
    pytest.param("multi_err", 1, 1, 0, 1146, 0, b"", id="multi-then-err"),
]
FRAMINGS = [pytest.param(b, c, id=f"backend-{'deof' if b else 'eof'}-client-{'deof' if c else 'eof'}")
            for b in (False, True) for c in (False, True)]


def _capture(name: str, deprecate_eof: bool) -> str:
    return f"{name}_{'deof' if deprecate_eof else 'eof'}"


def _frames(data: bytes) -> list[tuple[int, bytes]]:
    dec = FrameDecoder()
    dec.feed(data)
    out = [(first, p) for first, _last, p in dec.packets()]
    assert dec.buffered == 0
    return out


def _relay(stream: bytes, chunk: int | None, **kw: Any) -> tuple[ResultRelay, bytes]:
    relay = ResultRelay(**kw)
    if chunk is None:
        return relay, relay.feed(stream)
    out = bytearray()
    for i in range(0, len(stream), chunk):
        assert not relay.done
        out += relay.feed(stream[i : i + chunk])
    return relay, bytes(out)


def _is_column_eof(frames: list[tuple[int, bytes]], i: int) -> bool:
    p = frames[i][1]
    return p[:1] == b"\xfe" and len(p) < 9 and i > 0 and frames[i - 1][1][:1] == b"\x03"


def pymysql_decode(stream: bytes, first_seq: int = 1) -> list[tuple[Any, ...]]:
    """What PyMySQL makes of a response (its reader checks each sequence id); errors come back as data."""
    conn = Connection(defer_connect=True, charset="utf8mb4")
    conn._rfile = io.BytesIO(stream)  # type: ignore[assignment]
    conn._next_seq_id = first_seq
    conn._current_timeout = conn._read_timeout  # type: ignore[attr-defined]
    out: list[tuple[Any, ...]] = []
    try:
        while True:
            r = MySQLResult(conn)
            r.read()
            out.append((r.rows, r.affected_rows, r.warning_count, r.description and [d[0] for d in r.description]))
            if not r.has_next:
                break
    except Exception as exc:  # an ERR packet ends the response
        out.append(("error", type(exc).__name__, exc.args))
    assert conn._rfile.read() == b"", "bytes after the end of the response"
    return out


@pytest.mark.parametrize(("backend_eof", "client_eof"), FRAMINGS)
@pytest.mark.parametrize(("name", "rows", "result_sets", "warnings", "errno", "affected", "info"), RESPONSES)
@pytest.mark.parametrize("chunk", [None, 1], ids=["whole", "byte-by-byte"])
@pytest.mark.parametrize("first_seq", [1, 255], ids=["seq1", "seq255"])
def test_relay_converts_to_the_servers_own_answer(
    name: str, rows: int, result_sets: int, warnings: int, errno: int | None, affected: int, info: bytes,
    backend_eof: bool, client_eof: bool, chunk: int | None, first_seq: int,
) -> None:
    src = server_stream(_capture(name, backend_eof))
    relay, out = _relay(src, chunk, backend_deprecate_eof=backend_eof, client_deprecate_eof=client_eof,
                        first_seq=first_seq)
    assert relay.done
    assert relay.rows == rows
    s = relay.summary
    assert (s.result_sets, s.warnings, s.affected_rows, s.info) == (result_sets, warnings, affected, info)
    assert (s.error.errno if s.error else None) == errno
    if errno is None:
        assert not s.status & ServerStatus.MORE_RESULTS_EXISTS
    expected = [(((f.seq - 1 + first_seq) & 0xFF), f.payload) for f in server_frames(_capture(name, client_eof))]
    got = _frames(out)
    assert [seq for seq, _ in got] == [(first_seq + i) & 0xFF for i in range(len(got))]
    assert relay.next_seq == (first_seq + len(got)) & 0xFF
    assert len(got) == len(expected)
    for i, (g, e) in enumerate(zip(got, expected, strict=True)):
        if backend_eof and not client_eof and _is_column_eof(expected, i):
            # the EOF after the column definitions is made up: the backend never sent it, so its status
            # can only be a guess; the index-use and more-results bits of this result are not known yet
            unknowable = ServerStatus.MORE_RESULTS_EXISTS | ServerStatus.NO_INDEX_USED
            assert g[1][:3] == e[1][:3] and len(g[1]) == len(e[1])
            assert (int.from_bytes(g[1][3:5], "little") | unknowable) == (
                int.from_bytes(e[1][3:5], "little") | unknowable)
        else:
            assert g == e, f"frame {i}"
    if not client_eof:
        assert pymysql_decode(out, first_seq) == pymysql_decode(server_stream(_capture(name, False)))


@pytest.mark.parametrize("name", ["rs_types", "multi", "err_unknown_table"])
def test_relay_stops_at_the_end_and_keeps_the_rest(name: str) -> None:
    src = server_stream(_capture(name, False))
    relay = ResultRelay(backend_deprecate_eof=False, client_deprecate_eof=False)
    out = relay.feed(src + b"\x01\x00\x00\x00\x00")  # the start of something that is not this response
    assert relay.done and out == src


def test_relay_passes_a_local_infile_request_on() -> None:
    """LOAD DATA LOCAL INFILE: the server's file request goes to the client (whose library decides whether to send
    the file); the answer goes on after the file, in a relay of its own."""
    relay = ResultRelay(backend_deprecate_eof=False, client_deprecate_eof=False, first_seq=3)
    out = relay.feed(encode_packet(b"\xfbrows.tsv", 1)[0])
    assert relay.done and relay.summary.local_infile == b"\xfbrows.tsv"
    assert out == encode_packet(b"\xfbrows.tsv", 3)[0] and relay.next_seq == 4


def _big_row_response(value_len: int, backend_eof: bool) -> tuple[bytes, bytes]:
    """A one-column, one-row result whose row needs continuation frames, built from a captured column."""
    col = server_frames("rs_empty_eof")[2].payload  # vc VARCHAR
    value = (b"0123456789abcdef" * (value_len // 16 + 1))[:value_len]
    row = encode_text_row([value])
    parts = [b"\x01", col]
    if not backend_eof:
        parts.append(b"\xfe\x00\x00\x02\x00")
    parts.append(row)
    parts.append(b"\xfe\x00\x00\x02\x00\x00\x00" if backend_eof else b"\xfe\x00\x00\x02\x00")
    out = bytearray()
    seq = 1
    for p in parts:
        data, seq = encode_packet(p, seq)
        out += data
    return bytes(out), value


@pytest.mark.parametrize("row_payload", [MAX_PAYLOAD, MAX_PAYLOAD + 1, 2 * MAX_PAYLOAD], ids=lambda n: f"row{n}")
@pytest.mark.parametrize(("backend_eof", "client_eof"), FRAMINGS)
def test_relay_rows_of_16mb_and_more(row_payload: int, backend_eof: bool, client_eof: bool) -> None:
    value_len = row_payload - len(lenenc_str(b"x" * row_payload)) + 1
    src, value = _big_row_response(value_len, backend_eof)
    relay = ResultRelay(backend_deprecate_eof=backend_eof, client_deprecate_eof=client_eof)
    out = bytearray()
    step = 1 << 20
    for i in range(0, len(src), step):  # frame headers land in the middle of feeds
        out += relay.feed(src[i : i + step])
    assert relay.done and relay.rows == 1
    got = _frames(bytes(out))
    assert got[-2][1] == encode_text_row([value])  # the whole row, joined again
    assert [seq for seq, _ in got] == sorted(seq for seq, _ in got)
    if not client_eof:
        assert pymysql_decode(bytes(out))[0][0] == ((value.decode(),),)


# --- ResultParser --------------------------------------------------------------------------------------

# the events of each response, as (kind, detail)
EVENTS: list[Any] = [
    pytest.param("ok_update", [("ok", 0)], id="ok"),
    pytest.param("err_unknown_table", [("err", 1146)], id="err"),
    pytest.param("rs_types", [("header", 20), ("row", 0), ("row", 0), ("end", 0)], id="all-types"),
    pytest.param("rs_empty", [("header", 2), ("end", 0)], id="empty"),
    pytest.param("rs_warning", [("header", 1), ("row", 0), ("end", 1)], id="warning"),
    pytest.param("multi", [("header", 1), ("row", 0), ("end", 0), ("ok", 0), ("header", 2), ("row", 0), ("end", 0)],
                 id="multi"),
    pytest.param("multi_err", [("header", 1), ("row", 0), ("end", 0), ("err", 1146)], id="multi-then-err"),
]


def _kind(ev: object) -> tuple[str, int]:
    if isinstance(ev, OKPacket):
        return ("ok", ev.warnings)
    if isinstance(ev, ERRPacket):
        return ("err", ev.errno)
    if isinstance(ev, ResultHeader):
        return ("header", len(ev.columns))
    if isinstance(ev, ResultEnd):
        return ("end", ev.warnings)
    assert isinstance(ev, bytes)
    return ("row", 0)


@pytest.mark.parametrize("backend_eof", [False, True], ids=["eof", "deof"])
@pytest.mark.parametrize(("name", "events"), EVENTS)
@pytest.mark.parametrize("chunk", [None, 1], ids=["whole", "byte-by-byte"])
def test_parser_events(name: str, events: list[tuple[str, int]], backend_eof: bool, chunk: int | None) -> None:
    src = server_stream(_capture(name, backend_eof))
    parser = ResultParser(backend_deprecate_eof=backend_eof)
    got: list[object] = []
    if chunk is None:
        got.extend(parser.feed(src))
    else:
        for i in range(len(src)):
            got.extend(parser.feed(src[i : i + 1]))
    assert parser.done
    assert [_kind(e) for e in got] == events
    ends = [e for e in got if isinstance(e, ResultEnd | OKPacket)]
    for e in ends[:-1]:
        assert e.status & ServerStatus.MORE_RESULTS_EXISTS
    if ends and not any(isinstance(e, ERRPacket) for e in got):
        assert not ends[-1].status & ServerStatus.MORE_RESULTS_EXISTS


def test_parser_header_carries_the_columns() -> None:
    parser = ResultParser(backend_deprecate_eof=True)
    header = next(e for e in parser.feed(server_stream("rs_types_deof")) if isinstance(e, ResultHeader))
    assert [c.name for c in header.columns][:3] == ["id", "ti", "si"]
    assert header.columns[6].name == "ubi"


# --- ResultParser(row_frames=True): rows as runs of frames ---------------------------------------------------


def _flatten(events: list[object]) -> list[object]:
    """Runs of row frames as the payloads they hold: what the default parser yields for them."""
    out: list[object] = []
    for e in events:
        if isinstance(e, RowFrames):
            assert e.rows == len(e.payloads())
            out.extend(e.payloads())
        else:
            out.append(e)
    return out


def _parse(src: bytes, chunk: int, **kw: bool) -> list[object]:
    parser = ResultParser(**kw)
    got: list[object] = []
    for i in range(0, len(src), chunk):
        assert not parser.done
        got.extend(parser.feed(src[i : i + chunk]))
    assert parser.done
    return got


@pytest.mark.parametrize("backend_eof", [False, True], ids=["eof", "deof"])
@pytest.mark.parametrize(("name", "events"), EVENTS)
@pytest.mark.parametrize("chunk", [1, 7, 1 << 20], ids=["byte-by-byte", "7-bytes", "whole"])
def test_parser_row_frames_hold_the_same_rows(name: str, events: list[tuple[str, int]], backend_eof: bool,
                                              chunk: int) -> None:
    src = server_stream(_capture(name, backend_eof))
    plain = _parse(src, chunk, backend_deprecate_eof=backend_eof)
    framed = _parse(src, chunk, backend_deprecate_eof=backend_eof, row_frames=True)
    assert [_kind(e) for e in _flatten(framed)] == events
    assert _flatten(framed) == plain


@pytest.mark.parametrize("row_payload", [MAX_PAYLOAD - 1, MAX_PAYLOAD, 2 * MAX_PAYLOAD + 3], ids=lambda n: f"row{n}")
def test_parser_row_frames_keep_rows_of_16mb_whole(row_payload: int) -> None:
    value_len = row_payload - len(lenenc_str(b"x" * row_payload)) + 1
    src, value = _big_row_response(value_len, False)
    got = _parse(src, 1 << 20, backend_deprecate_eof=False, row_frames=True)
    runs = [e for e in got if isinstance(e, RowFrames)]
    assert len(runs) == 1 and runs[0].rows == 1
    assert runs[0].payloads() == [encode_text_row([value])]
    assert isinstance(got[-1], ResultEnd)


@pytest.mark.parametrize("backend_eof", [False, True], ids=["eof", "deof"])
@pytest.mark.parametrize("name", ["rs_types", "rs_warning", "multi", "rs_empty"])
def test_a_header_seen_before_is_taken_whole_and_parses_alike(name: str, backend_eof: bool,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """`ResultParser` remembers recent result set headers by their bytes: an answer that starts with
    the same bytes gets the same header without its packets parsed, in either EOF mode, and the events are
    those of a parse from scratch, fed whole or byte by byte."""
    import protocol.results as results

    monkeypatch.setattr(results, "_HEADERS", {False: [], True: []})
    src = server_stream(_capture(name, backend_eof))
    first = _parse(src, 1 << 20, backend_deprecate_eof=backend_eof, row_frames=True)
    assert results._HEADERS[backend_eof] and not results._HEADERS[not backend_eof]
    decoded: list[bytes] = []
    real = results.ColumnDefinition41.decode
    monkeypatch.setattr(results.ColumnDefinition41, "decode",
                        classmethod(lambda cls, p: decoded.append(p) or real(p)))  # type: ignore[misc]
    again = _parse(src, 1 << 20, backend_deprecate_eof=backend_eof, row_frames=True)
    assert [_kind(e) for e in _flatten(again)] == [_kind(e) for e in _flatten(first)]
    assert again[0] == first[0]
    assert name == "multi" or not decoded  # (the second result set of "multi" is parsed: only the first is looked up)
    assert [_kind(e) for e in _flatten(_parse(src, 1, backend_deprecate_eof=backend_eof, row_frames=True))] \
        == [_kind(e) for e in _flatten(first)]
    # the other EOF mode does not take it: there the header ends elsewhere
    other, mode = server_stream(_capture(name, not backend_eof)), not backend_eof
    assert [_kind(e) for e in _flatten(_parse(other, 1 << 20, backend_deprecate_eof=mode, row_frames=True))] \
        == [_kind(e) for e in _flatten(_parse(other, 1 << 20, backend_deprecate_eof=mode))]


def test_a_header_differing_in_one_byte_is_parsed(monkeypatch: pytest.MonkeyPatch) -> None:
    import protocol.results as results

    monkeypatch.setattr(results, "_HEADERS", {False: [], True: []})
    src = server_stream(_capture("rs_types", True))
    first = _parse(src, 1 << 20, backend_deprecate_eof=True, row_frames=True)
    raw = results._HEADERS[True][0][0]
    at = src.index(b"ti")  # a column's name, inside the header
    assert at < len(raw)
    changed = src[:at] + b"tj" + src[at + 2:]
    got = _parse(changed, 1 << 20, backend_deprecate_eof=True, row_frames=True)
    assert got[0] != first[0] and [c.name for c in got[0].columns] == [c.name for c in first[0].columns[:1]] + \
        ["tj" if c.name == "ti" else c.name for c in first[0].columns[1:]]


@pytest.mark.parametrize("row_frames", [False, True], ids=["payloads", "row-frames"])
@pytest.mark.parametrize("chunk", [1, 7, 1 << 20], ids=["byte-by-byte", "7-bytes", "whole"])
def test_parser_stops_at_its_answer_and_hands_back_the_next(row_frames: bool, chunk: int) -> None:
    """Answers to commands sent back to back (proxy.execution.multipath pipelines a data source's units): each parser
    stops at its answer's end and `take_rest` is where the next answer starts, whatever the reads' boundaries."""
    names = ["rs_types", "err_unknown_table", "rs_empty", "rs_warning"]
    stream = b"".join(server_stream(_capture(n, False)) for n in names)
    parsers = [ResultParser(backend_deprecate_eof=False, row_frames=row_frames) for _ in names]
    got: list[list[object]] = [[] for _ in names]
    at = 0
    for i in range(0, len(stream), chunk):
        data = stream[i : i + chunk]
        while data and at < len(parsers):
            got[at].extend(parsers[at].feed(data))
            if not parsers[at].done:
                break
            data = parsers[at].take_rest()
            at += 1
        assert at < len(parsers) or not data
    assert at == len(parsers)
    for name, events in zip(names, got, strict=True):
        src = server_stream(_capture(name, False))
        alone = _parse(src, 1 << 20, backend_deprecate_eof=False, row_frames=row_frames)
        assert _flatten(events) == _flatten(alone), name


# --- whole_result: a whole answer under a recent header, in one step ---------------------------------------------


def _parsed_whole(src: bytes) -> tuple[object, ...] | None:
    """What `whole_result` should give for `src`, from a ResultParser's events: (header, rows, status, warnings, end)
    when `src` holds one whole result set and its parser ends there, else None."""
    parser = ResultParser(backend_deprecate_eof=False, row_frames=True)
    events = list(parser.feed(src))
    if not parser.done or not events or not isinstance(events[0], ResultHeader) \
            or not isinstance(events[-1], ResultEnd):
        return None
    runs = [e for e in events[1:-1] if isinstance(e, RowFrames)]
    rows = (b"".join(bytes(r.data) for r in runs), sum(r.rows for r in runs)) if runs else None
    rest = parser.take_rest()
    return events[0], rows, events[-1].status, events[-1].warnings, len(src) - len(rest)


def _whole(src: bytes) -> tuple[object, ...] | None:
    from protocol.results import whole_result

    got = whole_result(src)
    if got is None:
        return None
    header, frames, status, warnings, end = got
    return header, None if frames is None else (bytes(frames.data), frames.rows), status, warnings, end


def _eof_with(src: bytes, status: int, length: int = 5) -> bytes:
    """`src` (an answer ending with a classic EOF) with that EOF's status, or of another length."""
    eof_at = len(src) - 9
    assert src[eof_at + 4] == 0xFE and src[eof_at] == 5
    body = b"\xfe" + src[eof_at + 5:eof_at + 7] + status.to_bytes(2, "little")
    body = body[:length] if length <= 5 else body + bytes(length - 5)
    return src[:eof_at] + len(body).to_bytes(3, "little") + src[eof_at + 3:eof_at + 4] + body


_BIG_ROW, _ = _big_row_response(MAX_PAYLOAD + 10 - len(lenenc_str(b"x" * (MAX_PAYLOAD + 10))) + 1, False)
RS_TYPES, RS_EMPTY, RS_WARNING = (server_stream(f"{n}_eof") for n in ("rs_types", "rs_empty", "rs_warning"))
# (answer, whether it is taken whole); each is parsed once first, so that its header is a recent one
WHOLE_CASES: list[Any] = [
    pytest.param(RS_TYPES, True, id="rows"),
    pytest.param(RS_EMPTY, True, id="no-rows"),
    pytest.param(RS_WARNING, True, id="warning"),
    pytest.param(_BIG_ROW, True, id="row-of-16mb"),
    pytest.param(RS_TYPES + server_stream("rs_empty_eof"), True, id="the-next-answer-after-it"),
    pytest.param(RS_TYPES + b"\x01", True, id="a-byte-after-it"),
    pytest.param(RS_TYPES[:-1], False, id="its-end-cut-short"),
    pytest.param(RS_TYPES[:-9], False, id="no-end-yet"),
    pytest.param(RS_TYPES[:len(RS_TYPES) // 2], False, id="half"),
    pytest.param(_eof_with(RS_TYPES, int(ServerStatus.MORE_RESULTS_EXISTS | ServerStatus.AUTOCOMMIT)), False,
                 id="more-results"),
    pytest.param(_eof_with(RS_TYPES, 2, length=7), False, id="an-eof-of-7-bytes"),
    pytest.param(_eof_with(RS_TYPES, 2, length=3), False, id="an-eof-of-3-bytes"),
    pytest.param(server_stream("multi_err_eof"), False, id="rows-then-err"),
    pytest.param(server_stream("multi_eof"), False, id="several-results"),
    pytest.param(server_stream("err_unknown_table_eof"), False, id="err"),
    pytest.param(server_stream("ok_update_eof"), False, id="ok"),
]


@pytest.mark.parametrize(("src", "taken"), WHOLE_CASES)
def test_whole_result_is_the_parsers_answer(src: bytes, taken: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    import protocol.results as results

    monkeypatch.setattr(results, "_HEADERS", {False: [], True: []})
    assert _whole(src) is None  # a header not seen lately: the parser's
    with contextlib.suppress(MalformedPacket):  # (an EOF of 3 bytes: the parser's refusal)
        list(ResultParser(backend_deprecate_eof=False, row_frames=True).feed(src))  # remembers its header
    got = _whole(src)
    assert (got is not None) == taken
    if got is not None:
        assert got == _parsed_whole(src)
        assert got[0] is results._HEADERS[False][0][1]  # the header object itself, as the parser hands it out


def test_whole_result_agrees_with_the_parser_on_generated_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Generated answers (1-40 columns, 0-60 rows of values of random lengths and bytes, NULLs), whole, cut at a
    random point and with bytes after them: whenever `whole_result` takes one, it is what the parser makes of it;
    it takes every whole one."""
    import random

    import protocol.results as results
    from protocol.packets import ColumnDefinition41

    monkeypatch.setattr(results, "_HEADERS", {False: [], True: []})
    rng = random.Random(15)
    for _ in range(200):
        ncols = rng.randint(1, 40)
        cols = [ColumnDefinition41(name=f"c{i}", type=253) for i in range(ncols)]
        packets = [bytes((ncols,)), *(c.encode() for c in cols), b"\xfe\x00\x00\x02\x00"]
        for _row in range(rng.randint(0, 60)):
            values = [None if rng.random() < 0.1 else bytes(rng.randrange(256) for _ in range(rng.randint(0, 60)))
                      for _ in range(ncols)]
            packets.append(encode_text_row(values))
        status = rng.choice([2, 0x22, 3])
        packets.append(b"\xfe" + rng.randint(0, 5).to_bytes(2, "little") + status.to_bytes(2, "little"))
        src = b"".join(encode_packet(p, i + 1)[0] for i, p in enumerate(packets))
        list(ResultParser(backend_deprecate_eof=False, row_frames=True).feed(src))
        variants = [src, src[:rng.randrange(len(src))], src + bytes(rng.randint(1, 9))]
        for data in variants:
            got = _whole(data)
            if got is not None:
                assert got == _parsed_whole(data)
        assert _whole(src) is not None
