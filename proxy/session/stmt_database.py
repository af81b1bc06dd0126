"""A prepared statement runs in the database it was prepared in.

MariaDB keeps a session's prepared statements across USE, and executes each in the database that was current at
its PREPARE (Prepared_statement::execute sets it for the execution): its unqualified tables and DATABASE() are that
database's, whatever USE chose since. The proxy's connections belong to the current logical database (USE gives
them back), so a statement of another database runs on connections of its own database borrowed for that one
command, with the session's SET state, and given back after it; the session's own state (its connections, its
transaction, its read/write splitting state) is put back untouched.

Refused (ERR 1235, nothing run) inside a transaction, with autocommit off or under LOCK TABLES: there MariaDB would
run the statement in the session's transaction or under its locks, which live on the current database's connections,
not on the borrowed ones.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from protocol.constants import ErrorCode, ServerStatus
from protocol.errors import ServerError
from proxy.execution.state import TransactionState

if TYPE_CHECKING:
    from proxy.backends.runtime import LogicalDatabase
    from proxy.execution.context import SessionContext as Session

_IN_TRANS = int(ServerStatus.IN_TRANS)
_AUTOCOMMIT = int(ServerStatus.AUTOCOMMIT)


def _name(db: LogicalDatabase | None) -> str:
    return db.name if db is not None else "(none)"


def refusal(session: Session, db: LogicalDatabase | None, what: str) -> ServerError | None:
    """Why `what` (prepared in `db`) cannot run outside the session's current database now, or None."""
    status = session.status
    if status & _IN_TRANS or not status & _AUTOCOMMIT or session.txn.active:
        why = "inside a transaction or with autocommit off"
    elif session.txn.table_locks:
        why = "under LOCK TABLES"
    else:
        return None
    current = _name(session.database)
    return ServerError(
        f"shardproxy: {what} was prepared in database '{_name(db)}' and cannot run {why} in database '{current}' "
        f"(its transaction and locks are on '{current}''s connections); run it after COMMIT / UNLOCK TABLES, or "
        f"USE {_name(db)} first",
        errno=ErrorCode.NOT_SUPPORTED_YET,
        sqlstate="42000",
    )


@contextlib.asynccontextmanager
async def in_database(session: Session, db: LogicalDatabase | None, what: str) -> AsyncIterator[None]:
    """Run the body with `db` as the session's database, on connections borrowed for it (see the module)."""
    if db is session.database:
        yield
        return
    refused = refusal(session, db, what)
    if refused is not None:
        raise refused
    saved = (session.database, session.backends, session.read_backends, session.read_state, session.txn, session.status)
    fresh = TransactionState()
    was = session.txn
    fresh.session_sets, fresh.mode_flags, fresh.sql_mode_bits = was.session_sets, was.mode_flags, was.sql_mode_bits
    session.database, session.backends, session.read_backends, session.read_state, session.txn = db, {}, {}, {}, fresh
    try:
        yield
    finally:
        borrowed = [*session.backends.values(), *session.read_backends.values()]
        (session.database, session.backends, session.read_backends, session.read_state, session.txn, session.status) = (
            saved
        )
        for conn in borrowed:
            session.give_back(conn)
