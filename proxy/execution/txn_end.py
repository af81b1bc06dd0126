"""Ending a transaction that spans data sources: `end_transaction` sends COMMIT or ROLLBACK to every joined
data source, LOCAL or XA (one phase on one data source, two-phase on several), and leaves the session out
of the transaction whatever fails, with an error that names what each data source did.

Split from `txn.py`, which starts a transaction on each data source it touches (`join`) and keeps track
of lost parts; this is how it ends. `txn_control.py` maps BEGIN / COMMIT / SET ... to these.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from protocol.errors import ServerError
from protocol.packets import ERRPacket, OKPacket
from proxy.backends.xa import XAER_NOTA, LogUnavailable, XATransaction, server_key
from proxy.backends.xalog import Branch
from proxy.execution import diagnostics
from proxy.execution.locks import release_session_locks
from proxy.execution.txn import (
    _LOST,
    ER_ERROR_DURING_COMMIT,
    ER_ERROR_DURING_ROLLBACK,
    _detail,
    _drop_lost,
    _names,
    _over,
)

if TYPE_CHECKING:
    from collections.abc import Mapping

    from proxy.backends.backend import BackendConnection
    from proxy.execution.context import SessionContext as Session


async def end_transaction(session: Session, verb: str, *, label: str | None = None,
                          consequence: str = "") -> ServerError | None:
    """COMMIT or ROLLBACK on every data source the transaction touched; the transaction is over afterwards
    whatever happens, and the error (None when all went well) says plainly which data source did what.

    * A data source whose part was lost before the COMMIT (its connection died or was closed during the
      transaction: the server rolled that part back) makes an atomic commit impossible, and the proxy knows
      it before committing anything: the others are rolled back, and the COMMIT fails saying nothing was
      committed.
    * Otherwise COMMIT goes to every data source, as ShardingSphere's LOCAL transactions do (all sent at once,
      the answers read in turn: `_fan`), and a failure on one does not stop the others: each data source's
      outcome is independent of the order the data sources joined in. The ones that failed are named with
      what happened (an ERR; or a lost connection or a timeout, after which whether that data source
      committed is unknown).
    * ROLLBACK goes to every data source; a data source whose loss the client already heard of (the failing
      statement said so) needs no second error: its part was rolled back by its server.
    * A connection whose outcome is unknown or bad is closed, never pooled; the session's transaction state is
      reset (autocommit mode as before; under autocommit=0 the next transaction starts on every connection).
    """
    txn = session.txn
    label = label or verb
    session.commit_note = ""
    session.end_warnings = 0
    if txn.xa is not None:
        return await _xa_end(session, txn.xa, verb, label, consequence)
    fresh = _drop_lost(session)
    lost = dict(txn.lost)
    action = "ROLLBACK" if verb == "COMMIT" and lost else verb
    session.ending_transaction = True  # a client leaving now does not stop the fan-out half-way
    try:
        # The statement is sent to every data source at once, then the answers are read in turn (one
        # round trip, no task per data source); as each data source's outcome does not depend on the others',
        # this is what sending it to one after the other does, without the wait in between
        names = list(txn.joined)
        work = {name: conn for name in names
                if (conn := session.backends.get(name)) is not None and not conn.broken}
        results = dict(zip(work, await _fan([(conn, [action]) for conn in work.values()]), strict=True))
        session.end_warnings = end_warnings(results)
        warned_by(session, results)
        ended, failed = local_outcomes(action, names, work, results)
        if txn.upsert_locks:
            await release_session_locks(session)
    finally:
        session.ending_transaction = False
    return local_ended(session, verb, action, label, consequence, ended, failed, lost, fresh)


def end_warnings(results: Mapping[str, list[OKPacket | ERRPacket] | Exception]) -> int:
    """The warnings of a COMMIT / ROLLBACK's OK: one server's (ROLLBACK's 1196 "Some non-transactional changed
    tables couldn't be rolled back" once, however many data sources say it)."""
    return max((ok.warnings for result in results.values() if isinstance(result, list)
                for ok in result if isinstance(ok, OKPacket)), default=0)


def warned_by(session: Session, results: Mapping[str, list[OKPacket | ERRPacket] | Exception]) -> None:
    """A COMMIT / ROLLBACK that warned: SHOW WARNINGS reads the data source whose OK counted them (one server's,
    as `end_warnings`); one that did not leaves the session's diagnostics as they were, as MariaDB does."""
    counts = {name: max((ok.warnings for ok in result if isinstance(ok, OKPacket)), default=0)
              for name, result in results.items() if isinstance(result, list)}
    most = max(counts.values(), default=0)
    if most:
        diagnostics.ran_on(session, [next(name for name, n in counts.items() if n == most)])


def local_outcomes(action: str, names: list[str], work: dict[str, BackendConnection],
                   results: dict[str, list[OKPacket | ERRPacket] | Exception]
                   ) -> tuple[list[str], dict[str, tuple[str, bool]]]:
    """The data sources where `action` (COMMIT / ROLLBACK) went well, and what went wrong on the others (the
    connection of each is marked broken: its state is unknown or bad, it is closed, never pooled). Also the fast
    path's (proxy.execution.fastcommit), from the answers it read in the socket callbacks."""
    ended: list[str] = []
    failed: dict[str, tuple[str, bool]] = {}
    for name in names:
        result = results.get(name)
        if result is None:  # not after _drop_lost; kept so that nothing goes unreported
            failed[name] = (_LOST, False)
            continue
        outcome = _outcome([action], result)
        if outcome is None:
            ended.append(name)
        else:
            work[name].broken = True
            failed[name] = outcome
    return ended, failed


def local_ended(session: Session, verb: str, action: str, label: str, consequence: str, ended: list[str],
                failed: dict[str, tuple[str, bool]], lost: dict[str, str], fresh: list[str]) -> ServerError | None:
    """A LOCAL transaction's end, once every data source answered (`local_outcomes`): the session is out of the
    transaction, and the error that says what each data source did (None when all went well)."""
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


# --- one round trip over several connections (LOCAL and XA); XA: COMMIT and ROLLBACK ------------------------


Outcome = tuple[str, bool] | None  # None: done; else what went wrong, and whether the server answered it


async def _fan(work: list[tuple[BackendConnection, list[str]]]) -> list[list[OKPacket | ERRPacket] | Exception]:
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
    """Statements that end (part of) XA branches, one round trip for all of them (see `_fan`)."""
    results = await _fan(work)
    return [_outcome(statements, result) for (_c, statements), result in zip(work, results, strict=True)]


async def _xa_aborts(work: list[tuple[BackendConnection, str, bool]]) -> list[str | None]:
    """Roll branches back (connection, xid, prepared?): XA END (when still active; refused harmlessly when
    not) and XA ROLLBACK, all in one round trip. Per branch: None when rolled back; else what went wrong,
    and the connection is broken (closing it rolls back a branch that is not prepared)."""
    plan = [(conn, [f"XA ROLLBACK {xid}"] if prepared else [f"XA END {xid}", f"XA ROLLBACK {xid}"])
            for conn, xid, prepared in work]
    out: list[str | None] = []
    for (conn, _s), result in zip(plan, await _fan(plan), strict=True):
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
