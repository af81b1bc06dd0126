"""LAST_INSERT_ID() of a session on a sharded database, after a statement one node answered.

The proxy answers LAST_INSERT_ID() itself there (the session's statements run on several connections, pooled
between sessions), so it must know what the server would: the first id a statement *generated*, kept until the
next statement that generates one, or the value of LAST_INSERT_ID(expr). An OK's last insert id is not that:
for an INSERT that gives the AUTO_INCREMENT column its values it is the last row's value, and LAST_INSERT_ID()
stays what it was. The node is asked (`SELECT LAST_INSERT_ID()` on the statement's own connection) only when the
text cannot tell.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from protocol.results import ResultSummary
from proxy.backends.backend import BackendConnection
from routing.plan import ExecutionUnit, RoutedStatement, StatementKind
from routing.session_functions import sets_last_insert_id

if TYPE_CHECKING:
    from proxy.backends.runtime import LogicalDatabase
    from proxy.execution.context import SessionContext as Session

_NAME = r"(?:`(?:[^`]|``)+`|[\w$]+)"
# INSERT INTO t (a, b) ...: the column list, when the text starts with one
_COLUMN_LIST = re.compile(
    rf"\s*(?:INSERT|REPLACE)\s+(?:(?:LOW_PRIORITY|DELAYED|HIGH_PRIORITY|IGNORE)\s+)*(?:INTO\s+)?{_NAME}"
    rf"(?:\s*\.\s*{_NAME})?\s*\(([^()]*)\)",
    re.I,
)


async def after_relayed(
    session: Session,
    db: LogicalDatabase,
    conn: BackendConnection,
    routed: RoutedStatement,
    unit: ExecutionUnit,
    summary: ResultSummary,
) -> None:
    """Take the session's LAST_INSERT_ID() from a statement relayed from one node (`summary`: its answer)."""
    if summary.error is not None:
        return
    # (a statement with keys the kernel generated is never relayed: plans.unit_strategy writes it through
    # proxy.execution.writes, and of_units takes its id)
    if sets_last_insert_id(unit.sql):
        await _ask(session, conn)
        return
    if routed.kind is not StatementKind.INSERT or not summary.last_insert_id:
        return
    if _generated(db, routed, unit.sql):
        session.last_insert_id = summary.last_insert_id
        return
    # the AUTO_INCREMENT column is given values: generated only where a row gives NULL or 0 (the node knows)
    value = await _node_value(conn)
    if value is not None and value == summary.last_insert_id:
        session.last_insert_id = value


def of_units(
    db: LogicalDatabase | None,
    routed: RoutedStatement,
    answers: Sequence[tuple[ExecutionUnit, int]],
    zero_is_value: bool = False,
) -> tuple[int, int | None]:
    """The last insert id one server would put in the OK of a write whose units answered `answers` (each unit's
    OK id), and the session's LAST_INSERT_ID() after it (None: unchanged).

    One server reports the first id the statement generated (LAST_INSERT_ID() takes it); else the value of the
    last LAST_INSERT_ID(expr) it evaluated (LAST_INSERT_ID() too); else, when it wrote something, the
    AUTO_INCREMENT value the statement's *last* row gives (whether that row was written, skipped by IGNORE or
    left unchanged by ON DUPLICATE KEY UPDATE; when it updated an existing row, that row's value, as its node
    reports it; LAST_INSERT_ID() unchanged), else 0. Each node reports the same
    for its own rows, so: every row generates (the column list leaves the column out) — the unit holding the
    statement's first row; rows call LAST_INSERT_ID(expr) — the unit holding the last such row; the column's
    values are known (a sharding column) and a node wrote something — the last row's value. `zero_is_value`: the
    session's sql_mode has NO_AUTO_VALUE_ON_ZERO (a row giving 0 generates nothing)."""
    if routed.first_generated_key is not None:  # the kernel's key generator (as ShardingSphere)
        return routed.first_generated_key, routed.first_generated_key
    split = routed.kind is StatementKind.INSERT and bool(answers) and all(unit.rows for unit, _ in answers)
    column = _auto_increment(db, routed) if split and db is not None else None
    ordered = sorted((a for a in answers if a[1]), key=lambda a: a[0].rows[:1] or (len(routed.row_values),))
    if column is not None and db is not None and _generated(db, routed, answers[0][0].sql):
        first = ordered[0][1] if ordered else 0
        return first, first or None
    if split and routed.last_id_rows:
        row = max(routed.last_id_rows)
        value = next((v for unit, v in answers if row in unit.rows), None)
        if value is not None:
            return value, value
    if not ordered:
        return 0, None
    if column is None:
        return ordered[0][1], ordered[0][1]  # the text cannot tell whether the id was generated
    given = [_int(row.get(column)) for row in routed.row_values]
    # (an upsert's node reports the id of the row it updated, not the one given: no sign of a generated id there)
    if any(value is None or (value == 0 and not zero_is_value) for value in given) or (
        routed.insert_mode is None and any(given[unit.rows[-1]] != value for unit, value in ordered)
    ):
        return ordered[0][1], ordered[0][1]  # a row leaves it to the node (0): generated, where unknown
    if routed.insert_mode == "update":  # the last row updated a row: the OK's id is that row's
        last = len(routed.row_values) - 1
        updated = next((value for unit, value in ordered if unit.rows and unit.rows[-1] == last), None)
        if updated is not None:
            return updated, None
    return given[-1] or 0, None


def _auto_increment(db: LogicalDatabase, routed: RoutedStatement) -> str | None:
    if len(routed.logic_tables) != 1:
        return None
    table = routed.logic_tables[0]
    for column in db.metadata.columns(table) or ():
        info = db.metadata.column_info(table, column)
        if info is not None and info.auto_increment:
            return column.lower()
    return None


def _int(value: object) -> int | None:
    """The value as the OK carries it: an integer, unsigned 64-bit (-3 is 2**64 - 3)."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        return None
    try:
        return int(value) % (1 << 64)
    except ValueError:
        return None


def _generated(db: LogicalDatabase, routed: RoutedStatement, sql: str) -> bool:
    """The INSERT's column list leaves out the table's AUTO_INCREMENT column: its OK's id is a generated one."""
    m = _COLUMN_LIST.match(sql)
    if m is None or len(routed.logic_tables) != 1:
        return False
    table = routed.logic_tables[0]
    names = {part.strip().strip("`").replace("``", "`").lower() for part in m.group(1).split(",")}
    for column in db.metadata.columns(table) or ():
        info = db.metadata.column_info(table, column)
        if info is not None and info.auto_increment:
            return column.lower() not in names
    return False


async def _ask(session: Session, conn: BackendConnection) -> None:
    value = await _node_value(conn)
    if value is not None:
        session.last_insert_id = value


async def _node_value(conn: BackendConnection) -> int | None:
    answer = await conn.execute("SELECT LAST_INSERT_ID()")
    if isinstance(answer, list) and answer and answer[0][0] is not None:
        return int(answer[0][0])
    return None


__all__ = ["after_relayed", "of_units"]
