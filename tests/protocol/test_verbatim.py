"""`VerbatimRelay` on real MariaDB answers: the bytes pass unchanged, and it ends where `ResultRelay` ends
with the same summary (the relay that copies and renumbers is the oracle), fed whole, byte by byte and in
odd chunks."""

from __future__ import annotations

from typing import Any

import pytest

from protocol.constants import MAX_PAYLOAD
from protocol.framing import encode_packet
from protocol.packets import encode_text_row, lenenc_str
from protocol.results import ResultRelay
from protocol.verbatim import VerbatimRelay, relay_for
from protocol.wire import MalformedPacket
from tests.protocol.fixtures import server_stream
from tests.protocol.fixtures.binary import exchanges

CAPTURES = ["ok_update", "err_unknown_table", "rs_types", "rs_empty", "rs_warning", "multi", "multi_err", "ping",
            "init_db"]


def _binary_answers() -> list[Any]:
    """Every COM_STMT_EXECUTE answer of the binary captures (cursor openings included)."""
    out = []
    for name in ("types", "stmt_corners"):
        for deof in (False, True):
            for i, ex in enumerate(exchanges(f"{name}_{'deof' if deof else 'eof'}")):
                if ex.sent and ex.sent[0][:1] == b"\x17" and ex.answer_frames:
                    label = f"{name}-{'deof' if deof else 'eof'}-{i}"
                    out.append(pytest.param(b"".join(ex.answer_frames), deof, id=label))
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
def test_verbatim_passes_bytes_and_ends_like_the_relay(stream: bytes, deof: bool, chunk: int | None) -> None:
    oracle = ResultRelay(backend_deprecate_eof=deof, client_deprecate_eof=deof)
    assert oracle.feed(stream) == stream and oracle.done  # same framing from seq 1: nothing to change
    relay = VerbatimRelay(deprecate_eof=deof)
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
def test_verbatim_rewrites_errors_like_the_relay(stream: bytes, deof: bool, chunk: int | None, rewriter: Any) -> None:
    oracle = ResultRelay(backend_deprecate_eof=deof, client_deprecate_eof=deof, error_rewriter=rewriter)
    expected = oracle.feed(stream)
    relay = VerbatimRelay(deprecate_eof=deof, error_rewriter=rewriter)
    assert _feed(relay, stream, chunk) == expected
    assert relay.done and relay.summary == oracle.summary and relay.next_seq == oracle.next_seq


@pytest.mark.parametrize(("stream", "deof"), ANSWERS)
def test_verbatim_is_not_done_before_the_last_byte(stream: bytes, deof: bool) -> None:
    relay = VerbatimRelay(deprecate_eof=deof)
    relay.feed(stream[:-1])
    assert not relay.done
    relay.feed(stream[-1:])
    assert relay.done


def test_verbatim_refuses_bytes_after_the_end() -> None:
    stream = server_stream("rs_types_eof")
    with pytest.raises(MalformedPacket):
        VerbatimRelay().feed(stream + b"\x01\x00\x00\x00\x00")


def test_verbatim_rejects_local_infile() -> None:
    with pytest.raises(MalformedPacket):
        VerbatimRelay().feed(encode_packet(b"\xfb/etc/passwd", 1)[0])


@pytest.mark.parametrize("row_payload", [MAX_PAYLOAD - 1, MAX_PAYLOAD, MAX_PAYLOAD + 1, 2 * MAX_PAYLOAD])
def test_verbatim_rows_of_16mb_and_more(row_payload: int) -> None:
    value_len = row_payload - len(lenenc_str(b"x" * row_payload)) + 1
    col = b"\x03def\x04test\x01t\x01t\x02vc\x02vc\x0c\x2d\x00\xfc\xff\x03\x00\xfd\x00\x00\x00\x00\x00"
    out = bytearray()
    seq = 1
    for p in (b"\x01", col, b"\xfe\x00\x00\x02\x00", encode_text_row([b"v" * value_len]), b"\xfe\x00\x00\x02\x00"):
        data, seq = encode_packet(p, seq)
        out += data
    stream = bytes(out)
    relay = VerbatimRelay()
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
    ({"backend_deprecate_eof": False, "client_deprecate_eof": False, "error_rewriter": bytes}, True),  # issue 15
]


@pytest.mark.parametrize(("kwargs", "verbatim"), RELAY_CHOICES)
def test_relay_for_copies_only_when_something_changes(kwargs: dict[str, Any], verbatim: bool) -> None:
    assert isinstance(relay_for(**kwargs), VerbatimRelay) is verbatim


def test_verbatim_empty_frame_among_rows_is_skipped_by_its_length() -> None:
    # the frame header of an empty payload, right at the end of a read, followed by the end of the rows
    col = b"\x03def\x04test\x01t\x01t\x01c\x01c\x0c\x2d\x00\x10\x00\x00\x00\xfd\x00\x00\x00\x00\x00"
    out = bytearray()
    seq = 1
    for p in (b"\x01", col, b"\xfe\x00\x00\x02\x00", b"", b"\xfe\x00\x00\x02\x00"):
        data, seq = encode_packet(p, seq)
        out += data
    stream = bytes(out)
    split = stream.index(b"\x00\x00\x00\x04") + 4  # just after the empty frame's header
    relay = VerbatimRelay()
    relay.feed(stream[:split])
    assert not relay.done
    relay.feed(stream[split:])
    assert relay.done and relay.rows == 1 and relay.summary.status == 2
