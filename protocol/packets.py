"""One frozen dataclass per wire message, each with `decode(payload, capabilities)` and `encode(...)`.

Capabilities are always passed in explicitly: the same bytes mean different things under different
negotiated capabilities (DEPRECATE_EOF, PLUGIN_AUTH_LENENC_CLIENT_DATA, ...), and a codec that guessed
would be wrong for half of the clients.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from protocol.constants import Capability, Collation, ColumnType, ServerStatus
from protocol.text import decode as text_decode
from protocol.text import encode as text_encode
from protocol.wire import MalformedPacket, Reader, lenenc_int, lenenc_str

OK_HEADER = 0x00
EOF_HEADER = 0xFE
ERR_HEADER = 0xFF
LOCAL_INFILE_HEADER = 0xFB


def is_err(payload: bytes) -> bool:
    return bool(payload) and payload[0] == ERR_HEADER


def is_eof(payload: bytes) -> bool:
    """Classic EOF (or an OK sent with the 0xFE header under DEPRECATE_EOF): 0xFE and short."""
    return bool(payload) and payload[0] == EOF_HEADER and len(payload) < 9


def is_ok(payload: bytes) -> bool:
    return bool(payload) and payload[0] == OK_HEADER


# --- connection phase ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class HandshakeV10:
    server_version: str
    connection_id: int
    auth_data: bytes  # the 20-byte scramble
    capabilities: Capability
    character_set: int = Collation.UTF8MB4_GENERAL_CI
    status: ServerStatus = ServerStatus.AUTOCOMMIT
    auth_plugin: str = "mysql_native_password"

    def encode(self) -> bytes:
        caps = int(self.capabilities)
        data = self.auth_data
        return b"".join(
            (
                b"\x0a",
                self.server_version.encode() + b"\x00",
                struct.pack("<I", self.connection_id),
                data[:8],
                b"\x00",
                struct.pack("<H", caps & 0xFFFF),
                bytes((self.character_set & 0xFF,)),
                struct.pack("<H", int(self.status)),
                struct.pack("<H", (caps >> 16) & 0xFFFF),
                bytes((len(data) + 1 if caps & Capability.PLUGIN_AUTH else 0,)),
                b"\x00" * 10,
                data[8:] + b"\x00",
                self.auth_plugin.encode() + b"\x00" if caps & Capability.PLUGIN_AUTH else b"",
            )
        )

    @classmethod
    def decode(cls, payload: bytes) -> HandshakeV10:
        r = Reader(payload)
        if r.u8() != 10:
            raise MalformedPacket("not a protocol 10 handshake")
        version = r.nul_str().decode(errors="replace")
        conn_id = r.u32()
        data1 = r.fixed(8)
        r.u8()
        caps = r.u16()
        charset = r.u8() if r.remaining() else 0
        status = r.u16() if r.remaining() else 0
        caps |= (r.u16() << 16) if r.remaining() else 0
        data_len = r.u8() if r.remaining() else 0
        r.fixed(10) if r.remaining() >= 10 else r.rest()
        data2 = b""
        if caps & Capability.SECURE_CONNECTION and r.remaining():
            n = max(13, data_len - 8)
            data2 = r.fixed(min(n, r.remaining())).rstrip(b"\x00")
        plugin = ""
        if caps & Capability.PLUGIN_AUTH and r.remaining():
            raw = r.rest()
            plugin = raw.split(b"\x00", 1)[0].decode(errors="replace")
        return cls(version, conn_id, data1 + data2, Capability(caps), charset, ServerStatus(status), plugin)


@dataclass(frozen=True)
class SSLRequest:
    """The 32-byte prefix a client sends when it wants TLS before the real handshake response."""

    capabilities: Capability
    max_packet_size: int
    character_set: int

    @staticmethod
    def matches(payload: bytes) -> bool:
        if len(payload) != 32:
            return False
        caps = struct.unpack_from("<I", payload)[0]
        return bool(caps & Capability.SSL)

    @classmethod
    def decode(cls, payload: bytes) -> SSLRequest:
        r = Reader(payload)
        return cls(Capability(r.u32()), r.u32(), r.u8())

    def encode(self) -> bytes:
        return struct.pack("<IIB", int(self.capabilities), self.max_packet_size, self.character_set) + (
            b"\x00" * 23
        )


@dataclass(frozen=True)
class HandshakeResponse41:
    capabilities: Capability
    max_packet_size: int
    character_set: int
    username: str
    auth_response: bytes
    database: str | None = None
    auth_plugin: str | None = None
    attributes: dict[str, str] = field(default_factory=dict)

    @classmethod
    def decode(cls, payload: bytes) -> HandshakeResponse41:
        r = Reader(payload)
        caps = Capability(r.u32())
        if not caps & Capability.PROTOCOL_41:
            raise MalformedPacket("clients must speak protocol 4.1")
        max_packet = r.u32()
        charset = r.u8()
        r.fixed(23)
        # client text, kept as the bytes it was (protocol.text): a name that is not UTF-8 must be refused
        # as MariaDB refuses it, not turn into another, valid name
        username = text_decode(r.nul_str())
        if caps & Capability.PLUGIN_AUTH_LENENC_CLIENT_DATA:
            auth = r.lenenc_str() or b""
        elif caps & Capability.SECURE_CONNECTION:
            auth = r.fixed(r.u8())
        else:
            auth = r.nul_str()
        database = None
        if caps & Capability.CONNECT_WITH_DB and r.remaining():
            database = text_decode(r.nul_str()) or None
        plugin = None
        if caps & Capability.PLUGIN_AUTH and r.remaining():
            plugin = text_decode(r.nul_str() if b"\x00" in r.data[r.pos :] else r.rest())
        attrs: dict[str, str] = {}
        if caps & Capability.CONNECT_ATTRS and r.remaining():
            # Informational only, and not always well formed: mysql-connector-python writes the length of
            # a non-ASCII value in characters, not bytes. Like the server, keep what parses and go on.
            try:
                total = r.lenenc_int() or 0
                a = Reader(r.fixed(min(total, r.remaining())))
                while a.remaining():
                    k = a.lenenc_str() or b""
                    v = a.lenenc_str() or b""
                    attrs[k.decode(errors="replace")] = v.decode(errors="replace")
            except MalformedPacket:
                pass
        return cls(caps, max_packet, charset, username, auth, database, plugin, attrs)

    def encode(self) -> bytes:
        caps = self.capabilities
        parts = [
            struct.pack("<IIB", int(caps), self.max_packet_size, self.character_set),
            b"\x00" * 23,
            text_encode(self.username) + b"\x00",
        ]
        if caps & Capability.PLUGIN_AUTH_LENENC_CLIENT_DATA:
            parts.append(lenenc_str(self.auth_response))
        else:
            parts.append(bytes((len(self.auth_response),)) + self.auth_response)
        if caps & Capability.CONNECT_WITH_DB:
            parts.append(text_encode(self.database or "") + b"\x00")
        if caps & Capability.PLUGIN_AUTH:
            parts.append(text_encode(self.auth_plugin or "") + b"\x00")
        if caps & Capability.CONNECT_ATTRS:
            body = b"".join(lenenc_str(text_encode(k)) + lenenc_str(text_encode(v)) for k, v in self.attributes.items())
            parts.append(lenenc_str(body))
        return b"".join(parts)


@dataclass(frozen=True)
class AuthSwitchRequest:
    plugin: str
    auth_data: bytes

    def encode(self) -> bytes:
        return b"\xfe" + text_encode(self.plugin) + b"\x00" + self.auth_data + b"\x00"

    @classmethod
    def decode(cls, payload: bytes) -> AuthSwitchRequest:
        r = Reader(payload)
        if r.u8() != 0xFE:
            raise MalformedPacket("not an auth switch request")
        plugin = r.nul_str().decode(errors="replace")
        return cls(plugin, r.rest().rstrip(b"\x00"))


@dataclass(frozen=True)
class AuthMoreData:
    """0x01 + data: caching_sha2_password's fast-auth result or the RSA public key."""

    data: bytes

    def encode(self) -> bytes:
        return b"\x01" + self.data

    @classmethod
    def decode(cls, payload: bytes) -> AuthMoreData:
        if not payload or payload[0] != 0x01:
            raise MalformedPacket("not an auth-more-data packet")
        return cls(payload[1:])


# --- generic responses --------------------------------------------------------------------------------


@dataclass(frozen=True)
class OKPacket:
    affected_rows: int = 0
    last_insert_id: int = 0
    status: ServerStatus = ServerStatus.AUTOCOMMIT
    warnings: int = 0
    info: bytes = b""
    header: int = OK_HEADER  # 0xFE when it ends a result set under DEPRECATE_EOF

    def encode(self, capabilities: Capability = Capability.PROTOCOL_41) -> bytes:
        parts = [
            bytes((self.header,)),
            lenenc_int(self.affected_rows),
            lenenc_int(self.last_insert_id),
            struct.pack("<HH", int(self.status) & 0xFFFF, self.warnings),
        ]
        if self.info:
            parts.append(lenenc_str(self.info))  # length-encoded, as servers send it and clients read it
        return b"".join(parts)

    @classmethod
    def decode(cls, payload: bytes, capabilities: Capability = Capability.PROTOCOL_41) -> OKPacket:
        r = Reader(payload)
        header = r.u8()
        if header not in (OK_HEADER, EOF_HEADER):
            raise MalformedPacket("not an OK packet")
        affected = r.lenenc_int() or 0
        last_id = r.lenenc_int() or 0
        status = r.u16() if r.remaining() >= 2 else 0
        warnings = r.u16() if r.remaining() >= 2 else 0
        return cls(affected, last_id, ServerStatus(status), warnings, _ok_info(r), header)


def _ok_info(r: Reader) -> bytes:
    """The human-readable info of an OK packet ("Rows matched: 1  Changed: 0  Warnings: 0"): a
    length-encoded string (MySQL and MariaDB write it so, libmysql/libmariadb and Connector/Python read it
    so); a bare string that does not parse as one is kept whole."""
    if not r.remaining():
        return b""
    start = r.pos
    try:
        info = r.lenenc_str()
    except MalformedPacket:
        info = None
    if info is None or r.remaining():
        r.pos = start
        return r.rest()
    return info


@dataclass(frozen=True)
class ERRPacket:
    errno: int
    message: str
    sqlstate: str = "HY000"

    def encode(self, capabilities: Capability = Capability.PROTOCOL_41) -> bytes:
        state = b"#" + self.sqlstate.encode()[:5].ljust(5, b"0") if capabilities & Capability.PROTOCOL_41 else b""
        return b"\xff" + struct.pack("<H", self.errno) + state + self.message.encode("utf-8", "replace")

    @classmethod
    def decode(cls, payload: bytes, capabilities: Capability = Capability.PROTOCOL_41) -> ERRPacket:
        r = Reader(payload)
        if r.u8() != ERR_HEADER:
            raise MalformedPacket("not an ERR packet")
        errno = r.u16()
        sqlstate = "HY000"
        if r.remaining() and r.data[r.pos] == ord("#"):
            r.u8()
            sqlstate = r.fixed(5).decode(errors="replace")
        return cls(errno, r.rest().decode("utf-8", errors="replace"), sqlstate)


@dataclass(frozen=True)
class EOFPacket:
    warnings: int = 0
    status: ServerStatus = ServerStatus.AUTOCOMMIT

    def encode(self, capabilities: Capability = Capability.PROTOCOL_41) -> bytes:
        return b"\xfe" + struct.pack("<HH", self.warnings, int(self.status) & 0xFFFF)

    @classmethod
    def decode(cls, payload: bytes, capabilities: Capability = Capability.PROTOCOL_41) -> EOFPacket:
        r = Reader(payload)
        if r.u8() != EOF_HEADER:
            raise MalformedPacket("not an EOF packet")
        warnings = r.u16() if r.remaining() >= 2 else 0
        status = r.u16() if r.remaining() >= 2 else 0
        return cls(warnings, ServerStatus(status))


_DEPRECATE_EOF = int(Capability.DEPRECATE_EOF)
_STATUS_WARNINGS = struct.Struct("<HH")


def end_of_result(status: int, warnings: int, capabilities: int) -> bytes:
    """The packet that ends a result set's rows: an OK with 0xFE header or a classic EOF (the same bytes as
    `OKPacket(0, 0, status, warnings, header=0xFE)` / `EOFPacket(warnings, status)` encode, without building
    them: it ends every result the proxy merges)."""
    if int(capabilities) & _DEPRECATE_EOF:
        return b"\xfe\x00\x00" + _STATUS_WARNINGS.pack(int(status) & 0xFFFF, warnings)
    return b"\xfe" + _STATUS_WARNINGS.pack(warnings, int(status) & 0xFFFF)


# --- result sets --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ColumnDefinition41:
    name: str
    type: ColumnType = ColumnType.VAR_STRING
    schema: str = ""
    table: str = ""
    org_table: str = ""
    org_name: str = ""
    catalog: str = "def"
    character_set: int = Collation.UTF8MB4_GENERAL_CI
    column_length: int = 1024
    flags: int = 0
    decimals: int = 0
    default: bytes | None = None  # only in COM_FIELD_LIST answers
    has_default: bool = False  # the default field is present (COM_FIELD_LIST), even as NULL (0xFB)

    def encode(self) -> bytes:
        parts = [
            lenenc_str(text_encode(self.catalog)),
            lenenc_str(text_encode(self.schema)),
            lenenc_str(text_encode(self.table)),
            lenenc_str(text_encode(self.org_table)),
            lenenc_str(text_encode(self.name)),
            lenenc_str(text_encode(self.org_name)),
            b"\x0c",
            struct.pack("<HIBHB", self.character_set, self.column_length, int(self.type), self.flags, self.decimals),
            b"\x00\x00",
        ]
        if self.default is not None:
            parts.append(lenenc_str(self.default))
        elif self.has_default:
            parts.append(b"\xfb")
        return b"".join(parts)

    @classmethod
    def decode(cls, payload: bytes) -> ColumnDefinition41:
        # a scatter reads the same definitions from every node for every execution: decoded once (the
        # instances are immutable, so sharing them is safe)
        key = payload if type(payload) is bytes else bytes(payload)
        known = _DECODED_COLUMNS.get(key)
        if known is not None and cls is ColumnDefinition41:
            return known
        col = cls._decode(payload)
        if cls is ColumnDefinition41:
            if len(_DECODED_COLUMNS) >= _DECODED_COLUMNS_MAX:
                _DECODED_COLUMNS.clear()
            _DECODED_COLUMNS[key] = col
        return col

    @classmethod
    def _decode(cls, payload: bytes) -> ColumnDefinition41:
        r = Reader(payload)

        def s() -> str:  # lossless: a label in a client's latin1 (b"\xe9") is relayed as the same bytes
            return text_decode(r.lenenc_str() or b"")

        catalog, schema, table, org_table, name, org_name = s(), s(), s(), s(), s(), s()
        fixed_len = r.lenenc_int() or 0
        if fixed_len < 10:
            raise MalformedPacket("column definition too short")
        charset, length, ctype, flags, decimals = struct.unpack("<HIBHB", r.fixed(10))
        r.fixed(fixed_len - 10)
        has_default = r.remaining() > 0
        default = r.lenenc_str() if has_default else None
        try:
            col_type = ColumnType(ctype)
        except ValueError as exc:
            raise MalformedPacket(f"unknown column type {ctype}") from exc
        return cls(name, col_type, schema, table, org_table, org_name, catalog, charset, length, flags, decimals,
                   default, has_default)


_DECODED_COLUMNS: dict[bytes, ColumnDefinition41] = {}
_DECODED_COLUMNS_MAX = 4096


def encode_text_row(values: tuple[bytes | None, ...] | list[bytes | None]) -> bytes:
    return b"".join(b"\xfb" if v is None else lenenc_int(len(v)) + v for v in values)


def decode_text_row(payload: bytes, column_count: int) -> tuple[bytes | None, ...]:
    r = Reader(payload)
    return tuple(r.lenenc_str() for _ in range(column_count))


def column_count_payload(n: int) -> bytes:
    return lenenc_int(n)


# --- command phase: client requests -------------------------------------------------------------------


@dataclass(frozen=True)
class ComQuery:
    sql: bytes

    def encode(self) -> bytes:
        return b"\x03" + self.sql

    @classmethod
    def decode(cls, payload: bytes) -> ComQuery:
        return cls(payload[1:])


@dataclass(frozen=True)
class ComInitDB:
    database: str

    def encode(self) -> bytes:
        return b"\x02" + text_encode(self.database)

    @classmethod
    def decode(cls, payload: bytes) -> ComInitDB:
        return cls(text_decode(payload[1:]))


@dataclass(frozen=True)
class ComFieldList:
    table: str
    wildcard: bytes = b""

    def encode(self) -> bytes:
        return b"\x04" + text_encode(self.table) + b"\x00" + self.wildcard

    @classmethod
    def decode(cls, payload: bytes) -> ComFieldList:
        r = Reader(payload, 1)
        raw = r.rest()
        table, _, wildcard = raw.partition(b"\x00")
        return cls(text_decode(table), wildcard)


@dataclass(frozen=True)
class ComSetOption:
    option: int

    def encode(self) -> bytes:
        return b"\x1b" + struct.pack("<H", self.option)

    @classmethod
    def decode(cls, payload: bytes) -> ComSetOption:
        r = Reader(payload, 1)
        return cls(r.u16())


@dataclass(frozen=True)
class ComProcessKill:
    connection_id: int

    def encode(self) -> bytes:
        return b"\x0c" + struct.pack("<I", self.connection_id)

    @classmethod
    def decode(cls, payload: bytes) -> ComProcessKill:
        r = Reader(payload, 1)
        return cls(r.u32())


@dataclass(frozen=True)
class ComSimple:
    """Commands that are one byte: COM_QUIT, COM_PING, COM_STATISTICS, COM_RESET_CONNECTION, ..."""

    command: int

    def encode(self) -> bytes:
        return bytes((self.command,))

    @classmethod
    def decode(cls, payload: bytes) -> ComSimple:
        return cls(payload[0])


@dataclass(frozen=True)
class ComChangeUser:
    """COM_CHANGE_USER: log in again as another user on the same connection (Connector/J's pools)."""

    username: str
    auth_response: bytes
    database: str | None = None
    character_set: int | None = None
    auth_plugin: str | None = None
    attributes: dict[str, str] = field(default_factory=dict)

    @classmethod
    def decode(cls, payload: bytes, capabilities: Capability) -> ComChangeUser:
        r = Reader(payload, 1)
        username = text_decode(r.nul_str())
        if capabilities & Capability.SECURE_CONNECTION:
            auth = r.fixed(r.u8())
        else:
            auth = r.nul_str()
        database = text_decode(r.nul_str()) or None if r.remaining() else None
        charset = r.u16() if r.remaining() >= 2 else None
        plugin = None
        if capabilities & Capability.PLUGIN_AUTH and r.remaining():
            raw = r.rest() if b"\x00" not in r.data[r.pos :] else r.nul_str()
            plugin = text_decode(raw) or None
        attrs: dict[str, str] = {}
        if capabilities & Capability.CONNECT_ATTRS and r.remaining():
            try:
                total = r.lenenc_int() or 0
                end = r.pos + total
                while r.pos < end:
                    k = r.lenenc_str() or b""
                    v = r.lenenc_str() or b""
                    attrs[k.decode(errors="replace")] = v.decode(errors="replace")
            except MalformedPacket:
                pass
        return cls(username, auth, database, charset, plugin, attrs)

    def encode(self, capabilities: Capability) -> bytes:
        parts = [b"\x11", text_encode(self.username) + b"\x00"]
        if capabilities & Capability.SECURE_CONNECTION:
            parts.append(bytes((len(self.auth_response),)) + self.auth_response)
        else:
            parts.append(self.auth_response + b"\x00")
        parts.append(text_encode(self.database or "") + b"\x00")
        parts.append(struct.pack("<H", self.character_set or Collation.UTF8MB4_GENERAL_CI))
        if capabilities & Capability.PLUGIN_AUTH:
            parts.append(text_encode(self.auth_plugin or "") + b"\x00")
        return b"".join(parts)
