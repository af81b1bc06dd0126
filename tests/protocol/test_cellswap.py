"""protocol.cellswap.swap_cells: one cell of each row replaced, the rest of each frame as it came; the Python
definition and the C form of protocol._crowframes give the same bytes, or both None, for every case."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from protocol import cellswap
from protocol.framing import encode_packet

C = cellswap.C
FORMS = ["python", "c"] if C is not None else ["python"]
EOF = b"\xfe\x00\x00\x02\x00"


def frames(*payloads: bytes, seq: int = 3) -> bytes:
    return b"".join(encode_packet(p, seq + i)[0] for i, p in enumerate(payloads))


def lenenc(v: bytes) -> bytes:
    n = len(v)
    return bytes((n,)) + v if n < 0xFB else b"\xfc" + n.to_bytes(2, "little") + v if n < 0x10000 else \
        b"\xfd" + n.to_bytes(3, "little") + v


def upper(v: bytes) -> bytes:
    return v.upper()


def double(v: bytes) -> bytes:
    return v * 2


def grow(v: bytes) -> bytes:
    return v * 300


def fail(v: bytes) -> bytes:
    raise ValueError("not mine")


BIN_INT = b"\x00\x00" + (7).to_bytes(4, "little")  # a binary row's header (0x00, NULL bitmap of 1 byte), an INT

# (name, buf, pos, fixed, nulls, index, convert, expected: bytes or None)
CASES: list[tuple[str, bytes, int, int, int, int, Callable[[bytes], bytes], bytes | None]] = [
    ("text, first value", frames(lenenc(b"ab"), EOF), 0, -1, 0, 0, upper, frames(lenenc(b"AB"), EOF)),
    ("text, after two", frames(lenenc(b"x") + b"\xfb" + lenenc(b"ab") + lenenc(b"z"), EOF), 0, -1, 0, 2, upper,
     frames(lenenc(b"x") + b"\xfb" + lenenc(b"AB") + lenenc(b"z"), EOF)),
    ("text, several rows", frames(lenenc(b"a"), lenenc(b"bc"), lenenc(b""), EOF), 0, -1, 0, 0, double,
     frames(lenenc(b"aa"), lenenc(b"bcbc"), lenenc(b""), EOF)),
    ("text, no row", frames(EOF), 0, -1, 0, 0, upper, frames(EOF)),
    ("text, after a head", b"HEAD" + frames(lenenc(b"a"), EOF), 4, -1, 0, 0, upper, frames(lenenc(b"A"), EOF)),
    ("text, what follows the end kept", frames(lenenc(b"a"), EOF) + b"more", 0, -1, 0, 0, upper,
     frames(lenenc(b"A"), EOF) + b"more"),
    ("text, OK ends", frames(lenenc(b"a"), b"\xfe\x00\x00\x02\x00\x00\x00"), 0, -1, 0, 0, upper,
     frames(lenenc(b"A"), b"\xfe\x00\x00\x02\x00\x00\x00")),
    ("text, ERR ends", frames(lenenc(b"a"), b"\xff\x10\x04#HY000x"), 0, -1, 0, 0, upper,
     frames(lenenc(b"A"), b"\xff\x10\x04#HY000x")),
    ("text, grows past 250", frames(lenenc(b"ab"), EOF), 0, -1, 0, 0, grow, frames(lenenc(b"ab" * 300), EOF)),
    ("text, a 300-byte value before", frames(lenenc(b"q" * 300) + lenenc(b"ab"), EOF), 0, -1, 0, 1, upper,
     frames(lenenc(b"q" * 300) + lenenc(b"AB"), EOF)),
    ("text, a 300-byte value", frames(lenenc(b"q" * 300), EOF), 0, -1, 0, 0, upper, frames(lenenc(b"Q" * 300), EOF)),
    ("text, NULL cell", frames(b"\xfb", EOF), 0, -1, 0, 0, upper, None),
    ("text, a 64 KB value", frames(lenenc(b"q" * 70000), EOF), 0, -1, 0, 0, upper, None),
    ("text, fewer values than index", frames(lenenc(b"a"), EOF), 0, -1, 0, 1, upper, None),
    ("text, no end frame", frames(lenenc(b"a")), 0, -1, 0, 0, upper, None),
    ("text, cut frame", frames(lenenc(b"a"), EOF)[:-2], 0, -1, 0, 0, upper, None),
    ("text, a row cut short", frames(lenenc(b"abc")[:-1], EOF), 0, -1, 0, 0, upper, None),
    ("text, an empty frame", frames(b"", EOF), 0, -1, 0, 0, upper, None),
    ("text, convert raises", frames(lenenc(b"a"), EOF), 0, -1, 0, 0, fail, None),
    ("binary, after an int", frames(BIN_INT + lenenc(b"ab"), EOF), 0, 6, 1, 1, upper,
     frames(BIN_INT + lenenc(b"AB"), EOF)),
    ("binary, first cell", frames(b"\x00\x00" + lenenc(b"ab") + b"\x01\x00", EOF), 0, 2, 1, 0, upper,
     frames(b"\x00\x00" + lenenc(b"AB") + b"\x01\x00", EOF)),
    ("binary, a NULL", frames(b"\x00\x08" + (7).to_bytes(4, "little"), EOF), 0, 6, 1, 1, upper, None),
    ("binary, past the row", frames(b"\x00\x00\x01", EOF), 0, 6, 1, 1, upper, None),
    ("binary, grows past 250", frames(BIN_INT + lenenc(b"ab"), EOF), 0, 6, 1, 1, grow,
     frames(BIN_INT + lenenc(b"ab" * 300), EOF)),
    ("binary, sequence ids kept", frames(BIN_INT + lenenc(b"a"), EOF, seq=200), 0, 6, 1, 1, upper,
     frames(BIN_INT + lenenc(b"A"), EOF, seq=200)),
]


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize(("name", "buf", "pos", "fixed", "nulls", "index", "convert", "expected"), CASES,
                         ids=[c[0] for c in CASES])
def test_swap_cells(form: str, name: str, buf: bytes, pos: int, fixed: int, nulls: int, index: int,
                    convert: Callable[[bytes], bytes], expected: bytes | None) -> None:
    c = C if form == "c" else None
    assert cellswap.swap_cells(buf, pos, fixed, nulls, index, convert, c) == expected


@pytest.mark.parametrize("form", FORMS)
def test_a_convert_that_returns_no_bytes_is_a_type_error_in_c_and_fails_in_python(form: str) -> None:
    c = C if form == "c" else None
    with pytest.raises(TypeError):
        cellswap.swap_cells(frames(lenenc(b"a"), EOF), 0, -1, 0, 0, lambda v: "text", c)  # type: ignore[arg-type,return-value]
