"""`protocol.framing`: the frame decoder fed real captures whole and byte by byte, and 16 MB splitting."""

from __future__ import annotations

import pytest

from protocol.constants import MAX_PAYLOAD
from protocol.framing import FrameDecoder, PacketTooLarge, encode_packet
from tests.protocol.fixtures import frames, names, server_frames, server_stream


def _drain(dec: FrameDecoder) -> list[tuple[int, int, bytes]]:
    return list(dec.packets())


@pytest.mark.parametrize("name", names())
@pytest.mark.parametrize("chunk", [None, 1, 3, 7])
def test_decoder_on_captured_streams(name: str, chunk: int | None) -> None:
    stream = server_stream(name)
    dec = FrameDecoder()
    got: list[tuple[int, int, bytes]] = []
    if chunk is None:
        dec.feed(stream)
        got = _drain(dec)
    else:
        for i in range(0, len(stream), chunk):
            dec.feed(stream[i : i + chunk])
            got.extend(_drain(dec))
    assert got == [(f.seq, f.seq, f.payload) for f in server_frames(name)]
    assert dec.buffered == 0


@pytest.mark.parametrize("name", names())
def test_encode_packet_reproduces_captured_frames(name: str) -> None:
    for f in frames(name):
        data, nxt = encode_packet(f.payload, f.seq)
        assert data == f.raw and nxt == (f.seq + 1) & 0xFF


# (payload length, number of frames, length of the last frame)
SPLITS = [
    (0, 1, 0),
    (1, 1, 1),
    (MAX_PAYLOAD - 1, 1, MAX_PAYLOAD - 1),
    (MAX_PAYLOAD, 2, 0),  # exactly 0xFFFFFF ends with an empty frame
    (MAX_PAYLOAD + 1, 2, 1),
    (2 * MAX_PAYLOAD, 3, 0),
    (2 * MAX_PAYLOAD + 5, 3, 5),
]


@pytest.mark.parametrize(("size", "nframes", "last"), SPLITS)
def test_16mb_split_and_join(size: int, nframes: int, last: int) -> None:
    payload = bytes(i & 0xFF for i in range(256)) * (size // 256) + b"x" * (size % 256)
    data, nxt = encode_packet(payload, 254)
    assert nxt == (254 + nframes) & 0xFF
    # walk the frames: every one but the last is full, sequence ids count up and wrap
    pos, seqs, lengths = 0, [], []
    while pos < len(data):
        n = int.from_bytes(data[pos : pos + 3], "little")
        seqs.append(data[pos + 3])
        lengths.append(n)
        pos += 4 + n
    assert pos == len(data)
    assert seqs == [(254 + i) & 0xFF for i in range(nframes)]
    assert lengths[:-1] == [MAX_PAYLOAD] * (nframes - 1) and lengths[-1] == last
    # join, whole and in awkward pieces (frame headers cut in the middle)
    for pieces in ([data], [data[:2], data[2:MAX_PAYLOAD + 5], data[MAX_PAYLOAD + 5 : MAX_PAYLOAD + 6],
                            data[MAX_PAYLOAD + 6 :]]):
        dec = FrameDecoder()
        got = []
        for p in pieces:
            dec.feed(p)
            got.extend(dec.packets())
        assert len(got) == 1
        first, last_seq, joined = got[0]
        assert (first, last_seq) == (254, (254 + nframes - 1) & 0xFF)
        assert joined == payload


def test_large_packet_then_small_packet_in_one_feed() -> None:
    big, seq = encode_packet(b"a" * MAX_PAYLOAD, 0)
    small, _ = encode_packet(b"tail", seq)
    dec = FrameDecoder()
    dec.feed(big + small)
    got = list(dec.packets())
    assert [(f, la, len(p)) for f, la, p in got] == [(0, 1, MAX_PAYLOAD), (2, 2, 4)]


def test_too_large_is_refused_on_the_header_alone() -> None:
    dec = FrameDecoder(max_payload=1 << 20)
    dec.feed(b"\xff\xff\xff\x07")  # declares 16 MB, sends nothing more
    with pytest.raises(PacketTooLarge) as exc:
        list(dec.packets())
    assert exc.value.next_seq == 8  # an error reply follows the offending frame


def test_too_large_counts_continuation_frames() -> None:
    dec = FrameDecoder(max_payload=MAX_PAYLOAD + 10)
    data, _ = encode_packet(b"z" * (MAX_PAYLOAD + 20), 0)
    dec.feed(data)
    with pytest.raises(PacketTooLarge):
        list(dec.packets())


def test_within_limit_is_accepted() -> None:
    dec = FrameDecoder(max_payload=MAX_PAYLOAD + 20)
    data, _ = encode_packet(b"z" * (MAX_PAYLOAD + 20), 0)
    dec.feed(data)
    assert [len(p) for _, _, p in dec.packets()] == [MAX_PAYLOAD + 20]
