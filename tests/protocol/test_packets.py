"""Every packet type of `protocol.packets` against bytes a real MariaDB (and real client libraries) sent.

Fixtures come from `fixtures/capture.py`; each case decodes real bytes, checks what it decoded, and
re-encodes (to the same bytes where the codec keeps every field, otherwise to bytes that decode equal).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import pytest

from protocol import auth
from protocol.constants import Capability, ColumnFlag, ColumnType, ServerStatus
from protocol.packets import (
    AuthMoreData,
    AuthSwitchRequest,
    ColumnDefinition41,
    ComFieldList,
    ComInitDB,
    ComProcessKill,
    ComQuery,
    ComSetOption,
    ComSimple,
    EOFPacket,
    ERRPacket,
    HandshakeResponse41,
    HandshakeV10,
    OKPacket,
    SSLRequest,
    column_count_payload,
    decode_text_row,
    encode_text_row,
    end_of_result,
    is_eof,
    is_err,
    is_ok,
)
from protocol.wire import MalformedPacket
from tests.protocol.fixtures import client_frames, server_frames

SANDBOX_PASSWORD = "root"  # the capture ran against a sandbox server whose root password is this

# --- connection phase -----------------------------------------------------------------------------


GREETINGS = ["handshake", "auth_switch", "auth_denied", "hsr_pymysql", "hsr_connector", "hsr_mysqlclient"]


@pytest.mark.parametrize("name", GREETINGS)
def test_handshake_v10_from_mariadb(name: str) -> None:
    payload = server_frames(name)[0].payload
    h = HandshakeV10.decode(payload)
    assert h.server_version.startswith("5.5.5-10.") and "MariaDB" in h.server_version
    assert h.connection_id > 0
    assert len(h.auth_data) == 20 and b"\x00" not in h.auth_data
    assert h.capabilities & (Capability.PROTOCOL_41 | Capability.SECURE_CONNECTION | Capability.PLUGIN_AUTH)
    assert h.capabilities & Capability.DEPRECATE_EOF
    assert h.auth_plugin == auth.NATIVE_PASSWORD
    assert h.status == ServerStatus.AUTOCOMMIT
    again = h.encode()
    assert HandshakeV10.decode(again) == h
    # MariaDB puts its extended capabilities in the last 4 of the 10 reserved bytes; the codec writes
    # zeros there (the proxy never offers them), and everything else comes out byte for byte
    reserved = payload.index(b"\x00", 1) + 1 + 4 + 8 + 1 + 2 + 1 + 2 + 2 + 1
    assert again[:reserved] == payload[:reserved]
    assert again[reserved + 10 :] == payload[reserved + 10 :]
    assert again[reserved : reserved + 6] == payload[reserved : reserved + 6] == b"\x00" * 6


def test_handshake_v10_proxy_greeting_round_trip() -> None:
    from protocol.constants import SERVER_CAPABILITIES

    h = HandshakeV10("8.0.99-shardproxy", 77, auth.new_scramble(), SERVER_CAPABILITIES)
    assert HandshakeV10.decode(h.encode()) == h


# (fixture, user, database, plugin, attributes expected to be present, whether re-encoding is byte-exact)
RESPONSES: list[Any] = [
    pytest.param("handshake", "root", "capture", auth.NATIVE_PASSWORD, {}, True, id="raw-with-db"),
    pytest.param("auth_switch", "switch", None, auth.CACHING_SHA2_PASSWORD, {}, True, id="raw-sha2-plugin"),
    pytest.param("hsr_pymysql", "root", "capture", auth.NATIVE_PASSWORD,
                 {"_client_name": "pymysql", "program_name": "capture"}, True, id="pymysql"),
    pytest.param("hsr_connector", "root", "capture", auth.NATIVE_PASSWORD,
                 {"_client_name": "mysql-connector-python", "program_name": "capture", "app": "shardproxy"},
                 True, id="mysql-connector"),
    # connector writes the byte length of 'shardproxy ☃' as its character count: keep what parses
    pytest.param("hsr_connector_nonascii", "root", None, auth.NATIVE_PASSWORD, {}, False,
                 id="mysql-connector-non-ascii-attr"),
    # libmariadb sends MariaDB's extended capabilities in the filler, which the codec does not keep
    pytest.param("hsr_mysqlclient", "root", "capture", auth.NATIVE_PASSWORD, {"_client_name": "libmariadb"},
                 False, id="mysqlclient"),
]


@pytest.mark.parametrize(("name", "user", "database", "plugin", "attrs", "exact"), RESPONSES)
def test_handshake_response41_from_clients(
    name: str, user: str, database: str | None, plugin: str, attrs: dict[str, str], exact: bool
) -> None:
    greeting = HandshakeV10.decode(server_frames(name)[0].payload)
    payload = client_frames(name)[0].payload
    r = HandshakeResponse41.decode(payload)
    assert r.username == user
    assert r.database == database
    assert r.auth_plugin == plugin
    assert r.capabilities & Capability.PROTOCOL_41
    if database is not None:  # (connector sets CONNECT_WITH_DB with an empty name when it has no database)
        assert r.capabilities & Capability.CONNECT_WITH_DB
    assert attrs.items() <= r.attributes.items()
    if plugin == auth.NATIVE_PASSWORD:
        assert auth.check_native_password(SANDBOX_PASSWORD, greeting.auth_data, r.auth_response)
    again = r.encode()
    assert HandshakeResponse41.decode(again) == r
    if exact:
        assert again == payload


def test_connector_non_ascii_attribute_keeps_the_handshake() -> None:
    r = HandshakeResponse41.decode(client_frames("hsr_connector_nonascii")[0].payload)
    assert r.username == "root" and r.auth_plugin == auth.NATIVE_PASSWORD
    assert r.attributes["app"].startswith("shardproxy ")  # the attributes that parse are kept


def test_auth_switch_request_from_mariadb() -> None:
    greeting = HandshakeV10.decode(server_frames("auth_switch")[0].payload)
    payload = server_frames("auth_switch")[1].payload
    switch = AuthSwitchRequest.decode(payload)
    assert switch.plugin == auth.NATIVE_PASSWORD
    assert switch.auth_data == greeting.auth_data  # MariaDB re-sends the greeting's scramble
    assert switch.encode() == payload
    answer = client_frames("auth_switch")[1].payload
    assert auth.check_native_password("swpw", switch.auth_data, answer)
    assert OKPacket.decode(server_frames("auth_switch")[2].payload).status == ServerStatus.AUTOCOMMIT


@pytest.mark.parametrize("data", [auth.FAST_AUTH_SUCCESS, auth.PERFORM_FULL_AUTHENTICATION, b"-----BEGIN PUBLIC"])
def test_auth_more_data(data: bytes) -> None:
    assert AuthMoreData.decode(AuthMoreData(data).encode()) == AuthMoreData(data)
    assert AuthMoreData(data).encode()[0] == 1


def test_ssl_request() -> None:
    req = SSLRequest(Capability.PROTOCOL_41 | Capability.SSL | Capability.SECURE_CONNECTION, 1 << 24, 45)
    payload = req.encode()
    assert len(payload) == 32 and SSLRequest.matches(payload)
    assert SSLRequest.decode(payload) == req
    assert not SSLRequest.matches(client_frames("hsr_pymysql")[0].payload)
    assert not SSLRequest.matches(struct.pack("<I", int(Capability.PROTOCOL_41)) + b"\x00" * 28)


# --- generic responses ----------------------------------------------------------------------------

# (fixture, frame index among the server's, expected fields)
OKS: list[Any] = [
    pytest.param("handshake", 1, {"affected_rows": 0, "status": ServerStatus.AUTOCOMMIT}, id="login"),
    pytest.param("ok_update_eof", 0, {"affected_rows": 0, "info": b"Rows matched: 2  Changed: 0  Warnings: 0"},
                 id="update"),
    pytest.param("ok_insert", 0, {"affected_rows": 2, "last_insert_id": 3,
                                  "info": b"Records: 2  Duplicates: 0  Warnings: 0"}, id="insert"),
    pytest.param("ping_eof", 0, {"affected_rows": 0}, id="ping"),
    pytest.param("init_db_eof", 0, {"affected_rows": 0}, id="init-db"),
    pytest.param("multi_eof", 5, {"status": ServerStatus.AUTOCOMMIT | ServerStatus.MORE_RESULTS_EXISTS},
                 id="ok-inside-multi-result"),
    pytest.param("rs_empty_deof", 3, {"header": 0xFE, "status": ServerStatus.AUTOCOMMIT}, id="deprecate-eof-end"),
    pytest.param("rs_warning_deof", -1, {"header": 0xFE, "warnings": 1}, id="deprecate-eof-end-warning"),
    pytest.param("set_option_off_deof", 0, {"header": 0xFE}, id="set-option-deprecate-eof"),
]


@pytest.mark.parametrize(("name", "index", "fields"), OKS)
def test_ok_packet(name: str, index: int, fields: dict[str, Any]) -> None:
    payload = server_frames(name)[index].payload
    ok = OKPacket.decode(payload)
    for key, value in fields.items():
        assert getattr(ok, key) == value, key
    assert ok.encode() == payload
    assert is_ok(payload) == (ok.header == 0)


ERRS: list[Any] = [
    pytest.param("err_unknown_table_eof", 0, 1146, "42S02", "Table 'capture.no_such_table' doesn't exist",
                 id="unknown-table"),
    pytest.param("multi_err_eof", 5, 1146, "42S02", "Table 'capture.no_such_table' doesn't exist",
                 id="in-multi-result"),
    pytest.param("auth_denied", 1, 1045, "28000", "Access denied for user 'root'@'127.0.0.1' (using password: YES)",
                 id="access-denied"),
    pytest.param("multi_refused", 0, 1064, "42000", "You have an error in your SQL syntax", id="syntax"),
]


@pytest.mark.parametrize(("name", "index", "errno", "sqlstate", "message"), ERRS)
def test_err_packet(name: str, index: int, errno: int, sqlstate: str, message: str) -> None:
    payload = server_frames(name)[index].payload
    err = ERRPacket.decode(payload)
    assert (err.errno, err.sqlstate) == (errno, sqlstate)
    assert err.message.startswith(message) or message in err.message
    assert is_err(payload) and not is_ok(payload) and not is_eof(payload)
    assert err.encode() == payload


def test_err_packet_without_protocol41_has_no_sqlstate() -> None:
    payload = ERRPacket(1045, "denied", "28000").encode(Capability(0))
    assert payload == b"\xff\x15\x04denied"
    assert ERRPacket.decode(payload) == ERRPacket(1045, "denied", "HY000")


EOFS: list[Any] = [
    pytest.param("set_option_off_eof", 0, ServerStatus.AUTOCOMMIT, 0, id="set-option"),
    pytest.param("rs_empty_eof", 3, ServerStatus.AUTOCOMMIT, 0, id="after-columns"),
    pytest.param("rs_warning_eof", -1, ServerStatus.AUTOCOMMIT, 1, id="end-with-warning"),
    pytest.param("multi_eof", 4, ServerStatus.AUTOCOMMIT | ServerStatus.MORE_RESULTS_EXISTS, 0, id="more-results"),
    pytest.param("field_list_eof", 20, ServerStatus.AUTOCOMMIT, 0, id="field-list-end"),
]


@pytest.mark.parametrize(("name", "index", "status", "warnings"), EOFS)
def test_eof_packet(name: str, index: int, status: ServerStatus, warnings: int) -> None:
    payload = server_frames(name)[index].payload
    assert is_eof(payload)
    eof = EOFPacket.decode(payload)
    assert (eof.status, eof.warnings) == (status, warnings)
    assert eof.encode() == payload
    assert end_of_result(status, warnings, Capability(0)) == payload


@pytest.mark.parametrize(("classic", "deprecated"), [("rs_empty_eof", "rs_empty_deof"),
                                                     ("rs_warning_eof", "rs_warning_deof"),
                                                     ("multi_eof", "multi_deof")])
def test_end_of_result_matches_the_server_in_both_framings(classic: str, deprecated: str) -> None:
    end_classic = server_frames(classic)[-1].payload
    end_deprecated = server_frames(deprecated)[-1].payload
    eof = EOFPacket.decode(end_classic)
    assert end_of_result(eof.status, eof.warnings, Capability(0)) == end_classic
    assert end_of_result(eof.status, eof.warnings, Capability.DEPRECATE_EOF) == end_deprecated


# --- result sets ----------------------------------------------------------------------------------

TYPES = {
    "id": ColumnType.LONG, "ti": ColumnType.TINY, "si": ColumnType.SHORT, "mi": ColumnType.INT24,
    "i": ColumnType.LONG, "bi": ColumnType.LONGLONG, "ubi": ColumnType.LONGLONG, "dc": ColumnType.NEWDECIMAL,
    "f": ColumnType.FLOAT, "d": ColumnType.DOUBLE, "vc": ColumnType.VAR_STRING, "ch": ColumnType.STRING,
    "dt": ColumnType.DATE, "dtm": ColumnType.DATETIME, "tm": ColumnType.TIME, "yr": ColumnType.YEAR,
    "bl": ColumnType.BLOB, "js": ColumnType.BLOB, "en": ColumnType.STRING, "bt": ColumnType.BIT,
}


def _column_frames(name: str) -> list[bytes]:
    frames = server_frames(name)
    if name.startswith("field_list"):
        return [f.payload for f in frames[:-1]]
    count = frames[0].payload[0]
    return [f.payload for f in frames[1 : 1 + count]]


@pytest.mark.parametrize("name", ["rs_types_eof", "rs_types_deof", "rs_empty_eof", "multi_eof", "field_list_eof",
                                  "field_list_deof"])
def test_column_definitions(name: str) -> None:
    payloads = _column_frames(name)
    assert payloads
    for payload in payloads:
        col = ColumnDefinition41.decode(payload)
        assert col.catalog == "def"
        assert col.encode() == payload
        if col.table == "t_types":
            assert col.type == TYPES[col.name], col.name
            assert col.schema == "capture" and col.org_name == col.name
            assert col.has_default == name.startswith("field_list")


def test_field_list_defaults() -> None:
    cols = {c.name: c for c in map(ColumnDefinition41.decode, _column_frames("field_list_eof"))}
    assert cols["id"].default == b"0" and cols["vc"].default is None and cols["vc"].has_default


def test_column_flags_and_charsets() -> None:
    cols = {c.name: c for c in map(ColumnDefinition41.decode, _column_frames("rs_types_eof"))}
    assert cols["id"].flags & ColumnFlag.PRI_KEY and cols["id"].flags & ColumnFlag.NOT_NULL
    assert cols["ubi"].flags & ColumnFlag.UNSIGNED and not cols["bi"].flags & ColumnFlag.UNSIGNED
    assert cols["dc"].decimals == 6 and cols["dtm"].decimals == 6
    assert cols["vc"].character_set == 45 and cols["vc"].column_length == 200  # 50 chars x 4 bytes
    assert cols["bl"].character_set == 63 and cols["bl"].flags & ColumnFlag.BINARY
    assert cols["en"].flags & ColumnFlag.ENUM


EXPECTED_ROW = (
    b"1", b"-128", b"-32768", b"-8388608", b"-2147483648", b"-9223372036854775808", b"18446744073709551615",
    b"-12345678901234.123456", b"1.5", b"2.25e-300", "日本語 ☃ 😀".encode(), b"abc", b"2024-02-29",
    b"2024-02-29 23:59:58.123456", b"-838:59:59", b"2024", b"\x00\xff\x7f\x80", '{"k": [1, "ü"]}'.encode(),
    b"b", b"\xa5",
)


@pytest.mark.parametrize("name", ["rs_types_eof", "rs_types_deof"])
def test_text_rows(name: str) -> None:
    frames = server_frames(name)
    count = frames[0].payload[0]
    assert column_count_payload(count) == frames[0].payload
    rows_start = 1 + count + (0 if name.endswith("deof") else 1)
    rows = [f.payload for f in frames[rows_start:-1]]
    assert len(rows) == 2
    first = decode_text_row(rows[0], count)
    second = decode_text_row(rows[1], count)
    assert first == EXPECTED_ROW
    assert second == (b"2",) + (None,) * (count - 1)
    assert encode_text_row(first) == rows[0] and encode_text_row(list(second)) == rows[1]


def test_text_row_truncated_is_malformed() -> None:
    row = server_frames("rs_types_eof")[22].payload
    with pytest.raises(MalformedPacket):
        decode_text_row(row[:-1], 20)


# --- commands -------------------------------------------------------------------------------------

COMMANDS: list[Any] = [
    pytest.param("rs_types_eof", ComQuery.decode, ComQuery(b"SELECT * FROM t_types ORDER BY id"), id="query"),
    pytest.param("init_db_eof", ComInitDB.decode, ComInitDB("capture"), id="init-db"),
    pytest.param("field_list_eof", ComFieldList.decode, ComFieldList("t_types"), id="field-list"),
    pytest.param("set_option_off_eof", ComSetOption.decode, ComSetOption(1), id="set-option"),
    pytest.param("ping_eof", ComSimple.decode, ComSimple(0x0E), id="ping"),
    pytest.param("statistics_eof", ComSimple.decode, ComSimple(0x09), id="statistics"),
]


@pytest.mark.parametrize(("name", "decode", "expected"), COMMANDS)
def test_commands(name: str, decode: Callable[[bytes], Any], expected: Any) -> None:
    payload = client_frames(name)[0].payload
    assert client_frames(name)[0].seq == 0
    assert decode(payload) == expected
    assert expected.encode() == payload


def test_com_process_kill() -> None:
    assert ComProcessKill(0x01020304).encode() == b"\x0c\x04\x03\x02\x01"
    assert ComProcessKill.decode(b"\x0c\x04\x03\x02\x01") == ComProcessKill(0x01020304)
    with pytest.raises(MalformedPacket):
        ComProcessKill.decode(b"\x0c\x01")


def test_statistics_answer_is_a_bare_string() -> None:
    payload = server_frames("statistics_eof")[0].payload
    assert payload.startswith(b"Uptime: ") and b"Queries per second avg: " in payload
    assert not (is_ok(payload) or is_err(payload) or is_eof(payload))


# --- truncation: any prefix of a real packet fails as MalformedPacket, never as another exception ---

DECODERS: list[Any] = [
    pytest.param("handshake", "<", 0, HandshakeV10.decode, id="handshake-v10"),
    pytest.param("hsr_pymysql", ">", 0, HandshakeResponse41.decode, id="handshake-response-pymysql"),
    pytest.param("hsr_mysqlclient", ">", 0, HandshakeResponse41.decode, id="handshake-response-mysqlclient"),
    pytest.param("hsr_connector", ">", 0, HandshakeResponse41.decode, id="handshake-response-connector"),
    pytest.param("auth_switch", "<", 1, AuthSwitchRequest.decode, id="auth-switch"),
    pytest.param("ok_insert", "<", 0, OKPacket.decode, id="ok"),
    pytest.param("err_unknown_table_eof", "<", 0, ERRPacket.decode, id="err"),
    pytest.param("rs_empty_eof", "<", 3, EOFPacket.decode, id="eof"),
    pytest.param("rs_types_eof", "<", 1, ColumnDefinition41.decode, id="column-definition"),
    pytest.param("field_list_eof", "<", 1, ColumnDefinition41.decode, id="column-definition-default"),
    pytest.param("set_option_off_eof", ">", 0, ComSetOption.decode, id="set-option"),
]


@pytest.mark.parametrize(("name", "direction", "index", "decode"), DECODERS)
def test_truncated_packets_raise_malformed(
    name: str, direction: str, index: int, decode: Callable[[bytes], Any]
) -> None:
    frames = server_frames(name) if direction == "<" else client_frames(name)
    payload = frames[index].payload
    for n in range(len(payload)):
        try:
            decode(payload[:n])
        except MalformedPacket:
            pass
