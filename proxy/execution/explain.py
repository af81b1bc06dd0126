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
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from protocol.constants import ColumnType
from protocol.packets import ColumnDefinition41, ERRPacket, OKPacket
from protocol.results import ResultHeader
from proxy.backends.backend import BackendConnection
from proxy.backends.codec import TEXT, StatementCodec, StatementFailed
from proxy.execution.errors import answer_error
from proxy.execution.executor import execute_plan
from proxy.execution.units import UnitFailed
from routing.errors import RoutingError
from routing.plan import ExecutionUnit, RoutedStatement, StatementKind

if TYPE_CHECKING:
    from proxy.backends.runtime import LogicalDatabase
    from proxy.execution.context import SessionContext as Session

_COMMENTS = r"(?:\s*(?:/\*.*?\*/|#[^\n]*\n|--\s[^\n]*\n))*"
_EXPLAIN = re.compile(
    r"^(?P<lead>" + _COMMENTS + r")\s*"
    r"(?P<words>(?:EXPLAIN|DESCRIBE|DESC|ANALYZE)\b"
    r"(?:\s+(?:EXTENDED|PARTITIONS|ANALYZE|FORMAT\s*=\s*\w+|FOR\s+CONNECTION))*)"
    r"\s*(?P<body>(?:SELECT|WITH|INSERT|UPDATE|DELETE|REPLACE|VALUES)\b.*|\(.*|\d.*)$",
    re.I | re.S,
)
_XA = re.compile(r"^" + _COMMENTS + r"\s*XA\s+(?P<verb>\w+)", re.I | re.S)
_READ_BODY = re.compile(r"^[\s(]*(?:SELECT|WITH|VALUES)\b", re.I)
_DML = re.compile(r"\b(?:INSERT|UPDATE|DELETE|REPLACE)\b", re.I)  # WITH ... DELETE (MySQL 8)

DATA_SOURCE_COLUMN = ColumnDefinition41("data_source", ColumnType.VAR_STRING, column_length=256)


def split_explain(sql: str) -> tuple[str, str, str] | None:
    """(leading comments, the EXPLAIN words, the explained statement) of `sql`, or None when it is no
    EXPLAIN of a statement (`EXPLAIN t_order` is DESCRIBE of a table: not one)."""
    m = _EXPLAIN.match(sql)
    if m is None:
        return None
    return m.group("lead"), m.group("words"), m.group("body")


def xa_refusal(sql: str) -> RoutingError | None:
    m = _XA.match(sql)
    if m is None:
        return None
    return RoutingError(
        f"XA {m.group('verb').upper()}: shardproxy does not run XA transactions yet; on a sharded database the "
        "statement would reach one data source only. Use BEGIN / COMMIT (LOCAL transactions across the data "
        "sources)"
    )


def route_explain(
    session: Session, db: LogicalDatabase, sql: str, params: Sequence[object] | None
) -> RoutedStatement | None:
    """The explained statement's route with every unit's SQL behind the EXPLAIN words, or None when `sql`
    is no EXPLAIN of a statement."""
    parts = split_explain(sql)
    if parts is None:
        return None
    lead, words, body = parts
    upper = " ".join(words.upper().split())
    if "FOR CONNECTION" in upper:
        raise RoutingError("EXPLAIN FOR CONNECTION names a backend thread, not a proxy session: it cannot be "
                           "answered on a sharded database")
    if upper.startswith("ANALYZE") or " ANALYZE" in upper:
        if not _READ_BODY.match(body) or (body.lstrip("( ").upper().startswith("WITH") and _DML.search(body)):
            raise RoutingError(f"{words.split()[0].upper()} ... ANALYZE runs the statement it explains; on a "
                               "sharded database only a SELECT can be analyzed: use EXPLAIN, or run the "
                               "statement itself")
    assert db.kernel is not None
    inner = db.kernel.route(lead + body, params, session.hints())
    units = tuple(replace(u, sql=_behind(words, u.sql)) for u in inner.execution_units)
    return RoutedStatement(
        kind=StatementKind.SELECT, route_units=inner.route_units, execution_units=units, write=inner.write,
        logic_tables=inner.logic_tables,
    )


def _behind(words: str, sql: str) -> str:
    """`EXPLAIN ...` before a unit's SQL (after its leading comments, which may carry hints)."""
    m = re.match(_COMMENTS, sql, re.S)
    head = m.end() if m else 0
    return f"{sql[:head]} {words} {sql[head:].lstrip()}" if head else f"{words} {sql.lstrip()}"


async def execute_explain(
    session: Session, db: LogicalDatabase, routed: RoutedStatement, codec: StatementCodec = TEXT
) -> None:
    if len(routed.execution_units) == 1:
        await execute_plan(session, db, routed, codec)
        return
    conns = await session.backends_for([u.data_source for u in routed.execution_units], read=not routed.write,
                                       record_write=False)
    columns: tuple[ColumnDefinition41, ...] | None = None
    rows: list[list[object]] = []
    try:
        for unit in routed.execution_units:
            unit_columns, unit_rows = await _unit_plan(conns[unit.data_source], unit, codec)
            if columns is None:
                columns = unit_columns
            rows.extend([*r[: len(columns)], *([None] * (len(columns) - len(r))), unit.data_source]
                        for r in unit_rows)
    except UnitFailed as exc:
        answer_error(session, exc, db=db, routed=routed, named=True)
        return
    session.rows([*(columns or ()), DATA_SOURCE_COLUMN], rows)


async def _unit_plan(conn: object, unit: ExecutionUnit, codec: StatementCodec
                     ) -> tuple[tuple[ColumnDefinition41, ...], list[tuple[bytes | None, ...]]]:

    assert isinstance(conn, BackendConnection)
    try:
        payload = await codec.command(conn, unit)
    except StatementFailed as exc:
        raise UnitFailed(unit.data_source, exc.err) from exc
    columns: tuple[ColumnDefinition41, ...] = ()
    rows: list[tuple[bytes | None, ...]] = []
    failure: ERRPacket | None = None
    async for ev in conn.events(payload):
        if isinstance(ev, ResultHeader):
            columns = ev.columns
        elif isinstance(ev, bytes):
            rows.append(codec.decode_row(ev, columns))
        elif isinstance(ev, ERRPacket):
            failure = ev
        elif isinstance(ev, OKPacket):
            pass
    if failure is not None:
        raise UnitFailed(unit.data_source, failure)
    return columns, rows


__all__ = ["DATA_SOURCE_COLUMN", "execute_explain", "route_explain", "split_explain", "xa_refusal"]
