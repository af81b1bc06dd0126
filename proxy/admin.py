"""Statements ShardingSphere users know from DistSQL: PREVIEW, SHOW SHARDING TABLE RULES / NODES,
SHOW STORAGE UNITS. They describe the loaded rules and never execute anything on the backends."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from protocol.constants import ErrorCode
from proxy.statements import ProxyStatement, unquote_ident
from routing.model import ComplexStrategy, HintStrategy, NoneStrategy, StandardStrategy, TableRule

if TYPE_CHECKING:
    from proxy.runtime import LogicalDatabase
    from proxy.session import Session


def _target_db(session: Session, name: str | None) -> LogicalDatabase | None:
    if name:
        db = session.server.database(unquote_ident(name))
        if db is None:
            session.error(ErrorCode.BAD_DB_ERROR, f"Unknown database '{unquote_ident(name)}'", "42000")
        return db
    if session.database is None:
        session.error(ErrorCode.NO_DB_ERROR, "No database selected", "3D000")
    return session.database


def _strategy(strategy: Any) -> tuple[str, str, str, str]:
    """(type, sharding column, algorithm type, algorithm props) as ShardingSphere prints them."""
    if isinstance(strategy, NoneStrategy) or strategy is None:
        return ("", "", "", "")
    algorithm = getattr(strategy, "algorithm", None)
    algo_type = getattr(algorithm, "type_name", "") or type(algorithm).__name__
    props = getattr(algorithm, "props", {}) or {}
    props_text = json.dumps(props, default=str) if props else ""
    if isinstance(strategy, StandardStrategy):
        return ("STANDARD", strategy.column, algo_type, props_text)
    if isinstance(strategy, ComplexStrategy):
        return ("COMPLEX", ",".join(strategy.columns), algo_type, props_text)
    if isinstance(strategy, HintStrategy):
        return ("HINT", "", algo_type, props_text)
    return (type(strategy).__name__, "", algo_type, props_text)


def _rule_row(rule: TableRule) -> list[object]:
    db = _strategy(rule.database_strategy)
    tb = _strategy(rule.table_strategy)
    key = rule.key_generate
    key_type = ""
    if key is not None:
        cls = type(key.generator).__name__
        key_type = getattr(key.generator, "type_name", "") or cls.removesuffix("KeyGenerator").upper()
    return [
        rule.logic_table,
        ", ".join(str(n) for n in rule.data_nodes),
        ", ".join(rule.data_sources),
        *db,
        *tb,
        key.column if key else "",
        key_type,
    ]


RULE_COLUMNS = [
    "table", "actual_data_nodes", "actual_data_sources", "database_strategy_type", "database_sharding_column",
    "database_sharding_algorithm_type", "database_sharding_algorithm_props", "table_strategy_type",
    "table_sharding_column", "table_sharding_algorithm_type", "table_sharding_algorithm_props",
    "key_generate_column", "key_generator_type",
]


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
            routed = db.kernel.route(inner, None, session.hints())
            rows = [(u.data_source, u.sql) for u in routed.execution_units]
        session.rows(["data_source_name", "actual_sql"], rows)
        return
    db = _target_db(session, stmt.arg2 if stmt.kind != "units" else stmt.arg)
    if db is None:
        return
    sharding = db.rules.sharding
    if stmt.kind == "show_rules":
        tables = sharding.tables.values() if sharding else []
        if stmt.arg:
            want = unquote_ident(stmt.arg).lower()
            tables = [t for t in tables if t.logic_table.lower() == want]
        session.rows(RULE_COLUMNS, [_rule_row(t) for t in tables])
    elif stmt.kind == "show_nodes":
        tables = list(sharding.tables.values()) if sharding else []
        if stmt.arg:
            want = unquote_ident(stmt.arg).lower()
            tables = [t for t in tables if t.logic_table.lower() == want]
        session.rows(["name", "nodes"], [(t.logic_table, ", ".join(str(n) for n in t.data_nodes)) for t in tables])
    elif stmt.kind == "units":
        rows = []
        for name, source in db.sources.items():
            c = source.config
            stats = source.stats()
            timeouts = (int(c.connect_timeout * 1000), int(c.idle_timeout * 1000), int(c.max_lifetime * 1000))
            rows.append((name, "MySQL", c.host, c.port, c.database, *timeouts, c.max_pool_size, c.min_pool_size,
                         stats["used"], stats["free"]))
        session.rows(["name", "type", "host", "port", "db", "connection_timeout_milliseconds",
                      "idle_timeout_milliseconds", "max_lifetime_milliseconds", "max_pool_size", "min_pool_size",
                      "connections_in_use", "connections_idle"], rows)
