"""`encode_execute`: the COM_STMT_EXECUTE `ComStmtExecute.encode` makes, without the command object, with the types'
encoding given or not."""

from __future__ import annotations

import datetime
from decimal import Decimal

import pytest

from protocol.binary import ComStmtExecute, ParamType, RawDateTime, encode_execute
from protocol.constants import ColumnType as T

CASES = [
    ((), ()),
    ((1,), (ParamType(T.LONGLONG),)),
    ((None,), (ParamType(T.NULL),)),
    (("sVq8Lmm+j6bZE5EKSilJEQ==", None, 7), (ParamType(T.VAR_STRING), ParamType(T.LONG), ParamType(T.TINY, True))),
    ((b"bytes", "text", "王五"), (ParamType(T.STRING), ParamType(T.VAR_STRING), ParamType(T.VAR_STRING))),
    ((1.5, Decimal("12.50"), -3), (ParamType(T.DOUBLE), ParamType(T.NEWDECIMAL), ParamType(T.LONGLONG))),
    ((datetime.date(2017, 8, 9), RawDateTime(2020, 1, 2, 3, 4, 5, 0)), (ParamType(T.DATE), ParamType(T.DATETIME))),
    ((*range(9), None), tuple(ParamType(T.LONGLONG) for _ in range(10))),  # a NULL bitmap of two bytes
]


@pytest.mark.parametrize(("values", "types"), CASES)
def test_encode_execute_is_what_the_command_encodes(values: tuple[object, ...], types: tuple[ParamType, ...]) -> None:
    expected = ComStmtExecute(42, 0, 1, values, types, True).encode()
    assert encode_execute(42, values, types) == expected
    assert encode_execute(42, values, types, b"".join(t.encode() for t in types)) == expected
