"""`SHOW QUERY DIGESTS [LIMIT n]` and `RESET QUERY DIGESTS`: the proxy's query digests (proxy.observe.digests),
most total time first. A user without `admin: true` sees its own digests only (as SHOW PROCESSLIST shows it its own
sessions); RESET is for admin users (proxy.session.distsql.handler checks it)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from protocol.constants import ColumnFlag, ColumnType
from protocol.packets import ColumnDefinition41
from proxy.observe.digests import COLUMNS

if TYPE_CHECKING:
    from proxy.execution.context import SessionContext as Session
    from proxy.session.distsql.grammar import DistSQL

_COUNTS = frozenset({"count", "errors", "rows_sent"})
_MILLISECONDS = frozenset({"total_ms", "max_ms", "p99_ms"})


def _column(name: str) -> str | ColumnDefinition41:
    """Numbers typed as numbers (a client reads ints and decimals, not strings), times as DATETIME."""
    if name in _COUNTS:
        return ColumnDefinition41(name, ColumnType.LONGLONG, column_length=21, flags=ColumnFlag.NUM)
    if name in _MILLISECONDS:
        return ColumnDefinition41(name, ColumnType.NEWDECIMAL, column_length=24, flags=ColumnFlag.NUM, decimals=3)
    if name in ("first_seen", "last_seen"):
        return ColumnDefinition41(name, ColumnType.DATETIME, column_length=19)
    return name


HEADER = [_column(name) for name in COLUMNS]


async def show(session: Session, d: DistSQL) -> None:
    limit = int(d.value) if d.value is not None else None
    admin = session.user_config is not None and session.user_config.admin
    session.rows(list(HEADER), session.server.digests.rows(limit, None if admin else session.user))


async def reset(session: Session, d: DistSQL) -> None:
    session.server.digests.reset()
    session.log.info("query_digests_reset")
    session.ok()


__all__ = ["reset", "show"]
