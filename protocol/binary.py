"""The binary (prepared-statement) protocol: COM_STMT_* requests, PREPARE_OK, binary result rows.

Sans-IO like the rest of `protocol/`: bytes in, dataclasses and Python values out, and back.

Python values of parameters and binary-row columns (the same mapping both ways):

* NULL: ``None``.
* TINY/SHORT/INT24/LONG/LONGLONG/YEAR: ``int``, signed or unsigned per the 0x80 parameter flag or the
  column's UNSIGNED flag.
* FLOAT/DOUBLE: ``float`` (a FLOAT is the exact 32-bit value widened to a double).
* DECIMAL/NEWDECIMAL: ``decimal.Decimal`` (on the wire an ASCII string).
* every string-like type (VARCHAR, VAR_STRING, STRING, the BLOBs, JSON, ENUM, SET, BIT, GEOMETRY): ``bytes``,
  never decoded: the character set belongs to the column or connection, not to this codec.
* DATE: ``datetime.date``; DATETIME/TIMESTAMP: ``datetime.datetime`` (with microseconds). Dates Python
  cannot hold -- the zero date ``0000-00-00``, ``2024-00-15`` (allowed without NO_ZERO_IN_DATE), year 0 --
  come back as `RawDateTime`; `ZERO_DATE` is the all-zero one. Time zones do not exist on the wire:
  an aware datetime is sent as its naive wall-clock fields.
* TIME: ``datetime.timedelta``, negative and beyond 24 hours allowed (MySQL's range is +-838:59:59).

`binary_row_to_text` / `text_row_to_binary` convert a binary row to the text-protocol values the server
sends for the same columns, so the merge engine (which works on text values) can merge binary results
and re-encode them. They work from the wire fields, not the Python values, so nothing is lost in between
(DECIMAL digits, zero dates, the sign of ``-00:00:00.001``). FLOAT/DOUBLE text is the shortest text that
reads back to the same binary value, laid out as MariaDB's ``my_gcvt`` lays it out ('f' notation while the
decimal exponent is within 15 digits, else ``1e20`` / ``2.25e-300``, never ``e+``). That is the server's
own text for every DOUBLE and for every FLOAT with at most 6 significant digits. It differs for FLOATs
that need 7 to 9 digits: the server prints FLT_DIG = 6 digits (``3.14159``) -- text that does not read
back to the same float -- and this module prints the round-trip text (``3.1415927``) on purpose, so that
binary -> text -> binary is exact. NaN and infinities, which no column stores, print as ``nan``/``inf``.

Out of scope: MariaDB's COM_STMT_BULK_EXECUTE and parameter indicators, MySQL 8 query attributes in
COM_STMT_EXECUTE (CLIENT_QUERY_ATTRIBUTES is not offered by the proxy), and the OPTIONAL_RESULTSET_METADATA
byte of PREPARE_OK (ignored when present).
"""

from __future__ import annotations

import datetime
import math
import re
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from protocol.constants import ColumnFlag, ColumnType, Command
from protocol.packets import EOF_HEADER, ColumnDefinition41, EOFPacket
from protocol.wire import MalformedPacket, Reader, lenenc_str

UNSIGNED_PARAM = 0x80  # the flag byte after a parameter's type in COM_STMT_EXECUTE
LAST_STATEMENT_ID = 0xFFFFFFFF  # MariaDB: "the statement prepared last on this connection"
NOT_FIXED_DEC = 31  # a FLOAT/DOUBLE column's decimals when it has no fixed scale

# COM_STMT_EXECUTE flags
CURSOR_TYPE_NO_CURSOR = 0x00
CURSOR_TYPE_READ_ONLY = 0x01
CURSOR_TYPE_FOR_UPDATE = 0x02
CURSOR_TYPE_SCROLLABLE = 0x04

_INT_SIZES = {
    ColumnType.TINY: 1,
    ColumnType.SHORT: 2,
    ColumnType.YEAR: 2,
    ColumnType.INT24: 4,
    ColumnType.LONG: 4,
    ColumnType.LONGLONG: 8,
}
_DATE_TYPES = frozenset({ColumnType.DATE, ColumnType.NEWDATE})
_DATETIME_TYPES = frozenset({ColumnType.DATETIME, ColumnType.TIMESTAMP, ColumnType.DATETIME2,
                             ColumnType.TIMESTAMP2})
_TIME_TYPES = frozenset({ColumnType.TIME, ColumnType.TIME2})
_DECIMAL_TYPES = frozenset({ColumnType.DECIMAL, ColumnType.NEWDECIMAL})
_FIXED_TYPES = frozenset(_INT_SIZES) | {ColumnType.FLOAT, ColumnType.DOUBLE, ColumnType.NULL} | _DATE_TYPES \
    | _DATETIME_TYPES | _TIME_TYPES

_F32 = struct.Struct("<f")
_F64 = struct.Struct("<d")


# --- values Python has no type for ----------------------------------------------------------------------


@dataclass(frozen=True)
class RawDateTime:
    """A DATE/DATETIME/TIMESTAMP value outside what ``datetime`` accepts (zero dates, month or day 0,
    year 0). Kept field by field so that it goes back on the wire unchanged."""

    year: int
    month: int
    day: int
    hour: int = 0
    minute: int = 0
    second: int = 0
    microsecond: int = 0

    def fields(self) -> tuple[int, int, int, int, int, int, int]:
        return (self.year, self.month, self.day, self.hour, self.minute, self.second, self.microsecond)


ZERO_DATE = RawDateTime(0, 0, 0)
"""``0000-00-00`` / ``0000-00-00 00:00:00``: the column type says which text it has."""

_DateFields = tuple[int, int, int, int, int, int, int]  # year, month, day, hour, minute, second, microsecond
_TimeFields = tuple[bool, int, int, int, int, int]  # negative, days, hours, minutes, seconds, microseconds


# --- parameter types ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ParamType:
    """A parameter's type in COM_STMT_EXECUTE: the column type byte and the 0x80 unsigned flag."""

    type: ColumnType
    unsigned: bool = False

    def encode(self) -> bytes:
        return bytes((int(self.type), UNSIGNED_PARAM if self.unsigned else 0))

    @classmethod
    def decode(cls, type_byte: int, flag_byte: int) -> ParamType:
        try:
            ctype = ColumnType(type_byte)
        except ValueError as exc:
            raise MalformedPacket(f"unknown parameter type {type_byte}") from exc
        return cls(ctype, bool(flag_byte & UNSIGNED_PARAM))

    @classmethod
    def of(cls, value: object) -> ParamType:
        """The type a client library would bind for a Python value (used when no type is given)."""
        if value is None:
            return cls(ColumnType.NULL)
        if isinstance(value, bool | int):
            v = int(value)
            if -(1 << 63) <= v < 1 << 63:
                return cls(ColumnType.LONGLONG)
            if 0 <= v < 1 << 64:
                return cls(ColumnType.LONGLONG, True)
            return cls(ColumnType.NEWDECIMAL)  # no integer type holds it; the server reads the digits
        if isinstance(value, float):
            return cls(ColumnType.DOUBLE)
        if isinstance(value, Decimal):
            return cls(ColumnType.NEWDECIMAL)
        if isinstance(value, bytes | bytearray | memoryview | str):
            return cls(ColumnType.VAR_STRING)
        if isinstance(value, datetime.datetime):
            return cls(ColumnType.DATETIME)
        if isinstance(value, datetime.date):
            return cls(ColumnType.DATE)
        if isinstance(value, RawDateTime):
            return cls(ColumnType.DATETIME if value.fields()[3:] != (0, 0, 0, 0) else ColumnType.DATE)
        if isinstance(value, datetime.timedelta | datetime.time):
            return cls(ColumnType.TIME)
        raise TypeError(f"no MySQL parameter type for {type(value).__name__}")


def _is_string_type(ctype: int) -> bool:
    return ctype not in _FIXED_TYPES and ctype not in _DECIMAL_TYPES


# --- reading and writing single values ----------------------------------------------------------------


def _read_date_fields(r: Reader) -> _DateFields:
    n = r.u8()
    if n not in (0, 4, 7, 11):
        raise MalformedPacket(f"a date value cannot be {n} bytes long")
    if n == 0:
        return (0, 0, 0, 0, 0, 0, 0)
    year, month, day = r.u16(), r.u8(), r.u8()
    hour = minute = second = micro = 0
    if n >= 7:
        hour, minute, second = r.u8(), r.u8(), r.u8()
    if n == 11:
        micro = r.u32()
    return (year, month, day, hour, minute, second, micro)


def _write_date_fields(f: _DateFields) -> bytes:
    """The shortest form, as the server writes it (Protocol_binary::store for MYSQL_TIME)."""
    year, month, day, hour, minute, second, micro = f
    if micro:
        return struct.pack("<BHBBBBBI", 11, year, month, day, hour, minute, second, micro)
    if hour or minute or second:
        return struct.pack("<BHBBBBB", 7, year, month, day, hour, minute, second)
    if year or month or day:
        return struct.pack("<BHBB", 4, year, month, day)
    return b"\x00"


def _read_time_fields(r: Reader) -> _TimeFields:
    n = r.u8()
    if n not in (0, 8, 12):
        raise MalformedPacket(f"a time value cannot be {n} bytes long")
    if n == 0:
        return (False, 0, 0, 0, 0, 0)
    negative, days, hours, minutes, seconds = r.u8(), r.u32(), r.u8(), r.u8(), r.u8()
    micro = r.u32() if n == 12 else 0
    return (bool(negative), days, hours, minutes, seconds, micro)


def _write_time_fields(f: _TimeFields) -> bytes:
    negative, days, hours, minutes, seconds, micro = f
    if micro:
        return struct.pack("<BBIBBBI", 12, negative, days, hours, minutes, seconds, micro)
    if days or hours or minutes or seconds:
        return struct.pack("<BBIBBB", 8, negative, days, hours, minutes, seconds)
    return b"\x00"


def _date_value(f: _DateFields, with_time: bool) -> datetime.date | RawDateTime:
    try:
        if with_time or f[3:] != (0, 0, 0, 0):
            return datetime.datetime(*f)
        return datetime.date(f[0], f[1], f[2])
    except ValueError:
        return RawDateTime(*f)


def _date_fields_of(value: object) -> _DateFields:
    if isinstance(value, RawDateTime):
        return value.fields()
    if isinstance(value, datetime.datetime):
        return (value.year, value.month, value.day, value.hour, value.minute, value.second, value.microsecond)
    if isinstance(value, datetime.date):
        return (value.year, value.month, value.day, 0, 0, 0, 0)
    raise TypeError(f"a date value must be a date, datetime or RawDateTime, not {type(value).__name__}")


def _time_value(f: _TimeFields) -> datetime.timedelta:
    negative, days, hours, minutes, seconds, micro = f
    td = datetime.timedelta(days=days, hours=hours, minutes=minutes, seconds=seconds, microseconds=micro)
    return -td if negative else td


def _time_fields_of(value: object) -> _TimeFields:
    if isinstance(value, datetime.time):
        return (False, 0, value.hour, value.minute, value.second, value.microsecond)
    if not isinstance(value, datetime.timedelta):
        raise TypeError(f"a TIME value must be a timedelta or time, not {type(value).__name__}")
    magnitude = abs(value)
    hours, rest = divmod(magnitude.seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    return (value < datetime.timedelta(0), magnitude.days, hours, minutes, seconds, magnitude.microseconds)


def _lenenc(r: Reader) -> bytes:
    value = r.lenenc_str()
    if value is None:
        raise MalformedPacket("0xFB (NULL) inside a binary value")
    return value


def _read_value(r: Reader, ctype: int, unsigned: bool) -> object:
    size = _INT_SIZES.get(ctype)  # type: ignore[call-overload]
    if size is not None:
        return int.from_bytes(r.fixed(size), "little", signed=not unsigned)
    if ctype == ColumnType.DOUBLE:
        return _F64.unpack(r.fixed(8))[0]
    if ctype == ColumnType.FLOAT:
        return _F32.unpack(r.fixed(4))[0]
    if ctype == ColumnType.NULL:
        return None
    if ctype in _DATE_TYPES or ctype in _DATETIME_TYPES:
        return _date_value(_read_date_fields(r), ctype in _DATETIME_TYPES)
    if ctype in _TIME_TYPES:
        return _time_value(_read_time_fields(r))
    raw = _lenenc(r)
    if ctype in _DECIMAL_TYPES:
        try:
            return Decimal(raw.decode("ascii"))
        except (UnicodeDecodeError, InvalidOperation) as exc:
            raise MalformedPacket(f"not a decimal number: {raw[:40]!r}") from exc
    return raw


def _decimal_text(value: object) -> bytes:
    if isinstance(value, Decimal):
        if not value.is_finite():
            raise ValueError(f"{value} is not a MySQL decimal")
        return format(value, "f").encode("ascii")
    if isinstance(value, int):
        return str(value).encode("ascii")
    if isinstance(value, float):
        return repr(value).encode("ascii")
    if isinstance(value, bytes | bytearray):
        return bytes(value)
    if isinstance(value, str):
        return value.encode("ascii")
    raise TypeError(f"a DECIMAL value must be a Decimal, not {type(value).__name__}")


def _write_value(value: object, ctype: int, unsigned: bool) -> bytes:
    """`value` in the binary encoding of `ctype`; ValueError/TypeError when it does not fit."""
    size = _INT_SIZES.get(ctype)  # type: ignore[call-overload]
    if size is not None:
        if not isinstance(value, int):
            raise TypeError(f"an integer column needs an int, not {type(value).__name__}")
        try:
            return int(value).to_bytes(size, "little", signed=not unsigned)
        except OverflowError as exc:
            raise ValueError(f"{value} does not fit a {ColumnType(ctype).name}") from exc
    if ctype == ColumnType.DOUBLE or ctype == ColumnType.FLOAT:
        if not isinstance(value, float | int | Decimal):
            raise TypeError(f"a floating point column needs a float, not {type(value).__name__}")
        return (_F64 if ctype == ColumnType.DOUBLE else _F32).pack(float(value))
    if ctype == ColumnType.NULL:
        raise ValueError("a NULL-typed value must be None")
    if ctype in _DATE_TYPES or ctype in _DATETIME_TYPES:
        return _write_date_fields(_date_fields_of(value))
    if ctype in _TIME_TYPES:
        return _write_time_fields(_time_fields_of(value))
    if ctype in _DECIMAL_TYPES:
        return lenenc_str(_decimal_text(value))
    if isinstance(value, str):
        return lenenc_str(value.encode("utf-8", "surrogateescape"))  # client text: its bytes (protocol.text)
    if isinstance(value, bytes | bytearray | memoryview):
        return lenenc_str(bytes(value))
    raise TypeError(f"a string column needs bytes, not {type(value).__name__}")


# --- commands --------------------------------------------------------------------------------------------


def _command(payload: bytes, command: Command) -> Reader:
    r = Reader(payload)
    if r.u8() != command:
        raise MalformedPacket(f"not a COM_{command.name}")
    return r


def _done(r: Reader) -> None:
    if r.remaining():
        raise MalformedPacket(f"{r.remaining()} bytes after the end of the packet")


@dataclass(frozen=True)
class ComStmtPrepare:
    sql: bytes

    def encode(self) -> bytes:
        return bytes((Command.STMT_PREPARE,)) + self.sql

    @classmethod
    def decode(cls, payload: bytes) -> ComStmtPrepare:
        return cls(_command(payload, Command.STMT_PREPARE).rest())


@dataclass(frozen=True)
class StmtPrepareOK:
    """The first packet of a successful COM_STMT_PREPARE answer (header 0x00, not an OK packet)."""

    statement_id: int
    num_columns: int
    num_params: int
    warnings: int = 0

    def encode(self) -> bytes:
        return struct.pack("<BIHHBH", 0, self.statement_id, self.num_columns, self.num_params, 0, self.warnings)

    @classmethod
    def decode(cls, payload: bytes) -> StmtPrepareOK:
        r = Reader(payload)
        if r.u8() != 0:
            raise MalformedPacket("not a PREPARE_OK packet")
        stmt_id, columns, params = r.u32(), r.u16(), r.u16()
        r.u8()
        warnings = r.u16()
        # MySQL 8 may add a metadata_follows byte (OPTIONAL_RESULTSET_METADATA, not negotiated): ignored
        return cls(stmt_id, columns, params, warnings)

    def following_packets(self, deprecate_eof: bool) -> int:
        """How many packets follow this one in the answer: the parameter and column definitions, each
        group ended by an EOF without CLIENT_DEPRECATE_EOF."""
        eofs = 0 if deprecate_eof else (self.num_params > 0) + (self.num_columns > 0)
        return self.num_params + self.num_columns + eofs


@dataclass(frozen=True)
class PrepareResponse:
    """A whole successful COM_STMT_PREPARE answer, so that the proxy can re-frame it for a client whose
    DEPRECATE_EOF differs from the backend's, or answer a prepare itself."""

    ok: StmtPrepareOK
    params: tuple[ColumnDefinition41, ...]
    columns: tuple[ColumnDefinition41, ...]

    @classmethod
    def decode(cls, payloads: Sequence[bytes], deprecate_eof: bool) -> PrepareResponse:
        if not payloads:
            raise MalformedPacket("empty prepare response")
        ok = StmtPrepareOK.decode(payloads[0])
        if len(payloads) != 1 + ok.following_packets(deprecate_eof):
            raise MalformedPacket(f"a prepare response of {ok} cannot have {len(payloads)} packets")
        pos = 1
        groups: list[tuple[ColumnDefinition41, ...]] = []
        for count in (ok.num_params, ok.num_columns):
            groups.append(tuple(ColumnDefinition41.decode(p) for p in payloads[pos : pos + count]))
            pos += count
            if count and not deprecate_eof:
                if payloads[pos][:1] != bytes((EOF_HEADER,)):
                    raise MalformedPacket("definitions not ended by an EOF")
                pos += 1
        return cls(ok, groups[0], groups[1])

    def encode(self, deprecate_eof: bool, status: int = 2) -> list[bytes]:
        """The answer's payloads; `status` goes into the EOF packets of the classic framing, and the prepare's
        warning count, as MariaDB sends it there (clients read it from the last packet: mysqltest's prepare
        warnings)."""
        out = [self.ok.encode()]
        for group in (self.params, self.columns):
            out.extend(c.encode() for c in group)
            if group and not deprecate_eof:
                out.append(EOFPacket(self.ok.warnings, status).encode())  # type: ignore[arg-type]
        return out


@dataclass(frozen=True)
class ComStmtExecute:
    """COM_STMT_EXECUTE. `types` has one entry per parameter; `values` holds Python values (see the module
    docstring). `statement_id` may be `LAST_STATEMENT_ID` (MariaDB): kept as is, the caller resolves it."""

    statement_id: int
    flags: int
    iteration_count: int
    values: tuple[object, ...]
    types: tuple[ParamType, ...]
    new_params_bound: bool

    @classmethod
    def decode(
        cls,
        payload: bytes,
        num_params: int,
        previous_types: tuple[ParamType, ...] | None,
        long_data: Mapping[int, bytes] | None = None,
    ) -> ComStmtExecute:
        """`num_params` comes from the statement's PREPARE_OK; `previous_types` are the types bound by the
        last execute of the statement (used when this one does not bind new ones); `long_data` holds what
        COM_STMT_SEND_LONG_DATA sent per parameter since the last execute or reset.

        As in the server, a parameter with long data takes that value, ignores the NULL bitmap and has no
        bytes in the value block. Its type becomes STRING unless it already was a string type: the server
        reads long data as a string and converts it, and this keeps `encode()` able to send the bytes."""
        r = _command(payload, Command.STMT_EXECUTE)
        stmt_id, flags, iterations = r.u32(), r.u8(), r.u32()
        if num_params == 0:
            _done(r)
            return cls(stmt_id, flags, iterations, (), (), False)
        nulls = r.fixed((num_params + 7) // 8)
        bound = r.u8()
        if bound > 1:
            raise MalformedPacket(f"new-params-bound flag {bound}")
        if bound:
            types = tuple(ParamType.decode(r.u8(), r.u8()) for _ in range(num_params))
        elif previous_types is None or len(previous_types) != num_params:
            raise MalformedPacket("COM_STMT_EXECUTE without parameter types, and none were bound before")
        else:
            types = tuple(previous_types)
        long_data = long_data or {}
        values: list[object] = []
        out_types: list[ParamType] = []
        for i, ptype in enumerate(types):
            if i in long_data:
                values.append(bytes(long_data[i]))
                out_types.append(ptype if _is_string_type(ptype.type) else ParamType(ColumnType.STRING))
                continue
            out_types.append(ptype)
            if nulls[i >> 3] & (1 << (i & 7)) or ptype.type == ColumnType.NULL:
                values.append(None)
            else:
                values.append(_read_value(r, ptype.type, ptype.unsigned))
        _done(r)
        return cls(stmt_id, flags, iterations, tuple(values), tuple(out_types), bool(bound))

    def encode(self) -> bytes:
        """For a backend: always binds the types (new-params-bound = 1); an empty `types` means "infer
        each from its value" (`ParamType.of`). Long data is sent inline."""
        head = struct.pack("<BIBI", Command.STMT_EXECUTE, self.statement_id, self.flags, self.iteration_count)
        n = len(self.values)
        if n == 0:
            return head
        types = self.types or tuple(ParamType.of(v) for v in self.values)
        if len(types) != n:
            raise ValueError(f"{n} values but {len(types)} types")
        nulls = bytearray((n + 7) // 8)
        body = []
        for i, (value, ptype) in enumerate(zip(self.values, types, strict=True)):
            if value is None:
                nulls[i >> 3] |= 1 << (i & 7)
            else:
                body.append(_write_value(value, ptype.type, ptype.unsigned))
        return b"".join((head, nulls, b"\x01", *(t.encode() for t in types), *body))


_EXECUTE_HEAD = struct.Struct("<BIBI")


def encode_execute(
    statement_id: int, values: Sequence[object], types: Sequence[ParamType], type_block: bytes | None = None
) -> bytes:
    """`ComStmtExecute(statement_id, 0, 1, values, types, True).encode()` without the command object: for a relay
    that executes a statement with the same types again and again (`type_block`: the encoding of `types`, kept)."""
    n = len(values)
    head = _EXECUTE_HEAD.pack(Command.STMT_EXECUTE, statement_id, 0, 1)
    if n == 0:
        return head
    nulls = bytearray((n + 7) // 8)
    body = []
    for i, value in enumerate(values):
        if value is None:
            nulls[i >> 3] |= 1 << (i & 7)
        else:
            ptype = types[i]
            body.append(_write_value(value, ptype.type, ptype.unsigned))
    if type_block is None:
        type_block = b"".join(t.encode() for t in types)
    return b"".join((head, nulls, b"\x01", type_block, *body))


@dataclass(frozen=True)
class ComStmtSendLongData:
    statement_id: int
    param_id: int
    data: bytes

    def encode(self) -> bytes:
        return struct.pack("<BIH", Command.STMT_SEND_LONG_DATA, self.statement_id, self.param_id) + self.data

    @classmethod
    def decode(cls, payload: bytes) -> ComStmtSendLongData:
        r = _command(payload, Command.STMT_SEND_LONG_DATA)
        return cls(r.u32(), r.u16(), r.rest())


@dataclass(frozen=True)
class ComStmtClose:
    """No answer comes back, not even an error."""

    statement_id: int

    def encode(self) -> bytes:
        return struct.pack("<BI", Command.STMT_CLOSE, self.statement_id)

    @classmethod
    def decode(cls, payload: bytes) -> ComStmtClose:
        r = _command(payload, Command.STMT_CLOSE)
        stmt = r.u32()
        _done(r)
        return cls(stmt)


@dataclass(frozen=True)
class ComStmtReset:
    """Drops the long data sent so far and closes an open cursor; answered by OK."""

    statement_id: int

    def encode(self) -> bytes:
        return struct.pack("<BI", Command.STMT_RESET, self.statement_id)

    @classmethod
    def decode(cls, payload: bytes) -> ComStmtReset:
        r = _command(payload, Command.STMT_RESET)
        stmt = r.u32()
        _done(r)
        return cls(stmt)


@dataclass(frozen=True)
class ComStmtFetch:
    """Rows of an open cursor; answered by binary rows and an EOF/OK (no column count, no definitions)."""

    statement_id: int
    num_rows: int

    def encode(self) -> bytes:
        return struct.pack("<BII", Command.STMT_FETCH, self.statement_id, self.num_rows)

    @classmethod
    def decode(cls, payload: bytes) -> ComStmtFetch:
        r = _command(payload, Command.STMT_FETCH)
        stmt, rows = r.u32(), r.u32()
        _done(r)
        return cls(stmt, rows)


# --- binary result rows ----------------------------------------------------------------------------------


def binary_null_bitmap_size(num_columns: int) -> int:
    """Bytes of a binary row's NULL bitmap, whose first two bits are unused (offset 2)."""
    return (num_columns + 9) // 8


def _unsigned(col: ColumnDefinition41) -> bool:
    return bool(col.flags & ColumnFlag.UNSIGNED)


def _row_reader(payload: bytes, n: int) -> tuple[Reader, bytes]:
    r = Reader(payload)
    if r.u8() != 0:
        raise MalformedPacket("a binary row starts with 0x00")
    return r, r.fixed(binary_null_bitmap_size(n))


def _is_null(bitmap: bytes, i: int) -> bool:
    bit = i + 2
    return bool(bitmap[bit >> 3] & (1 << (bit & 7)))


def decode_binary_row(payload: bytes, columns: Sequence[ColumnDefinition41]) -> tuple[object, ...]:
    r, bitmap = _row_reader(payload, len(columns))
    out = tuple(None if _is_null(bitmap, i) else _read_value(r, c.type, _unsigned(c)) for i, c in enumerate(columns))
    _done(r)
    return out


def _encode_row(cells: Sequence[bytes | None]) -> bytes:
    bitmap = bytearray(binary_null_bitmap_size(len(cells)))
    for i, cell in enumerate(cells):
        if cell is None:
            bit = i + 2
            bitmap[bit >> 3] |= 1 << (bit & 7)
    return b"\x00" + bytes(bitmap) + b"".join(c for c in cells if c is not None)


def binary_row_cells(payload: bytes, columns: Sequence[ColumnDefinition41]) -> list[bytes | None]:
    """Each cell of a binary row as its bytes on the wire (None: NULL): a relay that changes some cells (a decrypted
    column) keeps the others' bytes exactly, whatever their type."""
    r, bitmap = _row_reader(payload, len(columns))
    out: list[bytes | None] = []
    for i, c in enumerate(columns):
        if _is_null(bitmap, i):
            out.append(None)
            continue
        start = r.pos
        _read_value(r, c.type, _unsigned(c))
        out.append(r.data[start : r.pos])
    _done(r)
    return out


def binary_cell_widths(columns: Sequence[ColumnDefinition41]) -> tuple[int, ...]:
    """How each column's non-NULL cell is laid out in a binary row, read from its type alone: n >= 0 fixed bytes,
    -1 a length byte and that many (dates, times), -2 a length-encoded string. A relay that changes one cell (a
    decrypted column) finds it by these without decoding the others (`binary_cell_spans`)."""
    out = []
    for c in columns:
        size = _INT_SIZES.get(c.type)  # type: ignore[call-overload]
        if size is not None:
            out.append(size)
        elif c.type == ColumnType.DOUBLE:
            out.append(8)
        elif c.type == ColumnType.FLOAT:
            out.append(4)
        elif c.type == ColumnType.NULL:
            out.append(0)
        elif c.type in _DATE_TYPES or c.type in _DATETIME_TYPES or c.type in _TIME_TYPES:
            out.append(-1)
        else:
            out.append(-2)
    return tuple(out)


def binary_cell_spans(payload: bytes, widths: Sequence[int]) -> list[tuple[int, int] | None]:
    """Where each cell of a binary row lies in `payload` (start, end; None: NULL), by `binary_cell_widths`;
    MalformedPacket when the row does not hold exactly those cells."""
    n = len(widths)
    if not payload or payload[0] != 0:
        raise MalformedPacket("a binary row starts with 0x00")
    pos = 1 + binary_null_bitmap_size(n)
    end = len(payload)
    if pos > end:
        raise MalformedPacket("a binary row shorter than its NULL bitmap")
    spans: list[tuple[int, int] | None] = []
    for i, width in enumerate(widths):
        bit = i + 2
        if payload[1 + (bit >> 3)] & (1 << (bit & 7)):
            spans.append(None)
            continue
        start = pos
        if width >= 0:
            pos += width
        elif pos >= end:
            raise MalformedPacket("a binary row ends inside a cell")
        elif width == -1:
            pos += 1 + payload[pos]
        else:
            first = payload[pos]
            if first < 0xFB:
                pos += 1 + first
            else:
                size = 2 if first == 0xFC else 3 if first == 0xFD else 8 if first == 0xFE else -1
                if size < 0 or pos + 1 + size > end:
                    raise MalformedPacket("a binary row's string cell has a bad length")
                pos += 1 + size + int.from_bytes(payload[pos + 1 : pos + 1 + size], "little")
        if pos > end:
            raise MalformedPacket("a binary row ends inside a cell")
        spans.append((start, pos))
    if pos != end:
        raise MalformedPacket(f"{end - pos} bytes after a binary row's last cell")
    return spans


def encode_binary_cells(cells: Sequence[bytes | None]) -> bytes:
    """The binary row of `cells` (as `binary_row_cells` gives them)."""
    return _encode_row(cells)


def encode_binary_row(values: Sequence[object], columns: Sequence[ColumnDefinition41]) -> bytes:
    if len(values) != len(columns):
        raise ValueError(f"{len(values)} values for {len(columns)} columns")
    return _encode_row([
        None if v is None or c.type == ColumnType.NULL else _write_value(v, c.type, _unsigned(c))
        for v, c in zip(values, columns, strict=True)
    ])


# --- binary <-> text -------------------------------------------------------------------------------------


def _float_text(x: float, single: bool) -> bytes:
    """Shortest text that reads back to `x` (as a 32-bit float when `single`), laid out like my_gcvt."""
    if math.isnan(x) or math.isinf(x):
        return repr(x).encode("ascii")
    if x == 0:
        return b"-0" if math.copysign(1.0, x) < 0 else b"0"
    if single:
        target = _F32.pack(x)
        for p in range(1, 10):
            text = f"{x:.{p}g}"
            if _F32.pack(float(text)) == target:
                break
    else:
        text = repr(x)
    _, digit_tuple, exponent = Decimal(text).as_tuple()
    assert isinstance(exponent, int)
    digits = "".join(map(str, digit_tuple)).rstrip("0")
    decpt = len(digit_tuple) + exponent  # value = 0.DIGITS * 10**decpt
    length = len(digits)
    sign = "-" if x < 0 else ""
    if decpt >= -14 and (decpt <= 15 or length > decpt):
        if decpt <= 0:
            body = "0." + "0" * -decpt + digits
        elif decpt < length:
            body = digits[:decpt] + "." + digits[decpt:]
        else:
            body = digits + "0" * (decpt - length)
    else:
        body = digits[0] + ("." + digits[1:] if length > 1 else "") + "e" + str(decpt - 1)
    return (sign + body).encode("ascii")


def _fraction(micro: int, decimals: int) -> str:
    if decimals > 6:  # no fixed precision (an expression): the digits there are
        decimals = 6 if micro else 0
    return "." + f"{micro:06d}"[:decimals] if decimals else ""


def _date_text(f: _DateFields, col: ColumnDefinition41) -> bytes:
    text = f"{f[0]:04d}-{f[1]:02d}-{f[2]:02d}"
    if col.type in _DATETIME_TYPES:
        text += f" {f[3]:02d}:{f[4]:02d}:{f[5]:02d}" + _fraction(f[6], col.decimals)
    return text.encode("ascii")


def _time_text(f: _TimeFields, decimals: int) -> bytes:
    negative, days, hours, minutes, seconds, micro = f
    sign = "-" if negative else ""
    return f"{sign}{days * 24 + hours:02d}:{minutes:02d}:{seconds:02d}{_fraction(micro, decimals)}".encode("ascii")


def _cell_text(r: Reader, col: ColumnDefinition41) -> bytes | None:
    ctype = col.type
    size = _INT_SIZES.get(ctype)
    if size is not None:
        text = str(int.from_bytes(r.fixed(size), "little", signed=not _unsigned(col)))
        if col.flags & ColumnFlag.ZEROFILL:
            text = text.zfill(col.column_length)
        return text.encode("ascii")
    if ctype in (ColumnType.FLOAT, ColumnType.DOUBLE):
        single = ctype == ColumnType.FLOAT
        x: float = (_F32 if single else _F64).unpack(r.fixed(4 if single else 8))[0]
        if col.decimals < NOT_FIXED_DEC:
            return f"{x:.{col.decimals}f}".encode("ascii")
        return _float_text(x, single)
    if ctype == ColumnType.NULL:
        return None
    if ctype in _DATE_TYPES or ctype in _DATETIME_TYPES:
        return _date_text(_read_date_fields(r), col)
    if ctype in _TIME_TYPES:
        return _time_text(_read_time_fields(r), col.decimals)
    return _lenenc(r)


def binary_row_to_text(
    payload: bytes, columns: Sequence[ColumnDefinition41], count: int | None = None
) -> tuple[bytes | None, ...]:
    """The text-protocol values of a binary row (see the module docstring for FLOAT); `count`: only the
    first `count` columns (the rest of the row is not looked at)."""
    r, bitmap = _row_reader(payload, len(columns))
    if count is not None and count < len(columns):
        return tuple(None if _is_null(bitmap, i) else _cell_text(r, columns[i]) for i in range(count))
    out = tuple(None if _is_null(bitmap, i) else _cell_text(r, c) for i, c in enumerate(columns))
    _done(r)
    return out


_DATE_RE = re.compile(rb"(\d{1,4})-(\d{1,2})-(\d{1,2})(?:[ T](\d{1,2}):(\d{1,2}):(\d{1,2})(?:\.(\d{1,6}))?)?")
_TIME_RE = re.compile(rb"(-?)(\d+):(\d{1,2}):(\d{1,2})(?:\.(\d{1,6}))?")


def _micro(digits: bytes | None) -> int:
    return int(digits.ljust(6, b"0")) if digits else 0


def _cell_binary(text: bytes, col: ColumnDefinition41) -> bytes:
    ctype = col.type
    try:
        size = _INT_SIZES.get(ctype)
        if size is not None:
            return int(text).to_bytes(size, "little", signed=not _unsigned(col))
        if ctype == ColumnType.DOUBLE:
            return _F64.pack(float(text))
        if ctype == ColumnType.FLOAT:
            return _F32.pack(float(text))
    except (ValueError, OverflowError) as exc:
        raise MalformedPacket(f"{text[:40]!r} is not a {ctype.name} value") from exc
    if ctype == ColumnType.NULL:
        raise MalformedPacket("a value in a NULL-typed column")
    if ctype in _DATE_TYPES or ctype in _DATETIME_TYPES:
        m = _DATE_RE.fullmatch(text)
        if m is None:
            raise MalformedPacket(f"{text[:40]!r} is not a date")
        y, mo, d, h, mi, sec, frac = m.groups()
        return _write_date_fields((int(y), int(mo), int(d), int(h or 0), int(mi or 0), int(sec or 0), _micro(frac)))
    if ctype in _TIME_TYPES:
        m = _TIME_RE.fullmatch(text)
        if m is None:
            raise MalformedPacket(f"{text[:40]!r} is not a time")
        sign, hours, minutes, seconds, frac = m.groups()
        days, hours_left = divmod(int(hours), 24)
        return _write_time_fields((sign == b"-", days, hours_left, int(minutes), int(seconds), _micro(frac)))
    return lenenc_str(text)


def text_row_to_binary(values: Sequence[bytes | None], columns: Sequence[ColumnDefinition41]) -> bytes:
    """The binary row for text-protocol values of the same columns (what the server would have sent)."""
    if len(values) != len(columns):
        raise ValueError(f"{len(values)} values for {len(columns)} columns")
    return _encode_row([None if v is None else _cell_binary(v, c) for v, c in zip(values, columns, strict=True)])


# --- SQL literals -------------------------------------------------------------------------------------------

_ESCAPES = {0: "\\0", 0x0A: "\\n", 0x0D: "\\r", 0x1A: "\\Z", 0x27: "\\'", 0x22: '\\"', 0x5C: "\\\\"}


def _quote(text: str, no_backslash_escapes: bool) -> str:
    if no_backslash_escapes:
        return "'" + text.replace("'", "''") + "'"
    return "'" + text.translate(_ESCAPES) + "'"


def value_to_sql_literal(value: object, *, no_backslash_escapes: bool = False) -> str:
    """A MySQL literal for a parameter value, for SQL-level ``EXECUTE ... USING @v`` and for logs.

    Bytes that are valid UTF-8 become a quoted string (the proxy's connections are utf8mb4; in UTF-8 no
    byte of a multibyte character is a quote or backslash, so escaping cannot be defeated); any other
    bytes become ``X'..'``. Escaping follows the session's NO_BACKSLASH_ESCAPES mode, which the caller
    knows: with it only quotes are doubled, without it backslash escapes are used."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{value} has no MySQL literal")
        return repr(value).replace("e+", "e")
    if isinstance(value, Decimal):
        return _decimal_text(value).decode("ascii")
    if isinstance(value, str):
        return _quote(value, no_backslash_escapes)
    if isinstance(value, bytes | bytearray | memoryview):
        raw = bytes(value)
        try:
            return _quote(raw.decode("utf-8"), no_backslash_escapes)
        except UnicodeDecodeError:
            return f"X'{raw.hex().upper()}'"
    if isinstance(value, datetime.datetime | RawDateTime):
        f = _date_fields_of(value)
        if isinstance(value, RawDateTime) and f[3:] == (0, 0, 0, 0):
            return f"'{f[0]:04d}-{f[1]:02d}-{f[2]:02d}'"
        return "'" + _date_text(f, ColumnDefinition41("", ColumnType.DATETIME, decimals=NOT_FIXED_DEC)).decode() + "'"
    if isinstance(value, datetime.date):
        return f"'{value.year:04d}-{value.month:02d}-{value.day:02d}'"
    if isinstance(value, datetime.timedelta | datetime.time):
        return "'" + _time_text(_time_fields_of(value), NOT_FIXED_DEC).decode() + "'"
    raise TypeError(f"no MySQL literal for {type(value).__name__}")


__all__ = [
    "CURSOR_TYPE_FOR_UPDATE",
    "CURSOR_TYPE_NO_CURSOR",
    "CURSOR_TYPE_READ_ONLY",
    "CURSOR_TYPE_SCROLLABLE",
    "LAST_STATEMENT_ID",
    "ZERO_DATE",
    "ComStmtClose",
    "ComStmtExecute",
    "ComStmtFetch",
    "ComStmtPrepare",
    "ComStmtReset",
    "ComStmtSendLongData",
    "ParamType",
    "PrepareResponse",
    "RawDateTime",
    "StmtPrepareOK",
    "binary_null_bitmap_size",
    "binary_row_to_text",
    "decode_binary_row",
    "encode_binary_row",
    "encode_execute",
    "text_row_to_binary",
    "value_to_sql_literal",
]
