"""Client text that is not UTF-8: the codec decodes every field without raising, keeps the bytes (a field
encodes back to exactly what came in), and `protocol.text` words MariaDB's refusals."""

from __future__ import annotations

import random
import struct

import pytest

from protocol import text
from protocol.constants import Capability
from protocol.packets import (
    AuthSwitchRequest,
    ColumnDefinition41,
    ComChangeUser,
    ComFieldList,
    ComInitDB,
    ERRPacket,
    HandshakeResponse41,
    HandshakeV10,
)
from protocol.wire import MalformedPacket, lenenc_str

CAPS = (Capability.LONG_PASSWORD | Capability.PROTOCOL_41 | Capability.SECURE_CONNECTION | Capability.PLUGIN_AUTH
        | Capability.PLUGIN_AUTH_LENENC_CLIENT_DATA | Capability.CONNECT_WITH_DB | Capability.CONNECT_ATTRS)
NOT_UTF8 = [b"\xff", b"\xfe\xff", b"a\xffb", b"\xc3", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\x80abc", b"\xc3\xa9\xff"]


def response(user: bytes = b"root", database: bytes = b"demo", plugin: bytes = b"mysql_native_password",
             attrs: bytes = b"", auth_data: bytes = b"\x01" * 20) -> bytes:
    return b"".join((struct.pack("<IIB", int(CAPS), 1 << 24, 45), b"\x00" * 23, user + b"\x00", lenenc_str(auth_data),
                     database + b"\x00", plugin + b"\x00", lenenc_str(attrs)))


@pytest.mark.parametrize("raw", NOT_UTF8)
def test_text_round_trip(raw: bytes) -> None:
    decoded = text.decode(raw)
    assert text.encode(decoded) == raw
    assert not text.is_valid(decoded)
    assert "?" in text.shown(decoded)
    assert "\\x" in text.escaped(decoded)


def test_text_encode_is_total() -> None:
    assert text.encode("\ud800") == b"\xed\xa0\x80"  # a lone surrogate that is no escaped byte
    assert text.encode("é\udcff\udfff") == b"\xc3\xa9\xff\xed\xbf\xbf"
    assert text.is_valid("é") and text.encode("é") == "é".encode()


def test_invalid_string_message_is_mariadbs() -> None:
    assert text.invalid_string(text.decode(b"de\xffmo"), "utf8mb4") == "Invalid utf8mb4 character string: 'de\\xFFmo'"
    assert text.invalid_string(text.decode(b"\xff"), "utf8mb3") == "Invalid utf8mb3 character string: '\\xFF'"
    assert text.invalid_string("demo", "utf8mb4") is None
    assert text.invalid_string(text.decode(b"de\xffmo"), "latin1") is None  # every byte is a latin1 character
    assert len(text.invalid_string(text.decode(b"\xff" * 100), "utf8mb4") or "") < 110


@pytest.mark.parametrize("raw", NOT_UTF8)
@pytest.mark.parametrize("field", ["user", "database", "plugin"])
def test_handshake_response_field_not_utf8(field: str, raw: bytes) -> None:
    payload = response(**{field: raw})
    decoded = HandshakeResponse41.decode(payload)
    value = {"user": decoded.username, "database": decoded.database, "plugin": decoded.auth_plugin}[field]
    assert value is not None and text.encode(value) == raw
    assert decoded.encode() == payload  # the bytes, exactly


@pytest.mark.parametrize("raw", NOT_UTF8)
def test_handshake_response_attributes_not_utf8(raw: bytes) -> None:
    decoded = HandshakeResponse41.decode(response(attrs=lenenc_str(b"_client" + raw) + lenenc_str(raw)))
    assert decoded.username == "root" and len(decoded.attributes) == 1


@pytest.mark.parametrize("raw", NOT_UTF8)
def test_commands_with_names_not_utf8(raw: bytes) -> None:
    assert text.encode(ComInitDB.decode(b"\x02" + raw).database) == raw
    assert ComInitDB.decode(b"\x02" + raw).encode() == b"\x02" + raw
    field_list = ComFieldList.decode(b"\x04" + raw + b"\x00%")
    assert text.encode(field_list.table) == raw and field_list.encode() == b"\x04" + raw + b"\x00%"
    change = ComChangeUser.decode(b"\x11" + raw + b"\x00\x00" + raw + b"\x00\x2d\x00" + raw + b"\x00",
                                  Capability.SECURE_CONNECTION | Capability.PLUGIN_AUTH)
    assert (text.encode(change.username), text.encode(change.database or ""), text.encode(change.auth_plugin or "")) \
        == (raw, raw, raw)


@pytest.mark.parametrize("raw", NOT_UTF8)
def test_server_side_packets_not_utf8(raw: bytes) -> None:
    """What a backend sends (its greeting's plugin name, an auth switch) decodes too."""
    greeting = HandshakeV10("5.5.5-10.11", 1, b"\x01" * 20, CAPS, auth_plugin="x").encode()
    greeting = greeting[: -len(b"x\x00")] + raw + b"\x00"
    assert HandshakeV10.decode(greeting).connection_id == 1
    assert AuthSwitchRequest.decode(b"\xfe" + raw + b"\x00" + b"\x02" * 20).auth_data == b"\x02" * 20


def test_packets_built_from_client_text_encode() -> None:
    name = text.decode(b"a\xffb")
    assert ColumnDefinition41(name, schema=name, table=name).encode().count(b"a\xffb") == 3
    assert AuthSwitchRequest(name, b"").encode() == b"\xfea\xffb\x00\x00"
    # an ERR shows a byte that is not UTF-8 as '?', as MariaDB's messages do
    assert ERRPacket(1045, f"Access denied for user '{name}'", "28000").encode().endswith(b"'a?b'")


def test_fuzz_handshake_response_decodes_or_is_malformed() -> None:
    """Random byte mutations of a handshake response: decoded, or MalformedPacket; nothing else raises, and
    whatever decodes encodes again."""
    rng = random.Random(1200)
    base = response(attrs=lenenc_str(b"_client_name") + lenenc_str(b"libmariadb"))
    decoded = 0
    for _ in range(2000):
        data = bytearray(base)
        for _ in range(rng.randint(1, 6)):
            pos = rng.randrange(len(data))
            op = rng.random()
            if op < 0.6:
                data[pos] = rng.choice((rng.randrange(0x80, 0x100), rng.randrange(256)))
            elif op < 0.8:
                data.insert(pos, rng.randrange(0x80, 0x100))
            else:
                del data[pos]
        try:
            r = HandshakeResponse41.decode(bytes(data))
        except MalformedPacket:
            continue
        decoded += 1
        r.encode()
        for value in (r.username, r.database or "", r.auth_plugin or ""):
            text.encode(value)
            text.shown(value)
    assert decoded > 1000
