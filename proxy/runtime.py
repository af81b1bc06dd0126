"""A logical database at run time: its data sources, its kernel and the schema metadata the kernel reads.

Metadata (columns of logic tables, where unsharded tables live) is loaded from the backends'
information_schema at start-up and reloaded after DDL, so that routing itself never does I/O.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import structlog

from protocol.packets import ERRPacket
from proxy.backend import DataSource
from proxy.config import DatabaseConfig
from routing.model import DatabaseRules

log = structlog.get_logger("shardproxy.runtime")


@dataclass
class SchemaSnapshot:
    """Implements routing.model.SchemaMetadata from what the backends reported."""

    rules: DatabaseRules
    tables: dict[str, dict[str, list[str]]] = field(default_factory=dict)  # ds -> table(lower) -> columns
    # ds -> table(lower) -> column(lower) -> information_schema DATA_TYPE (lower case)
    types: dict[str, dict[str, dict[str, str]]] = field(default_factory=dict)

    def columns(self, logic_table: str) -> list[str] | None:
        low = logic_table.lower()
        sharding = self.rules.sharding
        rule = sharding.table(low) if sharding else None
        if rule is not None:
            for node in rule.data_nodes:
                cols = self.tables.get(node.data_source, {}).get(node.table.lower())
                if cols:
                    return cols
            return None
        for ds in self.rules.data_sources:
            cols = self.tables.get(ds, {}).get(low)
            if cols:
                return cols
        return None

    def column_type(self, logic_table: str, column: str) -> str | None:
        """The DATA_TYPE of a column of a logic table ('int', 'varchar', ...), None when unknown."""
        low = logic_table.lower()
        sharding = self.rules.sharding
        rule = sharding.table(low) if sharding else None
        places = [(n.data_source, n.table.lower()) for n in rule.data_nodes] if rule is not None else [
            (ds, low) for ds in self.rules.data_sources]
        for ds, table in places:
            found = self.types.get(ds, {}).get(table, {}).get(column.lower())
            if found is not None:
                return found
        return None

    def single_table_data_source(self, table: str) -> str | None:
        low = table.lower()
        for ds in self.rules.data_sources:
            if low in self.tables.get(ds, {}):
                return ds
        return None

    def actual_tables(self, data_source: str) -> list[str]:
        return list(self.tables.get(data_source, {}))


class LogicalDatabase:
    def __init__(self, config: DatabaseConfig, sources: dict[str, DataSource]) -> None:
        self.config = config
        self.name = config.name
        self.rules = config.rules
        self.sources = sources
        self.metadata = SchemaSnapshot(config.rules)
        self.kernel = None
        if not config.rules.is_pass_through:
            from routing.kernel import ShardingKernel

            size = int(config.rules.props.get("plan-cache-size", 1024)) if config.rules.props else 1024
            self.kernel = ShardingKernel(config.rules, self.metadata, plan_cache_size=size)
        # without sharding rules, the one data source every statement goes to
        self.pass_through_source: DataSource | None = (
            next(iter(sources.values())) if self.kernel is None else None
        )
        self._reload_lock = asyncio.Lock()

    async def reload_metadata(self) -> None:
        if self.kernel is None:
            return
        async with self._reload_lock:
            tables: dict[str, dict[str, list[str]]] = {}
            types: dict[str, dict[str, dict[str, str]]] = {}
            for name, source in self.sources.items():
                res = await source.admin_execute(
                    "SELECT TABLE_NAME, COLUMN_NAME, DATA_TYPE FROM information_schema.COLUMNS "
                    "WHERE TABLE_SCHEMA = DATABASE() ORDER BY TABLE_NAME, ORDINAL_POSITION"
                )
                if isinstance(res, ERRPacket) or not isinstance(res, list):
                    log.warning("metadata_load_failed", data_source=name, error=str(res))
                    continue
                per: dict[str, list[str]] = {}
                per_types: dict[str, dict[str, str]] = {}
                for t, c, dt in res:
                    table, column = (t or b"").decode().lower(), (c or b"").decode()
                    per.setdefault(table, []).append(column)
                    per_types.setdefault(table, {})[column.lower()] = (dt or b"").decode().lower()
                tables[name] = per
                types[name] = per_types
            self.metadata.tables = tables
            self.metadata.types = types
            if self.kernel is not None:
                self.kernel.invalidate()
