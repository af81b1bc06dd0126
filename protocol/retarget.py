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
from collections.abc import Sequence

from protocol.binary import ParamType

__all__ = ["retarget_execute"]

_HEAD = 4 + 1 + 4 + 1 + 4  # frame header, command, statement id, flags, iteration count
_MAX_FRAME = 0xFFFFFF


def retarget_execute(packet: bytes, statement_id: int, num_params: int, types: Sequence[ParamType]) -> bytes | None:
    """The framed command (sequence id 0) for the backend's `statement_id`, or None when `packet` (one framed
    COM_STMT_EXECUTE) is not laid out as `num_params` parameters with a new-params-bound flag of 0 or 1."""
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
            payload = b"".join((head, packet[_HEAD:flag_at], b"\x01", *(t.encode() for t in types),
                                packet[flag_at + 1:]))
        else:
            return None
    n = len(payload)
    if n >= _MAX_FRAME:
        return None
    return n.to_bytes(3, "little") + b"\x00" + payload
