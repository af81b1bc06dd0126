"""One statement, all or nothing: a write whose parts run on several data nodes is applied on every node or on
none, as one server applies a statement (InnoDB takes back a failed statement's rows).

* autocommit, LOCAL: the parts run inside a transaction of the statement's own. BEGIN goes in the same write as
  each data source's first part (no round trip of its own); COMMIT goes everywhere once every part succeeded;
  when one failed, ROLLBACK goes everywhere before the client hears the failure.
* autocommit, XA: an XA transaction of the statement's own (proxy.execution.txn joins each branch).
* inside the client's transaction (BEGIN, autocommit=0; LOCAL or XA): a savepoint on every data source the
  statement writes, in the same write as its first part there, rolled back on every one of them when a part
  fails. The transaction goes on, as on one server.

A data source whose part cannot be taken back (its connection lost, or the rollback refused) is closed, which
rolls its part back; inside a transaction that data source's work is then lost, and the transaction can no
longer commit (proxy.execution.txn says so). A single unit needs none of this: its server's own statement
rollback covers it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from typing import TYPE_CHECKING

from protocol.packets import ERRPacket, OKPacket
from proxy.backends.backend import BackendConnection, BackendError
from proxy.backends.codec import StatementCodec
from proxy.execution import txn, txn_end
from proxy.execution.units import UnitFailed, _run_unit_to_ok
from routing.plan import ExecutionUnit

if TYPE_CHECKING:
    from proxy.execution.context import SessionContext as Session

SAVEPOINT = "shardproxy_statement"
NOTHING_APPLIED = "; nothing of the statement was applied"  # said after a failure the statement was taken back from
_BEGIN = "BEGIN"
_SET_SAVEPOINT = f"SAVEPOINT {SAVEPOINT}"

Parts = Mapping[str, Sequence[ExecutionUnit]]  # data source -> its units, run in turn on its connection

# set while a statement runs in steps that its caller takes back whole (a stepwise write, an upsert in its own
# transaction): the steps' parts need no transaction or savepoint of their own
_HELD: ContextVar[bool] = ContextVar("shardproxy_statement_held", default=False)


@contextlib.contextmanager
def held_whole() -> Iterator[None]:
    """The statements run inside (in this task) are parts of one statement that the caller applies whole or
    takes back whole itself."""
    token = _HELD.set(True)
    try:
        yield
    finally:
        _HELD.reset(token)


def parts_of(units: Sequence[ExecutionUnit]) -> dict[str, list[ExecutionUnit]]:
    by_source: dict[str, list[ExecutionUnit]] = {}
    for unit in units:
        by_source.setdefault(unit.data_source, []).append(unit)
    return by_source


async def run_parts(session: Session, parts: Parts, conns: Mapping[str, BackendConnection], codec: StatementCodec,
                    *, atomic: bool = True) -> list[list[OKPacket]]:
    """Every data source's units in turn, the data sources at once; each data source's OKs, in `parts`' order.
    `atomic` (a DML statement): with more than one unit, all of them take effect or none (module docstring);
    raises the first failure, after every part was taken back."""
    if not atomic or _HELD.get() or sum(len(units) for units in parts.values()) <= 1:
        return await _gather(parts, conns, codec, None, None)
    if session.txn.active:
        return await _in_savepoint(session, parts, conns, codec)
    return await _in_own_transaction(session, parts, conns, codec)


async def _gather(parts: Parts, conns: Mapping[str, BackendConnection], codec: StatementCodec, prefix: str | None,
                  began: Callable[[BackendConnection], None] | None) -> list[list[OKPacket]]:
    """`prefix` goes with each data source's first unit (in the same write); `began` hears of each connection on
    which it succeeded. Every part has ended (succeeded or failed) when this returns or raises the first failure."""

    async def run_source(name: str, units: Sequence[ExecutionUnit]) -> list[OKPacket]:
        conn = conns[name]
        out = []
        for i, unit in enumerate(units):
            first = (prefix,) if prefix is not None and i == 0 else ()
            out.append(await _run_unit_to_ok(conn, unit, codec, first, began))
        return out

    if len(parts) == 1:
        name, units = next(iter(parts.items()))
        return [await run_source(name, units)]
    tasks = [asyncio.ensure_future(run_source(n, us)) for n, us in parts.items()]
    try:
        results = await asyncio.gather(*tasks, return_exceptions=True)
    except asyncio.CancelledError:
        for task in tasks:
            task.cancel()
        raise
    for result in results:
        if isinstance(result, BaseException):
            raise result
    return [r for r in results if not isinstance(r, BaseException)]


async def _in_own_transaction(session: Session, parts: Parts, conns: Mapping[str, BackendConnection],
                              codec: StatementCodec) -> list[list[OKPacket]]:
    """An autocommit statement's parts in a transaction of its own, committed once every part succeeded. LOCAL:
    BEGIN rides with each data source's first part. XA: each branch starts (txn.join: XA START) before the parts,
    and the commit is two-phase over several data sources."""
    state = session.txn
    if state.table_locks and not session.server.tm.xa:
        return await _under_table_locks(session, parts, conns, codec)
    state.begin_sql = _BEGIN
    state.joined = []
    xa = "XA " if session.server.tm.xa else ""
    try:
        if xa:
            for name in sorted(conns):
                await txn.join(session, conns[name])
            if state.xa is not None:
                state.xa.written.update(conns)
            results = await _gather(parts, conns, codec, None, None)
        else:
            results = await _gather(parts, conns, codec, _BEGIN, lambda conn: state.joined.append(conn.name))
    except asyncio.CancelledError:
        # the client went away (or the statement was cancelled) mid-statement: the connections that began are
        # closed, which rolls their parts back (an XA branch: txn.abandon), and none of them is reused
        if xa:
            txn.abandon(session)
        for name in state.joined:
            if (conn := conns.get(name)) is not None:
                conn.broken = True
        txn.reset(session)
        raise
    except Exception as exc:
        failure = await txn_end.end_transaction(session, "ROLLBACK",
                                                label=f"the implicit {xa}ROLLBACK of the statement")
        if failure is not None:  # a connection that failed is closed: its server rolls its part back
            session.log.warning("statement_rollback_failed", error=failure.message)
        raise said(exc, NOTHING_APPLIED + ": its parts were rolled back on every data source") from None
    failure = await txn_end.end_transaction(session, "COMMIT", label=f"the implicit {xa}COMMIT of the statement")
    if failure is not None:
        raise failure
    return results


async def _under_table_locks(session: Session, parts: Parts, conns: Mapping[str, BackendConnection],
                             codec: StatementCodec) -> list[list[OKPacket]]:
    """An autocommit statement's parts while the session holds LOCK TABLES: BEGIN would release the locks
    (MariaDB's implicit UNLOCK TABLES), SET autocommit=0 does not, so the statement's transaction is opened that way
    (on each data source with its first part), committed or rolled back everywhere, and autocommit set back."""
    state = session.txn
    state.joined = []
    try:
        results = await _gather(parts, conns, codec, "SET autocommit=0", lambda conn: state.joined.append(conn.name))
    except asyncio.CancelledError:
        for name in state.joined:
            if (conn := conns.get(name)) is not None:
                conn.broken = True
        state.joined = []
        raise
    except Exception as exc:
        began = [conns[n] for n in state.joined]
        await _end_under_locks(session, began, "ROLLBACK")
        raise said(exc, NOTHING_APPLIED + ": its parts were rolled back on every data source") from None
    failed = await _end_under_locks(session, [conns[n] for n in state.joined], "COMMIT")
    if failed:
        raise BackendError(failed[0], f"the implicit COMMIT of the statement failed on {', '.join(failed)} (its "
                           "connection is closed: whether its part committed is unknown)", errno=1180)
    return results


async def _end_under_locks(session: Session, began: Sequence[BackendConnection], verb: str) -> list[str]:
    """COMMIT or ROLLBACK, then autocommit back on, on each connection that began; the data sources where that
    failed (their connections closed)."""
    session.txn.joined = []
    work = [(conn, [verb, "SET autocommit=1"]) for conn in began if not conn.broken]
    failed = [conn.name for conn in began if conn.broken]
    for (conn, _s), result in zip(work, await txn_end._fan(work), strict=True):
        if isinstance(result, Exception) or any(isinstance(r, ERRPacket) for r in result):
            conn.broken = True
            failed.append(conn.name)
    session.drop_broken()
    return failed


async def _in_savepoint(session: Session, parts: Parts, conns: Mapping[str, BackendConnection],
                        codec: StatementCodec) -> list[list[OKPacket]]:
    marked: list[BackendConnection] = []
    try:
        return await _gather(parts, conns, codec, _SET_SAVEPOINT, marked.append)
    except asyncio.CancelledError:
        raise  # the session is ending: its transaction is abandoned with it
    except Exception as exc:
        raise said(exc, taken_back(await rollback_to_savepoint(session, marked))) from None


def taken_back(lost: Sequence[str]) -> str:
    """What became of a statement taken back to its savepoint inside the client's transaction (`lost`: the data
    sources where that failed), said after its first failure."""
    if not lost:
        return NOTHING_APPLIED + " (rolled back to its savepoint on every data source); the transaction goes on"
    return (f"; taking the statement back failed on {', '.join(lost)}, whose connection is closed: the open "
            "transaction's work there is lost, and the transaction cannot commit any more (ROLLBACK ends it; COMMIT "
            "rolls back the rest and reports it)")


async def rollback_to_savepoint(session: Session, conns: Sequence[BackendConnection], name: str = SAVEPOINT
                                ) -> list[str]:
    """ROLLBACK TO savepoint `name` on each connection that set it, all at once; the data sources where that failed
    (their connections closed: their part of the transaction is lost, and recorded so)."""
    rollback = f"ROLLBACK TO SAVEPOINT {name}"
    work = [(conn, [rollback]) for conn in conns if not conn.broken]
    failed = [conn.name for conn in conns if conn.broken]
    for (conn, _s), result in zip(work, await txn_end._fan(work), strict=True):
        if isinstance(result, Exception) or isinstance(result[0], ERRPacket):
            conn.broken = True
            failed.append(conn.name)
    if failed:
        txn._drop_lost(session)
    return failed


def said(exc: BaseException, note: str) -> BaseException:
    """The first failure, with what became of the statement added to its message (a unit's ERR, a lost
    connection; anything else, a refusal or a bug, is left as it is)."""
    if isinstance(exc, UnitFailed):
        exc.note = note
    elif isinstance(exc, BackendError) and exc.args:
        exc.args = (f"{exc.args[0]}{note}",)
    return exc


__all__ = ["NOTHING_APPLIED", "SAVEPOINT", "held_whole", "parts_of", "rollback_to_savepoint", "run_parts", "said",
           "taken_back"]
