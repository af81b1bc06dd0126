"""How a route unit is sent to its backend and how its rows are read and written back.

The same executor serves COM_QUERY (text protocol: the unit's SQL as a query, text rows) and
COM_STMT_EXECUTE (binary protocol: the unit's SQL prepared once per backend connection and executed with
the unit's parameters, binary rows). Merging works on text values either way, so binary rows are turned
into the text values the server would have sent for them and back.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from protocol.binary import ComStmtExecute, binary_row_to_text, text_row_to_binary
from protocol.errors import ServerError
from protocol.packets import ColumnDefinition41, ComQuery, ERRPacket, decode_text_row, encode_text_row
from proxy.backends.backend import BackendConnection
from routing.plan import ExecutionUnit

Row = tuple[bytes | None, ...]


def query_payload(unit: ExecutionUnit) -> bytes:
    """COM_QUERY of a unit's SQL."""
    return ComQuery(unit.sql.encode("utf-8", errors="surrogateescape")).encode()


def execute_payload(statement_id: int, unit: ExecutionUnit) -> bytes:
    """COM_STMT_EXECUTE of a unit's parameters, on the backend statement its SQL is prepared as."""
    return ComStmtExecute(statement_id, 0, 1, tuple(unit.params or ()), (), True).encode()


class StatementFailed(ServerError):
    """The backend refused to prepare a unit's statement: its ERR, as a ServerError of the same errno, SQLSTATE
    and message (`err` kept: callers rename its message to logic names)."""

    def __init__(self, err: ERRPacket) -> None:
        super().__init__(err.message, errno=err.errno, sqlstate=err.sqlstate)
        self.err = err


class StatementCodec(Protocol):
    binary: bool

    async def command(self, conn: BackendConnection, unit: ExecutionUnit) -> bytes: ...

    def decode_row(self, payload: bytes, columns: Sequence[ColumnDefinition41], count: int | None = None) -> Row:
        """The row's text values; `count`: only the first `count` columns."""
        ...

    def encode_row(self, row: Sequence[bytes | None], columns: Sequence[ColumnDefinition41]) -> bytes: ...


class TextCodec:
    binary = False

    async def command(self, conn: BackendConnection, unit: ExecutionUnit) -> bytes:
        return query_payload(unit)

    def decode_row(self, payload: bytes, columns: Sequence[ColumnDefinition41], count: int | None = None) -> Row:
        return decode_text_row(payload, len(columns) if count is None else count)

    def encode_row(self, row: Sequence[bytes | None], columns: Sequence[ColumnDefinition41]) -> bytes:
        return encode_text_row(list(row))


class BinaryCodec:
    binary = True

    async def command(self, conn: BackendConnection, unit: ExecutionUnit) -> bytes:
        answer = await conn.prepared(unit.sql)
        if isinstance(answer, ERRPacket):
            raise StatementFailed(answer)
        return execute_payload(answer.ok.statement_id, unit)

    def decode_row(self, payload: bytes, columns: Sequence[ColumnDefinition41], count: int | None = None) -> Row:
        return binary_row_to_text(payload, columns, count)

    def encode_row(self, row: Sequence[bytes | None], columns: Sequence[ColumnDefinition41]) -> bytes:
        return text_row_to_binary(row, columns)


TEXT = TextCodec()
BINARY = BinaryCodec()
