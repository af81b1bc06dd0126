"""retarget_execute: the client's COM_STMT_EXECUTE for the backend's statement id, values untouched; an
execute without bound types gets the client's last types written in (what the backend decodes is what the
client meant)."""

from __future__ import annotations

import datetime
from decimal import Decimal

import pytest

from protocol.binary import ColumnType, ComStmtExecute, ParamType
from protocol.framing import encode_packet
from protocol.retarget import retarget_execute

LONG, STR = ParamType(ColumnType.LONG), ParamType(ColumnType.VAR_STRING)
ULONGLONG = ParamType(ColumnType.LONGLONG, True)


def framed(cmd: ComStmtExecute, bound: bool = True) -> bytes:
    payload = cmd.encode()
    if not bound and cmd.values:  # what a client sends on a later execute: flag 0, no type block
        n = len(cmd.values)
        at = 10 + (n + 7) // 8
        payload = payload[:at] + b"\x00" + payload[at + 1 + 2 * n:]
    return encode_packet(payload, 0)[0]


@pytest.mark.parametrize(("values", "types", "bound"), [
    ((), (), True),
    ((7,), (LONG,), True),
    ((7,), (LONG,), False),
    ((None,), (LONG,), False),
    ((1, b"abc", None, 2**64 - 1), (LONG, STR, LONG, ULONGLONG), True),
    ((1, b"abc", None, 2**64 - 1), (LONG, STR, LONG, ULONGLONG), False),
    (tuple(range(9)), (LONG,) * 9, False),  # a two-byte NULL bitmap
    ((Decimal("1.5"), datetime.date(2020, 1, 2)), (ParamType(ColumnType.NEWDECIMAL), ParamType(ColumnType.DATE)),
     False),
])
def test_retarget_keeps_values_and_binds_types(values: tuple[object, ...], types: tuple[ParamType, ...],
                                               bound: bool) -> None:
    client = framed(ComStmtExecute(5, 0, 1, values, types, True), bound)
    out = retarget_execute(client, 99, len(values), types)
    assert out is not None and out[3] == 0 and int.from_bytes(out[:3], "little") == len(out) - 4
    got = ComStmtExecute.decode(out[4:], len(values), None)
    assert (got.statement_id, got.values, got.types) == (99, values, types)
    assert got.new_params_bound is bool(values)


@pytest.mark.parametrize(("packet", "num_params", "types"), [
    (framed(ComStmtExecute(5, 0, 1, (7,), (LONG,), True))[:14], 1, (LONG,)),  # truncated before the flag
    (framed(ComStmtExecute(5, 0, 1, (7,), (LONG,), True), False), 1, ()),  # unbound, no types known
])
def test_retarget_refuses_what_it_cannot_lay_out(packet: bytes, num_params: int, types: tuple[ParamType, ...]) -> None:
    assert retarget_execute(packet, 1, num_params, types) is None
