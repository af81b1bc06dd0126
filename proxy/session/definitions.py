"""MariaDB's own column definitions for answers the proxy builds itself (SHOW DATABASES, SHOW CREATE DATABASE, SHOW
PROCESSLIST, SELECT DATABASE(), SHOW OPEN TABLES ...): the same statement (or one of the same shape) is run on a data
source and the definitions of its answer are kept, its rows dropped. They are the server's, field by field, in the
session's character sets: a definition built here would have to follow every character set, length and flag rule of
the server.

They are read over the data source's admin connection (outside the pool, with the session's `SET NAMES` for that one
statement: proxy.backends.backend.DataSource.admin_answer), never a pooled one: SHOW PROCESSLIST must answer when every
pooled connection is taken, and SHOW DATABASES / SELECT DATABASE() needed none before. A statement's definitions
depend only on its text and the character sets, so they are kept (`_KEPT`): a tool's `SELECT DATABASE()` costs one
reading per character set, not one per statement.

Why its own module: the statements above are answered by several modules (proxy.session.dispatch, metadata,
processlist), and each must find a data source the same way, also when the session has chosen no database.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from protocol.packets import ColumnDefinition41, ERRPacket
from proxy.backends.backend import BackendConnection

if TYPE_CHECKING:
    from proxy.backends.backend import DataSource
    from proxy.backends.runtime import LogicalDatabase
    from proxy.execution.context import SessionContext as Session

Row = tuple[bytes | None, ...]

# (data source, statement, the session's character sets) -> the definitions of its answer; cleared when full
_KEPT: dict[tuple[object, str, str], tuple[ColumnDefinition41, ...]] = {}
_KEPT_MAX = 512


def _source(session: Session, db: LogicalDatabase | None) -> DataSource | None:
    """The first data source of `db` (the current database, else the default one when none is chosen)."""
    target = db or session.database or session.server.default_database()
    return None if target is None else next(iter(target.sources.values()))


async def backend_answer(
    session: Session, sql: str, db: LogicalDatabase | None = None
) -> tuple[tuple[ColumnDefinition41, ...], list[Row]] | ERRPacket | None:
    """`sql`'s answer on `db`'s first data source (the current database's, else the default one's), in the session's
    character sets: its column definitions and text rows, or its ERR. None when no data source can answer (no
    database, or it cannot be reached): the caller answers without the server's definitions."""
    source = _source(session, db)
    if source is None:
        return None
    answer = await source.admin_answer(sql, session.names)
    if answer is not None and not isinstance(answer, ERRPacket) and answer[0]:
        _keep((source, sql, session.names), answer[0])
    return answer


async def server_definitions(
    session: Session, sql: str, db: LogicalDatabase | None = None
) -> tuple[ColumnDefinition41, ...] | None:
    """The column definitions MariaDB sends for `sql` (`backend_answer`, kept); None when no data source could
    answer or it answered an error (the caller keeps its own definitions)."""
    source = _source(session, db)
    if source is None:
        return None
    kept = _KEPT.get((source, sql, session.names))
    if kept is not None:
        return kept
    answer = await backend_answer(session, sql, db)
    if answer is None or isinstance(answer, ERRPacket) or not answer[0]:
        return None
    return answer[0]


def _keep(key: tuple[object, str, str], columns: tuple[ColumnDefinition41, ...]) -> None:
    if len(_KEPT) >= _KEPT_MAX:
        _KEPT.clear()
    _KEPT[key] = columns


async def metadata_connection(session: Session, db: LogicalDatabase | None = None) -> BackendConnection | None:
    """The session's connection to the first data source of the current database (else of `db`, else of the default
    one), for a statement that must run in the session's state (a SHOW's WHERE over the proxy's rows). None when
    there is no database at all. A read: on a read/write splitting group it may be a replica, and it records no
    write. (The connections the session holds are the current database's: another one's are borrowed for it.)"""
    current = session.database
    target = current or db or session.server.default_database()
    if target is None:
        return None
    if target is current:
        return await session.backend(next(iter(target.sources)), read=True, record_write=False)
    session.database = target  # (no database chosen: the default one's connection, as other such statements)
    try:
        return await session.backend(next(iter(target.sources)), read=True, record_write=False)
    finally:
        session.database = current


def named(columns: tuple[ColumnDefinition41, ...] | None, labels: list[str]) -> list[str | ColumnDefinition41]:
    """`labels` as columns: each with the server's definition at its place when there is one of as many columns
    (its name the label's), else the bare label (the proxy's default definition)."""
    if columns is None or len(columns) != len(labels):
        return list(labels)
    return [replace(c, name=label) for c, label in zip(columns, labels, strict=True)]


__all__ = ["backend_answer", "metadata_connection", "named", "server_definitions"]
