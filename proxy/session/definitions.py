"""MariaDB's own column definitions for answers the proxy builds itself (SHOW DATABASES, SHOW CREATE DATABASE, SHOW
PROCESSLIST, SELECT DATABASE(), SHOW OPEN TABLES ...): the same statement (or one of the same shape) is run on one of
the session's data source connections and the definitions of its answer are kept, its rows dropped. They are the
server's, field by field, in the session's character set (the connection carries the session's SET NAMES): a
definition built here would have to follow every character set, length and flag rule of the server.

Why its own module: the statements above are answered by several modules (proxy.session.dispatch, metadata,
processlist), and each must find a connection the same way, also when the session has chosen no database.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from protocol import text as ptext
from protocol.packets import ColumnDefinition41, ComQuery, ERRPacket, decode_text_row
from protocol.results import ResultHeader
from proxy.backends.backend import BackendConnection, BackendError

if TYPE_CHECKING:
    from proxy.backends.runtime import LogicalDatabase
    from proxy.execution.context import SessionContext as Session

Row = tuple[bytes | None, ...]


async def metadata_connection(session: Session, db: LogicalDatabase | None = None) -> BackendConnection | None:
    """The session's connection to the first data source of `db` (the current database, else the default one when
    none is chosen), for reading what the server says about itself. None when there is no database at all.

    A read: on a read/write splitting group it may be a replica, and it records no write."""
    current = session.database
    target = db or current or session.server.default_database()
    if target is None:
        return None
    if target is current:
        return await session.backend(next(iter(target.sources)), read=True, record_write=False)
    session.database = target  # (no database chosen: the default one's connection, as other such statements)
    try:
        return await session.backend(next(iter(target.sources)), read=True, record_write=False)
    finally:
        session.database = current


async def backend_answer(
    session: Session, sql: str, db: LogicalDatabase | None = None
) -> tuple[tuple[ColumnDefinition41, ...], list[Row]] | ERRPacket | None:
    """`sql`'s answer on `metadata_connection`: its column definitions and text rows, or its ERR. None when no data
    source can answer (no database, or the connection failed): the caller answers without the server's
    definitions."""
    try:
        conn = await metadata_connection(session, db)
        if conn is None:
            return None
        columns: tuple[ColumnDefinition41, ...] = ()
        rows: list[Row] = []
        error: ERRPacket | None = None
        async for ev in conn.events(ComQuery(ptext.encode(sql)).encode()):
            if isinstance(ev, ResultHeader):
                columns = ev.columns
            elif isinstance(ev, bytes):
                rows.append(decode_text_row(ev, len(columns)))
            elif isinstance(ev, ERRPacket):
                error = ev
    except BackendError:
        return None
    return error if error is not None else (columns, rows)


async def server_definitions(
    session: Session, sql: str, db: LogicalDatabase | None = None
) -> tuple[ColumnDefinition41, ...] | None:
    """The column definitions MariaDB sends for `sql` (run on `metadata_connection`, its rows dropped); None when no
    data source could answer or it answered an error (the caller keeps its own definitions)."""
    answer = await backend_answer(session, sql, db)
    if answer is None or isinstance(answer, ERRPacket) or not answer[0]:
        return None
    return answer[0]


def named(columns: tuple[ColumnDefinition41, ...] | None, labels: list[str]) -> list[str | ColumnDefinition41]:
    """`labels` as columns: each with the server's definition at its place when there is one of as many columns
    (its name the label's), else the bare label (the proxy's default definition)."""
    if columns is None or len(columns) != len(labels):
        return list(labels)
    return [replace(c, name=label) for c, label in zip(columns, labels, strict=True)]


__all__ = ["backend_answer", "metadata_connection", "named", "server_definitions"]
