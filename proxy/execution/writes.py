"""Writes and DDL of a routed statement: units run concurrently per data source (sequentially within one),
their affected rows summed (once for a broadcast table); a DML statement with several units is applied on
every node or on none (proxy.execution.atomic).

Split from `executor.py`, which decides how a routed statement runs and answers reads; this is the write
side it hands statements to.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from protocol.constants import ServerStatus
from protocol.packets import OKPacket
from proxy.backends.backend import BackendConnection
from proxy.backends.codec import StatementCodec
from proxy.execution import lastid
from proxy.execution.atomic import parts_of, run_parts
from proxy.execution.units import _merged_info, insert_info
from routing.parse import NO_AUTO_VALUE_ON_ZERO
from routing.plan import RoutedStatement, StatementKind

if TYPE_CHECKING:
    from proxy.execution.context import SessionContext as Session


_DML = (StatementKind.INSERT, StatementKind.UPDATE, StatementKind.DELETE)


async def _write(
    session: Session, routed: RoutedStatement, codec: StatementCodec, conns: dict[str, BackendConnection]
) -> None:
    affected, last_id, warnings, info = await _write_units(session, routed, codec, conns)
    note, session.commit_note = session.commit_note, ""
    session.wire.send(
        OKPacket(
            affected, last_id, ServerStatus(session.status), min(warnings, 0xFFFF), note.encode() if note else info
        ).encode(session.capabilities)
    )


async def _write_units(
    session: Session, routed: RoutedStatement, codec: StatementCodec, conns: dict[str, BackendConnection]
) -> tuple[int, int, int, bytes]:
    """Run a write's units (each data source's in turn, the data sources at once; a DML statement all or
    nothing, proxy.execution.atomic); (affected rows, last insert id, warnings, info) for its OK."""
    parts = parts_of(routed.execution_units)
    per_source = await run_parts(session, parts, conns, codec, atomic=routed.kind in _DML)
    oks = [ok for r in per_source for ok in r]
    answers = [
        (unit, ok.last_insert_id)
        for units, r in zip(parts.values(), per_source, strict=True)
        for unit, ok in zip(units, r, strict=True)
    ]
    # Every data source holds a full copy of a broadcast table: the client changed its rows once, so the
    # count is one copy's (as ShardingSphere does: no accumulation when all tables are broadcast tables).
    counted = per_source[:1] if _only_broadcast_tables(session, routed) else per_source
    affected = sum(ok.affected_rows for r in counted for ok in r)
    warnings = sum(ok.warnings for r in counted for ok in r)
    zero_is_value = bool(session.txn.text_mode & NO_AUTO_VALUE_ON_ZERO)
    last_id, session_id = lastid.of_units(session.database, routed, answers, zero_is_value)
    session.update_status(oks[-1].status if oks else session.status)
    session.row_count = affected
    if session_id is not None:
        session.last_insert_id = session_id
    if routed.kind is StatementKind.INSERT and routed.execution_units:
        info = insert_info(routed.insert_mode, [ok for r in counted for ok in r])
    else:
        info = _merged_info([ok.info for r in counted for ok in r])
    return affected, last_id, warnings, info


def _only_broadcast_tables(session: Session, routed: RoutedStatement) -> bool:
    db = session.database
    if db is None or not routed.logic_tables:
        return False
    return all(table in db.rules.broadcast for table in routed.logic_tables)
