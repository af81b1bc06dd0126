"""Statements ShardingSphere users know from DistSQL: PREVIEW, SHOW SHARDING TABLE RULES / NODES,
SHOW STORAGE UNITS. They describe the loaded rules (rows built by `routing.admin`) and never execute
anything on the backends."""

from __future__ import annotations

from typing import TYPE_CHECKING

from protocol.constants import ErrorCode
from proxy.backend import DataSource
from proxy.readwrite import RULE_COLUMNS, ReadWriteGroup, storage_unit_rows
from proxy.statements import ProxyStatement, unquote_ident
from routing import admin as rule_rows

if TYPE_CHECKING:
    from proxy.runtime import LogicalDatabase
    from proxy.session import Session

STORAGE_UNIT_COLUMNS = [
    "name", "type", "host", "port", "db", "connection_timeout_milliseconds", "idle_timeout_milliseconds",
    "max_lifetime_milliseconds", "max_pool_size", "min_pool_size", "connections_in_use", "connections_idle",
    # read/write splitting members: enabled | disabled, why, Seconds_Behind_Master at the last probe
    "status", "status_detail", "replication_lag_seconds",
]


def _target_db(session: Session, name: str | None) -> LogicalDatabase | None:
    if name:
        return session.database_named(unquote_ident(name))
    if session.database is None:
        session.error(ErrorCode.NO_DB_ERROR, "No database selected", "3D000")
    return session.database


async def admin_statement(session: Session, stmt: ProxyStatement, sql: str) -> None:
    if stmt.kind == "preview":
        db = session.database
        if db is None:
            session.error(ErrorCode.NO_DB_ERROR, "No database selected", "3D000")
            return
        inner = stmt.arg or ""
        if db.kernel is None:
            rows = [(next(iter(db.sources)), inner)]
        else:
            rows = rule_rows.preview_rows(db.kernel.route(inner, None, session.hints()))
        session.rows(list(rule_rows.PREVIEW_COLUMNS), rows)
        return
    db = _target_db(session, stmt.arg2 if stmt.kind != "units" else stmt.arg)
    if db is None:
        return
    table = unquote_ident(stmt.arg) if stmt.arg and stmt.kind != "units" else None
    if stmt.kind == "show_rules":
        session.rows(list(rule_rows.TABLE_RULE_COLUMNS), rule_rows.table_rule_rows(db.rules, table))
    elif stmt.kind == "show_nodes":
        session.rows(list(rule_rows.TABLE_NODE_COLUMNS), rule_rows.table_node_rows(db.rules, table))
    elif stmt.kind == "show_rw_rules":
        groups = [s for s in db.sources.values() if isinstance(s, ReadWriteGroup)]
        session.rows(list(RULE_COLUMNS), [g.rule_row() for g in groups if table is None or g.name == table])
    elif stmt.kind == "units":
        session.rows(STORAGE_UNIT_COLUMNS, storage_units(db))


def storage_units(db: LogicalDatabase) -> list[tuple[object, ...]]:
    """SHOW STORAGE UNITS: one row per physical data source (each member of a read/write splitting group)."""
    rows: list[tuple[object, ...]] = []
    members: list[tuple[str, DataSource, tuple[str, str, float | None]]] = []
    for name, source in db.sources.items():
        if isinstance(source, ReadWriteGroup):
            members.extend(storage_unit_rows(source))
        else:
            members.append((name, source, ("enabled", "", None)))
    for name, source, (status, detail, lag) in members:
        c = source.config
        stats = source.stats()
        timeouts = (int(c.connect_timeout * 1000), int(c.idle_timeout * 1000), int(c.max_lifetime * 1000))
        rows.append((name, "MySQL", c.host, c.port, c.database, *timeouts, c.max_pool_size, c.min_pool_size,
                     stats["used"], stats["free"], status, detail, None if lag is None else f"{lag:g}"))
    return rows
