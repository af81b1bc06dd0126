"""The named locks an upsert check holds until its transaction ends (GET_LOCK on each data source).

Why its own module: the upsert check takes them and proxy.execution.txn gives them back when the transaction
ends; both import this, so the transaction code never imports the upsert check that uses it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from proxy.backends.backend import BackendConnection
    from proxy.execution.context import SessionContext as Session


async def release(conn: BackendConnection, names: list[str]) -> None:
    """Give named locks back (a connection that fails here is closed, which gives them back too)."""
    if not names or conn.broken:
        return
    try:
        await conn.execute("SELECT " + ", ".join(f"RELEASE_LOCK('{n}')" for n in names))
    except Exception:
        conn.broken = True


async def release_session_locks(session: Session) -> None:
    """The transaction ended: the upsert locks it held go (called by proxy.execution.txn_end.end_transaction)."""
    locks, session.txn.upsert_locks = session.txn.upsert_locks, {}
    for ds, names in locks.items():
        conn = session.backends.get(ds)
        if conn is not None:
            await release(conn, names)


__all__ = ["release", "release_session_locks"]
