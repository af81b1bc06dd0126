"""Coalescing a slow-path answer's small writes into one socket write.

Why: a merged answer is written as its header (column count and definitions), its rows and its end packet,
each by its own `transport.write`, that is its own `write()` system call and wake-up of the client: for a
short merged answer such as a scatter `ORDER BY ... LIMIT 10`, three writes cost more than the merge itself.
While corked, writes are kept and written together when the answer is complete, or as soon as 64 KiB are
kept (a large answer streams as before: the buffer never holds more than that).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from proxy.frontend.wire import ClientPackets

__all__ = ["CorkedWriter", "HeldWriter", "corked", "held"]

CORK_LIMIT = 1 << 16  # bytes kept before they are written through


class CorkedWriter:
    """Stands in for a StreamWriter: `write` keeps the bytes; `uncork`, `drain` or the limit write them."""

    def __init__(self, writer: Any) -> None:
        self.writer = writer
        self.transport = writer.transport
        self._parts: list[bytes] = []
        self._size = 0

    def write(self, data: bytes) -> None:
        self._parts.append(bytes(data))
        self._size += len(data)
        if self._size >= CORK_LIMIT:
            self.uncork()

    def uncork(self) -> None:
        if self._parts:
            data = b"".join(self._parts) if len(self._parts) > 1 else self._parts[0]
            self._parts, self._size = [], 0
            self.writer.write(data)

    async def drain(self) -> None:
        self.uncork()
        await self.writer.drain()

    def __getattr__(self, name: str) -> Any:  # close(), is_closing(), get_extra_info() ...: the real writer's
        return getattr(self.writer, name)


class _Corked:
    """`corked`'s context manager (a class: a generator-based one would cost a generator and its frames per
    statement)."""

    __slots__ = ("cork", "wire")

    def __init__(self, wire: ClientPackets) -> None:
        self.wire = wire
        self.cork: CorkedWriter | None = None

    def __enter__(self) -> None:
        wire = self.wire
        if not isinstance(wire.writer, CorkedWriter):  # (inside another corked block: that one writes)
            cork = self.cork = CorkedWriter(wire.writer)
            wire.writer = cork  # type: ignore[assignment]

    def __exit__(self, *exc: object) -> None:
        cork = self.cork
        if cork is not None:
            self.cork = None
            self.wire.writer = cork.writer
            cork.uncork()


def corked(wire: ClientPackets) -> _Corked:
    """Keep `wire`'s writes until the block ends (then write them as one)."""
    return _Corked(wire)


class HeldWriter:
    """Stands in for the client's writer and its transport: keeps every write, however large, until `release`
    (no flow control: what it holds is a DDL statement's answer, a packet or two)."""

    def __init__(self, writer: Any) -> None:
        self.writer = writer
        self._parts: list[bytes] = []

    @property
    def transport(self) -> HeldWriter:
        return self

    def write(self, data: bytes) -> None:
        self._parts.append(bytes(data))

    def get_write_buffer_size(self) -> int:
        return 0

    async def drain(self) -> None:
        return None

    def release(self) -> None:
        if self._parts:
            data = b"".join(self._parts)
            self._parts = []
            self.writer.write(data)

    def __getattr__(self, name: str) -> Any:  # is_closing(), get_extra_info() ...: the real writer's
        return getattr(self.writer, name)


@contextlib.contextmanager
def held(session: Any) -> Iterator[None]:
    """Keep what the block writes to the client (through `session.writer` or `session.wire`) and write it when
    the block ends, in the order it was written."""
    writer, wire_writer = session.writer, session.wire.writer
    hold = HeldWriter(writer)
    session.writer = session.wire.writer = hold
    try:
        yield
    finally:
        session.writer, session.wire.writer = writer, wire_writer
        hold.release()
