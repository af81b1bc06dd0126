"""Framing: 3-byte length + sequence id + payload, with 16 MB payloads split over several frames.

`FrameDecoder` is the buffer both sides of the proxy feed raw socket bytes into; it hands back whole
payloads (continuation frames joined) synchronously, so the hot path never awaits per packet.
"""

from __future__ import annotations

from collections.abc import Iterator

from protocol.constants import MAX_PAYLOAD


class PacketTooLarge(ValueError):
    """A payload exceeds the configured maximum (max_allowed_packet).

    `next_seq` is the sequence id after the frame whose header gave it away: the one an error reply
    carries (as a server's does), so the client reads the error instead of a sequence mismatch."""

    def __init__(self, message: str, next_seq: int = 0) -> None:
        super().__init__(message)
        self.next_seq = next_seq


def encode_packet(payload: bytes, seq: int) -> tuple[bytes, int]:
    """Frame one payload starting at sequence id `seq`; returns the bytes and the next sequence id."""
    n = len(payload)
    if n < MAX_PAYLOAD:
        return n.to_bytes(3, "little") + bytes((seq & 0xFF,)) + payload, (seq + 1) & 0xFF
    parts: list[bytes] = []
    pos = 0
    while True:
        chunk = payload[pos : pos + MAX_PAYLOAD]
        parts.append(len(chunk).to_bytes(3, "little") + bytes((seq & 0xFF,)) + chunk)
        seq = (seq + 1) & 0xFF
        pos += MAX_PAYLOAD
        if len(chunk) < MAX_PAYLOAD:
            break
    return b"".join(parts), seq


class FrameDecoder:
    """Accumulates bytes; yields (first sequence id, last sequence id, payload) per logical packet."""

    __slots__ = ("_buf", "_partial", "_partial_seq", "max_payload")

    def __init__(self, max_payload: int = 1 << 30) -> None:
        self._buf = bytearray()
        self._partial: list[bytes] = []
        self._partial_seq = 0
        self.max_payload = max_payload

    def feed(self, data: bytes) -> None:
        self._buf += data

    def take_buffered(self) -> bytes:
        """The bytes fed and not yet framed, removed (the start of a TLS handshake after SSLRequest)."""
        data = bytes(self._buf)
        self._buf.clear()
        return data

    @property
    def buffered(self) -> int:
        return len(self._buf)

    def next_payload(self) -> bytes | None:
        """The next whole payload, removed from the buffer; None when none is complete yet. For a reader that
        takes one packet and then looks at the buffer again (`protocol.results.ResultParser`): no generator
        per packet, since a result's rows are most of the packets the proxy reads. Continuation frames and
        oversized packets go through `packets`."""
        buf = self._buf
        if len(buf) < 4:
            return None
        length = buf[0] | (buf[1] << 8) | (buf[2] << 16)
        if length >= MAX_PAYLOAD or length > self.max_payload or self._partial:
            packets = self.packets()
            try:
                got = next(packets, None)
            finally:
                packets.close()
            return None if got is None else got[2]
        end = 4 + length
        if len(buf) < end:
            return None
        payload = bytes(buf[4:end])
        del buf[:end]
        return payload

    def packets(self) -> Iterator[tuple[int, int, bytes]]:
        buf = self._buf
        pos = 0
        try:
            while len(buf) - pos >= 4:
                length = buf[pos] | (buf[pos + 1] << 8) | (buf[pos + 2] << 16)
                seq = buf[pos + 3]
                if length > self.max_payload or (
                    self._partial and length + sum(len(p) for p in self._partial) > self.max_payload
                ):
                    raise PacketTooLarge(f"packet of {length} bytes exceeds the limit of {self.max_payload}",
                                         (seq + 1) & 0xFF)
                if len(buf) - pos < 4 + length:
                    break
                payload = bytes(buf[pos + 4 : pos + 4 + length])
                pos += 4 + length
                if length == MAX_PAYLOAD:
                    if not self._partial:
                        self._partial_seq = seq
                    self._partial.append(payload)
                    continue
                if self._partial:
                    self._partial.append(payload)
                    payload = b"".join(self._partial)
                    first = self._partial_seq
                    self._partial = []
                    yield first, seq, payload
                else:
                    yield seq, seq, payload
        finally:
            del buf[:pos]
