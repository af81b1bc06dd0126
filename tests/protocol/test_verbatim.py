"""`VerbatimRelay` on real MariaDB answers: the bytes pass unchanged, and it ends where `ResultRelay` ends
with the same summary (the relay that copies and renumbers is the oracle), fed whole, byte by byte and in
odd chunks."""

from __future__ import annotations

import os
import random
from typing import Any

import pytest

import protocol.verbatim
from protocol.constants import MAX_PAYLOAD
from protocol.framing import encode_packet
from protocol.packets import encode_text_row, lenenc_str
from protocol.results import ResultRelay
from protocol.verbatim import VerbatimRelay, relay_for
from protocol.wire import MalformedPacket
from tests.c_helpers import c_helper
from tests.protocol.fixtures import server_stream
from tests.protocol.fixtures.binary import exchanges


@pytest.fixture(params=["python", "c"])
def c(request: pytest.FixtureRequest) -> Any:
    """`VerbatimRelay`'s `c`: None (its Python loop alone) or protocol._crowframes (the loop's usual frames in C),
    which must agree."""
    return None if request.param == "python" else c_helper("protocol._crowframes")

CAPTURES = ["ok_update", "err_unknown_table", "rs_types", "rs_empty", "rs_warning", "multi", "multi_err", "ping",
            "init_db"]


# the answers of commands that asked for a cursor (COM_STMT_EXECUTE with cursor flags): the relays are told
CURSOR_ANSWERS: set[bytes] = set()


def _binary_answers() -> list[Any]:
    """Every COM_STMT_EXECUTE answer of the binary captures (cursor openings included)."""
    out = []
    for name in ("types", "stmt_corners"):
        for deof in (False, True):
            for i, ex in enumerate(exchanges(f"{name}_{'deof' if deof else 'eof'}")):
                if ex.sent and ex.sent[0][:1] == b"\x17" and ex.answer_frames:
                    label = f"{name}-{'deof' if deof else 'eof'}-{i}"
                    answer = b"".join(ex.answer_frames)
                    if len(ex.sent[0]) > 5 and ex.sent[0][5]:
                        CURSOR_ANSWERS.add(answer)
                    out.append(pytest.param(answer, deof, id=label))
    return out


def _text_answers() -> list[Any]:
    out = [pytest.param(server_stream("ok_insert"), False, id="ok_insert")]
    for name in CAPTURES:
        for deof in (False, True):
            stream = server_stream(f"{name}_{'deof' if deof else 'eof'}")
            out.append(pytest.param(stream, deof, id=f"{name}-{'deof' if deof else 'eof'}"))
    return out


ANSWERS = _text_answers() + _binary_answers()


def _feed(relay: Any, stream: bytes, chunk: int | None) -> bytes:
    if chunk is None:
        return bytes(relay.feed(stream))
    out = bytearray()
    for i in range(0, len(stream), chunk):
        assert not relay.done
        out += relay.feed(stream[i : i + chunk])
    return bytes(out)


@pytest.mark.parametrize(("stream", "deof"), ANSWERS)
@pytest.mark.parametrize("chunk", [None, 1, 3, 7], ids=["whole", "byte-by-byte", "chunk3", "chunk7"])
def test_verbatim_passes_bytes_and_ends_like_the_relay(stream: bytes, deof: bool, chunk: int | None, c: Any) -> None:
    cursor = stream in CURSOR_ANSWERS
    oracle = ResultRelay(backend_deprecate_eof=deof, client_deprecate_eof=deof, cursor=cursor)
    assert oracle.feed(stream) == stream and oracle.done  # same framing from seq 1: nothing to change
    relay = VerbatimRelay(deprecate_eof=deof, c=c, cursor=cursor)
    assert _feed(relay, stream, chunk) == stream
    assert relay.done
    assert relay.summary == oracle.summary
    assert relay.rows == oracle.rows
    assert relay.next_seq == oracle.next_seq


def _longer(payload: bytes) -> bytes:
    return payload + b" (in logic names)"


@pytest.mark.parametrize(("stream", "deof"), ANSWERS)
@pytest.mark.parametrize("chunk", [None, 1, 3, 7], ids=["whole", "byte-by-byte", "chunk3", "chunk7"])
@pytest.mark.parametrize("rewriter", [_longer, bytes], ids=["longer", "unchanged"])
def test_verbatim_rewrites_errors_like_the_relay(stream: bytes, deof: bool, chunk: int | None, rewriter: Any,
                                                 c: Any) -> None:
    cursor = stream in CURSOR_ANSWERS
    oracle = ResultRelay(backend_deprecate_eof=deof, client_deprecate_eof=deof, error_rewriter=rewriter, cursor=cursor)
    expected = oracle.feed(stream)
    relay = VerbatimRelay(deprecate_eof=deof, error_rewriter=rewriter, c=c, cursor=cursor)
    assert _feed(relay, stream, chunk) == expected
    assert relay.done and relay.summary == oracle.summary and relay.next_seq == oracle.next_seq


@pytest.mark.parametrize(("stream", "deof"), ANSWERS)
def test_verbatim_is_not_done_before_the_last_byte(stream: bytes, deof: bool, c: Any) -> None:
    relay = VerbatimRelay(deprecate_eof=deof, c=c, cursor=stream in CURSOR_ANSWERS)
    relay.feed(stream[:-1])
    assert not relay.done
    relay.feed(stream[-1:])
    assert relay.done


def test_verbatim_refuses_bytes_after_the_end(c: Any) -> None:
    stream = server_stream("rs_types_eof")
    with pytest.raises(MalformedPacket):
        VerbatimRelay(c=c).feed(stream + b"\x01\x00\x00\x00\x00")


def test_verbatim_passes_a_local_infile_request_on(c: Any) -> None:
    relay = VerbatimRelay(c=c)
    request = encode_packet(b"\xfbrows.tsv", 1)[0]
    assert relay.feed(request) == request
    assert relay.done and relay.summary.local_infile == b"\xfbrows.tsv" and relay.next_seq == 2


@pytest.mark.parametrize("row_payload", [MAX_PAYLOAD - 1, MAX_PAYLOAD, MAX_PAYLOAD + 1, 2 * MAX_PAYLOAD])
def test_verbatim_rows_of_16mb_and_more(row_payload: int, c: Any) -> None:
    value_len = row_payload - len(lenenc_str(b"x" * row_payload)) + 1
    col = b"\x03def\x04test\x01t\x01t\x02vc\x02vc\x0c\x2d\x00\xfc\xff\x03\x00\xfd\x00\x00\x00\x00\x00"
    out = bytearray()
    seq = 1
    for p in (b"\x01", col, b"\xfe\x00\x00\x02\x00", encode_text_row([b"v" * value_len]), b"\xfe\x00\x00\x02\x00"):
        data, seq = encode_packet(p, seq)
        out += data
    stream = bytes(out)
    relay = VerbatimRelay(c=c)
    step = 1 << 20
    for i in range(0, len(stream), step):  # frame headers land in the middle of feeds
        relay.feed(stream[i : i + step])
    assert relay.done and relay.rows == 1 and relay.next_seq == seq


RELAY_CHOICES = [
    # (keyword arguments, VerbatimRelay chosen)
    ({"backend_deprecate_eof": False, "client_deprecate_eof": False}, True),
    ({"backend_deprecate_eof": True, "client_deprecate_eof": True}, True),
    ({"backend_deprecate_eof": False, "client_deprecate_eof": True}, False),
    ({"backend_deprecate_eof": True, "client_deprecate_eof": False}, False),
    ({"backend_deprecate_eof": False, "client_deprecate_eof": False, "first_seq": 2}, False),
    ({"backend_deprecate_eof": False, "client_deprecate_eof": False, "more_results": True}, False),
    ({"backend_deprecate_eof": False, "client_deprecate_eof": False, "rows_only": True}, False),
    ({"backend_deprecate_eof": False, "client_deprecate_eof": False, "error_rewriter": bytes}, True),
    ({"backend_deprecate_eof": False, "client_deprecate_eof": False, "column_rewriter": bytes}, True),
]


@pytest.mark.parametrize(("kwargs", "verbatim"), RELAY_CHOICES)
def test_relay_for_copies_only_when_something_changes(kwargs: dict[str, Any], verbatim: bool) -> None:
    assert isinstance(relay_for(**kwargs), VerbatimRelay) is verbatim


def test_verbatim_empty_frame_among_rows_is_skipped_by_its_length(c: Any) -> None:
    # the frame header of an empty payload, right at the end of a read, followed by the end of the rows
    col = b"\x03def\x04test\x01t\x01t\x01c\x01c\x0c\x2d\x00\x10\x00\x00\x00\xfd\x00\x00\x00\x00\x00"
    out = bytearray()
    seq = 1
    for p in (b"\x01", col, b"\xfe\x00\x00\x02\x00", b"", b"\xfe\x00\x00\x02\x00"):
        data, seq = encode_packet(p, seq)
        out += data
    stream = bytes(out)
    split = stream.index(b"\x00\x00\x00\x04") + 4  # just after the empty frame's header
    relay = VerbatimRelay(c=c)
    relay.feed(stream[:split])
    assert not relay.done
    relay.feed(stream[split:])
    assert relay.done and relay.rows == 1 and relay.summary.status == 2


def _generated_answer(rng: random.Random, deof: bool) -> bytes:
    """An answer as a server frames it, with what `VerbatimRelay` meets: result sets of 1-300 columns (a count of
    251 and more is a length-encoded integer), rows (empty frames, rows starting 0xFE of 9 bytes and more, NULLs),
    OKs and ERRs, EOFs with MORE_RESULTS or CURSOR_EXISTS, several result sets."""
    packets: list[bytes] = []
    for _ in range(rng.randint(1, 3)):
        more = 0x0008 if rng.random() < 0.5 else 0
        status = 0x0002 | more | (0x0040 if rng.random() < 0.1 else 0)
        eof = b"\xfe" + rng.choice([b"\x00\x00", b"\x01\x00"]) + status.to_bytes(2, "little")
        ok = b"\x00\x01\x00" + status.to_bytes(2, "little") + b"\x00\x00"
        pick = rng.random()
        if pick < 0.1:
            packets.append(b"\xff\x7a\x04#42S02Table 'db.t_0' doesn't exist")
            break
        if pick < 0.2:
            packets.append(ok)
            if not more:
                break
            continue
        columns = rng.choice([1, 1, 2, 4, 250, 251, 300])
        packets.append(bytes([columns]) if columns < 251 else b"\xfc" + columns.to_bytes(2, "little"))
        packets += [b"\x03def\x01d\x01t\x01t\x01c\x01c\x0c\x2d\x00\x10\x00\x00\x00\xfd\x00\x00\x00\x00\x00"] * columns
        if not deof:
            packets.append(eof if rng.random() < 0.9 else eof + b"\x00\x00")  # (a longer EOF: read as one)
            if status & 0x0040:  # a cursor: the answer ends after the column definitions
                break
        for _ in range(rng.choice([0, 1, 2, 10])):
            packets.append(rng.choice([b"\x011", b"", b"\xfb", b"\xfe" + b"x" * rng.randint(8, 30), b"\x02ab"]))
        end = rng.random()
        if end < 0.1:
            packets.append(b"\xff\x7a\x04#70100Query execution was interrupted")
            break
        # the end of the rows: its own flags (a cursor or more results, whatever came before), and in the
        # DEPRECATE_EOF framing now and then an OK cut to EOF's five bytes
        status = 0x0002 | rng.choice([0, 0x0008, 0x0040, 0x0048])
        flags = status.to_bytes(2, "little")
        if deof:
            packets.append(b"\xfe" + rng.choice([b"\x00\x00", b"\x01\x00"]) + flags
                           + (b"\x00\x00" if rng.random() < 0.8 else b""))
        else:
            packets.append(b"\xfe" + rng.choice([b"\x00\x00", b"\x03\x00", b"\x00\x01"]) + flags)
        if not status & 0x0008 or status & 0x0040:
            break
    out = bytearray()
    seq = 1
    for p in packets:
        data, seq = encode_packet(p, seq)
        out += data
    return bytes(out)


def _run(relay: VerbatimRelay, stream: bytes, cuts: list[int]) -> tuple[Any, ...]:
    outs: list[bytes] = []
    try:
        last = 0
        for cut in [*cuts, len(stream)]:
            outs.append(bytes(relay.feed(stream[last:cut])))
            last = cut
    except MalformedPacket as exc:
        outs.append(b"MalformedPacket: " + str(exc).encode())
    return b"|".join(outs), relay.done, relay.summary, relay.rows, relay.next_seq


@pytest.mark.parametrize("seed", range(40))
def test_verbatim_c_loop_agrees_with_python_on_generated_answers(seed: int) -> None:
    """protocol._crowframes.verbatim_scan walks the usual frames of `feed`: over generated answers, whole and
    broken (a byte replaced, cut short, bytes after the end), fed in random pieces, the relay with it gives what the
    Python loop alone gives: bytes, end, summary, rows, sequence id, and the same MalformedPacket."""
    c = c_helper("protocol._crowframes")
    rng = random.Random(seed)
    for _ in range(60):
        deof = rng.random() < 0.5
        stream = _generated_answer(rng, deof)
        mutation = rng.random()
        if mutation < 0.15 and stream:
            i = rng.randrange(len(stream))
            stream = stream[:i] + bytes([rng.choice([0x00, 0x01, 0xFB, 0xFE, 0xFF, 0x05])]) + stream[i + 1:]
        elif mutation < 0.25:
            stream = stream[:rng.randrange(len(stream) + 1)]
        elif mutation < 0.3:
            stream += b"\x01\x00\x00\x09\x00"
        cuts = sorted(rng.sample(range(1, max(2, len(stream))), min(rng.randint(0, 4), max(0, len(stream) - 1))))
        rewriter = rng.choice([None, _longer])
        cursor = rng.random() < 0.5
        python = _run(VerbatimRelay(deprecate_eof=deof, error_rewriter=rewriter, c=None, cursor=cursor), stream, cuts)
        with_c = _run(VerbatimRelay(deprecate_eof=deof, error_rewriter=rewriter, c=c, cursor=cursor), stream, cuts)
        assert with_c == python, (deof, stream.hex(), cuts)


def test_verbatim_uses_the_c_loop_where_built() -> None:
    if os.environ.get("SHARDPROXY_NO_C") == "1":
        pytest.skip("SHARDPROXY_NO_C=1 switches it off")
    assert protocol.verbatim.C is c_helper("protocol._crowframes")
    assert VerbatimRelay()._c is protocol.verbatim.C


@pytest.mark.parametrize(("stream", "deof"), ANSWERS)
def test_a_restarted_relay_answers_as_a_new_one(stream: bytes, deof: bool, c: Any) -> None:
    """The fast path keeps one relay per session and restarts it for each answer: after an answer relayed
    whole, or one left in the middle (a lost backend), it relays the next as a new relay does."""
    cursor = stream in CURSOR_ANSWERS
    fresh = VerbatimRelay(deprecate_eof=deof, error_rewriter=_longer, c=c, cursor=cursor)
    expected = _run(fresh, stream, [])
    kept = VerbatimRelay(deprecate_eof=deof, c=c, cursor=cursor)
    _run(kept, stream, [])  # one whole
    kept.restart(_longer, cursor)
    assert _run(kept, stream, []) == expected
    kept.restart(cursor=cursor)
    kept.feed(stream[: len(stream) // 2 + 1])  # one left in the middle
    kept.restart(_longer, cursor)
    assert _run(kept, stream, []) == expected


# `CALL p()` of a procedure that opened a cursor of its own (MariaDB 10.11, classic EOF framing): both result sets
# carry CURSOR_EXISTS with MORE_RESULTS_EXISTS, and the final OK follows
_PROCEDURE_WITH_CURSOR = [
    "01", "03646566000000017801780c3f000b000000030000000000", "fe00006900", "0131", "fe00006900",
    "01", "036465660000000132000c3f0001000000038100000000", "fe00006900", "0132", "fe00006900",
    "00010021000000",
]


@pytest.mark.parametrize("chunk", [None, 1, 5], ids=["whole", "byte-by-byte", "chunk5"])
def test_procedure_results_with_an_open_cursor_are_relayed_to_the_final_ok(chunk: int | None, c: Any) -> None:
    stream = b"".join(encode_packet(bytes.fromhex(p), i + 1)[0] for i, p in enumerate(_PROCEDURE_WITH_CURSOR))
    oracle = ResultRelay(backend_deprecate_eof=False, client_deprecate_eof=False)
    assert oracle.feed(stream) == stream and oracle.done
    relay = VerbatimRelay(c=c)
    assert _feed(relay, stream, chunk) == stream
    assert relay.done and relay.summary == oracle.summary
    assert relay.summary.result_sets == 2 and relay.summary.affected_rows == 1 and relay.rows == 2


def _definition_renamed(payload: bytes) -> bytes:
    return payload + b"\x00renamed" if len(payload) > 8 else payload


@pytest.mark.parametrize(("stream", "deof"), ANSWERS)
@pytest.mark.parametrize("chunk", [None, 1, 3, 7], ids=["whole", "byte-by-byte", "chunk3", "chunk7"])
def test_verbatim_rewrites_column_definitions_like_the_relay(stream: bytes, deof: bool, chunk: int | None,
                                                             c: Any) -> None:
    """Column definitions in other names (a renamed pass-through database, a sharded node's actual table) keep the
    verbatim relay, rows passing through the C scan: the bytes equal the frame-by-frame relay's."""
    cursor = stream in CURSOR_ANSWERS
    oracle = ResultRelay(backend_deprecate_eof=deof, client_deprecate_eof=deof, column_rewriter=_definition_renamed,
                         cursor=cursor)
    expected = oracle.feed(stream)
    relay = VerbatimRelay(deprecate_eof=deof, column_rewriter=_definition_renamed, c=c, cursor=cursor)
    assert _feed(relay, stream, chunk) == expected
    assert relay.done and relay.summary == oracle.summary and relay.next_seq == oracle.next_seq


@pytest.mark.parametrize(("stream", "deof"), ANSWERS)
@pytest.mark.parametrize("chunk", [None, 1, 5], ids=["whole", "byte-by-byte", "chunk5"])
def test_verbatim_remembers_a_rewritten_head_for_the_next_answer(stream: bytes, deof: bool, chunk: int | None,
                                                                 c: Any) -> None:
    """The same statement's next answer starts with the same column definitions: sent as rewritten before, without
    walking them again; any other answer is walked afresh."""
    cursor = stream in CURSOR_ANSWERS
    oracle = ResultRelay(backend_deprecate_eof=deof, client_deprecate_eof=deof, column_rewriter=_definition_renamed,
                         cursor=cursor)
    expected = oracle.feed(stream)
    relay = VerbatimRelay(deprecate_eof=deof, column_rewriter=_definition_renamed, c=c, cursor=cursor)
    for other in (None, *(s for s, d in ((a.values[0], a.values[1]) for a in ANSWERS[:6]) if d == deof)):
        for answer in (stream, other, stream):
            if answer is None:
                continue
            relay.restart(None, cursor, _definition_renamed)
            want = ResultRelay(backend_deprecate_eof=deof, client_deprecate_eof=deof,
                               column_rewriter=_definition_renamed, cursor=cursor)
            assert _feed(relay, answer, chunk) == want.feed(answer)
            assert relay.done and relay.summary == want.summary and relay.next_seq == want.next_seq
    relay.restart(None, cursor, _definition_renamed)
    assert _feed(relay, stream, None) == expected
