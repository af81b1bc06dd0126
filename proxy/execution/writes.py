"""Writes and DDL of a routed statement: units run concurrently per data source (sequentially within one),
their affected rows summed (once for a broadcast table); a DML statement outside a transaction under the XA
rule runs in an implicit XA transaction, so it commits everywhere or nowhere.

Split from `executor.py`, which decides how a routed statement runs and answers reads; this is the write
side it hands statements to.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import structlog

from protocol.constants import ServerStatus
from protocol.packets import (
    OKPacket,
)
from proxy.backends.backend import BackendConnection
from proxy.backends.codec import StatementCodec
from proxy.execution import txn, txn_end
from proxy.execution.units import (
    UnitFailed,
    _merged_info,
    _run_unit_to_ok,
)
from routing.plan import ExecutionUnit, RoutedStatement, StatementKind

if TYPE_CHECKING:
    from proxy.execution.context import SessionContext as Session


log = structlog.get_logger("shardproxy.executor")
_DML = (StatementKind.INSERT, StatementKind.UPDATE, StatementKind.DELETE)


async def _write_in_xa(session: Session, routed: RoutedStatement, codec: StatementCodec,
                       conns: dict[str, BackendConnection]) -> None:
    """Under the XA rule, an autocommit INSERT/UPDATE/DELETE with several units runs as one XA transaction
    of its own, so that its parts commit on every data source or on none (under LOCAL each part commits on
    its own, and a failing one leaves the others done). Its OK comes after the commit."""
    state = session.txn
    state.begin_sql = "BEGIN"
    try:
        for name in sorted(conns):
            await txn.join(session, conns[name])
        if state.xa is not None:
            state.xa.written.update(conns)
        answer = await _write_units(session, routed, codec, conns)
    except asyncio.CancelledError:
        txn.abandon(session)
        txn.reset(session)
        raise
    except BaseException:
        failure = await txn_end.end_transaction(session, "ROLLBACK", label="the implicit XA ROLLBACK of the statement")
        if failure is not None:
            log.warning("implicit_xa_rollback_failed", conn=session.id, error=failure.message)
        raise
    failure = await txn_end.end_transaction(session, "COMMIT", label="the implicit XA COMMIT of the statement")
    if failure is not None:
        session.error(failure.errno, failure.message, failure.sqlstate)
        return
    affected, last_id, warnings, info = answer
    note, session.commit_note = session.commit_note, ""
    session.wire.send(OKPacket(affected, last_id, ServerStatus(session.status), min(warnings, 0xFFFF),
                               note.encode() if note else info).encode(session.capabilities))


async def _write(session: Session, routed: RoutedStatement, codec: StatementCodec,
                 conns: dict[str, BackendConnection]) -> None:
    affected, last_id, warnings, info = await _write_units(session, routed, codec, conns)
    session.wire.send(
        OKPacket(affected, last_id, ServerStatus(session.status), min(warnings, 0xFFFF), info).encode(
            session.capabilities
        )
    )


async def _write_units(session: Session, routed: RoutedStatement, codec: StatementCodec,
                       conns: dict[str, BackendConnection]) -> tuple[int, int, int, bytes]:
    """Run a write's units (each data source's in turn, the data sources at once); (affected rows, last
    insert id, warnings, info) for its OK."""
    by_source: dict[str, list[ExecutionUnit]] = {}
    for unit in routed.execution_units:
        by_source.setdefault(unit.data_source, []).append(unit)

    async def run_source(name: str, units: list[ExecutionUnit]) -> list[OKPacket]:
        conn = conns[name]
        return [await _run_unit_to_ok(conn, u, codec) for u in units]

    tasks = [asyncio.create_task(run_source(n, us)) for n, us in by_source.items()]
    results = await asyncio.gather(*tasks, return_exceptions=True)
    failures = [r for r in results if isinstance(r, BaseException)]
    if failures:
        first = failures[0]
        done = [n for n, r in zip(by_source, results, strict=True) if not isinstance(r, BaseException)]
        if done and len(by_source) > 1:
            log.warning("partial_write", conn=session.id, succeeded=done, error=str(first))
        if isinstance(first, UnitFailed):
            raise first
        raise first
    per_source = [r for r in results if not isinstance(r, BaseException)]
    oks = [ok for r in per_source for ok in r]
    # Every data source holds a full copy of a broadcast table: the client changed its rows once, so the
    # count is one copy's (as ShardingSphere does: no accumulation when all tables are broadcast tables).
    counted = per_source[:1] if _only_broadcast_tables(session, routed) else per_source
    affected = sum(ok.affected_rows for r in counted for ok in r)
    warnings = sum(ok.warnings for r in counted for ok in r)
    last_id = 0
    if routed.generated_keys and isinstance(routed.generated_keys[0], int):
        last_id = routed.generated_keys[0]
    else:
        last_id = next((ok.last_insert_id for ok in oks if ok.last_insert_id), 0)
    session.update_status(oks[-1].status if oks else session.status)
    session.row_count = affected
    if last_id:
        session.last_insert_id = last_id
    info = _merged_info([ok.info for r in counted for ok in r])
    return affected, last_id, warnings, info


def _only_broadcast_tables(session: Session, routed: RoutedStatement) -> bool:
    db = session.database
    if db is None or not routed.logic_tables:
        return False
    return all(table in db.rules.broadcast for table in routed.logic_tables)
