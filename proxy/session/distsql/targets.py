"""Which logical database a DistSQL statement is about, and the actual tables of its data sources.

Why its own module: RQL/RAL (proxy.session.distsql.handler) and RDL (proxy.session.distsql.rdl, which the handler
dispatches to) both need these; here neither imports the other for them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from protocol.packets import ERRPacket
from proxy.session.distsql.errors import DistSQLError

if TYPE_CHECKING:
    from proxy.backends.runtime import LogicalDatabase
    from proxy.execution.context import SessionContext as Session


def target(session: Session, name: str | None) -> LogicalDatabase:
    """`FROM db`, else the session's database (ShardingSphere's errors as MySQL's: 1049, 1046)."""
    if name:
        db = session.server.database(name)
        if db is None:
            raise DistSQLError(1049, f"Unknown database '{name}'", "42000")
        return db
    if session.database is None:
        raise DistSQLError(1046, "No database selected", "3D000")
    return session.database


async def tables_by_source(db: LogicalDatabase) -> dict[str, list[str]]:
    """The actual tables of each data source: the loaded metadata (sharded databases), or asked of the one
    data source (pass-through databases load none)."""
    if db.kernel is not None:
        return {ds: db.metadata.actual_tables(ds) for ds in db.rules.data_sources}
    out: dict[str, list[str]] = {}
    for name, source in db.sources.items():
        res = await source.admin_execute(
            "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() ORDER BY TABLE_NAME")
        if isinstance(res, ERRPacket) or not isinstance(res, list):
            raise DistSQLError(1105, f"cannot list the tables of data source {name}: "
                               f"{res.message if isinstance(res, ERRPacket) else 'unreachable'}", "HY000")
        out[name] = [(r[0] or b"").decode() for r in res]
    return out


__all__ = ["tables_by_source", "target"]
