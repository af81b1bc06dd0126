"""EXPLAIN of a statement, and XA, on sharded databases.

``EXPLAIN [EXTENDED | PARTITIONS | FORMAT=...] <statement>`` (and ``DESCRIBE`` / ``DESC`` of a statement,
MariaDB's ``ANALYZE [FORMAT=JSON] SELECT ...``) is routed like the statement it explains: the kernel routes
the statement, and each execution unit's actual SQL is explained on its data source.

* one unit: the backend's answer is relayed as it is (its plan names the actual tables, ``t_order_1``:
  the plan is that table's);
* several units: every unit's plan rows, unit after unit, with the backend's columns and one more at the
  end, ``data_source``, naming where the unit runs (the actual table is in the plan's own ``table``
  column, or in its JSON).

ShardingSphere 5.5.2 explains one data node of the table (its unicast route), whatever the WHERE clause
says; the plans here are those of the statements that would really run.

``ANALYZE`` runs the statement: only a read may be analyzed this way (``ANALYZE UPDATE`` is refused);
``EXPLAIN ANALYZE`` (MySQL 8) likewise. ``EXPLAIN FOR CONNECTION`` names a backend thread, not a proxy
session: refused.

XA statements are refused: sent as they are they would run on one data source (the first), while the
proxy's transaction spans several; the proxy runs LOCAL transactions only.

The statement text is read and the explained route built by proxy.execution.explain_text, for the decision
(proxy.execution.decide); this module runs the decided `Explained` plan.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from protocol.constants import ColumnType
from protocol.packets import ColumnDefinition41, ERRPacket, OKPacket
from protocol.results import ResultEnd, ResultHeader
from proxy.backends.backend import BackendConnection
from proxy.backends.codec import TEXT, StatementCodec, StatementFailed
from proxy.execution.errors import answer_error
from proxy.execution.executor import execute_plan
from proxy.execution.explain_text import split_explain, xa_refusal
from proxy.execution.plans import Explained
from proxy.execution.units import UnitFailed
from routing.plan import ExecutionUnit

if TYPE_CHECKING:
    from proxy.backends.runtime import LogicalDatabase
    from proxy.execution.context import SessionContext as Session

DATA_SOURCE_COLUMN = ColumnDefinition41("data_source", ColumnType.VAR_STRING, column_length=256)


async def execute_explain(
    session: Session, db: LogicalDatabase, plan: Explained, codec: StatementCodec = TEXT
) -> None:
    """Run a decided EXPLAIN (proxy.execution.decide): the statement's one unit relayed, or every unit's plan."""
    routed = plan.run.routed
    if len(routed.execution_units) == 1:
        await execute_plan(session, db, plan.run, codec)
        return
    conns = await session.backends_for([u.data_source for u in routed.execution_units], read=not routed.write,
                                       record_write=False)
    columns: tuple[ColumnDefinition41, ...] | None = None
    rows: list[list[object]] = []
    warnings = 0  # EXPLAIN EXTENDED's note: one per plan, as one server's one EXPLAIN gives one
    try:
        for unit in routed.execution_units:
            unit_columns, unit_rows, unit_warnings = await _unit_plan(conns[unit.data_source], unit, codec)
            warnings = max(warnings, unit_warnings)
            if columns is None:
                columns = unit_columns
            rows.extend([*r[: len(columns)], *([None] * (len(columns) - len(r))), unit.data_source]
                        for r in unit_rows)
    except UnitFailed as exc:
        answer_error(session, exc, db=db, routed=routed, named=True)
        return
    session.rows([*(columns or ()), DATA_SOURCE_COLUMN], rows, warnings)


async def _unit_plan(conn: object, unit: ExecutionUnit, codec: StatementCodec
                     ) -> tuple[tuple[ColumnDefinition41, ...], list[tuple[bytes | None, ...]], int]:

    assert isinstance(conn, BackendConnection)
    try:
        payload = await codec.command(conn, unit)
    except StatementFailed as exc:
        raise UnitFailed(unit.data_source, exc.err) from exc
    columns: tuple[ColumnDefinition41, ...] = ()
    rows: list[tuple[bytes | None, ...]] = []
    failure: ERRPacket | None = None
    warnings = 0
    async for ev in conn.events(payload):
        if isinstance(ev, ResultHeader):
            columns = ev.columns
        elif isinstance(ev, bytes):
            rows.append(codec.decode_row(ev, columns))
        elif isinstance(ev, ERRPacket):
            failure = ev
        elif isinstance(ev, OKPacket | ResultEnd):
            warnings = ev.warnings
    if failure is not None:
        raise UnitFailed(unit.data_source, failure)
    return columns, rows, warnings


__all__ = ["DATA_SOURCE_COLUMN", "execute_explain", "split_explain", "xa_refusal"]
