"""A logical database at run time: its data sources, its kernel and the schema metadata the kernel reads.

Metadata (columns of logic tables, where unsharded tables live) is loaded from the backends'
information_schema at start-up and reloaded after DDL, so that routing itself never does I/O.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import structlog

from protocol.packets import ERRPacket
from proxy.backend import DataSource
from proxy.config import DatabaseConfig
from routing.model import DatabaseRules

if TYPE_CHECKING:
    from routing.kernel import ShardingKernel

log = structlog.get_logger("shardproxy.runtime")


@dataclass
class SchemaSnapshot:
    """Implements routing.model.SchemaMetadata from what the backends reported."""

    rules: DatabaseRules
    tables: dict[str, dict[str, list[str]]] = field(default_factory=dict)  # ds -> table(lower) -> columns

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

    def single_table_data_source(self, table: str) -> str | None:
        low = table.lower()
        for ds in self.rules.data_sources:
            if low in self.tables.get(ds, {}):
                return ds
        return None

    def actual_tables(self, data_source: str) -> list[str]:
        return list(self.tables.get(data_source, {}))


def _kernel(config: DatabaseConfig, metadata: SchemaSnapshot) -> ShardingKernel | None:
    if config.rules.is_pass_through:
        return None
    from routing.kernel import ShardingKernel

    size = int(config.rules.props.get("plan-cache-size", 1024)) if config.rules.props else 1024
    return ShardingKernel(config.rules, metadata, plan_cache_size=size)


class LogicalDatabase:
    def __init__(self, config: DatabaseConfig, sources: dict[str, DataSource]) -> None:
        self.config = config
        self.name = config.name
        self.rules = config.rules
        self.sources = sources
        self.metadata = SchemaSnapshot(config.rules)
        self.kernel = _kernel(config, self.metadata)
        # without sharding rules, the one data source every statement goes to
        self.pass_through_source: DataSource | None = (
            next(iter(sources.values())) if self.kernel is None else None
        )
        self._reload_lock = asyncio.Lock()

    def reconfigure(self, config: DatabaseConfig, sources: dict[str, DataSource]) -> None:
        """Take a changed configuration (DistSQL RDL) in one synchronous step: a statement already routed
        finishes on the kernel it holds, every statement routed from now on uses the new rules. The
        metadata loaded so far is kept (reload it for tables the change brings in)."""
        metadata = SchemaSnapshot(config.rules, dict(self.metadata.tables))
        kernel = _kernel(config, metadata)
        pass_through = next(iter(sources.values())) if kernel is None else None
        self.config, self.rules, self.sources = config, config.rules, sources
        self.metadata, self.kernel, self.pass_through_source = metadata, kernel, pass_through

    async def reload_metadata(self) -> None:
        if self.kernel is None:
            return
        async with self._reload_lock:
            tables: dict[str, dict[str, list[str]]] = {}
            for name, source in self.sources.items():
                res = await source.admin_execute(
                    "SELECT TABLE_NAME, COLUMN_NAME FROM information_schema.COLUMNS "
                    "WHERE TABLE_SCHEMA = DATABASE() ORDER BY TABLE_NAME, ORDINAL_POSITION"
                )
                if isinstance(res, ERRPacket) or not isinstance(res, list):
                    log.warning("metadata_load_failed", data_source=name, error=str(res))
                    continue
                per: dict[str, list[str]] = {}
                for t, c in res:
                    per.setdefault((t or b"").decode().lower(), []).append((c or b"").decode())
                tables[name] = per
            self.metadata.tables = tables
            if self.kernel is not None:
                self.kernel.invalidate()
