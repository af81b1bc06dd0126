"""The fast path's DecryptingRelay (proxy.execution.decrypting): an encrypted SELECT's answer, text or binary rows,
relayed with its cipher values decrypted. The first answer of a shape is walked frame by frame and its head kept;
the answers after it that come whole are decrypted without the walk (`_whole`). Every answer, walked or not, must be
the bytes the unencrypted answer would be: each case feeds the same encrypted answer three times, whole and split
into small reads, and compares with the answer encoded from the plaintext."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from protocol.binary import encode_binary_row
from protocol.constants import ColumnType
from protocol.framing import encode_packet
from protocol.packets import ColumnDefinition41, encode_text_row, end_of_result
from protocol.verbatim import VerbatimRelay
from proxy.execution.decrypting import DecryptingRelay
from routing.encrypt.algorithms import create_encryptor

AES = create_encryptor("AES", {"aes-key-value": "123456abc", "digest-algorithm-name": "SHA-1"}, key="t")
INT, STR, DATE = ColumnType.LONG, ColumnType.VAR_STRING, ColumnType.DATE
LONG = "x" * 300  # a value whose cipher text takes a 3-byte length (0xFC)

# (name, column types, which columns are encrypted, rows of plaintext values, answered without the walk after the
# first answer: text rows, binary rows). A binary row's cell is found without the walk only when every cell before
# it has a fixed width and none is NULL; a text row's values before it are skipped by their lengths
CASES: list[tuple[str, tuple[int, ...], tuple[bool, ...], list[tuple[Any, ...]], tuple[bool, bool]]] = [
    ("one column, one row", (STR,), (True,), [("zhangsan",)], (True, True)),
    ("after an int", (INT, STR), (False, True), [(10, "lisi")], (True, True)),
    ("before an int", (STR, INT), (True, False), [("lisi", 10)], (True, True)),
    ("after a string", (STR, STR), (False, True), [("a", "b")], (True, False)),
    ("several rows", (INT, STR), (False, True), [(1, "a"), (2, "bb"), (3, "王五")], (True, True)),
    ("no row", (INT, STR), (False, True), [], (True, True)),
    ("a long value", (INT, STR), (False, True), [(1, LONG)], (True, True)),
    ("a long value before it", (STR, STR), (False, True), [(LONG, "b")], (True, False)),
    ("a value over 64 KB", (INT, STR), (False, True), [(1, "y" * 70000)], (False, False)),
    ("empty value", (STR,), (True,), [("",)], (True, True)),
    ("NULL value", (INT, STR), (False, True), [(1, None)], (False, False)),
    ("NULL before it", (STR, STR), (False, True), [(None, "b")], (True, False)),
    ("NULL after it", (STR, STR), (True, False), [("a", None)], (True, False)),
    ("two encrypted", (STR, STR), (True, True), [("a", "b")], (False, False)),
    ("after a date", (DATE, STR), (False, True), [("2024-01-02", "b")], (True, False)),
    ("nothing encrypted", (INT, STR), (False, False), [(1, "a")], (False, False)),
]


def _columns(types: tuple[int, ...]) -> list[ColumnDefinition41]:
    return [ColumnDefinition41(f"c{i}", ColumnType(t), table="t", org_table="t", org_name=f"c{i}")
            for i, t in enumerate(types)]


def _text(value: Any) -> bytes | None:
    return None if value is None else str(value).encode()


def _answer(columns: list[ColumnDefinition41], rows: list[tuple[Any, ...]], binary: bool) -> bytes:
    packets = [bytes((len(columns),)), *(c.encode() for c in columns), b"\xfe\x00\x00\x02\x00"]
    for row in rows:
        texts = [_text(v) for v in row]
        packets.append(encode_binary_row(list(row), columns) if binary else encode_text_row(texts))
    packets.append(end_of_result(2, 0, 0))
    return b"".join(encode_packet(p, seq + 1)[0] for seq, p in enumerate(packets))


def _encrypted(row: tuple[Any, ...], encrypted: tuple[bool, ...]) -> tuple[Any, ...]:
    return tuple(AES.encrypt(str(v)) if e and v is not None else v for v, e in zip(row, encrypted, strict=True))


@pytest.mark.parametrize("binary", [False, True], ids=["text", "binary"])
@pytest.mark.parametrize(("name", "types", "encrypted", "rows", "lane"), CASES, ids=[c[0] for c in CASES])
def test_every_answer_is_the_plaintext_answer(
    name: str, types: tuple[int, ...], encrypted: tuple[bool, ...], rows: list[tuple[Any, ...]],
    lane: tuple[bool, bool],
    binary: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    columns = _columns(types)
    if binary:  # (the cipher column's definition is a string's in both: the values differ)
        rows = [tuple(_date(v) if t == DATE else v for v, t in zip(r, types, strict=True)) for r in rows]
    plain = _answer(columns, rows, binary)
    cipher = _answer(columns, [_encrypted(r, encrypted) for r in rows], binary)
    decrypt = tuple(AES if e else None for e in encrypted)
    session = SimpleNamespace(capabilities=0, deprecate_eof=False)
    walks = []
    original = DecryptingRelay._walk

    def counted(self: DecryptingRelay, data: bytes) -> bytes:
        walks.append(len(data))
        return original(self, data)

    monkeypatch.setattr(DecryptingRelay, "_walk", counted)
    relay = DecryptingRelay(session, decrypt, VerbatimRelay(), binary=binary)  # type: ignore[arg-type]
    for attempt, step in enumerate([len(cipher), len(cipher), 7, len(cipher)]):
        relay.restart(session, decrypt, VerbatimRelay(), binary=binary)  # type: ignore[arg-type]
        walks.clear()
        out = b"".join(relay.feed(cipher[i : i + step]) for i in range(0, len(cipher), step))
        assert relay.done
        assert out == plain, (name, attempt)
        if attempt in (1, 3):  # the head is known: whole answers skip the walk when the lane takes them
            assert (not walks) == lane[binary], (name, attempt, walks)


def _date(value: Any) -> Any:
    import datetime

    return datetime.date.fromisoformat(value) if isinstance(value, str) else value


def test_a_value_that_does_not_decrypt_is_a_lone_err_after_a_known_head() -> None:
    columns = _columns((INT, STR))
    session = SimpleNamespace(capabilities=0, deprecate_eof=False)
    good = _answer(columns, [(1, AES.encrypt("a"))], True)
    bad = _answer(columns, [(1, AES.encrypt("a")), (2, "plaintext")], True)
    relay = DecryptingRelay(session, (None, AES), VerbatimRelay(), binary=True)  # type: ignore[arg-type]
    relay.feed(good)
    relay.restart(session, (None, AES), VerbatimRelay(), binary=True)  # type: ignore[arg-type]
    out = relay.feed(bad)
    assert relay.done
    assert out[4] == 0xFF and b"c1 cannot be decrypted by its encryptor (AES)" in out
