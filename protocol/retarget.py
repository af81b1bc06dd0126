"""A client's COM_STMT_EXECUTE re-addressed to a backend's statement, its parameter bytes kept as they came.

Why: when the kernel routes an executed prepared statement to one node and the unit's parameters are the
statement's own, in the same order (a sharded point select), decoding every value into Python and
encoding them again for the backend costs more than routing itself, and can only lose information (the
client's exact types and signedness). The backend's statement differs from the client's only by its id,
and by the parameter types when this execute does not bind them (the backend's statement may last have
been executed with other types, by the proxy itself): those are written in from the types the client
bound last.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

from protocol.binary import _INT_SIZES, ComStmtExecute, ParamType, _is_string_type
from protocol.constants import ColumnType

__all__ = ["ExecuteLayout", "execute_layout", "execute_params", "retarget_execute"]

_HEAD = 4 + 1 + 4 + 1 + 4  # frame header, command, statement id, flags, iteration count
_MAX_FRAME = 0xFFFFFF
_NULL = ColumnType.NULL


def execute_params(packet: bytes, num_params: int, previous_types: tuple[ParamType, ...] | None,
                   long_data: Mapping[int, bytes] | None) -> tuple[tuple[object, ...], tuple[ParamType, ...]]:
    """The parameter values and types of one framed COM_STMT_EXECUTE, as `ComStmtExecute.decode` gives them.

    An execute that binds no new types (what libmysqlclient sends after the first), with integer, string or
    NULL parameters and no long data, is read here with slices and `int.from_bytes`; anything else goes to
    the full decoder (which raises MalformedPacket for what makes no sense)."""
    if previous_types is not None and not long_data and len(previous_types) == num_params:
        values = _unbound_values(packet, num_params, previous_types)
        if values is not None:
            return values, previous_types
    request = ComStmtExecute.decode(packet[4:], num_params, previous_types, long_data)
    return request.values, request.types


_INT_FORMATS = {1: "b", 2: "h", 4: "i", 8: "q"}


@dataclass(frozen=True, slots=True)
class ExecuteLayout:
    """What every execute that binds no new types has in common, for one list of bound types: the type block
    to write in when re-addressing it, and, when every parameter is a fixed-size integer, where their values
    lie. Why: a prepared point select is executed thousands of times with the same types; working these out
    once per bound type list instead of once per execute takes that work off every execute."""

    types: tuple[ParamType, ...]
    type_block: bytes
    ints: struct.Struct | None  # the values after the flag byte, when all are non-NULL integers
    nulls: bytes  # an all-zero NULL bitmap

    def values(self, packet: bytes) -> tuple[object, ...] | None:
        """The values of a framed execute that binds no new types and has no NULL, when every parameter is an
        integer; None otherwise (`execute_params` reads it then)."""
        ints = self.ints
        if ints is None:
            return None
        flag_at = _HEAD + len(self.nulls)
        if len(packet) != flag_at + 1 + ints.size or packet[flag_at] != 0 or packet[_HEAD:flag_at] != self.nulls:
            return None
        return ints.unpack_from(packet, flag_at + 1)


def execute_layout(types: tuple[ParamType, ...]) -> ExecuteLayout:
    fmt = ["<"]
    for t in types:
        size = _INT_SIZES.get(t.type)
        if size is None:
            break
        code = _INT_FORMATS[size]
        fmt.append(code.upper() if t.unsigned else code)
    ints = struct.Struct("".join(fmt)) if types and len(fmt) == len(types) + 1 else None
    return ExecuteLayout(types, _type_block(types), ints, bytes((len(types) + 7) // 8))


def _unbound_values(packet: bytes, n: int, types: Sequence[ParamType]) -> tuple[object, ...] | None:
    pos = _HEAD + (n + 7) // 8
    end = len(packet)
    if n == 0 or end <= pos or packet[pos] != 0:
        return None
    nulls = packet[_HEAD:pos]
    pos += 1
    out: list[object] = []
    for i, t in enumerate(types):
        ctype = t.type
        if nulls[i >> 3] & (1 << (i & 7)) or ctype == _NULL:
            out.append(None)
            continue
        size = _INT_SIZES.get(ctype)
        if size is not None:
            if pos + size > end:
                return None
            out.append(int.from_bytes(packet[pos:pos + size], "little", signed=not t.unsigned))
            pos += size
        elif _is_string_type(ctype):
            if pos >= end:
                return None
            first = packet[pos]
            if first < 0xFB:
                length, pos = first, pos + 1
            elif first == 0xFC:
                length, pos = int.from_bytes(packet[pos + 1:pos + 3], "little"), pos + 3
            elif first == 0xFD:
                length, pos = int.from_bytes(packet[pos + 1:pos + 4], "little"), pos + 4
            else:
                return None  # NULL marker or an 8-byte length: the full decoder words it
            if pos + length > end:
                return None
            out.append(packet[pos:pos + length])
            pos += length
        else:
            return None
    return tuple(out) if pos == end else None


@lru_cache(maxsize=1024)
def _type_block(types: tuple[ParamType, ...]) -> bytes:
    return b"".join(t.encode() for t in types)


def retarget_execute(packet: bytes, statement_id: int, num_params: int, types: Sequence[ParamType],
                     layout: ExecuteLayout | None = None) -> bytes | None:
    """The framed command (sequence id 0) for the backend's `statement_id`, or None when `packet` (one framed
    COM_STMT_EXECUTE) is not laid out as `num_params` parameters with a new-params-bound flag of 0 or 1.
    `layout`, when it is `types`' own, gives the type block."""
    head = packet[4:5] + struct.pack("<I", statement_id) + packet[9:_HEAD]
    if num_params == 0:
        payload = head + packet[_HEAD:]
    else:
        flag_at = _HEAD + (num_params + 7) // 8
        if len(packet) <= flag_at:
            return None
        bound = packet[flag_at]
        if bound == 1:
            payload = head + packet[_HEAD:]
        elif bound == 0 and len(types) == num_params:
            block = layout.type_block if layout is not None and layout.types is types else _type_block(tuple(types))
            payload = b"".join((head, packet[_HEAD:flag_at], b"\x01", block, packet[flag_at + 1:]))
        else:
            return None
    n = len(payload)
    if n >= _MAX_FRAME:
        return None
    return n.to_bytes(3, "little") + b"\x00" + payload
