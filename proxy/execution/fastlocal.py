"""The fast path's answers that need no relay of a backend's bytes by it: a BEGIN answered on the spot, a COMMIT
or ROLLBACK fanned out (proxy.execution.fastcommit), the BEGIN that makes a node join the open transaction in the
same write as the statement; and the fast path's counters.

Why its own module: these read only the session's transaction state, not the socket callbacks' relay state, and
keep proxy.execution.fastpath to the relay itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from protocol.framing import encode_packet
from proxy.execution.fastcommit import fast_end
from proxy.execution.plain import TRANSACTION

if TYPE_CHECKING:
    from proxy.backends.backend import BackendConnection
    from proxy.backends.runtime import LogicalDatabase
    from proxy.execution.context import SessionContext as Session


class FastPathStats:
    """Counts for tests and benchmarks. (An instance, not a class attribute: assigning to a class attribute
    per command would invalidate the interpreter's attribute caches for that class every time.)"""

    __slots__ = ("taken",)

    def __init__(self) -> None:
        self.taken = 0  # commands answered by fast paths in this process


STATS = FastPathStats()


class Answered:
    """`fast_forward`'s answer for a command it answered itself (nothing to send anywhere)."""


class EndForward(NamedTuple):
    """A COMMIT or ROLLBACK that `CommitFan` sends to every joined data source (proxy.execution.fastcommit)."""

    sql: str
    verb: str
    work: list[tuple[str, BackendConnection]]


ANSWERED = Answered()


def local_transaction(session: Session, db: LogicalDatabase, sql: str, command: int
                       ) -> EndForward | Answered | None:
    """BEGIN (`local_begin`), COMMIT or ROLLBACK (`fastcommit.fast_end`) as the session's coroutine would answer
    them, when nothing else is to be done; None otherwise."""
    verb = sql.upper()
    if verb == "BEGIN":
        return local_begin(session, sql, command)
    if verb != "COMMIT" and verb != "ROLLBACK":
        return None
    work = fast_end(session, db, verb)
    return None if work is None else EndForward(sql, verb, work)


def local_begin(session: Session, sql: str, command: int) -> Answered | None:
    """A BEGIN (`local_transaction` checked the word). A sharded database's BEGIN starts nothing anywhere (each data
    source joins at its first statement), so it is answered here, as `txn_control.session_statement` answers it
    (not through the session's coroutine), when no open transaction must commit first and nothing
    else is pending: not under autocommit=0, XA or SET TRANSACTION, nor with table locks to release."""
    txn = session.txn
    if not txn.autocommit or txn.commits_before_begin or txn.xa is not None or txn.next_tx_sets or txn.table_locks:
        return None
    STATS.taken += 1
    session.begin_command(command)
    session.info = session.sql = sql
    session.stmt_kind = TRANSACTION
    txn.begin(sql)
    session.update_status(0)
    session.wire.seq = 1
    session.ok()
    return ANSWERED


def join_frame(session: Session, ds: str) -> bytes:
    """The framed COM_QUERY that starts the session's open transaction on `ds`, when joining is nothing but
    the client's BEGIN / START TRANSACTION (what `txn.join` sends then); b"" when the slow path must join:
    XA, SET TRANSACTION waiting for the next transaction, autocommit=0, savepoints to replay, or a data
    source whose part of the transaction was lost."""
    txn = session.txn
    begin = txn.begin_sql
    if begin is None or not txn.autocommit or txn.next_tx_sets or txn.savepoints or txn.lost \
            or txn.xa is not None or session.server.tm.xa:
        return b""
    return encode_packet(b"\x03" + begin.encode("utf-8", errors="surrogateescape"), 0)[0]


__all__ = ["ANSWERED", "STATS", "Answered", "EndForward", "FastPathStats", "join_frame", "local_transaction"]
