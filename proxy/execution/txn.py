"""Session-wide statements on a sharded logical database: transactions and SET.

On one data source a client's BEGIN, COMMIT and SET simply go to its connection. Across data sources
the proxy must fan them out: a transaction starts on each data source the first time the transaction
touches it (LOCAL transactions, as ShardingSphere's default), COMMIT/ROLLBACK/SAVEPOINT go to every
data source that joined, and SET statements reach every connection the session holds now or borrows later.

Under the XA transaction rule (proxy.backends.xa) the same fan-out runs XA branches instead: each data source joins
with `XA START <xid>`, COMMIT is one phase on one data source and two-phase on several (`_xa_end`), and the
rows of a transaction are committed everywhere or nowhere.

A transaction always ends in a known state, whatever fails: COMMIT and ROLLBACK (and the implicit commits
of BEGIN, SET autocommit=1 and DDL) go to every joined data source even when one fails, a connection
whose outcome is unknown is closed (never pooled), the session leaves the transaction, and the error
names what each data source did (`end_transaction`). A data source whose part of the open transaction
is lost with its connection (`connection_lost`) cannot take part again in that transaction, and its
COMMIT rolls back the rest instead of committing a part of it.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from protocol import text
from protocol.constants import ServerStatus
from protocol.errors import ServerError
from protocol.packets import ERRPacket, OKPacket
from proxy.backends.backend import BackendError
from proxy.backends.xa import XAER_NOTA, LogUnavailable, XATransaction, bqual_for, server_key
from proxy.backends.xalog import Branch
from proxy.execution.locks import release_session_locks

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
            await session._must(conn, f"SAVEPOINT {name}")
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
    statements.extend(f"SAVEPOINT {name}" for name in txn.savepoints)
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


async def _finish(conn: BackendConnection, sql: str) -> tuple[str, bool] | None:
    """Run a statement that ends (part of) the transaction on one connection: None when it succeeded;
    else what went wrong and whether the server answered (an ERR) rather than leaving the outcome unknown.
    A connection that failed either way is marked broken: its state is unknown, it is closed, never pooled
    (and closing it rolls back whatever it still had open)."""
    try:
        res = await conn.execute(sql)
    except Exception as exc:  # lost, timed out, a reply that makes no sense
        conn.broken = True
        return _detail(exc), False
    if isinstance(res, ERRPacket):
        conn.broken = True
        return f"{res.errno}: {res.message}", True
    return None


def _names(names: list[str]) -> str:
    return ", ".join(names) or "none"


async def end_transaction(session: Session, verb: str, *, label: str | None = None,
                          consequence: str = "") -> ServerError | None:
    """COMMIT or ROLLBACK on every data source the transaction touched; the transaction is over afterwards
    whatever happens, and the error (None when all went well) says plainly which data source did what.

    * A data source whose part was lost before the COMMIT (its connection died or was closed during the
      transaction: the server rolled that part back) makes an atomic commit impossible, and the proxy knows
      it before committing anything: the others are rolled back, and the COMMIT fails saying nothing was
      committed.
    * Otherwise COMMIT goes to every data source in turn, as ShardingSphere's LOCAL transactions do, and a
      failure on one does not stop the others: each data source's outcome is then independent of the order
      the data sources joined in. The ones that failed are named with what happened (an ERR; or a lost
      connection or a timeout, after which whether that data source committed is unknown).
    * ROLLBACK goes to every data source; a data source whose loss the client already heard of (the failing
      statement said so) needs no second error: its part was rolled back by its server.
    * A connection whose outcome is unknown or bad is closed, never pooled; the session's transaction state is
      reset (autocommit mode as before; under autocommit=0 the next transaction starts on every connection).
    """
    txn = session.txn
    label = label or verb
    session.commit_note = ""
    if txn.xa is not None:
        return await _xa_end(session, txn.xa, verb, label, consequence)
    fresh = _drop_lost(session)
    lost = dict(txn.lost)
    action = "ROLLBACK" if verb == "COMMIT" and lost else verb
    ended: list[str] = []
    failed: dict[str, tuple[str, bool]] = {}
    session.ending_transaction = True  # a client leaving now does not stop the fan-out half-way
    try:
        for name in list(txn.joined):
            conn = session.backends.get(name)
            if conn is None or conn.broken:  # not after _drop_lost; kept so that nothing goes unreported
                failed[name] = (_LOST, False)
                continue
            outcome = await _finish(conn, action)
            if outcome is None:
                ended.append(name)
            else:
                failed[name] = outcome
        if txn.upsert_locks:
            await release_session_locks(session)
    finally:
        session.ending_transaction = False
    _over(session)
    if failed or lost:
        session.log.warning("transaction_end_failed", verb=verb, action=action, ended=ended,
                            failed={n: d for n, (d, _) in failed.items()}, lost=lost)
    if verb == "COMMIT" and lost:
        message = (f"{label} failed: the transaction's work on "
                   + ", ".join(f"{n} ({lost[n]})" for n in lost)
                   + f" was lost with its connection, so nothing was committed: rolled back on {_names(ended)}")
        if failed:
            message += ("; ROLLBACK failed on " + ", ".join(f"{n} ({d})" for n, (d, _) in failed.items())
                        + ", whose connection is closed (which rolls it back)")
        errno = ER_ERROR_DURING_COMMIT
    elif verb == "COMMIT":
        if not failed:
            return None
        message = (f"{label} failed on "
                   + ", ".join(f"{n} ({d}{'' if answered else f'; whether {n} committed is unknown'})"
                               for n, (d, answered) in failed.items())
                   + f"; committed on {_names(ended)}")
        errno = ER_ERROR_DURING_COMMIT
    else:
        if not failed and not fresh:
            return None
        problems = {n: lost[n] for n in fresh} | {n: d for n, (d, _) in failed.items()}
        message = (f"{label} failed on " + ", ".join(f"{n} ({d})" for n, d in problems.items())
                   + f"; rolled back on {_names(ended)}; nothing was committed (a failed data source's "
                   f"connection is closed, which rolls back its work)")
        errno = ER_ERROR_DURING_ROLLBACK
    return ServerError(message + consequence + "; the transaction is over", errno=errno, sqlstate="HY000")


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


# --- XA: COMMIT and ROLLBACK ---------------------------------------------------------------------------


Outcome = tuple[str, bool] | None  # None: done; else what went wrong, and whether the server answered it


async def _xa_fan(work: list[tuple[BackendConnection, list[str]]]) -> list[list[OKPacket | ERRPacket] | Exception]:
    """Each connection's statements in one round trip, all connections at once: everything is sent first,
    then the answers are read in turn (those of the others wait in their buffers meanwhile), which costs
    no task per branch. A connection that fails is marked broken; its entry is the exception."""
    results: list[list[OKPacket | ERRPacket] | Exception | None] = []
    for conn, statements in work:
        try:
            conn.send_pipeline(statements)
            results.append(None)
        except Exception as exc:
            conn.broken = True
            results.append(exc)
    for i, (conn, statements) in enumerate(work):
        if results[i] is None:
            try:
                results[i] = await conn.read_pipeline(statements)
            except Exception as exc:
                conn.broken = True
                results[i] = exc
    return [r for r in results if r is not None]  # (none is left None)


def _outcome(statements: list[str], result: list[OKPacket | ERRPacket] | Exception) -> Outcome:
    """None when every statement succeeded; else the first failure and whether the server answered it
    (False: the connection was lost)."""
    if isinstance(result, Exception):
        return _detail(result), False
    for sql, answer in zip(statements, result, strict=True):
        if isinstance(answer, ERRPacket):
            verb = " ".join(sql.split()[:2]) if len(statements) > 1 else ""
            return f"{verb + ': ' if verb else ''}{answer.errno}: {answer.message}", True
    return None


async def _xa_steps(work: list[tuple[BackendConnection, list[str]]]) -> list[Outcome]:
    """Statements that end (part of) XA branches, one round trip for all of them (see `_xa_fan`)."""
    results = await _xa_fan(work)
    return [_outcome(statements, result) for (_c, statements), result in zip(work, results, strict=True)]


async def _xa_aborts(work: list[tuple[BackendConnection, str, bool]]) -> list[str | None]:
    """Roll branches back (connection, xid, prepared?): XA END (when still active; refused harmlessly when
    not) and XA ROLLBACK, all in one round trip. Per branch: None when rolled back; else what went wrong,
    and the connection is broken (closing it rolls back a branch that is not prepared)."""
    plan = [(conn, [f"XA ROLLBACK {xid}"] if prepared else [f"XA END {xid}", f"XA ROLLBACK {xid}"])
            for conn, xid, prepared in work]
    out: list[str | None] = []
    for (conn, _s), result in zip(plan, await _xa_fan(plan), strict=True):
        if isinstance(result, Exception):
            out.append(_detail(result))
            continue
        last = result[-1]
        if isinstance(last, ERRPacket) and last.errno != XAER_NOTA:  # NOTA: no such branch (any more)
            conn.broken = True
            out.append(f"{last.errno}: {last.message}")
            continue
        conn.xa = None
        out.append(None)
    return out


async def _xa_end(session: Session, xa: XATransaction, verb: str, label: str, consequence: str
                  ) -> ServerError | None:
    """COMMIT or ROLLBACK of an XA transaction; over afterwards whatever happens (see `end_transaction` for
    what the LOCAL one does and how errors read). COMMIT:

    * nothing joined: nothing to do; one data source: XA END + XA COMMIT ONE PHASE (one round trip);
    * several: XA END + XA PREPARE on every branch (at once, one round trip each). When one fails, nothing
      commits: every branch is rolled back (XA ROLLBACK; a branch whose connection was lost is rolled back
      by its server, or by recovery if its PREPARE went through), and the error says so;
    * all prepared: the decision is written to the XA log and fsync'd; when that fails, all roll back;
    * then XA COMMIT on every branch. The transaction is committed from the moment the decision is on
      disk: a branch whose XA COMMIT fails (a lost connection, a server down) is committed by recovery,
      and COMMIT answers OK with a note saying so (the OK packet's info, and the log).

    A data source whose part was lost before the COMMIT (see `connection_lost`) makes the COMMIT roll back
    every branch, as in LOCAL. ROLLBACK rolls back every branch; a failure closes that connection."""
    txn = session.txn
    fresh = _drop_lost(session)
    lost = dict(txn.lost)
    conns = {name: conn for name in txn.joined if (conn := session.backends.get(name)) is not None}
    ended: list[str] = []
    failed: dict[str, tuple[str, bool]] = {}
    unresolved = False
    note = ""
    message: str | None = None
    errno = ER_ERROR_DURING_COMMIT
    session.ending_transaction = True  # a client leaving now does not stop the fan-out half-way
    try:
        if verb == "COMMIT" and not lost:
            writers = [n for n in conns if n in xa.written]
            readers = [n for n in conns if n not in xa.written]
            # branches that only read commit in one phase first: whatever becomes of them, no row changes
            outcomes = await _xa_steps([(conns[n], [f"XA END {xa.xid(n)}", f"XA COMMIT {xa.xid(n)} ONE PHASE"])
                                        for n in readers])
            for name, outcome in zip(readers, outcomes, strict=True):
                if outcome is None:
                    conns[name].xa = None
                    ended.append(name)
                else:
                    session.log.info("xa_read_only_branch_end_failed", data_source=name, error=outcome[0])
            if len(writers) == 1:
                name = writers[0]
                conn = conns[name]
                xid = xa.xid(name)
                [outcome] = await _xa_steps([(conn, [f"XA END {xid}", f"XA COMMIT {xid} ONE PHASE"])])
                if outcome is None:
                    conn.xa = None
                    ended.append(name)
                elif outcome[1]:  # refused (a deadlock made it rollback-only, ...): it did not commit
                    [problem] = await _xa_aborts([(conn, xid, False)])
                    message = (f"{label} failed on {name} ({outcome[0]}): nothing was committed"
                               + (f"; XA ROLLBACK failed too ({problem}), its connection is closed, which rolls "
                                  f"it back" if problem else f": rolled back on {name}"))
                else:
                    message = (f"{label} failed on {name} ({outcome[0]}; whether {name} committed is unknown); "
                               f"committed on none")
            elif writers:
                message, note, unresolved = await _xa_two_phase(session, xa, {n: conns[n] for n in writers}, label)
        else:
            names = list(conns)
            problems = await _xa_aborts([(conns[n], xa.xid(n), False) for n in names])
            for name, problem in zip(names, problems, strict=True):
                if problem is None:
                    ended.append(name)
                else:
                    failed[name] = (problem, False)
            if verb == "COMMIT":
                message = (f"{label} failed: the transaction's work on "
                           + ", ".join(f"{n} ({lost[n]})" for n in lost)
                           + f" was lost with its connection, so nothing was committed: rolled back on {_names(ended)}")
                if failed:
                    message += ("; XA ROLLBACK failed on " + ", ".join(f"{n} ({d})" for n, (d, _) in failed.items())
                                + ", whose connection is closed (which rolls it back)")
            elif failed or fresh:
                problems_by_name = {n: lost[n] for n in fresh} | {n: d for n, (d, _) in failed.items()}
                message = (f"{label} failed on " + ", ".join(f"{n} ({d})" for n, d in problems_by_name.items())
                           + f"; rolled back on {_names(ended)}; nothing was committed (a failed data source's "
                           f"connection is closed, which rolls back its work)")
                errno = ER_ERROR_DURING_ROLLBACK
    finally:
        session.ending_transaction = False
        for conn in conns.values():
            if conn.xa is not None:  # the branch did not end well here: the connection goes
                conn.broken = True
        _over(session, unresolved=unresolved or message is not None)
    if message is not None or note:
        session.log.warning("xa_transaction_end", gtrid=xa.gtrid, verb=verb, problem=message, note=note)
    session.commit_note = note
    if message is None:
        return None
    return ServerError(message + consequence + "; the transaction is over", errno=errno, sqlstate="HY000")


async def _xa_two_phase(session: Session, xa: XATransaction, conns: dict[str, BackendConnection], label: str
                        ) -> tuple[str | None, str, bool]:
    """Two-phase commit over several branches: (the error message or None, a note for the OK, whether a
    branch may be left prepared for recovery)."""
    names = list(conns)
    xids = {n: xa.xid(n) for n in names}
    phase1 = await _xa_steps([(conns[n], [f"XA END {xids[n]}", f"XA PREPARE {xids[n]}"]) for n in names])
    prepared = [n for n, r in zip(names, phase1, strict=True) if r is None]
    refused = {n: r for n, r in zip(names, phase1, strict=True) if r is not None}
    why = ""
    if not refused:
        branches = [Branch(n, server_key(conns[n].source), xa.branches[n]) for n in names]
        try:
            await session.server.tm.decide_commit(xa, branches)
        except LogUnavailable as exc:
            why = f"the commit decision could not be written to the XA log ({exc})"
        else:
            phase2 = await _xa_steps([(conns[n], [f"XA COMMIT {xids[n]}"]) for n in names])
            late = {n: r for n, r in zip(names, phase2, strict=True) if r is not None}
            for n in names:
                if n not in late:
                    conns[n].xa = None
            if not late:
                session.server.tm.committed(xa)
                return None, "", False
            note = ("committed; XA COMMIT did not complete on " + ", ".join(f"{n} ({d})" for n, (d, _) in late.items())
                    + ": the commit decision is logged and the proxy's recovery commits "
                    + ("that branch" if len(late) == 1 else "those branches")
                    + " (SHOW TRANSACTION IN DOUBT)")
            return None, note, True
    else:
        why = ", ".join(f"{n} could not prepare its branch ({d}{'' if answered else '; its connection was lost'})"
                        for n, (d, answered) in refused.items())
    # before the decision: every branch rolls back
    targets = [n for n in names if not (n in refused and not refused[n][1])]  # the lost ones are closed
    problems = await _xa_aborts([(conns[n], xids[n], n in prepared) for n in targets])
    rolled = [n for n, p in zip(targets, problems, strict=True) if p is None]
    failed = {n: p for n, p in zip(targets, problems, strict=True) if p is not None}
    lost_now = [n for n in names if n in refused and not refused[n][1]]
    message = f"{label} failed: {why}, so nothing was committed: rolled back on {_names(rolled)}"
    if failed:
        message += "; XA ROLLBACK failed on " + ", ".join(f"{n} ({d})" for n, d in failed.items())
    left = lost_now + [n for n in failed if n in prepared]
    if left:
        message += (f"; the branch on {', '.join(left)} is rolled back by its server when its connection closes, "
                    f"or by the proxy's recovery if it was prepared")
    return message, "", bool(left) or bool(failed)


