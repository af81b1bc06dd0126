"""Session-wide statements on a sharded logical database: transactions and SET.

On one data source a client's BEGIN, COMMIT and SET simply go to its connection. Across data sources
the proxy must fan them out: a transaction starts on each data source the first time the transaction
touches it (LOCAL transactions, as ShardingSphere's default), COMMIT/ROLLBACK/SAVEPOINT go to every
data source that joined, and SET statements reach every connection the session holds now or borrows later.

Under the XA transaction rule (proxy.backends.xa) the same fan-out runs XA branches instead: each data source joins
with `XA START <xid>`, COMMIT is one phase on one data source and two-phase on several (`txn_end`), and the
rows of a transaction are committed everywhere or nowhere.

A transaction always ends in a known state, whatever fails: COMMIT and ROLLBACK (and the implicit commits
of BEGIN, SET autocommit=1 and DDL) go to every joined data source even when one fails, a connection
whose outcome is unknown is closed (never pooled), the session leaves the transaction, and the error
names what each data source did (`txn_end.end_transaction`). A data source whose part of the open transaction
is lost with its connection (`connection_lost`) cannot take part again in that transaction, and its
COMMIT rolls back the rest instead of committing a part of it.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from protocol import text
from protocol.constants import ServerStatus
from protocol.errors import ServerError
from protocol.packets import ERRPacket
from proxy.backends.backend import BackendError
from proxy.backends.xa import LogUnavailable, XATransaction, bqual_for
from proxy.execution.txn_text import quote

if TYPE_CHECKING:
    from proxy.backends.backend import BackendConnection
    from proxy.execution.context import SessionContext as Session

# --- errors ------------------------------------------------------------------------------------------------
#
# A transaction that ends badly is reported with MySQL's own numbers for it, SQLSTATE HY000 as MySQL sends
# them: ER_ERROR_DURING_COMMIT (1180) for a COMMIT (explicit or implicit: BEGIN, SET autocommit=1, DDL) and
# ER_ERROR_DURING_ROLLBACK (1181) for a ROLLBACK. The message names every data source and what it did:
# "committed on ds_0", "rolled back on ds_0", "COMMIT failed on ds_1 (2013: ...; whether it committed is
# unknown)", and always ends with "the transaction is over": whatever the answer, no data source is left in
# the transaction. A statement that needs a data source whose part of the transaction was lost gets
# CR_SERVER_LOST (2013), the number the statement that lost it got.

ER_ERROR_DURING_COMMIT = 1180
ER_ERROR_DURING_ROLLBACK = 1181
ER_SP_DOES_NOT_EXIST = 1305
ER_XAER_RMERR = 1401
CR_SERVER_LOST = 2013

_LOST = "its connection was lost"


# --- fanning them out over a session's data sources ------------------------------------------------------


def next_is_xa(session: Session) -> bool:
    """Is the open transaction XA, or will the next one be (nothing joined yet, and the rule says XA)?"""
    txn = session.txn
    if txn.xa is not None:
        return True
    return not txn.joined and not txn.lost and session.server.tm.xa


async def join(session: Session, conn: BackendConnection) -> None:
    """An already held connection enters the session's open transaction (with the savepoints set so far,
    so that ROLLBACK TO one of them undoes this data source's part too). A connection that fails half-way
    has an unknown transaction state: it is marked broken (closed, never pooled) and has not joined."""
    txn = session.txn
    if txn.xa is None and next_is_xa(session):
        try:
            txn.xa = session.server.tm.begin()
        except LogUnavailable as exc:
            raise ServerError(f"cannot start an XA transaction: {exc}", errno=ER_XAER_RMERR, sqlstate="XAE03"
                              ) from exc
    if txn.xa is not None:
        await _xa_join(session, conn, txn.xa)
        return
    try:
        for sql in session.txn.next_tx_sets:
            await session._must(conn, sql)
        if not session.txn.autocommit:
            await session._must(conn, "SET autocommit=0")
        if session.txn.begin_sql is not None:
            await session._must(conn, session.txn.begin_sql)
        for name in session.txn.savepoints:
            await session._must(conn, f"SAVEPOINT {quote(name)}")
    except BaseException:
        conn.broken = True
        raise
    session.txn.joined.append(conn.name)


_ACCESS_MODE = re.compile(r"\bREAD\s+(ONLY|WRITE)\b", re.I)


async def _xa_join(session: Session, conn: BackendConnection, xa: XATransaction) -> None:
    """XA START on a data source joining the XA transaction, in one round trip with what must come before
    it (SET TRANSACTION, autocommit=0, START TRANSACTION READ ONLY's access mode) and after it (the
    savepoints). MariaDB requires XA START before the branch's first statement: under autocommit=0 too,
    every data source starts its branch when the transaction first touches it."""
    txn = session.txn
    statements = list(txn.next_tx_sets)
    mode = _ACCESS_MODE.search(txn.begin_sql or "")
    if mode:
        statements.append(f"SET TRANSACTION READ {mode.group(1).upper()}")
    if not txn.autocommit and conn.status & ServerStatus.AUTOCOMMIT:
        statements.append("SET autocommit=0")
    xa.branches[conn.name] = bqual_for(conn.name)
    xid = xa.xid(conn.name)
    statements.append(f"XA START {xid}")
    statements.extend(f"SAVEPOINT {quote(name)}" for name in txn.savepoints)
    conn.xa = xid  # from now on the connection is closed, never pooled, unless the branch ends well
    try:
        answers = await conn.pipeline(statements)
    except BaseException:
        conn.broken = True
        raise
    for sql, answer in zip(statements, answers, strict=True):
        if isinstance(answer, ERRPacket):
            conn.broken = True
            raise BackendError(conn.name, f"{text.shown(sql)!r} failed: {answer.message}", errno=answer.errno,
                               sqlstate=answer.sqlstate)
    txn.joined.append(conn.name)


def connection_lost(session: Session, conn: BackendConnection) -> None:
    """A joined connection leaves the session broken (lost, timed out, state unknown: it is closed, which
    rolls back whatever it had not committed). If it held part of the open transaction, that part is gone:
    the data source is recorded in `txn.lost` and the transaction can no longer commit."""
    txn = session.txn
    if conn.name not in txn.joined or session.backends.get(conn.name, conn) is not conn:
        return
    txn.joined.remove(conn.name)
    if txn.begin_sql is not None or conn.status & ServerStatus.IN_TRANS:
        txn.lost.setdefault(conn.name, _LOST)
    # else (autocommit=0, nothing done since the last COMMIT): nothing lost, a new connection joins afresh


def lost_error(session: Session, data_source: str) -> BackendError:
    """The refusal of a statement that needs a data source whose part of the open transaction is lost:
    running it on a new connection would commit it apart from the transaction's earlier work there."""
    return BackendError(
        data_source,
        f"the open transaction's work on {data_source} was lost ({session.txn.lost[data_source]}), so the "
        f"transaction cannot continue there; ROLLBACK ends it (COMMIT rolls back the rest and reports it)",
        errno=CR_SERVER_LOST,
    )


def note_failure(session: Session, exc: BackendError) -> str:
    """A statement failed with a backend error: drop the broken connections and say, in the client's
    error, when the open transaction lost its part on one of them."""
    before = set(session.txn.lost)
    session.drop_broken()
    new = [name for name in session.txn.lost if name not in before]
    if not new:
        return str(exc)
    if exc.data_source in new:
        session.txn.lost[exc.data_source] = _detail(exc)
    return (f"{exc}; the open transaction's work on {', '.join(new)} is lost with its connection: the "
            f"transaction cannot commit any more (ROLLBACK ends it; COMMIT rolls back the rest and reports it)")


def _drop_lost(session: Session) -> list[str]:
    """Connections found broken since the last statement leave the session; the data sources whose part
    of the transaction was lost that way (not reported to the client yet)."""
    before = set(session.txn.lost)
    session.drop_broken()
    return [name for name in session.txn.lost if name not in before]


def _detail(exc: BaseException) -> str:
    if isinstance(exc, BackendError):
        text = str(exc)
        prefix = f"data source {exc.data_source}: "
        return f"{exc.errno}: {text[len(prefix):] if text.startswith(prefix) else text}"
    if isinstance(exc, TimeoutError):
        return "timed out"
    return f"{type(exc).__name__}: {exc}"


def _names(names: list[str]) -> str:
    return ", ".join(names) or "none"


def reset(session: Session) -> None:
    """The transaction is over without COMMIT or ROLLBACK having run (see `abandon`)."""
    _over(session)


def _over(session: Session, *, unresolved: bool = False) -> None:
    """The transaction ended (well or not) on every data source: reset the session's transaction state.
    `unresolved`: an XA branch may be left prepared (recovery settles it)."""
    txn = session.txn
    txn.begin_sql = None
    txn.joined = []
    txn.next_tx_sets = []
    txn.savepoints = []
    txn.lost = {}
    xa, txn.xa = txn.xa, None
    session.drop_broken()  # the connections that failed just now: closed, never pooled
    if xa is not None:
        session.server.tm.finish(xa, unresolved=unresolved)
    if not txn.autocommit and not session.server.tm.xa:
        # LOCAL under autocommit=0: every held connection is in the next (implicit) transaction already;
        # under XA each one joins with XA START when the next transaction touches it
        for conn in session.backends.values():
            if not conn.status & ServerStatus.AUTOCOMMIT:
                txn.joined.append(conn.name)
    session.update_status(0)


def abandon(session: Session) -> None:
    """The session drops its transaction without ending it (the client left, USE, COM_CHANGE_USER,
    COM_RESET_CONNECTION): connections holding an XA branch are closed, never reset (closing rolls back a
    branch that is not prepared; a prepared one is left to recovery, which looks soon)."""
    xa, session.txn.xa = session.txn.xa, None
    if xa is None:
        return
    for conn in session.backends.values():
        if conn.xa is not None:
            conn.broken = True
    session.server.tm.finish(xa, unresolved=True)
