"""Prepared statements (COM_STMT_*), for pass-through and sharded logical databases.

Pass-through: the statement is prepared on the session's backend connection and every COM_STMT_* is
forwarded with the statement id translated; answers are relayed frame by frame.

Sharded: PREPARE parses nothing per execution — the kernel's plan cache keys on the prepared text, so
each EXECUTE only evaluates the algorithms with the bound values. The answer to PREPARE describes the
logic statement (columns obtained by preparing one routed variant on a backend); EXECUTE routes with the
parameter values and runs each unit as a prepared statement on its backend (prepared once per backend
connection), relaying binary rows for a single unit and merging them for several.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from protocol.binary import (
    CURSOR_TYPE_READ_ONLY,
    LAST_STATEMENT_ID,
    ComStmtClose,
    ComStmtExecute,
    ComStmtFetch,
    ComStmtPrepare,
    ComStmtReset,
    ComStmtSendLongData,
    ParamType,
    PrepareResponse,
    StmtPrepareOK,
)
from protocol.constants import Collation, ColumnFlag, ColumnType, ErrorCode
from protocol.packets import ColumnDefinition41, ERRPacket
from proxy.backend import BackendConnection
from routing.errors import RoutingError
from routing.parse import scan_shape

if TYPE_CHECKING:
    from proxy.session import Session

# MariaDB's and MySQL's definition of a `?` parameter in a PREPARE answer
PARAM_DEFINITION = ColumnDefinition41(
    "?", ColumnType.VAR_STRING, character_set=Collation.BINARY, column_length=0, flags=ColumnFlag.BINARY
)


@dataclass
class ClientStatement:
    id: int
    sql: str
    num_params: int
    columns: tuple[ColumnDefinition41, ...]
    types: tuple[ParamType, ...] | None = None
    long_data: dict[int, bytearray] = field(default_factory=dict)
    # pass-through: the statement on the session's backend connection
    backend: BackendConnection | None = None
    backend_id: int = 0


class StatementRegistry:
    """A session's prepared statements; ids are the proxy's own, per session."""

    def __init__(self) -> None:
        self.by_id: dict[int, ClientStatement] = {}
        self._next = 1
        self.last_id: int | None = None

    def new_id(self) -> int:
        sid = self._next
        self._next += 1
        return sid

    def add(self, stmt: ClientStatement) -> None:
        self.by_id[stmt.id] = stmt
        self.last_id = stmt.id

    def get(self, sid: int) -> ClientStatement | None:
        if sid == LAST_STATEMENT_ID and self.last_id is not None:
            sid = self.last_id
        return self.by_id.get(sid)

    def clear(self) -> None:
        self.by_id.clear()
        self.last_id = None


def _unknown(session: Session, sid: int, command: str) -> None:
    session.error(ErrorCode.UNKNOWN_STMT_HANDLER,
                  f"Unknown prepared statement handler ({sid}) given to {command}", "HY000")


def _prepare_answer(session: Session, stmt: ClientStatement, warnings: int = 0) -> None:
    params = tuple(PARAM_DEFINITION for _ in range(stmt.num_params))
    answer = PrepareResponse(StmtPrepareOK(stmt.id, len(stmt.columns), stmt.num_params, warnings), params,
                             stmt.columns)
    session.wire.send_many(answer.encode(session.deprecate_eof, session.status))


async def prepare(session: Session, payload: bytes) -> None:
    req = ComStmtPrepare.decode(payload)
    sql = req.sql.decode("utf-8", errors="surrogateescape")
    db = session.database
    if db is None:
        session.error(ErrorCode.NO_DB_ERROR, "No database selected", "3D000")
        return
    source = db.pass_through_source
    if source is not None:
        conn = await session.backend(source.name)
        answer = await conn.prepare(sql)
        if isinstance(answer, ERRPacket):
            session.wire.send(answer.encode(session.capabilities))
            return
        stmt = ClientStatement(session.statements.new_id(), sql, answer.ok.num_params, answer.columns,
                               backend=conn, backend_id=answer.ok.statement_id)
        session.statements.add(stmt)
        fixed = replace(answer, ok=replace(answer.ok, statement_id=stmt.id))
        session.wire.send_many(fixed.encode(session.deprecate_eof, session.status))
        return
    assert db.kernel is not None
    num_params = sum(1 for _s, _e, kind in scan_shape(sql).spans if kind == "p")
    columns = await _describe(session, sql, num_params)
    stmt = ClientStatement(session.statements.new_id(), sql, num_params, columns)
    session.statements.add(stmt)
    _prepare_answer(session, stmt)


async def _describe(session: Session, sql: str, num_params: int) -> tuple[ColumnDefinition41, ...]:
    """The columns of a sharded statement, from preparing one routed variant on its backend. A statement
    that cannot be routed without its values (or cannot be routed at all) is described when executed:
    the binary protocol sends the columns with every result anyway."""
    db = session.database
    assert db is not None and db.kernel is not None
    for dummy in (0, "0", None):
        try:
            routed = db.kernel.route(sql, [dummy] * num_params, session.hints())
        except RoutingError:
            continue
        unit = routed.execution_units[0]
        conn = await session.backend(unit.data_source)
        answer = await conn.prepared(unit.sql)
        if isinstance(answer, ERRPacket):
            raise RoutingError(answer.message, errno=answer.errno, sqlstate=answer.sqlstate)
        renames = {actual.lower(): logic for ru in routed.route_units for logic, actual in ru.table_map.items()}
        visible = routed.merge_spec.visible_columns if routed.merge_spec else len(answer.columns)
        return tuple(
            replace(c, table=renames.get(c.table.lower(), c.table), org_table=renames.get(c.org_table.lower(),
                    c.org_table), schema=db.name if c.schema else "")
            for c in answer.columns[:visible]
        )
    return ()


async def execute(session: Session, payload: bytes) -> None:
    if len(payload) < 5:
        session.error(ErrorCode.MALFORMED_PACKET, "Malformed communication packet: COM_STMT_EXECUTE", "HY000")
        return
    sid = struct.unpack_from("<I", payload, 1)[0]
    stmt = session.statements.get(sid)
    if stmt is None:
        _unknown(session, sid, "mysqld_stmt_execute")
        return
    if stmt.backend is not None:
        conn = await _pass_through_conn(session, stmt)
        if conn is None:
            return
        forwarded = payload[:1] + struct.pack("<I", stmt.backend_id) + payload[5:]
        await session.relay_on(conn, forwarded)
        return
    request = ComStmtExecute.decode(payload, stmt.num_params, stmt.types, stmt.long_data)
    stmt.types = request.types
    stmt.long_data.clear()
    if request.flags & CURSOR_TYPE_READ_ONLY:
        session.log.debug("cursor_ignored", statement=stmt.id)  # rows are sent at once, without a cursor
    db = session.database
    assert db is not None and db.kernel is not None
    routed = db.kernel.route(stmt.sql, list(request.values), session.hints())
    from proxy.codec import BINARY
    from proxy.executor import execute_plan, log_statement

    log_statement(session, stmt.sql, routed, request.values)
    await execute_plan(session, db, routed, BINARY)


async def _pass_through_conn(session: Session, stmt: ClientStatement) -> BackendConnection | None:
    """The backend connection the statement lives on; re-prepared if that connection was replaced."""
    db = session.database
    assert db is not None
    source = db.pass_through_source
    if source is None:
        _unknown(session, stmt.id, "mysqld_stmt_execute")
        return None
    conn = await session.backend(source.name)
    if conn is not stmt.backend:
        answer = await conn.prepare(stmt.sql)
        if isinstance(answer, ERRPacket):
            session.wire.send(answer.encode(session.capabilities))
            return None
        stmt.backend, stmt.backend_id = conn, answer.ok.statement_id
    return conn


async def send_long_data(session: Session, payload: bytes) -> None:
    """No answer, by protocol; errors surface at EXECUTE."""
    req = ComStmtSendLongData.decode(payload)
    stmt = session.statements.get(req.statement_id)
    if stmt is None:
        return
    if stmt.backend is not None:
        conn = await _pass_through_conn(session, stmt)
        if conn is not None:
            conn.send_only(ComStmtSendLongData(stmt.backend_id, req.param_id, req.data).encode())
        return
    stmt.long_data.setdefault(req.param_id, bytearray()).extend(req.data)


async def close(session: Session, payload: bytes) -> None:
    """No answer, by protocol."""
    req = ComStmtClose.decode(payload)
    stmt = session.statements.by_id.pop(req.statement_id, None)
    if stmt is not None and stmt.backend is not None and not stmt.backend.broken \
            and stmt.backend in session.backends.values():
        stmt.backend.send_only(ComStmtClose(stmt.backend_id).encode())


async def reset(session: Session, payload: bytes) -> None:
    req = ComStmtReset.decode(payload)
    stmt = session.statements.get(req.statement_id)
    if stmt is None:
        _unknown(session, req.statement_id, "mysqld_stmt_reset")
        return
    stmt.long_data.clear()
    if stmt.backend is not None:
        conn = await _pass_through_conn(session, stmt)
        if conn is None:
            return
        answer = await conn.simple_command(ComStmtReset(stmt.backend_id).encode())
        session.wire.send_many(answer)
        return
    session.ok()


async def fetch(session: Session, payload: bytes) -> None:
    req = ComStmtFetch.decode(payload)
    stmt = session.statements.get(req.statement_id)
    if stmt is None:
        _unknown(session, req.statement_id, "mysqld_stmt_fetch")
        return
    if stmt.backend is None:
        session.error(ErrorCode.UNKNOWN_STMT_HANDLER,
                      f"statement {stmt.id} has no open cursor (cursors on sharded tables are not supported; "
                      "results are sent in full at execute)", "HY000")
        return
    conn = await _pass_through_conn(session, stmt)
    if conn is None:
        return
    summary = await conn.relay(
        ComStmtFetch(stmt.backend_id, req.num_rows).encode(), session.writer, first_seq=session.wire.seq,
        client_deprecate_eof=session.deprecate_eof, rows_only=True,
    )
    session.update_status(summary.status)
