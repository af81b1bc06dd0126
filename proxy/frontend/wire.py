"""The client side of a session's socket: packets in (whole payloads), packets out (framed)."""

from __future__ import annotations

import asyncio
from typing import Protocol

from protocol.constants import Capability
from protocol.framing import FrameDecoder, PacketTooLarge, encode_packet
from protocol.packets import ERRPacket
from protocol.wire import MalformedPacket

READ_CHUNK = 1 << 16


class Armable(Protocol):
    """The session's fast path as this reader sees it (proxy.execution.fastpath.FastPath): armed while the session
    waits for a command, so that it may answer what arrives meanwhile."""

    armed: bool


class ClientGone(Exception):
    """The client closed the connection (or it broke)."""


class ClientPackets:
    """Reads whole packets from a client and writes framed responses with the right sequence ids."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, max_packet: int) -> None:
        self.reader = reader
        self.writer = writer
        self.frames = FrameDecoder(max_payload=max_packet)
        self._pending: list[tuple[int, int, bytes]] = []
        self.seq = 0  # next sequence id to send
        self.capabilities = Capability(0)
        self.fast: Armable | None = None  # proxy.execution.fastpath, armed while `read(idle=True)` waits

    async def read(self, timeout: float | None = None, *, idle: bool = False) -> bytes:
        """The next packet's payload; sets `seq` to answer it. Raises PacketTooLarge, ClientGone.
        `idle`: the session waits between commands, so the fast path may answer what comes meanwhile."""
        while not self._pending:
            try:
                self._pending.extend(self.frames.packets())
            except PacketTooLarge as exc:
                self.seq = exc.next_seq  # answer after the frame that was too much
                raise
            if self._pending:
                break
            fast = self.fast
            if idle and fast is not None and not self.frames.buffered and not self.reader._buffer:  # type: ignore[attr-defined]
                fast.armed = True
            try:
                if timeout is None:
                    data = await self.reader.read(READ_CHUNK)
                else:
                    data = await asyncio.wait_for(self.reader.read(READ_CHUNK), timeout)
            except (ConnectionError, OSError) as exc:
                raise ClientGone(str(exc)) from exc
            finally:
                if fast is not None:
                    fast.armed = False
            if not data:
                raise ClientGone("client closed the connection")
            self.frames.feed(data)
        _first, last, payload = self._pending.pop(0)
        self.seq = (last + 1) & 0xFF
        return payload

    def take_unread(self) -> bytes:
        """Every byte received and not yet returned as a packet (after an SSLRequest: the TLS ClientHello),
        taken out of this reader."""
        if self._pending:
            raise MalformedPacket("packets after SSLRequest before the TLS handshake")
        data = self.frames.take_buffered() + bytes(self.reader._buffer)  # type: ignore[attr-defined]
        self.reader._buffer.clear()  # type: ignore[attr-defined]
        return data

    def send(self, payload: bytes) -> None:
        data, self.seq = encode_packet(payload, self.seq)
        self.writer.write(data)

    def send_many(self, payloads: list[bytes]) -> None:
        out = []
        seq = self.seq
        for p in payloads:
            data, seq = encode_packet(p, seq)
            out.append(data)
        self.seq = seq
        self.writer.write(b"".join(out))

    def send_error(self, errno: int, message: str, sqlstate: str = "HY000") -> None:
        self.send(ERRPacket(errno, message, sqlstate).encode(self.capabilities or Capability.PROTOCOL_41))

    async def flush(self) -> None:
        if self.writer.transport.get_write_buffer_size() < 1 << 16 and not self.writer.transport.is_closing():
            return  # nothing waits in our buffer: the kernel has it (drain() would only cost time)
        try:
            await self.writer.drain()
        except (ConnectionError, OSError) as exc:
            raise ClientGone(str(exc)) from exc


__all__ = ["ClientGone", "ClientPackets", "PacketTooLarge"]


class CapturedWriter:
    """Stands in for a client's writer where the proxy produces an answer for itself (a cursor's rows kept for
    COM_STMT_FETCH, the row of a SELECT ... INTO): keeps the frames that would have been sent."""

    def __init__(self) -> None:
        self.frames = FrameDecoder()

    def write(self, data: bytes) -> None:
        self.frames.feed(data)

    @property
    def transport(self) -> CapturedWriter:
        return self

    def get_write_buffer_size(self) -> int:
        return 0

    def is_closing(self) -> bool:
        return False

    async def drain(self) -> None:
        return None
