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
    if routed.generated_keys and isinstance(routed.generated_keys[0], int):
        session.last_insert_id = routed.generated_keys[0]  # the kernel's key generator gave the ids
        return
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


__all__ = ["after_relayed"]
