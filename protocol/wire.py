"""Primitive wire encodings: fixed and length-encoded integers and strings.

`Reader` walks a payload with an explicit position so that packet decoders stay short and every
truncation surfaces as one exception type (`MalformedPacket`) that the server turns into an ERR.
"""

from __future__ import annotations

import struct


class MalformedPacket(ValueError):
    """A payload ended early or carried an impossible value."""


_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")


def lenenc_int(value: int) -> bytes:
    if value < 0xFB:
        return bytes((value,))
    if value < 1 << 16:
        return b"\xfc" + _U16.pack(value)
    if value < 1 << 24:
        return b"\xfd" + value.to_bytes(3, "little")
    return b"\xfe" + _U64.pack(value)


def lenenc_str(value: bytes) -> bytes:
    return lenenc_int(len(value)) + value


class Reader:
    __slots__ = ("data", "pos")

    def __init__(self, data: bytes | memoryview, pos: int = 0) -> None:
        self.data = bytes(data)
        self.pos = pos

    def remaining(self) -> int:
        return len(self.data) - self.pos

    def _need(self, n: int) -> None:
        if self.pos + n > len(self.data):
            raise MalformedPacket(f"packet ends after {len(self.data)} bytes, {self.pos + n} needed")

    def u8(self) -> int:
        self._need(1)
        v = self.data[self.pos]
        self.pos += 1
        return v

    def u16(self) -> int:
        self._need(2)
        v: int = _U16.unpack_from(self.data, self.pos)[0]
        self.pos += 2
        return v

    def u24(self) -> int:
        self._need(3)
        v = int.from_bytes(self.data[self.pos : self.pos + 3], "little")
        self.pos += 3
        return v

    def u32(self) -> int:
        self._need(4)
        v: int = _U32.unpack_from(self.data, self.pos)[0]
        self.pos += 4
        return v

    def u64(self) -> int:
        self._need(8)
        v: int = _U64.unpack_from(self.data, self.pos)[0]
        self.pos += 8
        return v

    def lenenc_int(self) -> int | None:
        """None for the 0xFB NULL marker of text rows."""
        first = self.u8()
        if first < 0xFB:
            return first
        if first == 0xFB:
            return None
        if first == 0xFC:
            return self.u16()
        if first == 0xFD:
            return self.u24()
        if first == 0xFE:
            return self.u64()
        raise MalformedPacket("0xFF is not a length-encoded integer")

    def lenenc_str(self) -> bytes | None:
        n = self.lenenc_int()
        if n is None:
            return None
        return self.fixed(n)

    def fixed(self, n: int) -> bytes:
        self._need(n)
        v = self.data[self.pos : self.pos + n]
        self.pos += n
        return v

    def nul_str(self) -> bytes:
        end = self.data.find(b"\x00", self.pos)
        if end < 0:
            raise MalformedPacket("NUL-terminated string has no NUL")
        v = self.data[self.pos : end]
        self.pos = end + 1
        return v

    def rest(self) -> bytes:
        v = self.data[self.pos :]
        self.pos = len(self.data)
        return v
