"""proxy.frontend.cork: writes kept while corked come out as one write, in order, at the end or at the limit."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from proxy.frontend.cork import CORK_LIMIT, CorkedWriter, corked


class FakeTransport:
    def get_write_buffer_size(self) -> int:
        return 0

    def is_closing(self) -> bool:
        return False


class FakeWriter:
    def __init__(self) -> None:
        self.transport = FakeTransport()
        self.writes: list[bytes] = []
        self.drained = 0

    def write(self, data: bytes) -> None:
        self.writes.append(bytes(data))

    async def drain(self) -> None:
        self.drained += 1


class FakeWire:
    def __init__(self) -> None:
        self.writer: Any = FakeWriter()


@pytest.mark.parametrize(("chunks", "writes"), [
    ([b"a", b"bc", b"d"], [b"abcd"]),
    ([], []),
    ([b"x" * CORK_LIMIT, b"y"], [b"x" * CORK_LIMIT, b"y"]),
    ([b"x" * (CORK_LIMIT - 1), b"yz", b"w"], [b"x" * (CORK_LIMIT - 1) + b"yz", b"w"]),
])
def test_corked_writes_come_out_together(chunks: list[bytes], writes: list[bytes]) -> None:
    wire = FakeWire()
    real = wire.writer
    with corked(wire):  # type: ignore[arg-type]
        assert isinstance(wire.writer, CorkedWriter)
        for c in chunks:
            wire.writer.write(c)
    assert wire.writer is real and real.writes == writes


def test_drain_writes_what_is_kept_first() -> None:
    wire = FakeWire()
    real = wire.writer
    with corked(wire):  # type: ignore[arg-type]
        wire.writer.write(b"ab")
        asyncio.run(wire.writer.drain())
        assert real.writes == [b"ab"] and real.drained == 1
        wire.writer.write(b"c")
    assert real.writes == [b"ab", b"c"]


def test_an_error_still_writes_what_was_kept() -> None:
    wire = FakeWire()
    real = wire.writer
    with pytest.raises(RuntimeError), corked(wire):  # type: ignore[arg-type]
        wire.writer.write(b"partial")
        raise RuntimeError
    assert real.writes == [b"partial"] and wire.writer is real


def test_nested_corks_are_one() -> None:
    wire = FakeWire()
    with corked(wire):  # type: ignore[arg-type]
        outer = wire.writer
        with corked(wire):  # type: ignore[arg-type]
            assert wire.writer is outer
