"""retarget_execute: the client's COM_STMT_EXECUTE for the backend's statement id, values untouched; an
execute without bound types gets the client's last types written in (what the backend decodes is what the
client meant)."""

from __future__ import annotations

import datetime
from decimal import Decimal

import pytest

from protocol.binary import ColumnType, ComStmtExecute, ParamType
from protocol.framing import encode_packet
from protocol.retarget import execute_layout, execute_params, retarget_execute

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


TINY, SHORT, YEAR = ParamType(ColumnType.TINY), ParamType(ColumnType.SHORT), ParamType(ColumnType.YEAR)
INT24, LONGLONG = ParamType(ColumnType.INT24), ParamType(ColumnType.LONGLONG)
UTINY, USHORT, ULONG = (ParamType(ColumnType.TINY, True), ParamType(ColumnType.SHORT, True),
                        ParamType(ColumnType.LONG, True))


@pytest.mark.parametrize(("values", "types"), [
    ((7,), (LONG,)),
    ((-7,), (LONGLONG,)),
    ((2**64 - 1,), (ULONGLONG,)),
    ((-128, 255, -32768, 65535), (TINY, UTINY, SHORT, USHORT)),
    ((2024, -8388608, 2**32 - 1, -(2**31)), (YEAR, INT24, ULONG, LONG)),
    (tuple(range(-4, 5)), (LONGLONG,) * 9),  # a two-byte NULL bitmap
])
def test_layout_reads_integer_executes_as_the_decoder_does(values: tuple[int, ...],
                                                           types: tuple[ParamType, ...]) -> None:
    """ExecuteLayout.values: the integers of an execute that binds no types, at their offsets, exactly what
    `execute_params` (and the full decoder) read; and the type block it writes in is the decoder's."""
    layout = execute_layout(types)
    packet = framed(ComStmtExecute(5, 0, 1, values, types, True), False)
    assert layout.values(packet) == values == execute_params(packet, len(types), types, None)[0]
    assert retarget_execute(packet, 9, len(types), types, layout) == retarget_execute(packet, 9, len(types), types)


@pytest.mark.parametrize(("values", "types", "bound"), [
    ((7,), (LONG,), True),  # binds its types: the decoder reads them
    ((None,), (LONG,), False),  # a NULL
    ((7, None), (LONG, LONG), False),
    ((b"7",), (STR,), False),  # not an integer
    ((7, b"x"), (LONG, STR), False),
    ((), (), False),
])
def test_layout_leaves_other_executes_to_the_decoder(values: tuple[object, ...], types: tuple[ParamType, ...],
                                                     bound: bool) -> None:
    packet = framed(ComStmtExecute(5, 0, 1, values, types, True), bound)
    assert execute_layout(types).values(packet) is None
    assert execute_layout(types).values(packet[:-1]) is None  # a truncated packet is never read here


def test_layout_refuses_a_packet_of_another_length() -> None:
    layout = execute_layout((LONG,))
    packet = framed(ComStmtExecute(5, 0, 1, (7,), (LONG,), True), False)
    assert layout.values(packet + b"\x00") is None
    longer = execute_layout((LONGLONG,))
    assert longer.values(packet) is None  # the client sent 4 bytes, the layout expects 8
