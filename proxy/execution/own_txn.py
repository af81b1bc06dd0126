"""The transaction of a statement's own (a stepwise write, the upsert's row by row): how it opens and ends.

Outside LOCK TABLES it is BEGIN ... COMMIT / ROLLBACK on every data source the statement touches. Under LOCK TABLES
BEGIN would release the session's table locks (MariaDB's implicit UNLOCK TABLES): the transaction opens with
`SET autocommit=0` instead, as the atomic statement transaction does (proxy.execution.atomic._under_table_locks),
and autocommit is set back on each connection once it ended, so that the locks hold after the statement.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from protocol.errors import ServerError
from proxy.execution import txn_end

if TYPE_CHECKING:
    from proxy.execution.context import SessionContext as Session

UNDER_LOCKS = "SET autocommit=0"


def begin(session: Session) -> None:
    """Open the statement's transaction (each data source joins it with the opening, proxy.execution.txn.join)."""
    under_locks = bool(session.txn.table_locks) and not session.server.tm.xa
    session.txn.begin_sql = UNDER_LOCKS if under_locks else "BEGIN"
    session.txn.joined = []


async def end(session: Session, verb: str, *, label: str | None = None) -> ServerError | None:
    """COMMIT or ROLLBACK it (txn_end.end_transaction), then autocommit back on where it was opened under locks."""
    under_locks = session.txn.begin_sql == UNDER_LOCKS
    began = [c for n in session.txn.joined if (c := session.backends.get(n)) is not None] if under_locks else []
    failure = await txn_end.end_transaction(session, verb, label=label)
    for conn in began:
        if conn.broken:
            continue
        try:
            await session._must(conn, "SET autocommit=1")
        except Exception:
            conn.broken = True  # (its autocommit is unknown: closed, never pooled)
    if began:
        session.drop_broken()
    return failure
